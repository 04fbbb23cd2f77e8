"""The SGS command line: ``python -m sgs [+experiment=NAME] [overrides]``.

    python -m sgs                                    # the embedded default (tiny model, Rocq, CPU)
    python -m sgs +experiment=no_guide model=tiny prover=rocq resources=local_cpu scale=laptop
    python -m sgs -m +experiment=standard,no_guide   # a sweep: one run directory per job
    python -m sgs run_dir=runs/x                     # start, or resume, the run in runs/x

Steps: check the command line's values of the choice fields and its config
group options (``+experiment=``, ``model=``; exit 2 naming every bad one, its
key and the allowed values: Hydra would stop at the first, with exit 1),
compose each job's config once first (exit 2 naming what Hydra refuses: a
value of the wrong type, an unknown key, a bad value in a YAML file; Hydra
would exit 1, as for a crash), compose and validate the config (exit 2 with every problem named; then what
the Solver objective asks of it, :func:`sgs.method.registry.config_problems`),
read the targets (exit 2 naming a malformed file), check that this machine
can run it before starting anything (exit 3 with what is missing and the
overrides that would run here), read the benchmark, open the run
directory (a new run, or a resume of the one there; exit 2 when it belongs
to another run or another version, exit 0 when it is finished: its
iterations all done, or its curve flat under ``stop``), then hand over to :func:`sgs.launch.run`: start Ray, start the
verifier pool (its prover must elaborate the first target's statement, else
exit 3 naming why, before the minutes a warm start takes), warm-start the
base model (:mod:`sgs.sft`; the tiny model only, cached after the first
run), start the engines, measure the Solver's pass@k on the held-out
targets, run the loop, measure it again, write the run's report
(:mod:`sgs.analysis.report`) and print a summary.  Every check before the
hand-over runs before torch, transformers and Ray are imported, so a
mistyped override is answered in about a second.

The default run (no overrides) is the ``standard`` experiment on the tiny
model with Rocq, at laptop scale (``conf/scale/laptop.yaml``): sized to
finish on 2 CPU cores in about a quarter of an hour, the warm start of a
first run included.
"""

from __future__ import annotations

import sys
from dataclasses import asdict

import hydra
from hydra._internal.utils import get_args_parser
from omegaconf import DictConfig

from sgs.config import CONFIG_DIR, CONFIG_NAME, ConfigError, SGSConfig, requirements_problems, suggested_overrides
from sgs.config import composition_problems, override_problems, resolve_source_path, validate
from sgs.loop.phases import PHASES
from sgs.loop.stopping import stop_reason
from sgs.method.registry import config_problems as objective_problems
from sgs.state.benchmarks import Benchmark, BenchmarkError, load_benchmark
from sgs.state.records import Target
from sgs.state.store import Store, StoreError
from sgs.state.targets import TargetError, read_targets

EXIT_CONFIG = 2
EXIT_REQUIREMENTS = 3


def cli() -> None:
    """``python -m sgs``: the command line's bad choices, then :func:`main`.

    OmegaConf refuses a bad value of a choice field (an Enum) while Hydra
    composes the config, before :func:`main` could report it: Hydra prints
    the first one and exits 1.  So the overrides are checked here first,
    read by Hydra's own argument parser (the one ``hydra.main`` reads them
    with), and every bad one is named as :func:`main` names config problems;
    then each job's config is composed once, so that what Hydra would refuse
    is named the same way, with the same exit status.
    """
    args = get_args_parser().parse_args()
    problems = override_problems(args.overrides, config_dir=args.config_dir)
    if not problems and not (args.help or args.hydra_help or args.info or args.shell_completion):
        problems = composition_problems(args.overrides, config_dir=args.config_dir)
    if problems:
        print(ConfigError(problems), file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    main()


@hydra.main(version_base=None, config_path=str(CONFIG_DIR), config_name=CONFIG_NAME)
def main(raw: DictConfig) -> None:
    try:
        cfg = validate(raw)
    except ConfigError as error:
        print(error, file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    problems = objective_problems(cfg)
    if problems:
        print(ConfigError(problems), file=sys.stderr)
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
        if targets is None:
            targets = read_run_targets(cfg)  # not a local file: a hub data set, fetched now
    except TargetError as error:
        print(f"targets.source: {error}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    try:
        with Store.open(cfg.run_dir, targets, asdict(cfg), proof_counting=cfg.method.ei_solved_count,
                        max_proofs=cfg.method.max_proofs_per_target) as store:
            iteration, phase = store.resume_point(PHASES)
            finished = stop_reason(cfg, store.metrics()) if phase == PHASES[0] else None
            if finished:
                print(f"{store.run_dir}: {finished}")
                return
            if (iteration, phase) != (0, PHASES[0]):
                print(f"resuming {store.run_dir} at iteration {iteration}, phase {phase!r}")
            # Imported only now: torch, transformers and Ray take about ten seconds to
            # load, and every check above answers a mistyped command line without them.
            from sgs.launch import run
            from sgs.machinery.runtime import ProverUnavailable

            try:
                run(cfg, benchmark, store)
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


if __name__ == "__main__":
    cli()
