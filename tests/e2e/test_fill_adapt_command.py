"""``python -m sgs.fill --adapt`` as a user runs it, at the smallest budgets, on a
two-file project written here: the supervised stage and one self-play iteration
are made and kept, a second run reuses them and trains nothing, the report says
which checkpoint proved the lemma and what the adaptation cost; bad inputs exit 2
before anything is built or trained.  The self-play is ``python -m sgs
solver.mode=search`` end to end (the Solver searching on Ray actors with real
Rocq, its tactics sampled from the run's engines, every found proof re-checked
by the verifier pool, the Solver trained on the steps of the accepted ones):
its run directory is checked as such (:func:`tests.loop_support.check_search_run`;
the pure parts: tests/unit/sgs/loop/test_search_mode.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_fill_command import make_project   # the project's files under the logical root Fill
from tests.loop_support import check_search_run
from tests.paths import REPO

pytestmark = [pytest.mark.rocq, pytest.mark.slow]

A = """\
Require Import Arith Lia.

Lemma add_zero : forall n, n + 0 = n.
Proof. intros n. lia. Qed.

Lemma zero_add : forall n, 0 + n = n.
Proof. intros n. simpl. reflexivity. Qed.

Lemma swap : forall n m, n + m = m + n.
Proof. intros n m. lia. Qed.
"""

B = """\
Require Import Arith Lia.
Require Import Fill.A.

Lemma twice : forall n, n + 0 + 0 = n.
Proof. intros n. rewrite !add_zero. reflexivity. Qed.

