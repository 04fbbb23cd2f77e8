"""The loop's test targets, and what every finished run directory must
satisfy (:func:`check_run`; a search-mode run also :func:`check_search_run`),
shared by its in-process tests (``tests/unit/sgs/loop/``) and its end-to-end
runs (``tests/e2e/test_loop.py``, ``tests/e2e/test_fill_adapt_command.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from sgs.loop.phases import PHASES
from sgs.loop.train import select_solver_samples
from sgs.loop.weights import TRAIN_METRICS_FILE
from sgs.method.registry import objective as registered
from sgs.state.records import Target
from sgs.state.store import REQUIRED_METRICS, Store

HEADER = "Require Import Arith Lia."
#: Test targets: some every tactic proves, some a few tactics prove, one none.
PROPOSITIONS = {
    "add_0": "forall n : nat, n + 0 = n",
    "four": "2 + 2 = 4",
    "le_succ": "forall n : nat, n <= S n",
    "truth": "True",
    "mul_comm": "forall a b : nat, a * b = b * a",
    "hard": "forall n : nat, n * n <> 2",
    "held": "forall n : nat, 0 + n = n",
}
HELD_OUT = {"held"}


def make_targets() -> list[Target]:
    return [Target(id=name, header=HEADER, statement=f"Theorem {name} : {prop}.", held_out=name in HELD_OUT)
            for name, prop in PROPOSITIONS.items()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """``rows`` as a JSON-lines file at ``path``."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def check_run(run_dir: Path, iterations: int, conjectures_per_target: int, k: int = 4,
              objective: str = "reinforce_half") -> Store:
    """Everything a finished run directory of a Solver ``objective`` must satisfy;
    returns the store (open: close it)."""
    store = Store.open(run_dir, None, yaml.safe_load((run_dir / "config.yaml").read_text()))
    training = [t for t in store.targets if not t.held_out]
    total = 0
    for it in range(iterations):
        assert all(store.phase_done(it, phase) for phase in PHASES)
        attempts, conjectures = store.attempts(it), store.conjectures(it)
        # Exactly cpt conjectures per target unsolved before this iteration, k attempts per problem.
        unsolved = [t.id for t in training if not store.solved_registry.is_solved(t.id, through_iteration=it - 1)]
        per_target = {t: sum(c.target_id == t for c in conjectures) for t in unsolved}
        assert per_target == {t: conjectures_per_target for t in unsolved}
        assert len(conjectures) == conjectures_per_target * len(unsolved)
        survivors = {c.id for c in conjectures if c.statement is not None}
        problems = {a.problem_id for a in attempts}
        assert problems == {t.id for t in training} | survivors
        assert all(sum(a.problem_id == p for a in attempts) == k for p in problems)
        assert len({a.id for a in attempts}) == len(attempts)
        # Nothing held out is ever attempted.
        assert not any(store.target(a.problem_id).held_out for a in attempts if a.problem_kind == "target")
        # Samples are drawn by the weights of the latest finished training.
        version = max([i + 1 for i in store.checkpoint_iterations("solver") if i < it], default=0)
        assert {a.completion.policy_version for a in attempts} == {version}
        # A checkpoint exists exactly when the objective selected something.
        trained = bool(select_solver_samples(attempts, registered(objective)))
        assert (it in store.checkpoint_iterations("solver")) == trained
        if trained:
            numbers = json.loads((store.checkpoint_dir("solver", it) / TRAIN_METRICS_FILE).read_text())
            assert numbers["num_examples"] == len(select_solver_samples(attempts, registered(objective)))
            # The engines serve what the learner wrote: both fp32 on CPU, so the probe's gap is rounding.
            assert numbers["probe_logprob_gap_mean"] < 1e-4
        # A committed phase leaves no sample cache behind.
        assert not any(store.sample_cache_path(it, phase).exists() for phase in PHASES)
        total += len(attempts) + len(conjectures)
        assert store.generations(through_iteration=it) == total
    metrics = store.metrics()
    best = max(range(iterations), key=lambda i: (metrics[i]["cumulative_solve_rate"], -i))
    if best in store.checkpoint_iterations("solver"):
        assert store.best_checkpoint("solver") == best
    assert [m["iteration"] for m in metrics] == list(range(iterations))
    assert all(key in m for m in metrics for key in REQUIRED_METRICS)
    assert metrics[-1]["generations"] == total == store.generations()
    assert metrics[-1]["cumulative_solve_rate"] == store.solved_registry.cumulative_solve_rate()
    assert metrics[-1]["system_error_rate"] == 0.0
    # Nothing was lost in these runs (the fault tests live in test_engine_faults and test_pool).
    assert metrics[-1]["faults/engine_restarts/solver"] == metrics[-1]["faults/verifier_restarts"] == 0
    assert metrics[-1]["faults/learner_restarts"] == 0
    return store


#: the summary line of a ``solver.mode=search`` run
SEARCH_SUMMARY = re.compile(r"search \(solver\.mode=search\): (\d+) search attempts, (\d+) found a proof, (\d+) "
                            r"re-checked valid by the verifier pool, (\d+) tactic steps trained on"
                            r"(?: \(and (\d+) anchor steps of solver\.anchor_corpus\))?; (\d+) model calls")


def check_search_run(run_dir: Path, console: str, attempts_per_problem: int, width: int) -> None:
    """What a one-iteration ``solver.mode=search`` run trained with REINFORCE (every
    accepted proof) must satisfy: every problem searched ``attempts_per_problem`` times,
    conjectures too; a proof counts only with the verifier pool's verdict, its steps
    stored with it and trained on; generations are the conjectures and the searches'
    model calls; and ``console`` (the run's output) says the same numbers."""
    from sgs.loop.search_steps import read_search_records, searches_path

    said = SEARCH_SUMMARY.search(console)
    assert said, console[-3000:]
    attempts_said, found_said, proved_said, steps_said, anchors_said, calls_said = (int(n or 0) for n in said.groups())
    store = Store.open(run_dir, None, yaml.safe_load((run_dir / "config.yaml").read_text()))
    try:
        attempts, conjectures = store.attempts(0), store.conjectures(0)
        records = read_search_records(searches_path(run_dir, 0))
        problems = {a.problem_id for a in attempts}
        assert all(sum(a.problem_id == p for a in attempts) == attempts_per_problem for p in problems)
        assert any(a.problem_kind == "conjecture" for a in attempts)
        assert {a.id for a in attempts} <= set(records) and len(attempts) == attempts_said
        assert all(a.completion.finish_reason.startswith("search:") and a.completion.token_ids == [] for a in attempts)
        verified = [a for a in attempts if a.verified]
        assert verified and len(verified) == proved_said <= found_said
        assert all(records[a.id].pool_checked and records[a.id].proved and records[a.id].steps for a in verified)
        assert sum(r.found for a in attempts for r in [records[a.id]]) == found_said
        [metrics] = store.metrics()
        assert metrics["search/model_calls"] == calls_said == sum(records[a.id].model_calls for a in attempts)
        assert metrics["generations"] == len(conjectures) + calls_said
        assert metrics["search/tokens"] >= metrics["search/samples"] == width * calls_said
        # REINFORCE takes every accepted proof: the Solver trained on all of their steps.
        assert steps_said == sum(len(records[a.id].steps) for a in verified) == metrics["search/step_examples"]
        assert anchors_said == metrics["search/anchor_examples"]
        numbers = json.loads((store.checkpoint_dir("solver", 0) / TRAIN_METRICS_FILE).read_text())
        assert numbers["num_examples"] == steps_said + anchors_said   # the anchors train in the same update
    finally:
        store.close()
