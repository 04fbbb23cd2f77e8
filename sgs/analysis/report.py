"""The report of one or more SGS runs: ten PNG figures and one page.

    python -m tools.report RUN_DIR [RUN_DIR ...] [--out DIR] [--min-generations N] [--format md|html]

(``tools/report.py`` is the command; the code lives here, in the package,
so that ``python -m sgs`` writes a report from any working directory.)

A RUN_DIR is a run directory, or a directory of runs such as a Hydra
multirun sweep (every directory below it with a ``metrics.jsonl``).  All runs
share each figure, one colour per run, labelled by experiment name, so an
ablation sweep reads as one comparison.  The page (``report.md`` or
``report.html``) goes to ``--out`` (default: ``report/`` in the first
RUN_DIR) with the figures beside it.  :func:`report` is the same as a library
function; ``python -m sgs`` calls it when a run ends.

The figures:

 1. ``solve_rate.png``        cumulative solve rate against generations, with the scaling-law fit
                              (:mod:`sgs.analysis.scaling`) and its asymptote, or why there is no fit;
 2. ``pass_at_k.png``         pass@k on the training targets per iteration, held-out and benchmark pass@k;
 3. ``conjecturer_reward.png`` the Conjecturer's reward and its two factors;
 4. ``guide.png``             Guide sub-score distributions and parse-failure rate;
 5. ``entropy.png``           Solver and Conjecturer token entropy;
 6. ``solve_rate_hist.png``   problems per solve-rate bucket, iteration by bucket;
 7. ``collapse.png``          disjunctive conclusions and conclusion length (the collapse signals);
 8. ``verification.png``      verification outcomes per iteration;
 9. ``phase_seconds.png``     wall time per phase per iteration;
10. ``targets.png``           per target and iteration: conjectures trained on, and when it was
                              first solved (the paper's Figure 5).

Reading is read-only.  ``Store.open`` takes the run's lock, may repair a
torn file and may log a config change, and the run that calls :func:`report`
at its end still holds that lock; so this module reads the files of the
layout in :mod:`sgs.state.store` itself, by the store's rule: only phases with a
commit marker count, and a partial log of a killed phase is ignored.
Missing or damaged data never stops a report: the panel is left empty and
the page says why.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from sgs.analysis.metrics import REJECTED_PREFIX
from sgs.state.records import Conjecture, ConjectureScore, RecordError, Target, record_from_line
from sgs.method.roles.guide import SCORE_TAGS
from sgs.analysis.scaling import DEFAULT_MIN_GENERATIONS, ScalingFit, Spread, find_runs, fit_with_robustness
from sgs.state.solved import SolvedRegistry, StoredProof
from sgs.state.store import CONFIG_FILE, METRICS_FILE, TARGETS_FILE, Store

#: The held-out evaluations of a run ({policy version: result}).  This and
#: the next name are :data:`sgs.analysis.evaluation.HELD_OUT_FILE` and
#: :data:`sgs.analysis.evaluation.SUMMARY_FILE`, repeated here because importing that
#: module loads Ray, Hydra and transformers (seconds) for two strings.
HELD_OUT_FILE = "held_out_eval.json"
#: The summary of one benchmark evaluation (``BenchmarkResult.to_json``),
#: found anywhere inside a run directory.
BENCHMARK_SUMMARY_FILE = "summary.json"
#: Exit status for a path that is not a run (the same as argparse's usage errors).
EXIT_NOT_A_RUN = 2
#: Resolution of the PNG files.
DPI = 110

#: Rejection reasons drawn one by one in the report; the others are summed as "other".
TOP_REASONS = 8
#: Colours of the verification outcomes (keys of ``verification/<outcome>``).
OUTCOME_COLOURS = {"valid": "tab:green", "invalid": "tab:red", "timeout": "tab:orange",
                   "system_error": "tab:purple", "no_proof": "tab:gray"}


class ReportError(Exception):
    """A path given to the report is not a run directory and holds none."""


# ---------------------------------------------------------------------------
# Reading a run directory (read-only)


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
    policy_version: int
    """The weights measured (0: weights from outside a run, or before self-play)."""
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
    """The run's ``config.yaml`` (empty when unreadable)."""
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
    def k(self) -> int | None:
        """Solver samples per problem (the k of the training pass@k)."""
        return self.config.get("method", {}).get("num_solver_samples")


