"""The SGS command line: ``python -m sgs [+experiment=NAME] [overrides]``.

    python -m sgs                                    # the embedded default (tiny model, Rocq, CPU)
    python -m sgs +experiment=no_guide model=tiny prover=rocq resources=local_cpu scale=laptop
    python -m sgs -m +experiment=standard,no_guide   # a sweep: one run directory per job
    python -m sgs run_dir=runs/x                     # start, or resume, the run in runs/x

Steps: compose and validate the config (exit 2 with every problem named),
check that this machine can run it before starting anything (exit 3 with
what is missing and the overrides that would run here), open the run
directory (a new run, or a resume of the one there), start Ray, the engines
and the verifier pool, run the loop, print a summary.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path

import hydra
import ray
from omegaconf import DictConfig
from transformers import AutoTokenizer

from sgs.config import CONFIG_DIR, CONFIG_NAME, ConfigError, SGSConfig, requirements_problems, suggested_overrides
from sgs.config import validate
from sgs.loop import PHASES, Loop, current_weights
from sgs.metrics import MetricsSink
from sgs.models import resolve_model_paths
from sgs.roles import template_dir
from sgs.runtime import Checkpoint, build_runtime, start_ray
from sgs.store import Store
from sgs.targets import corpus_texts, load_targets

EXIT_CONFIG = 2
EXIT_REQUIREMENTS = 3


@hydra.main(version_base=None, config_path=str(CONFIG_DIR), config_name=CONFIG_NAME)
def main(raw: DictConfig) -> None:
    try:
        cfg = validate(raw)
    except ConfigError as error:
        print(error, file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    problems = requirements_problems(cfg)
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        print(f"this machine cannot run the config:\n{lines}", file=sys.stderr)
        overrides = suggested_overrides(cfg)
        if overrides:
            print(f"to run here, add: {' '.join(overrides)}", file=sys.stderr)
        sys.exit(EXIT_REQUIREMENTS)
    run(cfg)


def run(cfg: SGSConfig) -> None:
    """Create or resume the run in ``cfg.run_dir`` and run it to ``cfg.iterations``."""
    targets = load_targets(cfg.targets, cfg.prover.language)
    run_dir = Path(cfg.run_dir)
    with Store.open(run_dir, targets, asdict(cfg)) as store:
        start_rate, start_generations = store.solved_registry.cumulative_solve_rate(), store.generations()
        iteration, phase = store.resume_point(PHASES)
        if iteration >= cfg.iterations:
            print(f"{run_dir}: all {cfg.iterations} iterations are done")
            return
        if (iteration, phase) != (0, PHASES[0]):
            print(f"resuming {run_dir} at iteration {iteration}, phase {phase!r}")

        # The tiny model's tokenizer is trained on the targets and the prompt wording.
        templates = [p.read_text() for p in sorted(template_dir(cfg.prover.language).glob("*.j2"))]
        paths = resolve_model_paths(cfg.model, seed=cfg.seed, corpus=corpus_texts(targets) + templates)
        weights = {role: current_weights(store, role, paths.base) for role in ("solver", "conjecturer")}
        weights["guide"] = Checkpoint(paths.guide, 0)

        context = start_ray(cfg)
        if context.dashboard_url:
            print(f"Ray dashboard: http://{context.dashboard_url.removeprefix('http://')} (Ray 2.60 asks for "
                  "the token in ~/.ray/auth_token; RAY_AUTH_MODE=disabled turns that off on a private machine)")
        sink = None
        runtime = None
        started = time.perf_counter()
        try:
            runtime = build_runtime(cfg, run_dir, weights, AutoTokenizer.from_pretrained(paths.tokenizer))
            sink = MetricsSink(cfg.logging, run_dir, name=f"{cfg.experiment}-{run_dir.name}", config=asdict(cfg))
            loop = Loop(cfg, store, runtime, weights, run_name=f"{cfg.experiment}-{run_dir.name}",
                        on_metrics=sink.log)
            loop.run()
        finally:
            if sink is not None:
                sink.close()
            if runtime is not None:
                runtime.shutdown()
            ray.shutdown()
        _summary(store, loop, start_rate, start_generations, time.perf_counter() - started)


def _summary(store: Store, loop: Loop, start_rate: float, start_generations: int, seconds: float) -> None:
    end_rate = store.solved_registry.cumulative_solve_rate()
    print(f"\nrun directory: {store.run_dir}")
    print(f"cumulative solve rate: {start_rate:.3f} -> {end_rate:.3f}")
    print(f"generations: {start_generations} -> {store.generations()}")
    print(f"wall time: {seconds:.0f} s; per phase: "
          + ", ".join(f"{phase} {loop.seconds[phase]:.1f} s" for phase in PHASES))


if __name__ == "__main__":
    main()
