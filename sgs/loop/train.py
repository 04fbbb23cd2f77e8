"""The training phase: the Solver on its objective's selection of this
iteration's attempts (or, for an objective that replays, such as expert
iteration, of the stored proofs of the last iterations; in search mode the
tactic steps of the chosen proofs, :mod:`sgs.loop.solver_modes`), the
Conjecturer on its weighted conjectures; each from the role's
current weights, both in one call of the run's learner (whose workers start
at the first training phase and serve the whole run); the roles' engines then
serve the results (:class:`sgs.loop.weights.EngineWeights`).  A role with no
examples is not trained; with none for either (parallel sampling always) the
learner is not called, and its workers never start."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict

from lean_env.verdict import Status
from sgs.loop.context import RunContext
from sgs.loop.weights import TRAIN_METRICS_FILE
from sgs.machinery.learner import TrainExample, TrainJob
from sgs.machinery.runtime import train_settings
from sgs.method import objectives
from sgs.method.registry import CONJECTURER_OBJECTIVE, Objective, ReplaySelection, objective
from sgs.state.phase_log import PhaseLog, PhaseStats
from sgs.state.records import Attempt, Completion, ConjectureScore, prompt_digest


def solver_rollouts(attempts: Sequence[Attempt]) -> list[objectives.Rollout]:
    """Attempts as the objectives see them (system errors carry no reward)."""
    return [
        objectives.Rollout(
            problem_id=a.problem_id,
            status=a.rollout_status,
            reward=None if a.rollout_status == Status.SYSTEM_ERROR.value else a.reward,
        )
        for a in attempts
    ]


def select_solver_samples(attempts: Sequence[Attempt], solver_objective: Objective) -> list[objectives.Sample]:
    """The objective's choice among this iteration's attempts."""
    return solver_objective.select(solver_rollouts(attempts))


def in_conjecturer_batch(score: ConjectureScore, rule: str) -> bool:
    """The reference rule trains on the kept conjectures; the paper's rule on
    every attempted one (the others at weight 0, counted by the normaliser)."""
    return score.kept or rule == "paper"


#: The Solver's examples of an iteration and the objective they are trained with.
SolverJob = Callable[[RunContext, int], tuple[list[TrainExample], str]]


def sampled_solver_job(ctx: RunContext, iteration: int) -> tuple[list[TrainExample], str]:
    """Whole-proof mode: the chosen samples, trained with the Solver's objective."""
    return solver_examples(ctx, iteration), ctx.cfg.method.solver_objective


def train_policies(ctx: RunContext, iteration: int, phase_log: PhaseLog | None,
                   solver_job: SolverJob = sampled_solver_job) -> PhaseStats:
    """Train the Solver (on ``solver_job``'s examples: by default its chosen whole-proof
    samples) and the Conjecturer on this iteration's examples (either may have none).
    The phase writes checkpoints, not records (no ``phase_log``)."""
    jobs = {"solver": solver_job(ctx, iteration),
            "conjecturer": (conjecturer_examples(ctx, iteration), CONJECTURER_OBJECTIVE)}
    learn(ctx, iteration, {role: (examples, objective) for role, (examples, objective) in jobs.items() if examples})
    return PhaseStats()


def chosen_attempts(ctx: RunContext, iteration: int, solver_objective: Objective) -> list[tuple[Attempt, float]]:
    """The attempts ``solver_objective`` trains on, with their weights: its choice among this
    iteration's attempts, or among the stored proofs of recent iterations (``replay``)."""
    if solver_objective.replay is not None:
        return replayed_samples(ctx, iteration, solver_objective.replay)
    attempts = ctx.store.attempts(iteration)
    return [(attempts[s.index], s.weight) for s in select_solver_samples(attempts, solver_objective)]


