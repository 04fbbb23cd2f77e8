"""``python -m sgs solver.mode=search`` end to end: the Solver searches every
target and conjecture on Ray actors with real Rocq, its tactics sampled from
the run's Solver engines, every found proof re-checked by the verifier pool,
and it trains on the tactic steps of the accepted proofs.  The pure parts:
tests/unit/sgs/loop/test_search_mode.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from sgs.loop.search_steps import read_search_records, searches_path
from sgs.loop.weights import TRAIN_METRICS_FILE
from sgs.state.store import Store
from tests.paths import REPO

SUMMARY = re.compile(r"search \(solver\.mode=search\): (\d+) search attempts, (\d+) found a proof, (\d+) re-checked "
                     r"valid by the verifier pool, (\d+) tactic steps trained on; (\d+) model calls")


@pytest.mark.slow
def test_a_search_mode_run_trains_the_solver_on_the_steps_of_its_rechecked_proofs(tmp_path, require_rocq):
    """The default run (the shipped prover, the standard method) cut to one iteration on 8
    targets, two 6-second searches per problem; REINFORCE (every accepted proof) so that the
    targets ``lia`` proves in every search are trained on too.  No warm start: the shipped
    prover already knows the tactic prompts and the roles' formats, and training one would
    cost this test more than half of its time."""
    run_dir = tmp_path / "run"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "WANDB_SILENT": "true", "SGS_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "sgs", "iterations=1", "targets.limit=8", "method.solver_objective=reinforce",
         "solver.mode=search", "solver.attempts=2", "solver.seconds_per_attempt=6", "solver.search.width=2",
         "solver.search.workers=1", "solver.search.finishers=[lia]", "evaluation.k=0", "logging.wandb_mode=disabled",
         "resources.verifier_workers=1", "warmstart.mode=never", f"run_dir={run_dir}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=590)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = SUMMARY.search(proc.stdout)
    assert said, proc.stdout[-3000:]
    attempts_said, found_said, proved_said, steps_said, calls_said = map(int, said.groups())
    store = Store.open(run_dir, None, yaml.safe_load((run_dir / "config.yaml").read_text()))
    try:
        attempts, conjectures = store.attempts(0), store.conjectures(0)
        records = read_search_records(searches_path(run_dir, 0))
        # Every problem (targets and surviving conjectures) searched twice, each search one attempt.
        problems = {a.problem_id for a in attempts}
        assert all(sum(a.problem_id == p for a in attempts) == 2 for p in problems)
        assert any(a.problem_kind == "conjecture" for a in attempts)
        assert {a.id for a in attempts} <= set(records) and len(attempts) == attempts_said
        assert all(a.completion.finish_reason.startswith("search:") and a.completion.token_ids == [] for a in attempts)
        # A proof counts only with the verifier pool's verdict, and its steps are stored with it.
        verified = [a for a in attempts if a.verified]
        assert verified and len(verified) == proved_said <= found_said
        assert all(records[a.id].pool_checked and records[a.id].proved and records[a.id].steps for a in verified)
        assert sum(r.found for a in attempts for r in [records[a.id]]) == found_said
        # Generations: every conjecture, and a search's model calls.
        [metrics] = store.metrics()
        assert metrics["search/model_calls"] == calls_said == sum(records[a.id].model_calls for a in attempts)
        assert metrics["generations"] == len(conjectures) + calls_said
        assert metrics["search/tokens"] >= metrics["search/samples"] == 2 * calls_said  # width 2
        # REINFORCE takes every accepted proof: the Solver trained on all of their steps.
        assert steps_said == sum(len(records[a.id].steps) for a in verified) == metrics["search/step_examples"]
        numbers = json.loads((store.checkpoint_dir("solver", 0) / TRAIN_METRICS_FILE).read_text())
        assert numbers["num_examples"] == steps_said
    finally:
        store.close()
