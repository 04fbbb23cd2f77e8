"""One run of ``python -m sgs``, from a checked config to its summary.

:mod:`sgs.__main__` checks the command line (config, targets, this
machine's requirements, the benchmark), opens the run directory (a new
run, or a resume of the one there) and then calls :func:`run`, which starts
Ray and the verifier pool (whose prover must elaborate the first target's
statement), warm-starts the base model (:mod:`sgs.sft`), starts the
engines, measures the Solver's pass@k on the held-out targets, runs the
loop, measures again, writes the report and prints a summary.

It is a module of its own so that the command line answers a mistyped
override in about a second: importing this one (torch, transformers, Ray
Train, vLLM) takes about ten.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import ray
from transformers import AutoTokenizer

from sgs import sft
from sgs.analysis.evaluation import HELD_OUT_FILE, held_out_pass_at_k, read_json
from sgs.analysis.metrics import MetricsSink, format_rate
from sgs.config import UNELABORATED_CONJECTURES, SGSConfig, search_cpus, searching, warmstart_enabled
from sgs.loop.context import derived_seed
from sgs.loop.iteration import Loop
from sgs.loop.phases import PHASES
from sgs.loop.search_prove import search_settings, tactic_sampling
from sgs.loop.solver_modes import solver_mode
from sgs.loop.weights import current_weights
from sgs.machinery.runtime import (DASHBOARD_TOKEN_HINT, Checkpoint, build_runtime, model_paths, reserved_cpus,
                                   backend_spec, sampling_settings, start_checked_pool, start_ray)
from sgs.search.benchmark import HELD_OUT_SEARCH_FILE, held_out_search, held_out_search_line, search_problems
from sgs.state.benchmarks import Benchmark
from sgs.state.store import Store

log = logging.getLogger(__name__)


def run(cfg: SGSConfig, benchmark: Benchmark | None, store: Store) -> None:
    """Run the run ``store`` holds (opened by the command line, with iterations
    left to do) to ``cfg.iterations``."""
    started = time.perf_counter()
    run_dir = store.run_dir
    paths = model_paths(cfg)

    # The Solver's search actors (search mode) on top of what the run's actors reserve.
    context = start_ray(cfg, reserved=reserved_cpus(cfg) + search_cpus(cfg.solver))
    dashboard = None
    if context.dashboard_url:
        dashboard = f"http://{context.dashboard_url.removeprefix('http://')}"
        print(f"Ray dashboard: {dashboard} ({DASHBOARD_TOKEN_HINT})")
    sink = None
    pool = None
    runtime = None
    seconds: dict[str, float] = {}
    held_out: dict[str, dict | None] = {}
    try:
        pool = start_checked_pool(cfg, run_dir, store.targets[0])
        base = paths.base
        if warmstart_enabled(cfg):
            warm_started = time.perf_counter()
            base = sft.prepare(cfg, paths, store.targets, pool=pool).checkpoint
            seconds["warm start"] = time.perf_counter() - warm_started
        weights = {role: current_weights(store, role, base) for role in ("solver", "conjecturer")}
        # An explicitly configured Guide keeps its own weights; otherwise it is the (warm) base.
        weights["guide"] = Checkpoint(paths.guide if cfg.model.guide_path else base, 0)

        runtime = build_runtime(cfg, run_dir, weights, AutoTokenizer.from_pretrained(paths.tokenizer), pool)
        # The store's copy: plain data, the choice fields' Enums as their strings.
        sink = MetricsSink(cfg.logging, run_dir, name=f"{cfg.experiment}-{run_dir.name}", config=store.config)
        loop = Loop(cfg, store, runtime, weights, run_name=f"{cfg.experiment}-{run_dir.name}",
                    benchmark=benchmark, on_metrics=sink.log)
        if weights["solver"].version == 0:
            held_out["before"] = _evaluate(cfg, store, runtime, seconds)
            held_out["search before"] = _evaluate_search(cfg, store, runtime, seconds)
        finished = loop.run()
        held_out["after"] = _evaluate(cfg, store, runtime, seconds)
        held_out["search after"] = _evaluate_search(cfg, store, runtime, seconds)
    finally:
        if sink is not None:
            sink.close()
        if runtime is not None:
            runtime.shutdown()
        elif pool is not None:
            pool.shutdown()
        ray.shutdown()
    report_page = _write_report(run_dir)
    _summary(cfg, store, loop, held_out, seconds, time.perf_counter() - started, dashboard, report_page, finished)


def _evaluate(cfg: SGSConfig, store: Store, runtime, seconds: dict[str, float]) -> dict | None:
    """The Solver engines' current weights on the held-out targets (``evaluation.k`` samples each)."""
    if cfg.evaluation.k == 0:
        return None
    start = time.perf_counter()
    settings = sampling_settings(cfg.sampling.solver, n=cfg.evaluation.k, seed=derived_seed(cfg.seed, 0, "evaluate"))
    result = held_out_pass_at_k(store.run_dir, runtime.engines["solver"], runtime.pool, runtime.prompter,
                                store.targets, settings, cfg.prover.language)
    seconds["held-out evaluation"] = seconds.get("held-out evaluation", 0.0) + time.perf_counter() - start
    return result