Lemma double_zero : forall n, 0 + (n + 0) = n.
Admitted.
"""

#: python -m sgs at its smallest: two short searches a problem on one actor, short
#: generations, one verifier; REINFORCE (every accepted proof), since lia proves each
#: target at the root in every search and REINFORCE-1/2 would then train nothing
ATTEMPTS, WIDTH = 2, 2
SMALL = (f"solver.attempts={ATTEMPTS}", "solver.seconds_per_attempt=6", f"solver.search.width={WIDTH}",
         "solver.search.workers=1", "method.solver_objective=reinforce", "sampling.conjecturer.max_tokens=48",
         "sampling.guide.max_tokens=64", "resources.verifier_workers=1")


def fill(project: Path, tmp: Path, *flags: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "sgs.fill", str(project), "--build-dir", str(tmp / "build"), *flags]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def adapt_flags(cache: Path, rounds: str = "search") -> list[str]:
    # by default the model's round alone, so that the proof (the search's finishers find one) names the checkpoint;
    # the project's own steps replayed beside the found ones (one per found step)
    return ["--adapt", "1", "--adapt-minutes", "0.1", "--adapt-cache", str(cache), "--rounds", rounds,
            "--adapt-anchor", "1",
            "--time-per-lemma", "20", "--workers", "2", *(f"--adapt-set={item}" for item in SMALL)]


@pytest.fixture(scope="module")
def adapted(tmp_path_factory, require_rocq):
    tmp = tmp_path_factory.mktemp("adapt")
    project = make_project(tmp / "project", {"A.v": A, "B.v": B})
    first = fill(project, tmp, "--out", str(tmp / "first.jsonl"), *adapt_flags(tmp / "cache"))
    return project, tmp, first


def stage_records(cache: Path) -> dict[str, dict]:
    return {path.parent.name.split("-")[0]: json.loads(path.read_text()) for path in cache.glob("*/*/adapted.json")}


def test_the_adapted_checkpoint_is_made_and_proposes(adapted):
    project, tmp, first = adapted
    assert first.returncode == 0, first.stderr[-3000:]
    stages = stage_records(tmp / "cache")
    assert set(stages) == {"sup", "sgs"}, stages
    assert stages["sup"]["detail"]["steps"] > 0 and stages["sup"]["cpu_minutes"] > 0
    assert stages["sgs"]["detail"]["iterations"] == 1 and stages["sgs"]["detail"]["generations"] > 0
    assert (Path(stages["sgs"]["checkpoint"]) / "config.json").is_file()
    [log] = (tmp / "cache").glob("*/sgs-*/selfplay.log")
    check_search_run(log.parent / "run", log.read_text(), attempts_per_problem=ATTEMPTS, width=WIDTH)
    metrics = [json.loads(line) for line in (log.parent / "run" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[0]["search/step_examples"] > 0       # lia proves every target at the root
    assert metrics[0]["search/anchor_examples"] == metrics[0]["search/step_examples"]
    assert "anchor steps of solver.anchor_corpus" in log.read_text()
    # the self-play's targets: the three proved lemmas of A.v, twice, and the admitted double_zero
    [targets] = (tmp / "cache").glob("*/targets.jsonl")
    ids = {json.loads(line)["id"] for line in targets.read_text().splitlines()}
    assert ids == {"Fill.A.add_zero", "Fill.A.zero_add", "Fill.A.swap", "Fill.B.twice", "Fill.B.double_zero"}
    [line] = [json.loads(line) for line in (tmp / "first.jsonl").read_text().splitlines()]
    assert line["name"] == "double_zero" and line["status"] == "proved" and line["prover"] == "search"
    assert line["checkpoint"] == stages["sgs"]["checkpoint"]
    summary = first.stdout.strip().splitlines()[-1]
    assert summary.startswith("proved 1 of 1 admitted lemmas") and "; adaptation: supervised " in summary
    assert "self-play (sgs) " in summary and "cached" not in summary
    page = (tmp / "first.md").read_text()
    assert "## Adaptation (`--adapt`)" in page and "CPU-min" in page and stages["sgs"]["checkpoint"] in page
    record = json.loads((tmp / "first.summary.json").read_text())
    assert [stage["name"] for stage in record["adaptation"]] == ["supervised", "self-play (sgs)"]


def test_a_second_run_reuses_the_adaptation_and_trains_nothing(adapted):
    project, tmp, first = adapted
    assert first.returncode == 0, first.stderr[-3000:]
    before = {path: path.stat().st_mtime_ns for path in (tmp / "cache").rglob("*") if path.is_file()}
    # Rocq's automation alone proves the lemma: the rounds are not the adaptation's business
    second = fill(project, tmp, "--out", str(tmp / "second.jsonl"), *adapt_flags(tmp / "cache", "automation"))
    assert second.returncode == 0, second.stderr[-3000:]
    assert "fine-tuning" not in second.stderr and "iteration(s) of python -m sgs" not in second.stderr
    summary = second.stdout.strip().splitlines()[-1]
    assert summary.count("(cached: nothing trained now)") == 2
    after = {path: path.stat().st_mtime_ns for path in (tmp / "cache").rglob("*") if path.is_file()
             if path.name != ".lock"}
    assert after == {path: stamp for path, stamp in before.items() if path.name != ".lock"}
    assert json.loads((tmp / "second.summary.json").read_text())["adaptation_seconds_now"] == 0.0


def test_a_project_without_a_proof_skips_the_supervised_stage(tmp_path, require_rocq):
    project = make_project(tmp_path / "project", {"B.v": "Lemma l : 1 + 1 = 2.\nAdmitted.\n"})
    result = fill(project, tmp_path, "--out", str(tmp_path / "r.jsonl"), "--adapt", "1", "--adapt-method",
                  "supervised", "--adapt-cache", str(tmp_path / "cache"), "--rounds", "automation",
                  "--time-per-lemma", "10", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "supervised: skipped (the project has no finished proof to learn from)" in result.stderr
    assert result.stdout.strip().splitlines()[-1].endswith(
        "; adaptation: supervised: skipped (the project has no finished proof to learn from)")


@pytest.mark.parametrize("flags, message", [
    (["--adapt", "0"], "--adapt must be a positive number of self-play iterations, got 0"),
    (["--adapt", "-1"], "--adapt must be a positive number of self-play iterations, got -1"),
    (["--adapt", "1", "--adapt-cache", "{locked}/cache"], "cannot be written (read-only)"),
    (["--adapt", "1", "--adapt-anchor", "0"], "argument --adapt-anchor: '0' is not a positive finite number"),
])
def test_bad_adapt_inputs_exit_2_and_write_nothing(tmp_path, flags, message, require_rocq):
    project = make_project(tmp_path / "project", {"A.v": A, "B.v": B})
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        result = fill(project, tmp_path, "--out", str(tmp_path / "out" / "r.jsonl"),
                      *(flag.format(locked=locked) for flag in flags), timeout=120)
    finally:
        locked.chmod(0o755)
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = [line for line in result.stderr.splitlines() if line.startswith("sgs.fill: error:")]
    assert message in line
    assert not (tmp_path / "out").exists() and not (tmp_path / "build").exists()
    assert not (locked / "cache").exists()
