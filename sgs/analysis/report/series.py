"""What the report's figures show, as pure functions of the data read from
runs (:mod:`sgs.analysis.report.runs`): metric series and groups, the solve
rate curve with its scaling-law fit, solve-rate histograms, Guide score
counts, rejection reasons and the per-target timeline.  No plotting here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sgs.analysis.metrics import REJECTED_PREFIX
from sgs.analysis.report.runs import RunData
from sgs.analysis.scaling import ScalingFit, Spread, fit_with_robustness
from sgs.method.roles.guide import SCORE_TAGS
from sgs.state.records import ConjectureScore

#: Rejection reasons drawn one by one in the report; the others are summed as "other".
TOP_REASONS = 8


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


def guide_reviews(scores: Mapping[int, Sequence[ConjectureScore]]) -> list[ConjectureScore]:
    """The scores that carry a Guide review, over all iterations in order."""
    # A conjecture the Guide did not review (not kept, or no Guide) has no output.
    return [s for it in sorted(scores) for s in scores[it] if s.guide_output is not None]


def guide_score_counts(scores: Mapping[int, Sequence[ConjectureScore]], sub_score: str) -> dict[int, int]:
    """Parsed Guide reviews per value of ``sub_score`` (relevance, redundancy,
    complexity) over all iterations, every value of the rubric's range listed."""
    _, low, high = SCORE_TAGS[sub_score]
    found = Counter(getattr(s, sub_score) for s in guide_reviews(scores) if getattr(s, sub_score) is not None)
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
class Followup:
    """What became of the targets whose conjectures the Conjecturer was trained on, in one run."""

    trained_targets: dict[str, int]
    """Target -> first iteration in which one of its conjectures was trained on."""
    solved_after: set[str]
    """Of those, the targets first solved in a later iteration."""

    @property
    def share(self) -> float | None:
        """Share of ``trained_targets`` solved afterwards (None: nothing trained on)."""
        return len(self.solved_after) / len(self.trained_targets) if self.trained_targets else None


def followup(run: RunData) -> Followup:
    """The mechanism in one run: was a target trained on through a conjecture, then solved?
    (A conjecture is written only for a target unsolved so far, so "later" means the
    target was unsolved when its conjecture was trained on.)"""
    first: dict[str, int] = {}
    if run.trains_conjecturer:
        for iteration in sorted(run.scores):
            for score in run.scores[iteration]:
                target = run.conjecture_target.get(score.conjecture_id)
                if target is not None and trained_on(score):
                    first.setdefault(target, iteration)
    return Followup(first, {t for t, i in first.items() if run.solved_at.get(t, -1) > i})


@dataclass(frozen=True)
class KeptConjecture:
    """One conjecture the Conjecturer was trained on, and what became of its parent target."""

    iteration: int
    conjecture_id: str
    target_id: str
    target_solved_at: int | None
    """First iteration the parent target was solved (None: not yet)."""


def kept_conjectures(run: RunData) -> list[KeptConjecture]:
    """Every conjecture the Conjecturer was trained on, in iteration order."""
    if not run.trains_conjecturer:
        return []
    return [KeptConjecture(iteration, score.conjecture_id, target, run.solved_at.get(target))
            for iteration in sorted(run.scores) for score in run.scores[iteration]
            if trained_on(score) and (target := run.conjecture_target.get(score.conjecture_id)) is not None]


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
