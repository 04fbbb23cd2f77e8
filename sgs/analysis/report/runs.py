"""Reading runs for the report: which directories are runs, and what the
report needs from each (:class:`RunData`).

The run's own files are read through the store's read-only reader
(:class:`sgs.state.run_reader.RunReader`, lenient): no lock is taken and
nothing is written, so a run still being written (its process still holds the
lock) can be reported, and the store's rules apply: only phases with a commit
marker count, a partial log of a killed or running phase is ignored, the
solved registry is rebuilt from the proofs each commit admitted.  Missing or
damaged data never stops a report: it is left out and noted.  The evaluation
files a run directory may also hold (held-out pass@k, benchmark summaries) are
read here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgs.analysis.scaling import find_runs
from sgs.config import UNELABORATED_CONJECTURES
from sgs.state.records import Conjecture, ConjectureScore
from sgs.state.solved import MAX_PROOFS
from sgs.state.run_reader import CONFIG_FILE, METRICS_FILE, PhaseMarker, RunReader, is_created_run

#: The held-out evaluations of a run ({policy version: result}).  This and
#: the next name are :data:`sgs.analysis.evaluation.HELD_OUT_FILE` and
#: :data:`sgs.analysis.evaluation.SUMMARY_FILE`, repeated here because importing that
#: module loads Ray, Hydra and transformers (seconds) for two strings.
HELD_OUT_FILE = "held_out_eval.json"
#: The summary of one benchmark evaluation (``BenchmarkResult.to_json``),
#: found anywhere inside a run directory.
BENCHMARK_SUMMARY_FILE = "summary.json"
#: ``method.unelaborated_conjectures`` of a run whose config predates the setting: they all skipped.
UNELABORATED_BEFORE_THE_SETTING = "skip"


class ReportError(Exception):
    """A path given to the report is not a run directory and holds none."""


@dataclass(frozen=True)
class HeldOutEval:
    """The Solver's pass@k on the held-out targets at one policy version."""

    policy_version: int
    """The weights measured: 0 before self-play, v after iteration v-1's Solver update."""
    k: int
    """Samples per target."""
    targets: int
    """Held-out targets measured."""
    pass_at_k: float
    """Share of the held-out targets with a valid proof among the k samples."""


@dataclass(frozen=True)
class BenchmarkEval:
    """One pass@k of a benchmark evaluation (``python -m sgs.evaluate``, or a
    run's evaluation every ``evaluation.every`` iterations)."""

    benchmark: str
    """The benchmark's name."""
    policy_version: int | None
    """The weights measured: 0 before self-play, v after iteration v-1's
    Solver update; None when the evaluation could not tell (weights from
    outside a run)."""
    k: int
    """The k of pass@k."""
    pass_at_k: float
    """The unbiased pass@k estimate."""
    ci_low: float
    """Lower end of its bootstrap confidence interval."""
    ci_high: float
    """Upper end of its bootstrap confidence interval."""


