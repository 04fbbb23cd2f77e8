"""``python -m sgs.fill.compare``'s logic on fakes: which lemmas are admitted and how,
each arm's command, what a rerun skips, the table, and the loop over fills (a fake
``python -m sgs.fill``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from sgs.fill.compare import (ARMS, UsageError, admit_text, draw, eligible, fill_command, parse_args, parse_suggestions,
                              pending, run, table)
from sgs.state.rocq_declarations import find_declarations

FILE = """\
Lemma top : 1 = 1.
Proof. reflexivity. Qed.
Section S.
Variable n : nat.
Lemma uses_n : n = n.
Proof using n.
  reflexivity.
Qed.
Lemma no_clause : n = n.
Proof. reflexivity. Qed.
Lemma transparent : n = n.
Proof. reflexivity. Defined.
End S.
"""

#: what coqc 8.16 printed with -set "Suggest Proof Using" (a real run's shape: a long
#: name breaks the first line, and Coq lists the smallest clause first)
SUGGESTIONS = """\
File "./F.v", line 3, characters 2-7:
Warning: The Focus command is deprecated; use bullets or focusing brackets
instead [deprecated-focus,deprecated]
The proof of get_single_eq_inv
should start with one of the following commands:
Proof using . 
Proof using Type. 
The proof of l1 should start with one of the following commands:
Proof using H. 
Proof using Type*. 
The proof of weird should start with one of the following commands:
Proof using Type*. 
The proof of twice should start with one of the following commands:
Proof using . 
The proof of twice should start with one of the following commands:
Proof using n. 
"""


def row(name: str, line: int, context: str = "") -> dict:
    return {"id": f"P.F.{name}", "source": {"file": "F.v", "line": line}, "context": context}


def test_coqs_suggestions_are_read_smallest_readable_clause_first():
    assert parse_suggestions(SUGGESTIONS) == {
        "get_single_eq_inv": "Proof using .", "l1": "Proof using H.",
        "weird": None,       # Type* is not a clause sgs.fill.admitted can state
        "twice": None,       # one short name in two modules: which is which cannot be told
    }
    assert parse_suggestions("") == {}


def test_a_suggestion_that_cannot_be_read_is_an_error_not_a_lemma_without_variables():
    with pytest.raises(UsageError, match="not all read"):
        parse_suggestions("The proof of l1 should start with one of the following commands:\nUse All.\n")
    assert parse_suggestions("The proof of l1 should start with one of the following commands:\n"
                             "Proof using (x y).\n") == {"l1": None}


def test_a_section_lemma_is_drawn_only_when_admitting_it_keeps_its_type():
    for suggested in (None, {}, {"no_clause": None}):
        assert eligible(row("top", 1), FILE, suggested)                      # no section
        assert eligible(row("uses_n", 5, "section S"), FILE, suggested)      # its own clause
    assert not eligible(row("no_clause", 9, "section S"), FILE, None)        # Coq not asked
    assert eligible(row("no_clause", 9, "section S"), FILE, {"no_clause": "Proof using ."})
    assert not eligible(row("no_clause", 9, "section S"), FILE, {"no_clause": None})
    # Coq asked and silent: a Qed proof has no section variable in scope, a Defined one may
    assert eligible(row("no_clause", 9, "section S"), FILE, {})
    assert not eligible(row("transparent", 11, "section S"), FILE, {})


def test_admitting_keeps_or_adds_a_proof_using_clause_and_nothing_else_changes():
    spans = {d.name: d.proof_span for d in find_declarations(FILE)[0]}
    admitted = admit_text(FILE, [spans["top"], spans["uses_n"], spans["no_clause"]],
                          {spans["no_clause"][0]: "Proof using ."})
    assert admitted == FILE.replace("Proof. reflexivity. Qed.\nSection", "Admitted.\nSection").replace(
        "Proof using n.\n  reflexivity.\nQed.", "Proof using n.\nAdmitted.").replace(
        "Lemma no_clause : n = n.\nProof. reflexivity. Qed.", "Lemma no_clause : n = n.\nProof using .\nAdmitted.")


def test_the_draw_is_a_seeded_share_of_the_traced_lemmas_among_the_eligible():
    ids = [f"l{i}" for i in range(12)]
    first = draw(ids, traced=16, fraction=0.25, seed=0)
    assert len(first) == 4 and set(first) <= set(ids) and first == sorted(first)
    assert draw(list(reversed(ids)), traced=16, fraction=0.25, seed=0) == first      # the order given does not matter
    assert len(draw(ids, traced=3, fraction=0.25, seed=0)) == 1                      # at least one
    assert draw(["only"], traced=40, fraction=0.25, seed=5) == ["only"]             # no more than the eligible


def test_each_arm_is_one_fill_command(tmp_path):
    common = dict(time_per_lemma=10, workers=2, build_dir=tmp_path / "b", iterations=2, minutes=1.5,
                  adapt_sets=("method.num_solver_samples=4",), cache=tmp_path / "c")
    base = fill_command(ARMS["a"], tmp_path / "p", tmp_path / "r.jsonl", 0, **common)
    assert base[1:4] == ["-m", "sgs.fill", str(tmp_path / "p")]
    assert base[-2:] == ["--rounds", "automation,sauto"] and "--adapt" not in base
    rl = fill_command(ARMS["e"], tmp_path / "p", tmp_path / "r.jsonl", 1, **common)
    tail = rl[rl.index("--proposer"):]
    assert tail == ["--proposer", "model", "--adapt", "2", "--adapt-method", "rl", "--adapt-minutes", "1.5",
                    "--adapt-cache", str(tmp_path / "c"), "--adapt-set=method.num_solver_samples=4"]
    assert rl[rl.index("--seed") + 1] == "1" and rl[rl.index("--time-per-lemma") + 1] == "10"
    supervised = fill_command(ARMS["c"], tmp_path, tmp_path, 0, **common)
    assert supervised[supervised.index("--adapt-method") + 1] == "supervised"
    # (m): the same supervised stage (the cache's key does not hold the proposer), the k-NN beside it
    beside = fill_command(ARMS["m"], tmp_path, tmp_path, 0, **common)
    assert beside[beside.index("--proposer") + 1] == "knn+model"
    assert beside[beside.index("--adapt-method") + 1] == "supervised"
    # the anchor goes to the arms that self-play only
    assert fill_command(ARMS["d"], tmp_path, tmp_path, 0, **common, anchor=0.5)[-2:] == ["--adapt-anchor", "0.5"]
    assert "--adapt-anchor" not in fill_command(ARMS["c"], tmp_path, tmp_path, 0, **common, anchor=0.5)


def test_a_rerun_skips_what_is_done_and_unseeded_arms_run_once():
    done = [{"project": "p", "arm": "a", "seed": 0}, {"project": "p", "arm": "d", "seed": 1}]
    assert pending(["p", "q"], ["a", "d"], [0, 1], done) == [("p", "d", 0), ("q", "a", 0), ("q", "d", 0),
                                                              ("q", "d", 1)]
    # the arms that adapt train with the seed; the others give the same fill whatever it is
    assert [arm for arm, spec in ARMS.items() if spec.seeded] == ["c", "d", "e", "m"]


def test_the_table_has_a_cell_per_project_and_arm():
    rows = [{"project": "p", "arm": "a", "seed": 0, "admitted": 8, "proved": 2, "adaptation": None},
            {"project": "p", "arm": "d", "seed": 0, "admitted": 8, "proved": 3,
             "adaptation": [{"wall_seconds": 60.0}, {"wall_seconds": 180.0}]},
            {"project": "p", "arm": "d", "seed": 1, "admitted": 8, "proved": 4,
             "adaptation": [{"wall_seconds": 60.0}, {"wall_seconds": 300.0}]}]
    assert table(rows, ["a", "b", "d"]).splitlines()[:3] == [
        "| project | admitted | (a) | (d) |", "|---|---|---|---|", "| p | 8 | 2 | 3.5 (3, 4); 5.0 min |"]


def test_results_kept_apart_from_the_work_folder_are_what_the_table_reads(tmp_path: Path, capsys):
    (tmp_path / "projects" / "p").mkdir(parents=True)
    kept = tmp_path / "kept" / "results.jsonl"
    kept.parent.mkdir()
    kept.write_text('{"project": "p", "arm": "k", "seed": 0, "admitted": 5, "proved": 2, "adaptation": null}\n')
    args = parse_args(["--out", str(tmp_path / "scratch"), "--results", str(kept),
                       "--projects", str(tmp_path / "projects"), "--table"])
    assert run(args) == 0
    assert "| p | 5 | 2 |" in (tmp_path / "scratch" / "table.md").read_text()
    assert not (tmp_path / "scratch" / "results.jsonl").exists()
    assert "| p | 5 | 2 |" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--out", "o", "--arms", "a,z"], "--arms: unknown z"),
    (["--out", "o", "--seeds", "x"], "--seeds takes integers"),
    (["--out", "o", "--fraction", "1.5"], "--fraction lies in"),
    (["--out", "o", "--projects", "/nonexistent/sgs"], "not a folder"),
    (["--out", "o", "--results", "/"], "--results /: not a file"),
])
def test_bad_command_lines_are_refused(argv, message):
    with pytest.raises(UsageError, match=message):
        parse_args(argv)


def test_only_names_existing_projects(tmp_path: Path):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "README.md").write_text("")
    assert parse_args(["--out", "o", "--projects", str(tmp_path)]).names == ["one", "two"]
    with pytest.raises(UsageError, match="no project three"):
        parse_args(["--out", "o", "--projects", str(tmp_path), "--only", "one,three"])


class FakeFills:
    """Stands in for ``python -m sgs.fill`` in the comparison's loop: writes the report's
    summary (or fails) as told per (project, arm), and remembers what it ran."""

    def __init__(self, fail: set = frozenset(), resumed: int = 0):
        self.fail, self.resumed, self.ran = fail, resumed, []

    def __call__(self, command, stdout, stderr, **_):
        import subprocess
        report = Path(command[command.index("--out") + 1])
        project, arm = report.parent.name, report.stem.split("-")[0]
        self.ran.append((project, arm, int(command[command.index("--seed") + 1])))
        stderr.write(f"fill {project} {arm}\n")
        if (project, arm) in self.fail:
            return subprocess.CompletedProcess(command, 1)
        summary = {"admitted": 4, "proved": len(self.ran) % 3, "not_proved": 1, "error": 0, "seconds": 12.5,
                   "adaptation": None, "checkpoint": None, "resumed_rounds": self.resumed}
        report.with_suffix(".summary.json").write_text(json.dumps(summary))
        return subprocess.CompletedProcess(command, 0)


def comparison(tmp_path: Path, monkeypatch, fills: FakeFills, broken: str = "") -> argparse.Namespace:
    from sgs.fill import compare
    for name in ("p", "q"):
        (tmp_path / "projects" / name).mkdir(parents=True, exist_ok=True)

    def prepare(source, out, **_):
        if source.name == broken:
            raise UsageError("the copy does not build")
        return out / "work" / source.name
    monkeypatch.setattr(compare, "prepare", prepare)
    monkeypatch.setattr(compare.subprocess, "run", fills)
    return parse_args(["--out", str(tmp_path / "out"), "--projects", str(tmp_path / "projects"), "--arms", "a,c",
                       "--seeds", "0,1"])


def test_each_finished_fill_is_one_results_row_and_a_rerun_runs_only_what_failed(tmp_path, monkeypatch, capsys):
    fills = FakeFills(fail={("q", "c")})
    assert run(comparison(tmp_path, monkeypatch, fills)) == 0
    assert fills.ran == [("p", "a", 0), ("p", "c", 0), ("p", "c", 1), ("q", "a", 0), ("q", "c", 0), ("q", "c", 1)]
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [(row["project"], row["arm"], row["seed"]) for row in rows] == fills.ran[:4]
    assert rows[0]["admitted"] == 4 and rows[0]["fill_seconds"] == 12.5 and "resumed_rounds" not in rows[0]
    failures = [json.loads(line) for line in (tmp_path / "out" / "failures.jsonl").read_text().splitlines()]
    assert [(row["project"], row["arm"], row["seed"], row["exit"]) for row in failures] == [
        ("q", "c", 0, 1), ("q", "c", 1, 1)]
    assert "fill q c" in (tmp_path / "out" / "reports" / "q" / "c-seed0.log").read_text()

    fixed = FakeFills(resumed=3)
    assert run(comparison(tmp_path, monkeypatch, fixed)) == 0
    assert fixed.ran == [("q", "c", 0), ("q", "c", 1)]
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and rows[-1]["resumed_rounds"] == 3
    # the log of a fill run twice keeps both parts
    assert (tmp_path / "out" / "reports" / "q" / "c-seed0.log").read_text().count("fill q c") == 2
    assert "| q | 4 |" in (tmp_path / "out" / "table.md").read_text()


def test_a_project_that_cannot_be_prepared_is_skipped_and_the_others_run(tmp_path, monkeypatch):
    fills = FakeFills()
    assert run(comparison(tmp_path, monkeypatch, fills, broken="p")) == 1
    assert {project for project, _, _ in fills.ran} == {"q"}
    [failure] = [json.loads(line) for line in (tmp_path / "out" / "failures.jsonl").read_text().splitlines()]
    assert failure == {"project": "p", "prepare": "the copy does not build"}
