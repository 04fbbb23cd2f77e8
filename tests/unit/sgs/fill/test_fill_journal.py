"""The fill's journal: what a stopped fill finished is replayed, not tried again."""

from __future__ import annotations

import json

import pytest

from lean_env.verdict import ProofTask
from sgs.fill import attempts
from sgs.fill.journal import Entry, Journal, journal_key, journal_path

KEY = journal_key({"A.v": "ab" * 32}, time_per_lemma=30.0, rounds=("automation", "search"), predictor="knn",
                  weights=None, seed=0, rocq_options={"allowed_axioms": ("A.x", "x")})


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_journal_sits_beside_the_report():
    from pathlib import Path
    assert journal_path(Path("out/report.jsonl")) == Path("out/report.progress.jsonl")
    assert journal_path(Path("p.fill.jsonl")) == Path("p.fill.progress.jsonl")


def test_the_key_is_plain_json_that_reads_back_equal():
    assert KEY == json.loads(json.dumps(KEY))
    assert KEY["settings"]["rounds"] == ["automation", "search"]
    assert journal_key({}, names=frozenset({"b", "a"}))["settings"]["names"] == ["a", "b"]


def test_a_new_journal_holds_its_key_and_what_is_recorded(tmp_path):
    path = tmp_path / "r.progress.jsonl"
    journal = Journal.open(path, KEY)
    assert journal.note == "" and journal.replay("automation") == {}
    journal.record(Entry("automation", "P.a", "Proof. auto. Qed.", 1.5, {"valid": 1}))
    journal.record(Entry("automation", "P.b", None, 3.0, {"invalid": 4}))
    assert lines(path) == [{"journal": 1, "key": KEY},
                           {"round": "automation", "lemma": "P.a", "proof": "Proof. auto. Qed.", "seconds": 1.5,
                            "statuses": {"valid": 1}},
                           {"round": "automation", "lemma": "P.b", "proof": None, "seconds": 3.0,
                            "statuses": {"invalid": 4}}]


def test_reopened_with_the_same_key_it_replays_by_round_and_lemma(tmp_path):
    path = tmp_path / "r.progress.jsonl"
    first = Journal.open(path, KEY)
    first.record(Entry("automation", "P.a", None, 1.0, {"invalid": 2}))
    first.record(Entry("search", "P.a", "Proof. lia. Qed.", 9.0, {"valid": 1}))
    again = Journal.open(path, KEY)
    assert again.note == f"resuming from {path}: 2 lemma rounds finished before" and again.finished_before == 2
    assert again.replay("automation") == {"P.a": Entry("automation", "P.a", None, 1.0, {"invalid": 2})}
    assert set(again.replay("search")) == {"P.a"} and again.replay("sauto") == {}


def test_a_line_cut_off_by_a_kill_is_dropped_and_the_file_stays_appendable(tmp_path):
    path = tmp_path / "r.progress.jsonl"
    Journal.open(path, KEY).record(Entry("automation", "P.a", None, 1.0, {}))
    with open(path, "ab") as f:
        f.write(b'{"round": "automation", "lemma": "P.b", "pro')
    again = Journal.open(path, KEY)
    assert set(again.replay("automation")) == {"P.a"}
    again.record(Entry("automation", "P.b", None, 2.0, {}))
    assert [row.get("lemma") for row in lines(path)] == [None, "P.a", "P.b"]


def test_lines_that_are_not_entries_are_left_out(tmp_path):
    path = tmp_path / "r.progress.jsonl"
    Journal.open(path, KEY)
    with open(path, "a") as f:
        f.write('{"round": "automation", "lemma": 3, "proof": null, "seconds": 1, "statuses": {}}\n'
                '[1, 2]\nnot json\n'
                '{"round": "automation", "lemma": "P.c", "proof": null, "seconds": 1, "statuses": {}}\n')
    assert set(Journal.open(path, KEY).replay("automation")) == {"P.c"}


@pytest.mark.parametrize("header", [
    {"journal": 1, "key": {**KEY, "sources": {"A.v": "cd" * 32}}},   # the file changed since
    {"journal": 0, "key": KEY},                                      # another version of the journal
    "garbage",
])
def test_a_journal_of_other_sources_or_settings_is_set_aside(tmp_path, header):
    path = tmp_path / "r.progress.jsonl"
    path.write_text(json.dumps(header) + "\n"
                    + json.dumps({"round": "automation", "lemma": "P.a", "proof": "x", "seconds": 1,
                                  "statuses": {}}) + "\n")
    old = path.read_text()
    journal = Journal.open(path, KEY)
    stale = tmp_path / "r.progress.stale"
    assert journal.replay("automation") == {} and stale.read_text() == old
    assert journal.note == f"{path} was written for other sources or settings: set aside as {stale}, starting over"
    assert lines(path) == [{"journal": 1, "key": KEY}]


def test_remove_deletes_it(tmp_path):
    journal = Journal.open(tmp_path / "r.progress.jsonl", KEY)
    journal.remove()
    journal.remove()
    assert not list(tmp_path.iterdir())


def fake_rounds(monkeypatch, calls):
    """Fake runners: ``a`` falls to the automation, ``b`` to the search, ``c`` to nothing."""
    def baseline(prover, todo, *, seconds, workers, record, rocq_options):
        calls.append(("automation", [t.id for t in todo]))
        for task in todo:
            record(task, "Proof. easy. Qed." if task.id == "a" else None, 1.0, {"invalid": 1})

    def search(prover, todo, *, seconds, workers, corpus, checkpoint, record, rocq_options):
        calls.append(("search", [(t.id, seconds(t)) for t in todo]))
        for task in todo:
            record(task, "Proof. auto. Qed." if task.id == "b" else None, seconds(task), {"not_found:budget": 1})

    monkeypatch.setattr(attempts, "run_baseline", baseline)
    monkeypatch.setattr(attempts, "run_search", search)


def run_fill(journal, progress=None):
    tasks = [ProofTask(name, "", f"Lemma {name} : True.", "") for name in ("a", "b", "c")]
    return attempts.attempt_all(tasks, seconds=10.0, workers=1, rocq_options={}, predictor="knn", knn_corpus=None,
                                checkpoint="/ckpt", rounds=("automation", "search"), journal=journal,
                                progress=progress or (lambda line: None))


def test_a_resumed_fill_replays_the_finished_rounds_and_tries_only_the_rest(tmp_path, monkeypatch):
    path = tmp_path / "r.progress.jsonl"
    calls: list = []
    fake_rounds(monkeypatch, calls)
    whole = run_fill(Journal.open(path, KEY))
    assert calls == [("automation", ["a", "b", "c"]), ("search", [("b", 9.0), ("c", 9.0)])]

    # Stopped during the search: the automation round and the search of b were in the journal.
    kept = [line for line in path.read_text().splitlines(keepends=True) if '"c"' not in line or '"automation"' in line]
    path.write_text("".join(kept))
    calls.clear()
    said: list[str] = []
    resumed = run_fill(Journal.open(path, KEY), said.append)
    # only c's search is run again, with the time its replayed automation round left it
    assert calls == [("search", [("c", 9.0)])]
    assert said == ["search (knn proposing): 1 lemmas, 5.0 s each and what the rounds before left "
                    "(1 finished before, from the journal)"]
    assert {k: vars(v) for k, v in resumed.items()} == {k: vars(v) for k, v in whole.items()}

    # Everything finished: nothing runs at all.
    calls.clear()
    assert {k: vars(v) for k, v in run_fill(Journal.open(path, KEY)).items()} == \
        {k: vars(v) for k, v in whole.items()}
    assert calls == []
