"""The GPU suite (``benchmarks/gpu_check.py``) where there is no GPU: the
dry run executes the cheap stages' code on the CPU (the others' dry runs
take minutes on 2 cores and are run by hand, see benchmarks/README.md), a
plain run skips every GPU stage with its reason, a stage that breaks is
recorded and the next one runs, and the loop stage's overrides are a valid
config."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

from sgs import config as C
from tests.conftest import MISSING_STDLIB, coqtop_without_stdlib
from tests.paths import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import gpu_check  # noqa: E402
import gpu_stages  # noqa: E402

#: The stages CI dry-runs: the machine and its prover, and one through a benchmark script that
#: drives the engine machinery (an EngineGroup on Ray, the search's queue and pump).  vLLM's
#: log-probs against transformers are tested in tests/integration/sgs/test_engines_vllm.py;
#: the other stages' dry runs were run by hand (benchmarks/README.md).
CI_STAGES = "environment,tactic_batching"


def run_check(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_the_dry_run_executes_the_stages_on_the_cpu(tmp_path, require_rocq):
    done = run_check("--dry-run", "--stages", CI_STAGES, "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    assert summary["dry_run"] and summary["date"] and list(summary["stages"]) == CI_STAGES.split(",")
    stages = summary["stages"]
    assert {name: stage["status"] for name, stage in stages.items()} == dict.fromkeys(stages, "ok")
    assert stages["environment"]["figures"]["gpu"] == "none" and stages["environment"]["figures"]["coqtop"]
    assert stages["environment"]["figures"]["rocq_check"].startswith("valid (ok, ")
    batching = stages["tactic_batching"]["figures"]
    # four searches' calls through the queue and pump: every call answered, in fewer engine batches
    assert batching["4_searches/calls_per_s"] > 0 and 1 <= batching["4_searches/batches"] < 4 * 2
    assert batching["one_search/batches"] == 2  # one call at a time: a batch each
    table = (tmp_path / "gpu_check.md").read_text()
    assert "| tactic_batching | ok |" in table and "GPU: none" in table


@pytest.mark.slow
def test_a_rocq_that_answers_its_version_but_cannot_check_fails_the_environment_stage(tmp_path, require_rocq):
    # A coqtop whose standard library is missing: what a half-carried Rocq looks like.
    env = coqtop_without_stdlib(tmp_path / "bin")
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--dry-run", "--stages",
                           "environment", "--out", str(tmp_path / "out")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:]
    environment = json.loads((tmp_path / "out" / "gpu_check.json").read_text())["stages"]["environment"]
    assert environment["status"] == "fail" and environment["figures"]["coqtop"] == str(tmp_path / "bin" / "coqtop")
    assert "came back system_error" in environment["reason"] and MISSING_STDLIB in environment["reason"]


def test_a_loop_whose_prover_broke_is_a_failure_with_its_causes():
    healthy = {"iteration": 0, "system_error_rate": 0.0, "conjecture_rejected/unclosed_block": 3}
    assert gpu_stages.verifier_trouble([healthy]) == ""
    broken = {"iteration": 1, "system_error_rate": 0.839, "verifier/system_error/crash": 47,
              "verifier/system_error/worker_lost": 2, "conjecture_rejected/elaboration_system_error": 8}
    assert gpu_stages.verifier_trouble([healthy, broken]) == (
        "iteration 1: 83.9% of verifications were system errors (crash 47, worker_lost 2), 8 conjecture(s) lost "
        "to prover failures; the causes' first messages are in loop.log")
    # Under the alarm's 1% but a conjecture was lost: still not a working loop.
    assert gpu_stages.verifier_trouble([{"iteration": 0, "system_error_rate": 0.005,
                                         "conjecture_rejected/elaboration_system_error": 1}]).startswith(
        "iteration 0: 0.5% of verifications were system errors (no proof reached the prover)")


@pytest.mark.slow
def test_without_a_gpu_every_gpu_stage_is_skipped_with_its_reason(tmp_path):
    done = run_check("--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:]
    stages = json.loads((tmp_path / "gpu_check.json").read_text())["stages"]
    assert stages["environment"]["status"] == "ok"
    for name in ("generation", "learner", "sleep_wake", "weight_update", "loop"):
        assert stages[name]["status"] == "skip" and "no CUDA GPU visible" in stages[name]["reason"], name
        assert not (tmp_path / f"{name}.stage.log").exists(), name   # said without a process of its own


def test_bad_arguments_are_refused_with_status_2(tmp_path):
    for args in (["--stages", "nonsense"], ["--stages", ","], ["--stage-timeout", "0"]):
        done = run_check(*args, "--out", str(tmp_path), timeout=120)
        assert done.returncode == 2 and "error:" in done.stderr and "Traceback" not in done.stderr, args


def test_a_stage_that_breaks_or_lacks_something_is_recorded(tmp_path, monkeypatch):
    def broken(ctx):
        raise ZeroDivisionError("division by zero")

    def lacking(ctx):
        raise gpu_stages.Skip("not installed: vllm")

    monkeypatch.setitem(gpu_check.STAGES, "broken", broken)
    monkeypatch.setitem(gpu_check.STAGES, "lacking", lacking)
    ctx = gpu_stages.CheckContext(dry_run=True, workdir=tmp_path, out=tmp_path)
    for name, status, reason in (("broken", "fail", "ZeroDivisionError: division by zero"),
                                 ("lacking", "skip", "not installed: vllm")):
        gpu_check.stage_main(name, ctx, tmp_path / f"{name}.json")
        outcome = json.loads((tmp_path / f"{name}.json").read_text())
        assert (outcome["status"], outcome["reason"]) == (status, reason)


@pytest.mark.parametrize("gpu, vllm", [(True, True), (True, False), (False, True)])
def test_the_loop_stage_runs_a_valid_config(tmp_path, gpu, vllm):
    """Its overrides (three engines and the learner sharing one GPU) pass the config's own checks."""
    command = gpu_stages.loop_command(gpu, tmp_path / "run", vllm)
    assert command[1:3] == ["-m", "sgs"]
    with initialize_config_dir(config_dir=str(C.CONFIG_DIR), version_base="1.3"):
        cfg = C.validate(compose(config_name=C.CONFIG_NAME, overrides=command[3:]))
    assert cfg.iterations == (2 if gpu else 1)
    if gpu:
        res = cfg.resources
        assert res.engine_backend == ("vllm" if vllm else "transformers")
        assert res.engine_gpu_memory_fraction == (0.2 if vllm else None)
        assert 3 * res.gpus_per_engine + res.gpus_per_learner_worker <= res.num_gpus
