"""Next-tactic accuracy on hand-built corpora: top-1/top-10 counts, online
learning within a held-out file, per-library tallies, and the command."""

from __future__ import annotations

import json

import pytest

from sgs.corpus.records import FileRecord, Step, TheoremRecord, shard_path, write_shard
from sgs.prover import accuracy
from sgs.prover.knn import KnnTactics
from sgs.prover.steps import load_theorems


def goals(conclusion: str) -> str:
    return f"1 goal (ID 3)\n  \n  n : nat\n  ============================\n  {conclusion}\n"


def theorem(library: str, file: str, split: str, name: str, steps: list[tuple[str, str]]) -> TheoremRecord:
    return TheoremRecord(library=library, file=file, name=name, line=1, statement=f"Lemma {name} : X.",
                         proof="Proof. Qed.", ending="Qed", split=split,
                         steps=[Step(tactic=t, kind="tactic", goals=goals(g), num_goals=1, line=2) for g, t in steps])


def write_file(out, library: str, file: str, split: str, theorems: list[TheoremRecord]) -> None:
    meta = FileRecord(library=library, file=file, module=file, split=split, status="ok")
    write_shard(shard_path(out, library, file), meta, theorems)


@pytest.fixture
def corpus(tmp_path):
    """Training: one stdlib file.  Held out (test): a stdlib file whose second
    proof repeats its first, and a flocq file."""
    out = tmp_path / "corpus"
    write_file(out, "stdlib", "Train.v", "train", [
        theorem("stdlib", "Train.v", "train", "t1", [("n + 0 = n", "lia."), ("even n", "constructor.")]),
    ])
    repeated = [("zorg n = blip n", "apply zorg_blip."), ("blip n = n", "apply blip_id.")]
    write_file(out, "stdlib", "Held.v", "test", [
        theorem("stdlib", "Held.v", "test", "h1", repeated),
        theorem("stdlib", "Held.v", "test", "h2", repeated),
    ])
    write_file(out, "flocq", "F.v", "test", [
        theorem("flocq", "F.v", "test", "f1", [("n + 0 = n", "lia ."), ("odd n", "auto.")]),
    ])
    return out


class Fixed:
    """A predictor that cannot learn: the same guesses everywhere."""

    def __init__(self, guesses: list[str]) -> None:
        self.guesses = guesses

    def predict(self, state: str, k: int) -> list[str]:
        return self.guesses[:k]


def test_top1_and_top10_count_by_tactic_key(corpus):
    # guesses 1 and 11 are outside the top 10: only the first and the tenth count
    guesses = ["lia."] + [f"idtac {i}." for i in range(8)] + ["auto .", "apply blip_id."]
    report = accuracy.evaluate(Fixed(guesses), load_theorems(corpus, splits=("test",)), online=False)
    # held out: zorg, blip (twice each), lia (flocq, 'lia .' = 'lia.'), auto
    assert (report.total.steps, report.total.top1, report.total.top10) == (6, 1, 2)
    flocq, stdlib = report.libraries["flocq"], report.libraries["stdlib"]
    assert (flocq.steps, flocq.top1, flocq.top10) == (2, 1, 2)
    assert (stdlib.steps, stdlib.top1, stdlib.top10) == (4, 0, 0)
    assert report.as_dict()["total"]["top1_rate"] == pytest.approx(1 / 6)


def test_online_learning_finds_the_repeated_proof_offline_does_not(corpus):
    def knn() -> KnnTactics:
        model = KnnTactics()
        for t in load_theorems(corpus, splits=("train",)):
            for step in t.steps:
                model.add(step.goals, step.tactic)
        return model

    held = list(load_theorems(corpus, splits=("test",), libraries=["stdlib"]))
    offline = accuracy.evaluate(knn(), held, online=False)
    online = accuracy.evaluate(knn(), held, online=True)
    assert (offline.total.steps, offline.total.top1) == (4, 0)
    # h2's two steps are h1's: learned after h1, both are the nearest neighbours' tactics
    assert (online.total.steps, online.total.top1, online.total.top10) == (4, 2, 2)


def test_limit_and_a_predictor_that_cannot_learn(corpus):
    held = list(load_theorems(corpus, splits=("test",)))
    assert accuracy.evaluate(Fixed([]), held, online=False, limit=3).total.steps == 3
    with pytest.raises(TypeError, match="cannot learn"):
        accuracy.evaluate(Fixed([]), held, online=True)


def test_the_command_builds_the_registered_predictor_and_writes_its_figures(corpus, tmp_path, capsys):
    out = tmp_path / "figures.json"
    assert accuracy.main(["--corpus", str(corpus), "--predictor", "knn", "--split", "test", "--libraries", "flocq",
                          "--offline", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "flocq" in printed and "predictions/s" in printed
    figures = json.loads(out.read_text())
    # training holds "n + 0 = n" -> lia. and "even n" -> constructor.; flocq asks for lia and auto
    assert (figures["setting"], figures["total"]["steps"], figures["total"]["top1"]) == ("offline", 2, 1)
    assert figures["libraries"].keys() == {"flocq"}


def test_bad_arguments_exit_2_with_a_message(corpus, tmp_path, capsys):
    assert accuracy.main(["--corpus", str(tmp_path / "missing"), "--predictor", "knn"]) == 2
    assert "not a corpus directory" in capsys.readouterr().err
    assert accuracy.main(["--corpus", str(corpus), "--predictor", "knn", "--split", "valid"]) == 2
    assert "valid split" in capsys.readouterr().err
    assert accuracy.main(["--corpus", str(corpus), "--predictor", "knn", "--libraries", "nope"]) == 2
    assert "of nope" in capsys.readouterr().err
    with pytest.raises(SystemExit) as unknown:
        accuracy.main(["--corpus", str(corpus), "--predictor", "oracle"])
    assert unknown.value.code == 2 and "invalid choice: 'oracle'" in capsys.readouterr().err
