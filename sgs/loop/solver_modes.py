"""The Solver's modes in self-play (``solver.mode``), one entry each: how the
prove phase attempts the problems, what the Solver trains on, how many
attempts a problem's solve rate counts, and what the mode adds to the metrics
line.  The loop asks the entry (:func:`solver_mode`), never the name.

* ``sample`` (the paper's method): whole proofs, ``method.num_solver_samples``
  per problem (:mod:`sgs.loop.prove`), the Solver trained on its objective's
  choice of them (:func:`sgs.loop.train.solver_examples`);
* ``search``: ``solver.attempts`` tactic-level searches per problem
  (:mod:`sgs.loop.search_prove`), the Solver trained on the tactic steps of
  the proofs they found and the verifier pool accepted
  (:mod:`sgs.loop.search_steps`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sgs.config import SelfPlaySolverMode, SGSConfig
from sgs.loop.context import RunContext, derived_seed
from sgs.loop.prove import prove
from sgs.loop.search_prove import prove_by_search
from sgs.loop.search_steps import (STEP_OBJECTIVE, StepChoice, anchor_pool, anchor_steps, chosen_steps,
                                   read_search_records, search_metrics, searches_path, step_example)
from sgs.loop.train import SolverJob, chosen_attempts, sampled_solver_job, train_policies
from sgs.machinery.learner import TrainExample
from sgs.method.registry import objective
from sgs.search.languages import tactic_language
from sgs.state.phase_log import PhaseLog, PhaseStats
from sgs.state.records import Attempt

__all__ = ["SOLVER_MODES", "SolverMode", "chosen_search_steps", "generation_counts", "prove_phase", "solver_mode",
           "training_phase"]


@dataclass(frozen=True)
class SolverMode:
    """One way the Solver proves (module docstring)."""

    #: the prove phase: ``step(ctx, iteration, log) -> PhaseStats``
    prove: Callable[[RunContext, int, PhaseLog], PhaseStats]
    #: the Solver's training examples of an iteration and their objective
    solver_job: SolverJob
    #: attempts per problem: the denominator of a solve rate
    attempts_per_problem: Callable[[SGSConfig], int]
    #: the mode's own keys of an iteration's metrics line, from its committed attempts
    metrics: Callable[[RunContext, int, Sequence[Attempt]], dict[str, Any]]


def no_metrics(ctx: RunContext, iteration: int, attempts: Sequence[Attempt]) -> dict[str, Any]:
    return {}


def chosen_search_steps(ctx: RunContext, iteration: int) -> list[StepChoice]:
    """The tactic steps the Solver trains on after ``iteration`` (:mod:`sgs.loop.search_steps`)."""
    entry = objective(ctx.cfg.method.solver_objective)
    if not entry.trains:
        return []
    chosen = chosen_attempts(ctx, iteration, entry)
    records = {i: read_search_records(searches_path(ctx.store.run_dir, i)) for i in {a.iteration for a, _ in chosen}}
    return chosen_steps(chosen, records, tactic_language(ctx.cfg.prover.backend).step_text)


def replayed_anchor_steps(cfg: SGSConfig, iteration: int, found: int) -> list[StepChoice]:
    """The anchor corpus's steps replayed beside ``found`` found steps in ``iteration``'s
    update (``solver.anchor_corpus``; none without one, or without found steps)."""
    solver = cfg.solver
    if solver.anchor_corpus is None or not found:
        return []
    return anchor_steps(anchor_pool(solver.anchor_corpus), round(solver.anchor_ratio * found),
                        derived_seed(cfg.seed, iteration, "anchor"))


def searched_solver_job(ctx: RunContext, iteration: int) -> tuple[list[TrainExample], str]:
    tokenizer = ctx.rt.prompter.tokenizer
    language = ctx.cfg.prover.backend
    steps = chosen_search_steps(ctx, iteration)
    steps += replayed_anchor_steps(ctx.cfg, iteration, len(steps))
    return [step_example(tokenizer, step, language) for step in steps], STEP_OBJECTIVE


def searched_metrics(ctx: RunContext, iteration: int, attempts: Sequence[Attempt]) -> dict[str, Any]:
    records = read_search_records(searches_path(ctx.store.run_dir, iteration))
    found = len(chosen_search_steps(ctx, iteration))
    return search_metrics(attempts, records, found, len(replayed_anchor_steps(ctx.cfg, iteration, found)))


#: The modes by ``solver.mode``.
SOLVER_MODES: dict[str, SolverMode] = {
    SelfPlaySolverMode.sample: SolverMode(prove, sampled_solver_job, lambda cfg: cfg.method.num_solver_samples,
                                          no_metrics),
    SelfPlaySolverMode.search: SolverMode(prove_by_search, searched_solver_job, lambda cfg: cfg.solver.attempts,
                                          searched_metrics),
}


def solver_mode(cfg: SGSConfig) -> SolverMode:
    return SOLVER_MODES[SelfPlaySolverMode(cfg.solver.mode)]


def prove_phase(ctx: RunContext, iteration: int, phase_log: PhaseLog) -> PhaseStats:
    """The prove phase of the run's Solver mode."""
    return solver_mode(ctx.cfg).prove(ctx, iteration, phase_log)


def training_phase(ctx: RunContext, iteration: int, phase_log: PhaseLog | None) -> PhaseStats:
    """The training phase, the Solver's examples those of the run's Solver mode."""
    return train_policies(ctx, iteration, phase_log, solver_mode(ctx.cfg).solver_job)


def generation_counts(stored: int, this_iteration: int, mode_metrics: Mapping[str, Any],
                      earlier: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """The run's generations through an iteration and the iteration's own, a search
    counted as its model calls: ``stored`` and ``this_iteration`` count one per
    attempt and conjecture record (:meth:`sgs.state.store.Store.generations`), each
    search attempt among them replaced by its model calls (``search/attempts`` and
    ``search/model_calls`` of ``mode_metrics`` and of the ``earlier`` metrics lines)."""
    def extra(line: Mapping[str, Any]) -> int:
        return int(line.get("search/model_calls", 0)) - int(line.get("search/attempts", 0))

    own = extra(mode_metrics)
    return stored + own + sum(extra(line) for line in earlier), this_iteration + own