def _evaluate_search(cfg: SGSConfig, store: Store, runtime, seconds: dict[str, float]) -> dict | None:
    """In search mode, also the held-out targets searched once each, as the Solver searches
    in the run (``solver.seconds_per_attempt``, no cap on the states expanded), every proof
    found re-checked by the pool: the measure that mode trains for.  None in sample mode or
    with ``evaluation.k=0`` (no held-out evaluation)."""
    solver = cfg.solver
    if not searching(solver) or cfg.evaluation.k == 0:
        return None
    start = time.perf_counter()
    engine = runtime.engines["solver"]

    def search(targets):
        searched, _ = search_problems(
            targets, engine=engine, pool=runtime.pool, tokenizer=runtime.prompter.tokenizer,
            sampling=tactic_sampling(solver.search, cfg.sampling.solver),
            settings=search_settings(solver.search, cfg.prover.backend, solver.seconds_per_attempt,
                                     cfg.prover.timeout),
            strategy=str(solver.search.strategy), backend=backend_spec(cfg.prover),
            workers=solver.search.workers)
        return searched

    result = held_out_search(store.run_dir, store.targets, engine.policy_version, solver.seconds_per_attempt, search)
    seconds["held-out search"] = seconds.get("held-out search", 0.0) + time.perf_counter() - start
    return result


def _write_report(run_dir: Path) -> Path | None:
    """The run's plots and page (:mod:`sgs.analysis.report`) in ``<run_dir>/report/``.
    The run is done by now, so a failure here is only a warning."""
    try:
        # Imported here: matplotlib is slow to load, and only needed at the end.
        from sgs.analysis.report import report

        return report([run_dir], run_dir / "report")
    except Exception:
        log.warning("could not write the report of %s", run_dir, exc_info=True)
        return None


def _summary(cfg: SGSConfig, store: Store, loop: Loop, held_out: dict[str, dict | None],
             seconds: dict[str, float], wall: float, dashboard: str | None, report_page: Path | None,
             finished: str) -> None:
    """What the run did, in a few lines."""
    metrics = store.metrics()
    k = solver_mode(cfg).attempts_per_problem(cfg)  # searches per problem in search mode
    print(f"\n== SGS run summary ({cfg.experiment}, model {cfg.model.name}, prover {cfg.prover.backend}) ==")
    print(f"run directory: {store.run_dir}  (metrics.jsonl, records per iteration, checkpoints/)")
    print(f"finished: {finished}")
    print(f"report: {report_page}" if report_page else "report: not written (see the warning above)")
    if metrics:
        first, last = metrics[0], metrics[-1]
        solver = "warm-started Solver" if warmstart_enabled(cfg) else "base Solver (no warm start)"
        print(f"cumulative solve rate on the {sum(not t.held_out for t in store.targets)} training targets: "
              f"{first['cumulative_solve_rate']:.3f} after iteration 0 (the {solver}'s pass@{k}, "
              f"before any self-play update) -> {last['cumulative_solve_rate']:.3f} after iteration "
              f"{last['iteration']}")
        print("  per iteration: " + ", ".join(f"{m['iteration']}: {m['cumulative_solve_rate']:.3f}" for m in metrics))
        print(f"  pass@{k} per iteration, on the training targets it sampled: "
              + ", ".join(f"{m['iteration']}: {format_rate(m['pass_at_k'])}" for m in metrics))
        print(f"generations: {last['generations']}, {generation_count(cfg)}")
        searched = {key: sum(m.get(f"search/{key}", 0) for m in metrics)
                    for key in ("attempts", "found", "proved", "step_examples", "anchor_examples", "model_calls",
                                "samples", "tokens")}
        if searched["attempts"]:
            anchors = (f" (and {searched['anchor_examples']} anchor steps of solver.anchor_corpus)"
                       if searched["anchor_examples"] else "")
            print(f"search (solver.mode=search): {searched['attempts']} search attempts, {searched['found']} found a "
                  f"proof, {searched['proved']} re-checked valid by the verifier pool, {searched['step_examples']} "
                  f"tactic steps trained on{anchors}; {searched['model_calls']} model calls (the generations a "
                  f"search counts), {searched['samples']} samples, {searched['tokens']} tokens")
    before, after = held_out.get("before") or _stored_before(store), held_out.get("after")
    if after is None:
        print("held-out pass@k: not measured (no held-out target, or evaluation.k=0)")
    else:
        shown = "not measured" if before is None else (
            f"{before['pass_at_k']:.3f} (policy version {before['policy_version']})")
        print(f"held-out pass@{after['k']} on {after['targets']} targets: {shown} -> {after['pass_at_k']:.3f} "
              f"(policy version {after['policy_version']})")
    searched_after = held_out.get("search after")
    if searched_after is not None:
        print(held_out_search_line(held_out.get("search before") or _stored_before(store, HELD_OUT_SEARCH_FILE),
                                   searched_after))
    print(f"wall time: {wall:.0f} s; " + ", ".join(f"{name} {s:.1f} s" for name, s in seconds.items()))
    print("  per phase: " + ", ".join(f"{phase} {loop.seconds[phase]:.1f} s" for phase in PHASES))
    if dashboard:
        print(f"Ray dashboard (while a run is going): {dashboard}; {DASHBOARD_TOKEN_HINT}")


def generation_count(cfg: SGSConfig) -> str:
    """What the run's generation count includes, naming the setting that decides it."""
    setting = cfg.method.unelaborated_conjectures
    return (f"every Conjecturer and Solver sample: {UNELABORATED_CONJECTURES[setting]} "
            f"(method.unelaborated_conjectures={setting})")


def _stored_before(store: Store, name: str = HELD_OUT_FILE) -> dict | None:
    """The base model's held-out result (``name``: sampling's or the search's) stored by an
    earlier session of this run."""
    return (read_json(store.run_dir / name) or {}).get("0")
