"""The record phase: the iteration's ``metrics.jsonl`` line (and wandb's
tables and histograms), the benchmark evaluation every ``evaluation.every``
iterations, the best checkpoint's flag, and a loud warning when too many
verifications ended in a system error."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from sgs.analysis import metrics as M
from sgs.analysis.closeness import closeness_metrics
from sgs.analysis.evaluation import SUMMARY_FILE, evaluate_problems, format_table, read_json
from sgs.loop.context import MATCHES_BENCHMARK, RunContext, derived_seed
from sgs.loop.phases import TRAINING_PHASE
from sgs.loop.solver_modes import generation_counts, solver_mode
from sgs.loop.weights import TRAIN_METRICS_FILE, TRAINED_ROLES
from sgs.machinery.runtime import sampling_settings
from sgs.method.roles import canonical_form
from sgs.state.phase_log import PhaseLog, PhaseStats
from sgs.state.records import Conjecture

log = logging.getLogger(__name__)

#: Benchmark evaluations during the run (``evaluation.every``), one folder per iteration.
EVALS_DIR = "evals"
#: An iteration whose share of system errors among verifications exceeds this says so loudly (SPEC §1.6).
SYSTEM_ERROR_ALARM = 0.01


def record(ctx: RunContext, iteration: int, phase_log: PhaseLog | None) -> PhaseStats:
    """Write the metrics line of ``iteration``, with the timing of the phases
    this process ran and the run's fault totals so far (``ctx.journal``).
    The phase writes the metrics file, not records (no ``phase_log``)."""
    store = ctx.store
    mode = solver_mode(ctx.cfg)
    # Read once: a paper-sized iteration holds ~39,000 records.
    attempts, conjectures = store.attempts(iteration), store.conjectures(iteration)
    scores = store.conjecture_scores(iteration)
    mode_metrics = mode.metrics(ctx, iteration, attempts)
    metrics = M.iteration_metrics(
        iteration=iteration,
        attempts=attempts,
        conjectures=conjectures,
        scores=list(scores.values()),
        training_ids=[t.id for t in store.targets if not t.held_out],
        k=mode.attempts_per_problem(ctx.cfg),
        language=ctx.language,
        generations=store.generations(through_iteration=iteration),
        cumulative_solve_rate=store.solved_registry.cumulative_solve_rate(through_iteration=iteration),
        phases=ctx.journal.phases(iteration),
        training=training_numbers(ctx, iteration),
    )
    metrics.update(mode_metrics)
    metrics["generations"], metrics["generations_this_iteration"] = generation_counts(
        metrics["generations"], metrics["generations_this_iteration"], mode_metrics,
        [m for m in store.metrics() if m["iteration"] < iteration])
    metrics["conjectures_matching_benchmark"] = benchmark_matches(ctx, conjectures)
    parents = {c.target_id for c in conjectures}
    metrics.update(closeness_metrics(
        conjectures, scores, attempts, {t.id: t.statement for t in store.targets if t.id in parents},
        {tid: [p.proof for p in store.solved_registry.proofs(tid)] for tid in parents}, ctx.language))
    metrics.update(M.seq_len_capped_metrics(attempts, conjectures, {
        role: getattr(ctx.cfg.sampling, role).max_tokens for role in TRAINED_ROLES}))
    metrics.update(ctx.journal.fault_counts(ctx.rt))
    metrics.update(periodic_evaluation(ctx, iteration))
    best_so_far = max((m["cumulative_solve_rate"] for m in store.metrics()), default=None)
    store.append_metrics(metrics)
    if best_so_far is None or metrics["cumulative_solve_rate"] > best_so_far:
        flag_best_checkpoints(ctx, iteration)
    if metrics["system_error_rate"] > SYSTEM_ERROR_ALARM:
        log.warning("!!! iteration %d: %.1f%% of verifications ended in a system error (prover crashes, lost "
                    "workers), above the %.0f%% the results can be trusted with; their samples carry no "
                    "reward. Commonest causes: %s. Counts by cause: %s/<reason> in metrics.jsonl.",
                    iteration, 100 * metrics["system_error_rate"], 100 * SYSTEM_ERROR_ALARM,
                    M.system_error_causes(a.verdict for a in attempts if a.verdict is not None),
                    M.SYSTEM_ERROR_PREFIX)
    tables = M.sample_tables(iteration, conjectures, scores, attempts, {t.id: t.statement for t in store.targets})
    ctx.monitor.iteration_finished(metrics)
    ctx.journal.on_metrics(metrics, tables, M.sample_histograms(attempts, list(scores.values())))
    log.info("iteration %d: cumulative solve rate %.3f, pass@k %s on the %d training targets sampled, %d generations",
             iteration, metrics["cumulative_solve_rate"], M.format_rate(metrics["pass_at_k"]),
             metrics["targets_attempted"], metrics["generations"])
    ctx.rt.placement.actors(ctx.rt.engines, ctx.rt.pool)  # restarted actors may run elsewhere now
    return PhaseStats()


def training_numbers(ctx: RunContext, iteration: int) -> dict[str, dict]:
    """The learner's numbers of this iteration's checkpoints, per role."""
    numbers = {}
    for role in TRAINED_ROLES:
        path = ctx.store.checkpoint_dir(role, iteration) / TRAIN_METRICS_FILE
        if path.is_file():
            numbers[role] = json.loads(path.read_text())
    return numbers


def periodic_evaluation(ctx: RunContext, iteration: int) -> dict[str, float]:
    """pass@k on the benchmark every ``evaluation.every`` iterations, of
    the weights the Solver serves after ``iteration``'s update; results in
    ``evals/iter_NNNN/`` (a resumed record phase reads them back)."""
    evaluation, benchmark = ctx.cfg.evaluation, ctx.benchmark
    if benchmark is None or evaluation.every <= 0 or (iteration + 1) % evaluation.every:
        return {}
    directory = ctx.store.run_dir / EVALS_DIR / f"iter_{iteration:04d}"
    summary = read_json(directory / SUMMARY_FILE)
    solver = ctx.weights.current["solver"]
    if summary is None or summary.get("policy_version") != solver.version:
        settings = sampling_settings(ctx.cfg.sampling.solver, n=evaluation.samples_per_problem,
                                     seed=derived_seed(ctx.cfg.seed, iteration, "evaluate"))
        result = evaluate_problems(ctx.rt.engines["solver"], ctx.rt.pool, ctx.rt.prompter, benchmark.problems,
                                   ks=evaluation.ks, settings=settings, language=ctx.language,
                                   benchmark=benchmark.name, checkpoint=solver.path,
                                   confidence=evaluation.confidence)
        result.write(directory)
        summary = result.to_json()
        log.info("iteration %d: %s", iteration, format_table(result))
    numbers = {}
    for k, estimate in summary["pass_at_k"].items():
        numbers[f"eval/pass@{k}"] = estimate["pass_at_k"]
        numbers[f"eval/pass@{k}_ci_low"] = estimate["ci_low"]
        numbers[f"eval/pass@{k}_ci_high"] = estimate["ci_high"]
    return numbers


def benchmark_matches(ctx: RunContext, conjectures: Sequence[Conjecture]) -> int:
    """Conjectures that state a benchmark problem, excluded or let through."""
    if not ctx.benchmark_forms:
        return 0
    return sum(c.extraction_error == MATCHES_BENCHMARK
               or (c.statement is not None and canonical_form(c.statement, ctx.language) in ctx.benchmark_forms)
               for c in conjectures)


def flag_best_checkpoints(ctx: RunContext, iteration: int) -> None:
    """The weights after ``iteration`` set the best cumulative solve rate so
    far: keep them (pruning spares the best) under ``checkpoints/<role>/best``."""
    for role in TRAINED_ROLES:
        if ctx.store.phase_done(iteration, TRAINING_PHASE) and ctx.store.checkpoint_dir(role, iteration).is_dir():
            ctx.store.set_best_checkpoint(role, iteration)