def solver_examples(ctx: RunContext, iteration: int) -> list[TrainExample]:
    solver_objective = objective(ctx.cfg.method.solver_objective)
    chosen = chosen_attempts(ctx, iteration, solver_objective)
    conjectures = {c.id: c for c in ctx.store.conjectures(iteration)}
    examples = []
    for attempt, weight in chosen:
        if attempt.problem_kind == "target":
            target = ctx.store.target(attempt.problem_id)
            header, statement = target.header, target.statement
        else:
            conjecture = conjectures[attempt.problem_id]
            header, statement = ctx.store.target(conjecture.target_id).header, conjecture.statement
        prompt = checked_prompt(ctx.rt.prompter.solver(header, statement), attempt.completion)
        examples.append(TrainExample(
            prompt_ids=ctx.rt.prompter.token_ids(prompt),
            completion_ids=attempt.completion.token_ids,
            weight=weight,
            old_logprobs=attempt.completion.logprobs if solver_objective.needs_old_logprobs else None,
            group_id=attempt.problem_id,
        ))
    return examples


def replayed_samples(ctx: RunContext, iteration: int, replay: ReplaySelection) -> list[tuple[Attempt, float]]:
    """``replay``'s choice among the stored proofs of the last ``ei_replay_iterations``
    iterations, with their attempts."""
    window = ctx.cfg.method.ei_replay_iterations
    stored = ctx.store.solved_registry.recent_proofs(since_iteration=iteration - window + 1)
    records = [objectives.StoredProof(problem_id=p.target_id, proof=p.proof, iteration=p.iteration,
                                      reward=p.reward) for p in stored]
    samples = replay(records, iteration, window)
    attempts = {a.id: a for i in sorted({p.iteration for p in stored}) for a in ctx.store.attempts(i)}
    return [(attempts[stored[s.index].attempt_id], s.weight) for s in samples]


def conjecturer_examples(ctx: RunContext, iteration: int) -> list[TrainExample]:
    method = ctx.cfg.method
    if not method.train_conjecturer:
        return []
    conjectures = {c.id: c for c in ctx.store.conjectures(iteration)}
    conditioned = method.conjecturer_prompt == "target_conditioned"
    examples = []
    for score in ctx.store.conjecture_scores(iteration).values():
        if not in_conjecturer_batch(score, method.reward_normalisation):
            continue
        conjecture = conjectures[score.conjecture_id]
        target = ctx.store.target(conjecture.target_id)
        prompt = checked_prompt(ctx.rt.prompter.conjecturer(target if conditioned else None), conjecture.completion)
        examples.append(TrainExample(prompt_ids=ctx.rt.prompter.token_ids(prompt),
                                     completion_ids=conjecture.completion.token_ids, weight=score.weight))
    if not any(e.weight != 0.0 for e in examples):
        return []  # nothing earned a reward: no gradient to take
    return examples


def checked_prompt(prompt: str, completion: Completion) -> str:
    """``prompt`` if it is the one the sample was drawn from; training on
    another prompt (templates edited mid-run) would be silently wrong."""
    if prompt_digest(prompt) != completion.prompt_sha256:
        raise RuntimeError("a re-rendered prompt differs from the one the sample was drawn from; "
                           "were the prompt templates or the tokenizer changed during the run?")
    return prompt


def learn(ctx: RunContext, iteration: int, jobs: dict[str, tuple[list[TrainExample], str]]) -> None:
    """One call of the run's learner (``ctx.rt.learner``) training each role of ``jobs`` (its
    examples and objective) from its current weights; the roles' engines then serve the results."""
    if not jobs:
        return
    settings = train_settings(ctx.cfg)
    targets = {role: ctx.weights.transfer_target(role, iteration + 1) for role in jobs}
    results = ctx.rt.learner([
        TrainJob(examples, base_checkpoint=ctx.weights.current[role].path, objective=objective,
                 output_dir=str(ctx.store.checkpoint_dir(role, iteration)),
                 seed=ctx.seed(iteration, f"train_{role}"), probe=ctx.weights.probe_sequence,
                 weight_target=targets[role])
        for role, (examples, objective) in jobs.items()
    ], settings=settings, run_name=f"{ctx.run_name}-train-{iteration:04d}")
    ctx.journal.learner_restarts += max(result.restarts for result in results)
    for role, result in zip(jobs, results):
        numbers = {**asdict(result.metrics), "weights_sent_directly": float(result.weights_sent),
                   "weight_transfer_seconds": result.weight_transfer_seconds}
        (ctx.store.checkpoint_dir(role, iteration) / TRAIN_METRICS_FILE).write_text(json.dumps(numbers))
        ctx.rt.placement.learner(role, iteration, result.placement)
        ctx.weights.trained(role, result, iteration + 1, targets[role])
