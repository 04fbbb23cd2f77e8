"""Measuring a model with the real engines and the verifier pool.

    python -m sgs.evaluate                                   # the base model on the prover's own benchmark
    python -m sgs.evaluate evaluation.checkpoint=runs/x/checkpoints/solver/iter_0004 \\
        evaluation.ks=[1,8,32] evaluation.samples_per_problem=32
    python -m sgs.evaluate model=deepseek_prover_v2_7b prover=lean resources=gpu_node \\
        evaluation.benchmark=minif2f-test evaluation.benchmark_file=/data/minif2f.jsonl
    python -m sgs.evaluate evaluation.solver_mode=both evaluation.seconds_per_target=30 \\
        evaluation.search.width=8 evaluation.search.workers=4     # sampling, then search on what is left

The command takes the overrides ``python -m sgs`` takes (model, prover,
resources, sampling ...) plus the ``evaluation`` node (:class:`sgs.config.EvaluationConfig`).
It samples n = ``evaluation.samples_per_problem`` proofs per benchmark problem
(:mod:`sgs.state.benchmarks`) with the Solver's sampling settings, checks each with
the verifier pool, and reports the unbiased pass@k for each k of
``evaluation.ks`` with a bootstrap confidence interval (:mod:`sgs.analysis.estimators`).
It writes ``problems.jsonl`` (one line per problem: id, n, c, pass@k per k,
the count of each verdict status) and ``summary.json`` (pass@k per k with
its interval, the checkpoint and its policy version, benchmark, n, seed and
wall time) to
``evaluation.output_dir``, and prints a table.

``evaluation.solver_mode`` chooses how it proves: ``sample`` (the above),
``search`` (tactic-level search, :mod:`sgs.search.benchmark`: one search per
problem within ``evaluation.seconds_per_target``, with the settings of
``evaluation.search``, its model calls batched through the same engines) or
``both`` (sampling first, then the search on the problems no sample proved).
In those modes each line of ``problems.jsonl`` also says which mode proved
the problem (``proved_by``) and what its search did, and ``summary.json``
holds the solve rate by mode and what each mode generated.  A bad config, benchmark or
file ends it with exit status 2, a machine that lacks what the config needs
with 3, both before Ray starts.

The measurement itself is :mod:`sgs.analysis.evaluation`; this module is the command
around it: config, benchmark, Ray, engines and pool, and the files it writes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace

import ray
from transformers import AutoTokenizer

from sgs import sft
from sgs.state.benchmarks import BenchmarkError, load_benchmark
from sgs.config import ConfigError, SGSConfig, compose_config, missing_model_directory, requirements_problems
from sgs.config import validate
from sgs.analysis.evaluation import BenchmarkResult, evaluate_problems
from sgs.loop.search_prove import search_settings, tactic_sampling
from sgs.loop.weights import checkpoint_version
from sgs.state.records import Target
from sgs.machinery.prompts import Prompter
from sgs.machinery.runtime import (Checkpoint, backend_spec, model_paths, pinned_gpus, reserved_cpus,
                                   sampling_settings, start_engines, start_ray, start_verifier_pool)
from sgs.search.benchmark import SolverModeResult, result_table, search_problems
from sgs.state.targets import TargetError


# --------------------------------------------------------------------------
# The command: python -m sgs.evaluate
# --------------------------------------------------------------------------

EXIT_CONFIG = 2
EXIT_REQUIREMENTS = 3


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sgs.evaluate [overrides]``: pass@k of a checkpoint on a benchmark."""
    overrides = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = validate(compose_config(overrides))
    except ConfigError as error:
        print(error, file=sys.stderr)
        return EXIT_CONFIG
    evaluation = cfg.evaluation
    missing = requirements_problems(cfg) + checkpoint_problems(evaluation.checkpoint)
    if missing:
        print("this machine cannot run the config:\n" + "\n".join(f"  - {p}" for p in missing), file=sys.stderr)
        return EXIT_REQUIREMENTS
    try:
        benchmark = load_benchmark(evaluation.benchmark, cfg.prover.language,
                                   benchmark_file=evaluation.benchmark_file, limit=evaluation.limit)
    except BenchmarkError as error:
        print(f"evaluation.benchmark: {error}", file=sys.stderr)
        return EXIT_CONFIG
    started = time.perf_counter()
    try:
        result = evaluate_checkpoint(cfg, benchmark.name, benchmark.problems)
    except TargetError as error:  # the tiny model's tokenizer is trained on the targets
        print(f"targets.source: {error}", file=sys.stderr)
        return EXIT_CONFIG
    result = replace(result, wall_seconds=time.perf_counter() - started)
    problems_path, summary_path = result.write(evaluation.output_dir or default_output_dir())
    print(result_table(result))
    print(f"benchmark read from {benchmark.source}; wrote {problems_path} and {summary_path}")
    return 0


