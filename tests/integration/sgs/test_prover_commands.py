"""`python -m sgs.prover COMMAND` as a user runs it: the dispatcher, a measurement on a tiny corpus, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

from sgs.corpus.records import FileRecord, Step, TheoremRecord, shard_path, write_shard


def _prover(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "sgs.prover", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def _corpus(root):
    goals = "1 goal (ID 3)\n  \n  n : nat\n  ============================\n  n + 0 = n"
    for file, split in (("T.v", "train"), ("H.v", "test")):
        theorem = TheoremRecord(library="lib", file=file, name="t", line=1, statement="Lemma t n : n + 0 = n.",
                                proof="Proof.\n  lia.\nQed.", ending="Qed", split=split,
                                steps=[Step(tactic="lia.", kind="tactic", goals=goals, num_goals=1, line=2)])
        meta = FileRecord(library="lib", file=file, module="Lib." + file[:-2], split=split, status="ok", theorems=1)
        write_shard(shard_path(root, "lib", file), meta, [theorem])
    return root


def test_the_commands_are_listed_and_an_unknown_one_is_refused():
    listed = _prover("--help")
    assert listed.returncode == 0
    assert all(name in listed.stdout for name in ("train", "ship", "accuracy", "premises", "proof-rate"))
    unknown = _prover("prove-everything")
    assert unknown.returncode == 2 and "unknown command 'prove-everything'" in unknown.stderr


def test_accuracy_through_the_dispatcher(tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    out = tmp_path / "figures.json"
    run = _prover("accuracy", "--corpus", str(corpus), "--predictor", "knn", "--json", str(out))
    assert run.returncode == 0, run.stderr
    figures = json.loads(out.read_text())
    assert (figures["total"]["steps"], figures["total"]["top1"]) == (1, 1)


def test_bad_input_exits_2_before_any_work(tmp_path):
    train = _prover("train", "--corpus", str(tmp_path / "none"), "--out", str(tmp_path / "run"))
    assert train.returncode == 2 and "not a directory" in train.stderr
    assert not (tmp_path / "run").exists()
    ship = _prover("ship", str(tmp_path / "none"), str(tmp_path / "dest"))
    assert ship.returncode == 2 and "no model.safetensors" in ship.stderr