@dataclass(frozen=True)
class RunData:
    """What the report needs from one run directory."""

    run_dir: Path
    """The run directory."""
    experiment: str
    """The config's experiment name (the directory's name when the config has none)."""
    config: dict
    """The config the run last ran with (``config.yaml`` and accepted changes; empty when unreadable)."""
    metrics: list[dict]
    """The ``metrics.jsonl`` lines, oldest first."""
    training_target_ids: list[str]
    """Ids of the targets that are not held out, in the run's order."""
    solved_at: dict[str, int]
    """First iteration with a verified proof, per solved target."""
    conjecture_target: dict[str, str]
    """Target each conjecture was conditioned on, by conjecture id."""
    scores: dict[int, list[ConjectureScore]]
    """Conjecture scores of the finished review phases, by iteration."""
    held_out: list[HeldOutEval]
    """Held-out evaluations, by policy version."""
    benchmarks: list[BenchmarkEval]
    """Benchmark evaluations stored in the run directory, by benchmark, k and policy version."""
    notes: list[str] = field(default_factory=list)
    """Damage met while reading (skipped lines, unreadable files), for the page."""

    @property
    def uses_guide(self) -> bool:
        return bool(self.config.get("method", {}).get("use_guide", True))

    @property
    def trains_conjecturer(self) -> bool:
        return bool(self.config.get("method", {}).get("train_conjecturer", True))

    @property
    def unelaborated_conjectures(self) -> str:
        """``method.unelaborated_conjectures``: what its generation count includes."""
        return str(self.config.get("method", {}).get("unelaborated_conjectures", UNELABORATED_BEFORE_THE_SETTING))

    @property
    def generation_count(self) -> str:
        """What its generation count includes, in words, naming the setting."""
        setting = self.unelaborated_conjectures
        return (f"{UNELABORATED_CONJECTURES.get(setting, 'an unknown setting')} "
                f"(method.unelaborated_conjectures={setting})")

    @property
    def k(self) -> int | None:
        """Solver samples per problem (the k of the training pass@k)."""
        return self.config.get("method", {}).get("num_solver_samples")


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` holds one run (its config, or at least its metrics)."""
    return is_created_run(path) or (path / METRICS_FILE).is_file()


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """The run directories the given paths name: each path itself when it is
    a run, else the runs below it (a sweep).  Raises ReportError for a path
    that is neither."""
    found: dict[Path, Path] = {}  # by resolved path: a run named twice is reported once
    for given in map(Path, paths):
        if not given.is_dir():
            raise ReportError(f"{given}: no such directory")
        runs = [given] if is_run_dir(given) else find_runs(given)
        if not runs:
            raise ReportError(f"{given}: not a run directory (no {CONFIG_FILE} or {METRICS_FILE}) "
                              f"and no run directory below it")
        for run in runs:
            found.setdefault(run.resolve(), run)
    return list(found.values())


def _conjecture_records(reader: RunReader, markers: Sequence[PhaseMarker]
                        ) -> tuple[dict[str, str], dict[int, list[ConjectureScore]]]:
    """(target of each conjecture, scores by iteration) from the finished
    phase logs that hold conjectures or scores; attempts are never parsed."""
    conjecture_target: dict[str, str] = {}
    scores: dict[int, list[ConjectureScore]] = {}
    kinds = ("conjecture", "conjecture_score")
    for marker in markers:
        if not any(marker.records.get(kind) for kind in kinds):
            continue
        for record in reader.records(marker, kinds):
            if isinstance(record, Conjecture):
                conjecture_target[record.id] = record.target_id
            elif isinstance(record, ConjectureScore):
                scores.setdefault(marker.iteration, []).append(record)
    return conjecture_target, scores


def held_out_evals(stored: Any) -> list[HeldOutEval]:
    """The held-out evaluations in a ``held_out_eval.json`` object, by policy
    version; entries that are not evaluations are skipped."""
    evals = []
    for result in stored.values() if isinstance(stored, dict) else ():
        try:
            evals.append(HeldOutEval(policy_version=int(result["policy_version"]), k=int(result["k"]),
                                     targets=int(result["targets"]), pass_at_k=float(result["pass_at_k"])))
        except (KeyError, TypeError, ValueError):
            continue
    return sorted(evals, key=lambda e: e.policy_version)


def _read_held_out(run_dir: Path, notes: list[str]) -> list[HeldOutEval]:
    path = run_dir / HELD_OUT_FILE
    if not path.is_file():
        return []
    try:
        return held_out_evals(json.loads(path.read_text(encoding="utf-8")))
    except ValueError:
        notes.append(f"{path}: not valid JSON; held-out results left out")
        return []


def benchmark_evals(summary: Any) -> list[BenchmarkEval]:
    """The pass@k estimates of one benchmark summary object; empty when it is
    not one (another tool's ``summary.json``)."""
    try:
        version = None if summary["policy_version"] is None else int(summary["policy_version"])
        return [BenchmarkEval(benchmark=str(summary["benchmark"]), policy_version=version,
                              k=int(k), pass_at_k=float(estimate["pass_at_k"]), ci_low=float(estimate["ci_low"]),
                              ci_high=float(estimate["ci_high"]))
                for k, estimate in summary["pass_at_k"].items()]
    except (KeyError, TypeError, ValueError, AttributeError):
        return []


def _read_benchmarks(run_dir: Path) -> list[BenchmarkEval]:
    evals = []
    for path in run_dir.rglob(BENCHMARK_SUMMARY_FILE):
        try:
            evals.extend(benchmark_evals(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            continue  # not ours to judge: any tool may leave a summary.json
    return sorted(evals, key=lambda e: (e.benchmark, e.k, -1 if e.policy_version is None else e.policy_version))


def read_run(run_dir: str | Path) -> RunData:
    """Everything the report shows about one run, without changing the directory."""
    run_dir = Path(run_dir)
    reader = RunReader(run_dir, strict=False)
    config = reader.config()
    targets = reader.targets()
    markers = reader.markers()
    method = config.get("method", {})
    registry = reader.solved_registry(targets, markers, method.get("ei_solved_count", "distinct"),
                                      method.get("max_proofs_per_target", MAX_PROOFS))
    conjecture_target, scores = _conjecture_records(reader, markers)
    metrics = reader.metrics()
    notes = reader.notes
    unfinished = reader.unfinished_logs()
    if unfinished:
        notes.append(f"{run_dir}: left out the unfinished phase log(s) {', '.join(unfinished)} "
                     f"(a killed or running phase counts only once it commits)")
    return RunData(
        run_dir=run_dir,
        experiment=str(config.get("experiment") or run_dir.name),
        config=config,
        metrics=metrics,
        training_target_ids=[t.id for t in targets if not t.held_out],
        solved_at={t.id: at for t in targets if (at := registry.solved_at(t.id)) is not None},
        conjecture_target=conjecture_target,
        scores=scores,
        held_out=_read_held_out(run_dir, notes),
        benchmarks=_read_benchmarks(run_dir),
        notes=notes,
    )


def run_labels(runs: Sequence[RunData]) -> list[str]:
    """One legend label per run: its experiment name, plus the directory's
    name where two runs share an experiment."""
    counts = Counter(run.experiment for run in runs)
    return [run.experiment if counts[run.experiment] == 1 else f"{run.experiment} ({run.run_dir.name})"
            for run in runs]