@dataclass(frozen=True)
class _Commit:
    """A finished phase, as its marker ``iter_NNNN/phase_<phase>.done`` records it."""

    iteration: int
    """The iteration the phase belongs to."""
    phase: str
    """The phase name."""
    seq: int
    """Order of the commit among all the run's commits."""
    records: dict[str, int]
    """Records per type in the phase's log."""
    new_proofs: list[StoredProof]
    """Target proofs the solved registry admitted at this commit."""
    log: Path
    """The phase's finished record log (exists when ``records`` counts any)."""


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` holds one run (its config, or at least its metrics)."""
    return Store.is_run_dir(path) or (path / METRICS_FILE).is_file()


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


def _read_jsonl(path: Path, notes: list[str]) -> list[Any]:
    """The parsed lines of a JSONL file.  A last line without its newline (a
    writer killed mid-line) and lines that are not JSON are skipped with a
    note; the file is never repaired (it is not ours to change)."""
    rows = []
    with open(path, "rb") as lines:
        for lineno, raw in enumerate(lines, 1):
            if not raw.endswith(b"\n"):
                notes.append(f"{path}: ignored an incomplete last line (its writer was killed mid-line)")
                break
            try:
                rows.append(json.loads(raw))
            except ValueError:
                notes.append(f"{path}:{lineno}: not valid JSON; line ignored")
    return rows


def _read_config(run_dir: Path, notes: list[str]) -> dict:
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        notes.append(f"{run_dir}: no {CONFIG_FILE}; the run is labelled by its directory name")
        return {}
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        notes.append(f"{path}: not valid YAML ({error}); ignored")
        return {}
    return config if isinstance(config, dict) else {}


def _read_metrics(run_dir: Path, notes: list[str]) -> list[dict]:
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return []
    metrics: list[dict] = []
    for row in _read_jsonl(path, notes):
        iteration = row.get("iteration") if isinstance(row, dict) else None
        if not isinstance(iteration, int) or (metrics and iteration <= metrics[-1]["iteration"]):
            notes.append(f"{path}: ignored a line whose iteration ({iteration!r}) does not follow the one before")
            continue
        metrics.append(row)
    return metrics


def _read_targets(run_dir: Path, notes: list[str]) -> list[Target]:
    path = run_dir / TARGETS_FILE
    if not path.is_file():
        notes.append(f"{run_dir}: no {TARGETS_FILE}; no per-target view")
        return []
    targets = []
    for row in _read_jsonl(path, notes):
        try:
            targets.append(Target.from_json(row))
        except RecordError as error:
            notes.append(f"{path}: ignored a damaged target ({error})")
    return targets


def _read_commits(run_dir: Path, notes: list[str]) -> list[_Commit]:
    """The run's finished phases, in commit order."""
    commits = []
    for path in run_dir.glob("iter_*/phase_*.done"):
        try:
            marker = json.loads(path.read_bytes())
            commits.append(_Commit(
                iteration=int(marker["iteration"]), phase=str(marker["phase"]), seq=int(marker["seq"]),
                records={str(name): int(n) for name, n in marker["records"].items()},
                new_proofs=[StoredProof.from_json(proof) for proof in marker["new_proofs"]],
                log=path.parent / f"{marker['phase']}.jsonl",
            ))
        except (ValueError, KeyError, TypeError, AttributeError) as error:  # RecordError is a ValueError
            notes.append(f"{path}: damaged phase marker ({error}); the phase is left out")
    return sorted(commits, key=lambda c: c.seq)


def _solved_at(targets: Sequence[Target], commits: Sequence[_Commit], notes: list[str]) -> dict[str, int]:
    # The store's own rule: the registry is rebuilt from the proofs each commit admitted.
    registry = SolvedRegistry(targets)
    for commit in commits:
        try:
            registry.add(commit.new_proofs)
        except (ValueError, KeyError) as error:
            notes.append(f"{commit.log.parent}: the proofs of phase {commit.phase!r} do not fit the solved "
                         f"registry ({error}); left out")
    return {t.id: at for t in targets if (at := registry.solved_at(t.id)) is not None}


def _read_conjecture_records(commits: Sequence[_Commit], notes: list[str]
                             ) -> tuple[dict[str, str], dict[int, list[ConjectureScore]]]:
    """(target of each conjecture, scores by iteration) from the finished
    phase logs that hold conjectures or scores; attempts are never parsed."""
    conjecture_target: dict[str, str] = {}
    scores: dict[int, list[ConjectureScore]] = {}
    for commit in commits:
        if not (commit.records.get("conjecture") or commit.records.get("conjecture_score")):
            continue
        if not commit.log.is_file():
            notes.append(f"{commit.log}: missing, though its phase marker counts records in it")
            continue
        for row in _read_jsonl(commit.log, notes):
            if not (isinstance(row, dict) and row.keys() & {"conjecture", "conjecture_score"}):
                continue
            try:
                record = record_from_line(row)
            except RecordError as error:
                notes.append(f"{commit.log}: ignored a damaged record ({error})")
                continue
            if isinstance(record, Conjecture):
                conjecture_target[record.id] = record.target_id
            elif isinstance(record, ConjectureScore):
                scores.setdefault(commit.iteration, []).append(record)
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
        return [BenchmarkEval(benchmark=str(summary["benchmark"]), policy_version=int(summary["policy_version"]),
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
    return sorted(evals, key=lambda e: (e.benchmark, e.k, e.policy_version))


def read_run(run_dir: str | Path) -> RunData:
    """Everything the report shows about one run, without changing the directory."""
    run_dir = Path(run_dir)
    notes: list[str] = []
    config = _read_config(run_dir, notes)
    targets = _read_targets(run_dir, notes)
    commits = _read_commits(run_dir, notes)
    conjecture_target, scores = _read_conjecture_records(commits, notes)
    unfinished = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.glob("iter_*/*.partial.jsonl"))
    if unfinished:
        notes.append(f"{run_dir}: left out the unfinished phase log(s) {', '.join(unfinished)} "
                     f"(a killed or running phase counts only once it commits)")
    return RunData(
        run_dir=run_dir,
        experiment=str(config.get("experiment") or run_dir.name),
        config=config,
        metrics=_read_metrics(run_dir, notes),
        training_target_ids=[t.id for t in targets if not t.held_out],
        solved_at=_solved_at(targets, commits, notes),
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


# ---------------------------------------------------------------------------
# What the figures show (pure functions of the data read above)


def metric_series(metrics: Sequence[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(iterations, values) of one metric, leaving out the iterations where it
    is missing or undefined (None: a mean over nothing)."""
    pairs = [(m["iteration"], float(m[key])) for m in metrics if m.get(key) is not None]
    return [i for i, _ in pairs], [v for _, v in pairs]


def metric_group(metrics: Sequence[Mapping[str, Any]], prefix: str) -> dict[str, list[float | None]]:
    """The metrics ``<prefix>/<name>``: one value per metrics line for each
    name (None where a line lacks it), names in the order first seen."""
    names: dict[str, None] = {}
    for m in metrics:
        names.update((key[len(prefix) + 1:], None) for key in m if key.startswith(prefix + "/"))
    return {name: [m.get(f"{prefix}/{name}") for m in metrics] for name in names}


@dataclass(frozen=True)
class SolveRateCurve:
    """A run's cumulative solve rate against generations and its scaling-law fit."""

    generations: list[int]
    """Cumulative generations after each iteration."""
    rates: list[float]
    """Cumulative solve rate on the training targets after each iteration."""
    fit: ScalingFit | None
    """The fit, or None when there is none."""
    no_fit_reason: str | None
    """Why there is no fit (the fit's refusal, or why the curve cannot be fitted)."""
    asymptote_spread: Spread | None
    """Spread of A over the random-half refits (None without them)."""


def solve_rate_curve(metrics: Sequence[Mapping[str, Any]], min_generations: int) -> SolveRateCurve:
    """The curve of ``metrics`` with its fit (:func:`sgs.analysis.scaling.fit_with_robustness`)."""
    points = [(m["generations"], m["cumulative_solve_rate"]) for m in metrics
              if m.get("generations") is not None and m.get("cumulative_solve_rate") is not None]
    generations, rates = [g for g, _ in points], [r for _, r in points]
    try:
        fitted = fit_with_robustness(generations, rates, min_generations=min_generations)
    except ValueError as error:  # not a curve: damaged metrics
        return SolveRateCurve(generations, rates, None, f"the curve cannot be fitted: {error}", None)
    return SolveRateCurve(generations, rates, fitted.fit, fitted.reason, fitted.asymptote_spread)


@dataclass(frozen=True)
class SolveRateHistogram:
    """Problems per solve-rate bucket and iteration (``solve_rate_hist/<kind>/<j>``)."""

    iterations: list[int]
    """Iterations that have the histogram (columns)."""
    buckets: list[int]
    """j = valid attempts out of k (rows), ascending."""
    counts: np.ndarray
    """Problems, shape (len(buckets), len(iterations))."""


def solve_rate_histogram(metrics: Sequence[Mapping[str, Any]], kind: str) -> SolveRateHistogram:
    """The histogram of ``kind`` (``target`` or ``conjecture``) per iteration."""
    group = metric_group(metrics, f"solve_rate_hist/{kind}")
    buckets = sorted(int(j) for j in group)
    columns = [i for i, m in enumerate(metrics) if any(group[str(j)][i] is not None for j in buckets)]
    counts = np.array([[group[str(j)][i] or 0 for i in columns] for j in buckets], dtype=int)
    return SolveRateHistogram([metrics[i]["iteration"] for i in columns], buckets,
                              counts.reshape(len(buckets), len(columns)))


def _reviews(scores: Mapping[int, Sequence[ConjectureScore]]) -> list[ConjectureScore]:
    # A conjecture the Guide did not review (not kept, or no Guide) has no output.
    return [s for it in sorted(scores) for s in scores[it] if s.guide_output is not None]


def guide_score_counts(scores: Mapping[int, Sequence[ConjectureScore]], sub_score: str) -> dict[int, int]:
    """Parsed Guide reviews per value of ``sub_score`` (relevance, redundancy,
    complexity) over all iterations, every value of the rubric's range listed."""
    _, low, high = SCORE_TAGS[sub_score]
    found = Counter(getattr(s, sub_score) for s in _reviews(scores) if getattr(s, sub_score) is not None)
    return {value: found.get(value, 0) for value in range(low, high + 1)}


def guide_parse_failure_rate(scores: Mapping[int, Sequence[ConjectureScore]]) -> tuple[list[int], list[float]]:
    """(iterations, share of the Guide's reviews that did not parse) for the
    iterations with any review."""
    iterations, rates = [], []
    for iteration in sorted(scores):
        reviews = [s for s in scores[iteration] if s.guide_output is not None]
        if reviews:
            iterations.append(iteration)
            rates.append(sum(s.guide_parse_error is not None for s in reviews) / len(reviews))
    return iterations, rates


def trained_on(score: ConjectureScore) -> bool:
    """Whether the Conjecturer's update used this conjecture: selection kept it,
    or the normalisation gave it a weight (the paper's rule)."""
    return score.kept or score.weight != 0


@dataclass(frozen=True)
class TargetTimeline:
    """One run's training targets over its iterations (the paper's Figure 5)."""

    target_ids: list[str]
    """Rows: solved targets by the iteration they were first solved, then the unsolved ones."""
    iterations: list[int]
    """Columns: 0 .. the run's last iteration."""
    trained: np.ndarray
    """Conjectures of the row's target trained on in the column's iteration, shape (rows, columns)."""
    solved_at: list[int | None]
    """First iteration with a verified proof, per row (None: never solved)."""


def target_timeline(run: RunData) -> TargetTimeline:
    """Which targets' conjectures each iteration trained the Conjecturer on,
    and when each target was first solved."""
    last = max([m["iteration"] for m in run.metrics] + list(run.scores) + list(run.solved_at.values()), default=-1)
    iterations = list(range(last + 1))
    order = {tid: index for index, tid in enumerate(run.training_target_ids)}
    rows = sorted(run.training_target_ids,
                  key=lambda tid: (tid not in run.solved_at, run.solved_at.get(tid, 0), order[tid]))
    row_of = {tid: index for index, tid in enumerate(rows)}
    trained = np.zeros((len(rows), len(iterations)), dtype=int)
    if run.trains_conjecturer:  # a frozen Conjecturer is never trained, whatever selection kept
        for iteration, scores in run.scores.items():
            for score in scores:
                target = run.conjecture_target.get(score.conjecture_id)
                if trained_on(score) and target in row_of:
                    trained[row_of[target], iteration] += 1
    return TargetTimeline(rows, iterations, trained, [run.solved_at.get(tid) for tid in rows])


# ---------------------------------------------------------------------------
# Figures


@dataclass(frozen=True)
class Plot:
    """One figure of the report."""

    file: str
    """PNG file name, in the report's directory."""
    title: str
    """Heading on the page."""
    caption: str
    """What the figure shows and how to read it."""
    notes: list[str]
    """Why a panel or a run is missing from it, one sentence each."""


def _colour(index: int) -> str:
    return f"C{index % 10}"


def _empty(ax, note: str) -> None:
    """An empty panel that says why it is empty."""
    ax.text(0.5, 0.5, note, ha="center", va="center", wrap=True, fontsize=9, color="0.35",
            transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _iteration_axis(ax) -> None:
    ax.set_xlabel("iteration")
    # min_n_ticks=1: a one-iteration run gets the tick 0, not fractions of an iteration.
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def _save(fig: Figure, out_dir: Path, name: str) -> str:
    fig.savefig(out_dir / name, dpi=DPI)
    return name


def _line_panels(runs: Sequence[RunData], labels: Sequence[str], panels: Sequence[tuple[str, str]],
                 out_dir: Path, name: str, *, width: float = 4.6) -> list[str]:
    """One panel per ``(metric key, title)``, one line per run over the
    iterations; returns a note for each run and metric with no value."""
    fig = Figure(figsize=(width * len(panels), 3.6), layout="constrained")
    notes = []
    for ax, (key, title) in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
        drawn = False
        for index, (run, label) in enumerate(zip(runs, labels)):
            iterations, values = metric_series(run.metrics, key)
            if not values:
                notes.append(f"{label}: no `{key}` values")
                continue
            ax.plot(iterations, values, marker="o", color=_colour(index), label=label)
            drawn = True
        ax.set_title(title, fontsize=10)
        if drawn:
            _iteration_axis(ax)
            ax.legend(fontsize=8)
        else:
            _empty(ax, f"no run has {key}")
    _save(fig, out_dir, name)
    return notes


def plot_solve_rate(runs: Sequence[RunData], labels: Sequence[str], curves: Sequence[SolveRateCurve],
                    out_dir: Path, min_generations: int) -> Plot:
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.subplots()
    notes = []
    for index, (label, curve) in enumerate(zip(labels, curves)):
        colour = _colour(index)
        if not curve.generations:
            notes.append(f"{label}: no finished iteration yet")
            continue
        ax.plot(curve.generations, curve.rates, marker="o", color=colour, label=label)
        if curve.fit is None:
            notes.append(f"{label}: no fit: {curve.no_fit_reason}")
            # The refusal goes in the legend too, so the figure explains itself off the page.
            ax.plot([], [], " ", label=textwrap.fill(f"no fit: {curve.no_fit_reason}", 60,
                                                     initial_indent="  ", subsequent_indent="  "))
            continue
        fit = curve.fit
        start = min(min(curve.generations), fit.first_generations)
        grid = np.geomspace(max(start, 1), fit.last_generations * 2, 200)
        ax.plot(grid, fit.predict(grid), color=colour, linewidth=1,
                label=f"  fit: A={fit.asymptote:.3f}, C_mid={fit.c_mid:.3g}, B={fit.exponent:.2f}")
        ax.axhline(fit.asymptote, color=colour, linestyle="--", linewidth=1)
        if curve.asymptote_spread is not None:
            ax.axhspan(curve.asymptote_spread.p5, curve.asymptote_spread.p95, color=colour, alpha=0.08)
    if ax.lines:
        ax.set_xscale("log")
        if any(curve.generations and max(curve.generations) >= min_generations for curve in curves):
            ax.axvline(min_generations, color="0.6", linestyle=":", linewidth=1)
        ax.set_xlabel("generations (Solver and Conjecturer samples, cumulative)")
        ax.set_ylabel("cumulative solve rate (training targets)")
        ax.legend(fontsize=8, loc="lower right")
    else:
        _empty(ax, "no run has a finished iteration")
    caption = ("Share of the training targets solved at least once, against cumulative generations (log scale). "
               "Solid thin line: the scaling-law fit R(C) = R0 + (A − R0)/(1 + (C_mid/C)^B) "
               f"on the points at or above {min_generations:,} generations (dotted line), re-centred there as "
               "in the paper (C counted from the first point past the cut, R0 the rate there); dashed line: its "
               "asymptote A; shaded band: 5th–95th percentile of A over 100 random-half refits.")
    return Plot(_save(fig, out_dir, "solve_rate.png"), "Cumulative solve rate against generations", caption, notes)


def plot_pass_at_k(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.subplots()
    notes = []
    for index, (run, label) in enumerate(zip(runs, labels)):
        iterations, values = metric_series(run.metrics, "pass_at_k")
        if values:
            ax.plot(iterations, values, marker="o", color=_colour(index),
                    label=f"{label}: training targets, pass@{run.k}")
        else:
            notes.append(f"{label}: no finished iteration yet")
        if run.held_out:
            ax.plot([e.policy_version for e in run.held_out], [e.pass_at_k for e in run.held_out], marker="s",
                    linestyle="--", color=_colour(index),
                    label=f"{label}: held-out pass@{run.held_out[0].k} ({run.held_out[0].targets} targets)")
        else:
            notes.append(f"{label}: no held-out evaluation ({HELD_OUT_FILE} absent or empty)")
        series: dict[tuple[str, int], list[BenchmarkEval]] = {}
        for result in run.benchmarks:
            series.setdefault((result.benchmark, result.k), []).append(result)
        for number, ((benchmark, k), results) in enumerate(series.items()):
            below = [r.pass_at_k - r.ci_low for r in results]
            above = [r.ci_high - r.pass_at_k for r in results]
            ax.errorbar([r.policy_version for r in results], [r.pass_at_k for r in results], yerr=[below, above],
                        marker="^vD<>ph"[number % 7], linestyle=":", capsize=3, color=_colour(index),
                        label=f"{label}: {benchmark} pass@{k}")
    if ax.lines:
        _iteration_axis(ax)
        ax.set_ylabel("pass@k")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
    else:
        _empty(ax, "no pass@k measured in any run")
    caption = ("Solid: share of the training targets with a verified proof among the k samples of each iteration. "
               "Dashed squares: pass@k on the held-out targets of the Solver at policy version v, drawn at "
               "iteration v, the iteration those weights sample (v = 0: before self-play; the last point: the "
               "final weights).  Dotted, with confidence intervals: benchmark evaluations found in the run "
               f"directory ({BENCHMARK_SUMMARY_FILE} of `python -m sgs.evaluate`), at their policy version.")
    return Plot(_save(fig, out_dir, "pass_at_k.png"), "pass@k per iteration", caption, notes)


def plot_conjecturer_reward(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    notes = _line_panels(runs, labels, [("mean_conjecturer_reward", "Conjecturer reward R (mean)"),
                                        ("mean_r_solve", "R_solve = 1 − s (kept; 0 otherwise)"),
                                        ("mean_guide_score", "R_guide (mean over reviews)")],
                         out_dir, "conjecturer_reward.png")
    caption = ("The Conjecturer's reward R = R_guide · R_solve, averaged over every attempted conjecture (zeros "
               "included), and its two factors: the solve-rate term R_solve = 1 − s for kept conjectures "
               "(0 for the others) and the Guide's score over the reviewed ones.  A run without a Guide has "
               "no R_guide.")
    return Plot("conjecturer_reward.png", "Conjecturer reward and its components", caption, notes)


def plot_guide(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    fig = Figure(figsize=(17, 3.8), layout="constrained")
    axes = fig.subplots(1, len(SCORE_TAGS) + 1)
    notes = []
    reviewed = [(i, run, label) for i, (run, label) in enumerate(zip(runs, labels)) if _reviews(run.scores)]
    for run, label in zip(runs, labels):
        if not _reviews(run.scores):
            why = "its experiment has no Guide" if not run.uses_guide else "no finished review phase"
            notes.append(f"{label}: no Guide reviews ({why})")
    width = 0.8 / max(len(reviewed), 1)
    for ax, sub_score in zip(axes, SCORE_TAGS):
        ax.set_title(f"{sub_score} (parsed reviews)", fontsize=10)
        if not reviewed:
            _empty(ax, "no Guide reviews")
            continue
        for slot, (index, run, label) in enumerate(reviewed):
            counts = guide_score_counts(run.scores, sub_score)
            total = sum(counts.values())
            shares = [n / total if total else 0.0 for n in counts.values()]
            ax.bar(np.array(list(counts)) + (slot - (len(reviewed) - 1) / 2) * width, shares, width,
                   color=_colour(index), label=label)
        ax.set_xlabel("score")
        ax.set_ylabel("share of reviews")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=8)
    ax = axes[-1]
    ax.set_title("Guide parse-failure rate", fontsize=10)
    for index, run, label in reviewed:
        iterations, rates = guide_parse_failure_rate(run.scores)
        ax.plot(iterations, rates, marker="o", color=_colour(index), label=label)
    if reviewed:
        _iteration_axis(ax)
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
    else:
        _empty(ax, "no Guide reviews")
    caption = ("Distribution of the Guide's three sub-scores over all parsed reviews of the run (relevance 0–5, "
               "redundancy 0/1, conclusion complexity 0–4), and per iteration the share of reviews whose "
               "scores could not be parsed (their R_guide is then the batch mean).")
    return Plot(_save(fig, out_dir, "guide.png"), "Guide sub-scores and parse failures", caption, notes)


def plot_entropy(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    notes = _line_panels(runs, labels, [("solver_entropy", "Solver token entropy"),
                                        ("conjecturer_entropy", "Conjecturer token entropy")],
                         out_dir, "entropy.png")
    caption = ("Mean token entropy of each role's samples per iteration, over the sampler's top-10 "
               "log-probabilities renormalised (nats).  A fall towards 0 means the policy is collapsing.")
    return Plot("entropy.png", "Solver and Conjecturer entropy", caption, notes)


def plot_solve_rate_hist(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    kinds = ("target", "conjecture")
    fig = Figure(figsize=(11, 3.2 * len(runs) + 0.4), layout="constrained")
    axes = fig.subplots(len(runs), len(kinds), squeeze=False)
    notes = []
    for row, (run, label) in zip(axes, zip(runs, labels)):
        for ax, kind in zip(row, kinds):
            hist = solve_rate_histogram(run.metrics, kind)
            ax.set_title(f"{label}: {kind}s", fontsize=10)
            if not hist.iterations or not hist.counts.any():
                notes.append(f"{label}: no {kind} attempted")
                _empty(ax, f"no {kind} attempted")
                continue
            image = ax.imshow(hist.counts, origin="lower", aspect="auto", cmap="viridis",
                              extent=(hist.iterations[0] - 0.5, hist.iterations[-1] + 0.5,
                                      hist.buckets[0] - 0.5, hist.buckets[-1] + 0.5))
            if hist.counts.size <= 200:  # small enough to read the numbers
                for (b, i), n in np.ndenumerate(hist.counts):
                    ax.text(hist.iterations[i], hist.buckets[b], str(n), ha="center", va="center", fontsize=7,
                            color="white" if n < hist.counts.max() / 2 else "black")
            fig.colorbar(image, ax=ax, label="problems", ticks=MaxNLocator(integer=True))
            _iteration_axis(ax)
            ax.set_ylabel(f"valid attempts out of {hist.buckets[-1]}")
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    caption = ("Per iteration, how many problems got j valid attempts out of k (targets left, conjectures "
               "right).  Problems with only system errors are not counted.  Mass at j = 0 and j = k carries "
               "no learning signal for REINFORCE½; conjectures are kept for reward when 0 < s ≤ the p70.")
    return Plot(_save(fig, out_dir, "solve_rate_hist.png"), "Solve-rate histogram over iterations", caption, notes)


def plot_collapse(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    notes = _line_panels(runs, labels, [("disjunctive_share", "share of conjectures with a disjunctive conclusion"),
                                        ("mean_conclusion_length", "mean conclusion length")],
                         out_dir, "collapse.png", width=5.2)
    caption = ("The paper's collapse signals over the conjectures that were attempted: a Conjecturer that games "
               "its reward drifts to disjunctive conclusions (easy to prove one side of) and to long, "
               "padded conclusions.")
    return Plot("collapse.png", "Conjecture collapse signals", caption, notes)


def _stacked_bars(runs: Sequence[RunData], labels: Sequence[str], prefix: str, colours: Mapping[str, str],
                  ylabel: str, out_dir: Path, name: str, missing_why: str,
                  group_of: Callable[[Sequence[Mapping[str, Any]]], dict[str, list[float | None]]] | None = None
                  ) -> list[str]:
    """Per run one panel of bars per iteration stacking the ``<prefix>/<name>``
    metrics (or the series ``group_of`` makes of a run's metrics); returns notes
    for runs without any, and for missing values."""
    fig = Figure(figsize=(max(6.0, 5.0 * len(runs)), 4.2), layout="constrained")
    notes = []
    for ax, (run, label) in zip(fig.subplots(1, len(runs), squeeze=False)[0], zip(runs, labels)):
        ax.set_title(label, fontsize=10)
        group = metric_group(run.metrics, prefix) if group_of is None else group_of(run.metrics)
        if not group:
            notes.append(f"{label}: no `{prefix}/…` metrics")
            _empty(ax, f"no {prefix} metrics")
            continue
        iterations = [m["iteration"] for m in run.metrics]
        bottom = np.zeros(len(iterations))
        for part, values in group.items():
            missing = [i for i, v in zip(iterations, values) if v is None]
            if missing:
                notes.append(f"{label}: no `{prefix}/{part}` in iteration(s) {_ranges(missing)} ({missing_why})")
            heights = np.array([0.0 if v is None else float(v) for v in values])
            ax.bar(iterations, heights, bottom=bottom, color=colours.get(part), label=part)
            bottom += heights
        _iteration_axis(ax)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    _save(fig, out_dir, name)
    return notes


def _ranges(numbers: Sequence[int]) -> str:
    """``0-2, 5`` for [0, 1, 2, 5]."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def plot_verification(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    notes = _stacked_bars(runs, labels, "verification", OUTCOME_COLOURS, "attempts", out_dir, "verification.png",
                          "not recorded by that iteration")
    caption = ("Solver attempts per iteration by outcome: valid, invalid, timeout, system error (an "
               "infrastructure failure, never training signal; must stay under 1%) and no proof (nothing "
               "could be extracted from the output).")
    return Plot("verification.png", "Verification outcomes", caption, notes)


def rejection_counts(metrics: Sequence[Mapping[str, Any]], top: int = TOP_REASONS) -> dict[str, list[float | None]]:
    """The ``verifier/rejected/<reason>`` counts per iteration: the ``top`` reasons
    with the most rejections over the run, most first, and the rest summed as
    ``other``.  A reason missing from an iteration's line did not occur in it (0)."""
    group = {reason: [v or 0 for v in values] for reason, values in metric_group(metrics, REJECTED_PREFIX).items()}
    ranked = sorted(group, key=lambda reason: (-sum(group[reason]), reason))
    shown: dict[str, list[float | None]] = {reason: list(group[reason]) for reason in ranked[:top]}
    if len(ranked) > top:
        shown["other"] = [sum(group[reason][i] for reason in ranked[top:]) for i in range(len(metrics))]
    return shown


def plot_rejections(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    reasons = list(dict.fromkeys(r for run in runs for r in rejection_counts(run.metrics)))
    colours = {reason: _colour(index) for index, reason in enumerate(reasons)}
    notes = _stacked_bars(runs, labels, REJECTED_PREFIX, colours, "rejected proofs", out_dir, "rejections.png",
                          "", group_of=rejection_counts)
    for run, label in zip(runs, labels):
        disagreements = sum(m.get("verifier/audit_disagreements") or 0 for m in run.metrics)
        audited = sum(m.get("verifier/audited") or 0 for m in run.metrics)
        if audited:
            notes.append(f"{label}: the audit re-checked {audited} valid proofs and disagreed on {disagreements}")
    caption = (f"Proofs the verifier rejected in each iteration, by its reason (the {TOP_REASONS} most frequent "
               "over the run; the rest as other). Reward hacking shows as a reason that rises: the Solver "
               "learning a shape the checks refuse. `audit_disagreement` counts proofs accepted by the first "
               "check and rejected by the independent audit (their reward is withheld).")
    return Plot("rejections.png", "Rejection reasons", caption, notes)


def plot_phase_seconds(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    phases = list(dict.fromkeys(p for run in runs for p in metric_group(run.metrics, "phase_seconds")))
    colours = {phase: _colour(index) for index, phase in enumerate(phases)}
    notes = _stacked_bars(runs, labels, "phase_seconds", colours, "seconds", out_dir, "phase_seconds.png",
                          "a phase finished before the run was resumed is not timed")
    caption = "Wall time of each phase of each iteration, stacked."
    return Plot("phase_seconds.png", "Time per phase", caption, notes)


def plot_targets(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    timelines = [target_timeline(run) for run in runs]
    rows = max([len(t.target_ids) for t in timelines] + [1])
    fig = Figure(figsize=(max(6.0, 4.5 * len(runs)), min(30.0, 3.0 + 0.12 * rows)), layout="constrained")
    notes = []
    trained_colour, solved_colour = np.array([0.13, 0.4, 0.75]), np.array([0.78, 0.92, 0.78])
    for ax, (run, label, timeline) in zip(fig.subplots(1, len(runs), squeeze=False)[0],
                                          zip(runs, labels, timelines)):
        ax.set_title(label, fontsize=10)
        if not timeline.target_ids or not timeline.iterations:
            why = "no training targets" if not timeline.target_ids else "no finished iteration"
            notes.append(f"{label}: {why}")
            _empty(ax, why)
            continue
        if not run.trains_conjecturer:
            notes.append(f"{label}: the Conjecturer is not trained in this experiment; only solves are shown")
        elif not timeline.trained.any():
            notes.append(f"{label}: no conjecture was trained on")
        # White: nothing; green: solved by then; blue, darker for more conjectures: trained on.
        image = np.ones((len(timeline.target_ids), len(timeline.iterations), 3))
        for r, solved in enumerate(timeline.solved_at):
            if solved is not None:
                image[r, solved:] = solved_colour
        shade = timeline.trained / max(timeline.trained.max(), 1)
        blue = 1 - (0.35 + 0.65 * shade[..., None]) * (1 - trained_colour)
        image = np.where(timeline.trained[..., None] > 0, blue, image)
        ax.imshow(image, aspect="auto", interpolation="nearest",
                  extent=(-0.5, len(timeline.iterations) - 0.5, len(timeline.target_ids) - 0.5, -0.5))
        first = [(s, r) for r, s in enumerate(timeline.solved_at) if s is not None]
        if first:
            ax.scatter(*zip(*first), marker="*", s=30 if rows <= 80 else 12, color="black", zorder=3)
        _iteration_axis(ax)
        if len(timeline.target_ids) <= 60:
            ax.set_yticks(range(len(timeline.target_ids)), timeline.target_ids, fontsize=6)
        else:
            ax.set_yticks([])
        solved = sum(s is not None for s in timeline.solved_at)
        ax.set_title(f"{label}: {solved} of {len(timeline.target_ids)} training targets solved", fontsize=10)
        ax.set_ylabel("training target")
    fig.legend(handles=[Patch(color=trained_colour, label="its conjectures trained on"),
                        Patch(color=solved_colour, label="solved"),
                        Line2D([], [], marker="*", color="black", linestyle="", label="first solved")],
               loc="outside lower center", ncols=3, fontsize=8)
    caption = ("One row per training target, one column per iteration (the paper's Figure 5).  Blue: the "
               "Conjecturer was trained on conjectures conditioned on this target in this iteration (kept by "
               "selection or given a weight; darker: more of them); star: the iteration of the target's first "
               "verified proof; green: solved.  Rows: solved targets by when they were solved, then unsolved ones.")
    return Plot(_save(fig, out_dir, "targets.png"), "Per-target view", caption, notes)


# ---------------------------------------------------------------------------
# The page


def _summary_rows(runs: Sequence[RunData], labels: Sequence[str], curves: Sequence[SolveRateCurve]
                  ) -> list[list[str]]:
    """The page's table of runs: a header row, then one row per run."""
    header = ["run", "directory", "iterations", "generations", "cumulative solve rate",
              "held-out pass@k by policy version", "scaling fit"]
    rows = [header]
    for run, label, curve in zip(runs, labels, curves):
        last = run.metrics[-1] if run.metrics else {}
        held_out = " → ".join(f"v{result.policy_version}: {result.pass_at_k:.3f}" for result in run.held_out) or "—"
        if curve.fit is not None:
            fit = f"A = {curve.fit.asymptote:.3f}, C_mid = {curve.fit.c_mid:.3g}, B = {curve.fit.exponent:.2f}"
            if curve.asymptote_spread is not None:
                fit += f" (A over random halves: {curve.asymptote_spread.p5:.3f}–{curve.asymptote_spread.p95:.3f})"
        else:
            fit = f"no fit: {curve.no_fit_reason}"
        rate = ("—" if not curve.rates else
                f"{curve.rates[0]:.3f} → {curve.rates[-1]:.3f}" if len(curve.rates) > 1 else f"{curve.rates[0]:.3f}")
        rows.append([label, str(run.run_dir), str(len(run.metrics)), f"{last.get('generations', 0):,}", rate,
                     held_out, fit])
    return rows


def render_markdown(rows: Sequence[Sequence[str]], plots: Sequence[Plot], reading_notes: Sequence[str]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["# SGS run report", "", "| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows[1:]]
    for number, plot in enumerate(plots, 1):
        lines += ["", f"## {number}. {plot.title}", "", f"![{plot.title}]({plot.file})", "", plot.caption]
        if plot.notes:
            lines += ["", "Missing from this figure:", ""] + [f"- {note}" for note in plot.notes]
    if reading_notes:
        lines += ["", "## Reading notes", ""] + [f"- {note}" for note in reading_notes]
    return "\n".join(lines) + "\n"


def render_html(rows: Sequence[Sequence[str]], plots: Sequence[Plot], reading_notes: Sequence[str]) -> str:
    e = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>SGS run report</title>',
             "<style>body{font-family:sans-serif;max-width:1400px;margin:auto;padding:1em}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
             "img{max-width:100%}.notes{color:#555}</style></head><body>", "<h1>SGS run report</h1>", "<table>",
             "<tr>" + "".join(f"<th>{e(c)}</th>" for c in rows[0]) + "</tr>"]
    parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows[1:]]
    parts.append("</table>")
    for number, plot in enumerate(plots, 1):
        parts += [f"<h2>{number}. {e(plot.title)}</h2>", f'<img src="{e(plot.file)}" alt="{e(plot.title)}">',
                  f"<p>{e(plot.caption)}</p>"]
        if plot.notes:
            parts.append('<div class="notes">Missing from this figure:<ul>'
                         + "".join(f"<li>{e(note)}</li>" for note in plot.notes) + "</ul></div>")
    if reading_notes:
        parts += ["<h2>Reading notes</h2>", "<ul>" + "".join(f"<li>{e(n)}</li>" for n in reading_notes) + "</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


FORMATS = {"md": render_markdown, "html": render_html}


def report(run_dirs: Sequence[str | Path], out_dir: str | Path, *, min_generations: int = DEFAULT_MIN_GENERATIONS,
           page_format: str = "md") -> Path:
    """Write the figures and the page for ``run_dirs`` (runs or sweep
    directories) into ``out_dir``; return the page's path.  Raises
    ReportError when a path is not a run directory and holds none."""
    if page_format not in FORMATS:
        raise ValueError(f"page_format must be one of {sorted(FORMATS)}, got {page_format!r}")
    runs = [read_run(run_dir) for run_dir in find_run_dirs(run_dirs)]
    labels = run_labels(runs)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    curves = [solve_rate_curve(run.metrics, min_generations) for run in runs]
    plots = [
        plot_solve_rate(runs, labels, curves, out_dir, min_generations),
        plot_pass_at_k(runs, labels, out_dir),
        plot_conjecturer_reward(runs, labels, out_dir),
        plot_guide(runs, labels, out_dir),
        plot_entropy(runs, labels, out_dir),
        plot_solve_rate_hist(runs, labels, out_dir),
        plot_collapse(runs, labels, out_dir),
        plot_verification(runs, labels, out_dir),
        plot_rejections(runs, labels, out_dir),
        plot_phase_seconds(runs, labels, out_dir),
        plot_targets(runs, labels, out_dir),
    ]
    reading_notes = [f"{label}: {note}" for run, label in zip(runs, labels) for note in run.notes]
    page = out_dir / f"report.{page_format}"
    page.write_text(FORMATS[page_format](_summary_rows(runs, labels, curves), plots, reading_notes),
                    encoding="utf-8")
    return page


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.report",
                                     description="Plots and one page about one or more SGS runs.")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="a run directory, or a directory of runs (a multirun sweep)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="where to write the page and the figures (default: RUN_DIR/report of the first RUN_DIR)")
    parser.add_argument("--min-generations", type=int, default=DEFAULT_MIN_GENERATIONS, metavar="N",
                        help="the scaling-law fit leaves out points below this many generations (default: %(default)s)")
    parser.add_argument("--format", choices=sorted(FORMATS), default="md", help="page format (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.min_generations < 1:
        parser.error(f"--min-generations must be at least 1, got {args.min_generations}")
    try:
        page = report(args.run_dirs, args.out or Path(args.run_dirs[0]) / "report",
                      min_generations=args.min_generations, page_format=args.format)
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_NOT_A_RUN
    print(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