def default_output_dir() -> str:
    """Where an evaluation without ``evaluation.output_dir`` writes: a folder named by the time of the call."""
    return f"runs/evaluations/{time.strftime('%Y-%m-%d_%H-%M-%S')}"


def checkpoint_problems(checkpoint: str | None) -> list[str]:
    """A checkpoint that looks like a local path must be a directory (else it is a hub id)."""
    if checkpoint is not None and missing_model_directory(checkpoint):
        return [f"checkpoint directory not found: evaluation.checkpoint={checkpoint!r}"]
    return []


def evaluate_checkpoint(cfg: SGSConfig, benchmark: str,
                        problems: Sequence[Target]) -> BenchmarkResult | SolverModeResult:
    """Start Ray, one Solver engine group on the configured weights and a
    verifier pool, measure ``problems`` in ``evaluation.solver_mode``, and stop them all.

    With ``evaluation.checkpoint`` null the weights are the run's base model,
    warm-started (from the cache, or trained now) when ``python -m sgs``
    would warm-start it: policy version 0.  A checkpoint's version is its
    own (:func:`sgs.loop.weights.checkpoint_version`: written into it, or
    found in the run directory that holds it), or None when neither tells.
    """
    evaluation, res = cfg.evaluation, cfg.resources
    paths = model_paths(cfg) if evaluation.checkpoint is None else None
    searching = evaluation.solver_mode != "sample"
    # The search's actors (one CPU each) on top of what the run's actors would reserve.
    start_ray(cfg, reserved=reserved_cpus(cfg) + (evaluation.search.workers if searching else 0))
    try:
        if paths is None:
            checkpoint = evaluation.checkpoint
            tokenizer = cfg.model.tokenizer_path or checkpoint
            version = checkpoint_version(checkpoint)
        else:
            checkpoint, tokenizer = sft.default_weights(cfg, paths, train=True)
            version = 0
        # The engines label their samples with an int (none is kept here); the result carries the truth.
        engine = start_engines(cfg, "eval-solver", Checkpoint(checkpoint, version or 0),
                               num_engines=res.solver_engines, gpu_ids=pinned_gpus(cfg).get("solver"),
                               weight_transfer=False)
        try:
            pool = start_verifier_pool(cfg, name="eval-verifier")
            try:
                loaded, sampled = AutoTokenizer.from_pretrained(tokenizer), None
                if evaluation.solver_mode != "search":
                    settings = sampling_settings(cfg.sampling.solver, n=evaluation.samples_per_problem,
                                                 seed=cfg.seed)
                    result = evaluate_problems(engine, pool, Prompter(cfg.prover.language, loaded), problems,
                                               ks=evaluation.ks, settings=settings, language=cfg.prover.language,
                                               benchmark=benchmark, checkpoint=checkpoint,
                                               confidence=evaluation.confidence)
                    sampled = replace(result, policy_version=version)
                    if not searching:
                        return sampled
                proved = {p.id for p in sampled.problems if p.c > 0} if sampled is not None else set()
                return search_left(cfg, engine, pool, loaded, benchmark, problems, sampled,
                                   [p for p in problems if p.id not in proved], checkpoint, version)
            finally:
                pool.shutdown()
        finally:
            engine.shutdown()
    finally:
        ray.shutdown()


def search_left(cfg: SGSConfig, engine, pool, tokenizer, benchmark: str, problems: Sequence[Target],
                sampled: BenchmarkResult | None, left: Sequence[Target], checkpoint: str,
                version: int | None) -> SolverModeResult:
    """The search on ``left`` (every problem, or those no sample proved), with the running engines,
    their (loaded) ``tokenizer`` and the pool."""
    evaluation = cfg.evaluation
    # The search of evaluation.search, evaluation.seconds_per_target per problem, as self-play's.
    settings = search_settings(evaluation.search, cfg.prover.backend, evaluation.seconds_per_target,
                               cfg.prover.timeout)
    started = time.perf_counter()
    searched, batches = search_problems(left, engine=engine, pool=pool, tokenizer=tokenizer,
                                        sampling=tactic_sampling(evaluation.search, cfg.sampling.solver),
                                        settings=settings,
                                        strategy=str(evaluation.search.strategy),
                                        backend=backend_spec(cfg.prover),
                                        workers=evaluation.search.workers)
    return SolverModeResult(
        mode=str(evaluation.solver_mode), benchmark=benchmark, checkpoint=checkpoint, policy_version=version,
        language=cfg.prover.language, problem_ids=tuple(p.id for p in problems), sampled=sampled,
        searched=tuple(searched), seconds_per_target=evaluation.seconds_per_target,
        search_settings={"strategy": str(evaluation.search.strategy), "width": settings.width,
                         "max_depth": settings.max_depth, "tactic_seconds": settings.tactic_seconds,
                         "finishers": list(settings.finishers), "workers": evaluation.search.workers},
        search_seconds=time.perf_counter() - started, engine_batches=batches)


if __name__ == "__main__":
    sys.exit(main())
