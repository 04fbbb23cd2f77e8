"""The SGS command line: ``python -m sgs [+experiment=NAME] [overrides]``.

    python -m sgs                                    # the embedded default (tiny model, Rocq, CPU)
    python -m sgs +experiment=no_guide model=tiny prover=rocq resources=local_cpu scale=laptop
    python -m sgs -m +experiment=standard,no_guide   # a sweep: one run directory per job
    python -m sgs run_dir=runs/x                     # start, or resume, the run in runs/x

Steps: compose and validate the config (exit 2 with every problem named),
check that this machine can run it before starting anything (exit 3 with
what is missing and the overrides that would run here), open the run
directory (a new run, or a resume of the one there), start Ray, start the
verifier pool (its prover must elaborate the first target's statement, else
exit 3 naming why, before the minutes a warm start takes), warm-start the
base model (:mod:`sgs.sft`; the tiny model only, cached after the first
run), start the engines, measure the Solver's pass@k on
the held-out targets, run the loop, measure it again, write the run's report
(:mod:`sgs.analysis.report`) and print a summary.

The default run (no overrides) is the ``standard`` experiment on the tiny
model with Rocq, at laptop scale (``conf/scale/laptop.yaml``): sized to
finish on 2 CPU cores in about a quarter of an hour, the warm start of a
first run included.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import asdict
from pathlib import Path

import hydra
import ray
from omegaconf import DictConfig
from transformers import AutoTokenizer

from sgs import sft
from sgs.state.benchmarks import Benchmark, BenchmarkError, load_benchmark
from sgs.config import CONFIG_DIR, CONFIG_NAME, ConfigError, SGSConfig, requirements_problems, suggested_overrides
from sgs.config import resolve_source_path, validate, warmstart_enabled
from sgs.analysis.evaluation import HELD_OUT_FILE, held_out_pass_at_k, read_json
from sgs.loop import PHASES, Loop, current_weights, derived_seed
from sgs.analysis.metrics import MetricsSink
from sgs.machinery.runtime import (DASHBOARD_TOKEN_HINT, Checkpoint, ProverUnavailable, build_runtime, model_paths,
                                   sampling_settings, start_checked_pool, start_ray)
from sgs.state.store import Store, StoreError
from sgs.state.records import Target
from sgs.state.targets import TargetError, read_targets

EXIT_CONFIG = 2
EXIT_REQUIREMENTS = 3

log = logging.getLogger(__name__)


@hydra.main(version_base=None, config_path=str(CONFIG_DIR), config_name=CONFIG_NAME)
def main(raw: DictConfig) -> None:
    try:
        cfg = validate(raw)
    except ConfigError as error:
        print(error, file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    targets = None
    if _is_local_file(cfg.targets.source):
        # A local file is read before anything else is checked: a malformed one is a usage error
        # whatever this machine lacks, and the line below says what the run will prove.
        try:
            targets = read_run_targets(cfg)
        except TargetError as error:
            print(f"targets.source: {error}", file=sys.stderr)
            sys.exit(EXIT_CONFIG)
    problems = requirements_problems(cfg)
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        print(f"this machine cannot run the config:\n{lines}", file=sys.stderr)
        overrides = suggested_overrides(cfg)
        if overrides:
            print(f"to run here, add: {' '.join(overrides)}", file=sys.stderr)
        sys.exit(EXIT_REQUIREMENTS)
    try:
        benchmark = run_benchmark(cfg)
    except BenchmarkError as error:
        print(f"evaluation.benchmark: {error}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    try:
        run(cfg, benchmark, targets)
    except TargetError as error:
        print(f"targets.source: {error}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    except ProverUnavailable as error:
        # Nothing was sampled yet; the run directory resumes once the prover works.
        print(f"this machine cannot run the config: {error}", file=sys.stderr)
        sys.exit(EXIT_REQUIREMENTS)
    except StoreError as error:
        # The run directory cannot be created or resumed as asked (another run's config or
        # targets, another version's phases, damaged records); it is left as it was.
        print(f"run_dir: {error}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)


def run_benchmark(cfg: SGSConfig) -> Benchmark | None:
    """The benchmark a run evaluates on every ``evaluation.every`` iterations and
    keeps its conjectures away from: only when one is named or evaluated
    (the held-out targets are always kept away, as targets)."""
    evaluation = cfg.evaluation
    if evaluation.every <= 0 and evaluation.benchmark is None:
        return None
    return load_benchmark(evaluation.benchmark, cfg.prover.language, benchmark_file=evaluation.benchmark_file,
                          limit=evaluation.limit)


def _is_local_file(source: str) -> bool:
    try:
        path = resolve_source_path(source)
    except ValueError:
        return False
    return path is not None and path.is_file()


def read_run_targets(cfg: SGSConfig) -> list[Target]:
    """The run's targets, with one line saying what was read (and, for a LeanDojo
    file, how many entries were skipped and why)."""
    found = read_targets(cfg.targets, cfg.prover.language)
    print(found.summary(cfg.targets.source))
    return found.targets


def run(cfg: SGSConfig, benchmark: Benchmark | None = None, targets: list[Target] | None = None) -> None:
    """Create or resume the run in ``cfg.run_dir`` and run it to ``cfg.iterations``
    (on ``targets``, read from ``cfg.targets`` when not given)."""
    started = time.perf_counter()
    if targets is None:
        targets = read_run_targets(cfg)
    run_dir = Path(cfg.run_dir)
    with Store.open(run_dir, targets, asdict(cfg)) as store:
        iteration, phase = store.resume_point(PHASES)
        if iteration >= cfg.iterations:
            print(f"{run_dir}: all {cfg.iterations} iterations are done")
            return
        if (iteration, phase) != (0, PHASES[0]):
            print(f"resuming {run_dir} at iteration {iteration}, phase {phase!r}")
        paths = model_paths(cfg)

        context = start_ray(cfg)
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
            sink = MetricsSink(cfg.logging, run_dir, name=f"{cfg.experiment}-{run_dir.name}", config=asdict(cfg))
            loop = Loop(cfg, store, runtime, weights, run_name=f"{cfg.experiment}-{run_dir.name}",
                        benchmark=benchmark, on_metrics=sink.log)
            if weights["solver"].version == 0:
                held_out["before"] = _evaluate(cfg, store, runtime, seconds)
            loop.run()
            held_out["after"] = _evaluate(cfg, store, runtime, seconds)
        finally:
            if sink is not None:
                sink.close()
            if runtime is not None:
                runtime.shutdown()
            elif pool is not None:
                pool.shutdown()
            ray.shutdown()
        report_page = _write_report(run_dir)
        _summary(cfg, store, loop, held_out, seconds, time.perf_counter() - started, dashboard, report_page)


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
             seconds: dict[str, float], wall: float, dashboard: str | None, report_page: Path | None) -> None:
    """What the run did, in a few lines."""
    metrics = store.metrics()
    k = cfg.method.num_solver_samples
    print(f"\n== SGS run summary ({cfg.experiment}, model {cfg.model.name}, prover {cfg.prover.backend}) ==")
    print(f"run directory: {store.run_dir}  (metrics.jsonl, records per iteration, checkpoints/)")
    print(f"report: {report_page}" if report_page else "report: not written (see the warning above)")
    if metrics:
        first, last = metrics[0], metrics[-1]
        solver = "warm-started Solver" if warmstart_enabled(cfg) else "base Solver (no warm start)"
        print(f"cumulative solve rate on the {sum(not t.held_out for t in store.targets)} training targets: "
              f"{first['cumulative_solve_rate']:.3f} after iteration 0 (the {solver}'s pass@{k}, "
              f"before any self-play update) -> {last['cumulative_solve_rate']:.3f} after iteration "
              f"{last['iteration']}")
        print("  per iteration: " + ", ".join(f"{m['iteration']}: {m['cumulative_solve_rate']:.3f}" for m in metrics))
        print(f"  pass@{k} per iteration: " + ", ".join(f"{m['iteration']}: {m['pass_at_k']:.3f}" for m in metrics))
        print(f"generations: {last['generations']}")
    before, after = held_out.get("before") or _stored_before(store), held_out.get("after")
    if after is None:
        print("held-out pass@k: not measured (no held-out target, or evaluation.k=0)")
    else:
        shown = "not measured" if before is None else (
            f"{before['pass_at_k']:.3f} (policy version {before['policy_version']})")
        print(f"held-out pass@{after['k']} on {after['targets']} targets: {shown} -> {after['pass_at_k']:.3f} "
              f"(policy version {after['policy_version']})")
    print(f"wall time: {wall:.0f} s; " + ", ".join(f"{name} {s:.1f} s" for name, s in seconds.items()))
    print("  per phase: " + ", ".join(f"{phase} {loop.seconds[phase]:.1f} s" for phase in PHASES))
    if dashboard:
        print(f"Ray dashboard (while a run is going): {dashboard}; {DASHBOARD_TOKEN_HINT}")


def _stored_before(store: Store) -> dict | None:
    """The base model's held-out result stored by an earlier session of this run."""
    return (read_json(store.run_dir / HELD_OUT_FILE) or {}).get("0")


if __name__ == "__main__":
    main()
