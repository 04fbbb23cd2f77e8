"""`python -m sgs.prover.proof_rate` as a user runs it, on real coqtop: two targets, a resumed run, bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(shutil.which("coqtop") is None, reason="needs coqtop")

HEADER = "Require Import Arith Lia."
TARGETS = [
    {"id": "easy_arith", "header": HEADER, "statement": "Theorem easy_arith : forall n : nat, n + 0 = n."},
    # needs induction and a lemma: none of the automation list proves it
    {"id": "rev_rev", "header": "Require Import List.",
     "statement": "Theorem rev_rev : forall (l : list nat), List.rev (List.rev l) = l."},
]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "sgs.prover.proof_rate", *args], capture_output=True, text=True,
                          timeout=600)


def test_automation_proves_what_it_can_and_a_rerun_resumes(tmp_path):
    targets = tmp_path / "targets.jsonl"
    targets.write_text("".join(json.dumps(t) + "\n" for t in TARGETS))
    out = tmp_path / "out"
    args = ["--targets", f"tiny={targets}", "--provers", "automation", "--seconds", "24", "--workers", "1",
            "--out", str(out)]
    first = _run(*args)
    assert first.returncode == 0, first.stderr
    rows = {r["target"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert rows["easy_arith"]["proved"] and rows["easy_arith"]["proof"].startswith("Proof.")
    assert not rows["rev_rev"]["proved"] and rows["rev_rev"]["statuses"] == {"invalid": 12}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["table"]["tiny"]["automation"] == {"targets": 2, "proved": 1, "rate": 0.5}
    again = _run(*args)
    assert again.returncode == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 2   # nothing tried twice
    assert "1 (0.500)" in again.stdout


def test_bad_arguments_name_the_problem_and_exit_2(tmp_path):
    run = _run("--targets", "nofile", "--provers", "magic", "--out", str(tmp_path / "o"))
    assert run.returncode == 2
    assert "unknown 'magic'" in run.stderr and "NAME=FILE" in run.stderr
    assert not (tmp_path / "o").exists()
    assert _run("--out", str(tmp_path / "o")).returncode == 2      # no targets at all


def test_a_search_prover_runs_on_ray_actors_and_its_proofs_are_rechecked(tmp_path):
    from sgs.corpus.records import FileRecord, Step, TheoremRecord, shard_path, write_shard
    corpus = tmp_path / "corpus"
    goals = "1 goal (ID 3)\n  \n  n : nat\n  ============================\n  n + 0 = n"
    theorem = TheoremRecord(library="lib", file="T.v", name="t", line=1, statement="Lemma t n : n + 0 = n.",
                            proof="Proof.\n  lia.\nQed.", ending="Qed", split="train",
                            steps=[Step(tactic="lia.", kind="tactic", goals=goals, num_goals=1, line=2)])
    write_shard(shard_path(corpus, "lib", "T.v"),
                FileRecord(library="lib", file="T.v", module="Lib.T", split="train", status="ok"), [theorem])
    targets = tmp_path / "targets.jsonl"
    targets.write_text(json.dumps(TARGETS[0]) + "\n")
    out = tmp_path / "out"
    # the k-NN proposing; the same with the value estimate (learned from the same corpus) ranking states;
    # the k-NN and the shipped model taking turns
    run = _run("--targets", f"tiny={targets}", "--provers", "search-knn,search-knn-value,search-knn-model",
               "--corpus", str(corpus), "--seconds", "60", "--expansions", "8", "--workers", "1", "--out", str(out))
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [row["prover"] for row in rows] == ["search-knn", "search-knn-value", "search-knn-model"]
    for row in rows:
        assert row["proved"] and row["statuses"] == {"valid": 1}        # the re-check's verdict
        assert row["proof"].startswith("Proof.") and row["proof"].rstrip().endswith("Qed.")
        assert row["expansions_per_lemma"] == 8
    missing = _run("--targets", f"tiny={targets}", "--provers", "search-knn", "--out", str(tmp_path / "o2"))
    assert missing.returncode == 2 and "needs --corpus" in missing.stderr


def test_a_directory_holds_one_budget(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text(json.dumps({"prover": "automation", "group": "g", "target": "t",
                                                   "proved": False, "seconds_per_lemma": 10.0}) + "\n")
    targets = tmp_path / "targets.jsonl"
    targets.write_text(json.dumps(TARGETS[0]) + "\n")
    run = _run("--targets", f"g={targets}", "--provers", "automation", "--seconds", "60", "--out", str(out))
    assert run.returncode == 2 and "one directory, one budget" in run.stderr


def test_whole_proof_sampling_runs_the_shipped_model_for_the_same_time(tmp_path):
    targets = tmp_path / "targets.jsonl"
    targets.write_text(json.dumps(TARGETS[0]) + "\n")
    out = tmp_path / "out"
    run = _run("--targets", f"tiny={targets}", "--provers", "sample", "--seconds", "40", "--workers", "1",
               "--out", str(out))
    assert run.returncode == 0, run.stderr
    [row] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert row["prover"] == "sample" and row["seconds"] <= 40 + 5
    # seeded by the target: the shipped prover writes a valid proof of n + 0 = n in its first round
    assert row["proved"] and row["statuses"] == {"valid": 1}, row
    assert row["proof"].startswith("Proof.") and row["proof"].endswith("Qed.")
    generation = row["details"]["generation"]
    assert generation["model_calls"] >= 1 and generation["samples"] == 8 * generation["model_calls"]
    assert row["details"]["stats"]["checked"] >= 1


def test_a_row_torn_by_a_killed_run_is_cut_and_its_target_run_again(tmp_path):
    targets = tmp_path / "targets.jsonl"
    targets.write_text("".join(json.dumps(t) + "\n" for t in TARGETS))
    out = tmp_path / "out"
    out.mkdir()
    done = {"prover": "automation", "group": "tiny", "target": "easy_arith", "proved": True,
            "proof": "Proof.\n  lia.\nQed.", "seconds": 0.5, "statuses": {"valid": 1}, "seconds_per_lemma": 12.0,
            "expansions_per_lemma": None}
    torn = json.dumps({**done, "target": "rev_rev", "proved": False})[:40]
    (out / "results.jsonl").write_text(json.dumps(done) + "\n" + torn)
    run = _run("--targets", f"tiny={targets}", "--provers", "automation", "--seconds", "12", "--workers", "1",
               "--out", str(out))
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["target"], r["proved"]) for r in rows] == [("easy_arith", True), ("rev_rev", False)]
    assert rows[1]["statuses"] == {"invalid": 12}     # tried now, not read from the torn line
