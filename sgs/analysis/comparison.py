"""Comparing methods over seeds at equal generation budgets (pure statistics).

The paper's claims are comparisons: one method's cumulative solve rate
against another's, as functions of generations (every Conjecturer and Solver
sample), summarised by fitted asymptotes.  With several seeds per method this
module answers, for a researcher reading a sweep:

* **Where does each method stand?**  :func:`curve_band`: at each budget C the
  mean over seeds of the cumulative solve rate R_s(C), with a Student-t
  confidence interval over seeds (seeds are the unit that varies between
  repetitions; with 2-5 of them a t interval is the honest width, and it is
  infinite with one seed, which is reported as no interval).
* **Is A better than B, and by how much?**  :func:`difference_at`: the
  difference of the two methods' rates at equal budgets.  Runs are paired by
  seed when both methods ran the same seeds from the same start (the same seed
  and the same base weights and Solver sampling give both the same iteration-0
  samples, ``sampling.share_start_samples``): the interval is then a t
  interval of the per-seed differences, which removes the seed-to-seed
  variation both share.  Otherwise (other seeds, or another model, warm start
  or Solver sampling) the runs are independent and the interval is Welch's.
* **Where would each method end?**  :func:`method_fits`: the scaling-law fit
  (:mod:`sgs.analysis.scaling`) of every seed's curve, the spread of the
  asymptote A over seeds, and the fit of the seed-mean curve with its own
  robustness spread.

Curves are compared only where every run being compared has data: between
the largest first point and the smallest last point of their generation
counts.  Inside that range a run's rate is interpolated linearly between its
recorded iterations; no curve is ever extrapolated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from sgs.analysis.scaling import DEFAULT_MIN_GENERATIONS, FitReport, Spread, fit_with_robustness, spread

#: Coverage of every interval unless the caller asks for another.
DEFAULT_CONFIDENCE = 0.95
#: Budgets a comparison reports when none are given: evenly spaced over the common range.
DEFAULT_BUDGETS = 5


@dataclass(frozen=True)
class RunCurve:
    """One run's cumulative solve rate against cumulative generations."""

    method: str
    """The experiment the run belongs to (``experiment`` in its config)."""
    seed: int
    """The run's seed."""
    label: str
    """Where the run came from (its directory), for messages."""
    generations: tuple[float, ...]
    """Cumulative generations after each recorded iteration, increasing."""
    rates: tuple[float, ...]
    """Cumulative solve rate after each recorded iteration."""
    start: str = ""
    """What decides the run's iteration-0 samples (its base weights and Solver sampling), as
    text: two runs of the same seed share their start, and so pair, only when it is equal."""

    def __post_init__(self) -> None:
        if len(self.generations) != len(self.rates):
            raise ValueError(f"{self.label}: {len(self.generations)} generation counts but {len(self.rates)} rates")
        if not self.generations:
            raise ValueError(f"{self.label}: no recorded iteration")
        if any(b <= a for a, b in zip(self.generations, self.generations[1:])):
            raise ValueError(f"{self.label}: generations must increase from iteration to iteration")

    def rate_at(self, budgets: Sequence[float]) -> np.ndarray:
        """The rate at each budget, interpolated between recorded iterations;
        NaN outside the recorded range (a run says nothing there)."""
        c = np.asarray(budgets, dtype=float)
        values = np.interp(c, self.generations, self.rates)
        values[(c < self.generations[0]) | (c > self.generations[-1])] = np.nan
        return values


@dataclass(frozen=True)
class Interval:
    """A mean over seeds with its confidence interval (NaN ends with fewer than 2 values)."""

    mean: float
    """The mean of the values."""
    low: float
    """Lower end of the interval."""
    high: float
    """Upper end of the interval."""
    n: int
    """Values the interval is over (seeds, or seed pairs)."""
    confidence: float
    """Coverage of [low, high]."""

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly above or below 0 (a difference the data support)."""
        return bool(self.low > 0 or self.high < 0)

    def to_json(self) -> dict:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n, "confidence": self.confidence}


def t_interval(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """Mean ± t_{(1+c)/2, n-1} · s / sqrt(n) of ``values`` (s: the sample standard deviation)."""
    _check_confidence(confidence)
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise ValueError("an interval needs at least one value")
    mean = float(v.mean())
    if v.size < 2:
        return Interval(mean, math.nan, math.nan, 1, confidence)
    half = float(stats.t.ppf((1 + confidence) / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return Interval(mean, mean - half, mean + half, int(v.size), confidence)


def welch_interval(a: Sequence[float], b: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """Interval for mean(a) - mean(b) from independent samples (Welch-Satterthwaite
    degrees of freedom); NaN ends unless both sides have at least 2 values."""
    _check_confidence(confidence)
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError("a difference needs at least one value on each side")
    mean = float(x.mean() - y.mean())
    n = int(min(x.size, y.size))
    if x.size < 2 or y.size < 2:
        return Interval(mean, math.nan, math.nan, n, confidence)
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = math.sqrt(va + vb)
    if se == 0.0:
        return Interval(mean, mean, mean, n, confidence)
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = float(stats.t.ppf((1 + confidence) / 2, df) * se)
    return Interval(mean, mean - half, mean + half, n, confidence)


def common_range(curves: Sequence[RunCurve]) -> tuple[float, float] | None:
    """The generations every curve covers: (largest first point, smallest last point),
    or None when they do not overlap."""
    if not curves:
        return None
    start = max(c.generations[0] for c in curves)
    end = min(c.generations[-1] for c in curves)
    return (start, end) if start <= end else None


def default_budgets(curves: Sequence[RunCurve], count: int = DEFAULT_BUDGETS) -> list[float]:
    """``count`` budgets evenly spaced over the common range, ending at its end
    (the largest budget every run reached); empty when the runs do not overlap."""
    covered = common_range(curves)
    if covered is None:
        return []
    start, end = covered
    if count < 2 or start == end:
        return [end]
    return [float(x) for x in np.linspace(start, end, count)]


def curve_band(curves: Sequence[RunCurve], budgets: Sequence[float],
               confidence: float = DEFAULT_CONFIDENCE) -> list[Interval | None]:
    """Per budget, the mean rate over the curves with its t interval over seeds;
    None at a budget some curve does not cover."""
    rates = np.array([c.rate_at(budgets) for c in curves])
    return [None if np.isnan(column).any() else t_interval(column, confidence) for column in rates.T]


@dataclass(frozen=True)
class Difference:
    """Method A minus method B at one generation budget."""

    budget: float
    """The budget, in generations."""
    interval: Interval
    """The difference of cumulative solve rates (A - B) with its interval."""
    paired: bool
    """True when the runs were paired by seed (same seeds and starts on both sides)."""


def paired_by_seed(a: Sequence[RunCurve], b: Sequence[RunCurve]) -> bool:
    """Whether the two methods ran exactly the same seeds, once each, and each seed
    from the same start on both sides (so run i of A and the run of B with the same
    seed share their iteration-0 samples)."""
    starts_a, starts_b = {c.seed: c.start for c in a}, {c.seed: c.start for c in b}
    return len(starts_a) == len(a) and len(starts_b) == len(b) and starts_a == starts_b


def difference_at(a: Sequence[RunCurve], b: Sequence[RunCurve], budgets: Sequence[float],
                  confidence: float = DEFAULT_CONFIDENCE) -> list[Difference | None]:
    """A - B at each budget: paired by seed when :func:`paired_by_seed`, else Welch.
    None at a budget that some run of either method does not cover."""
    if not a or not b:
        raise ValueError("a difference needs at least one run of each method")
    paired = paired_by_seed(a, b)
    if paired:
        by_seed = {c.seed: c for c in b}
        b = [by_seed[c.seed] for c in a]
    rates_a = np.array([c.rate_at(budgets) for c in a])
    rates_b = np.array([c.rate_at(budgets) for c in b])
    found: list[Difference | None] = []
    for j, budget in enumerate(budgets):
        col_a, col_b = rates_a[:, j], rates_b[:, j]
        if np.isnan(col_a).any() or np.isnan(col_b).any():
            found.append(None)
            continue
        interval = t_interval(col_a - col_b, confidence) if paired else welch_interval(col_a, col_b, confidence)
        found.append(Difference(float(budget), interval, paired))
    return found


@dataclass(frozen=True)
class MethodFits:
    """Scaling-law fits of one method: per seed, and of the seed-mean curve."""

    per_seed: Mapping[int, FitReport]
    """Each seed's fit with its robustness refits (or the reason there is none)."""
    asymptote_over_seeds: Spread | None
    """Spread of the fitted asymptote A over the seeds that have a fit (None with fewer than 2)."""
    mean_curve: FitReport | None
    """The fit of the mean curve over seeds at their shared iterations (None with no shared iteration)."""


def mean_curve(curves: Sequence[RunCurve]) -> tuple[list[float], list[float]]:
    """The seed-mean curve at the iterations all curves recorded (their shortest length):
    mean generations and mean rate per iteration."""
    length = min(len(c.generations) for c in curves)
    generations = np.mean([c.generations[:length] for c in curves], axis=0)
    rates = np.mean([c.rates[:length] for c in curves], axis=0)
    return [float(g) for g in generations], [float(r) for r in rates]


def method_fits(curves: Sequence[RunCurve], *, min_generations: int = DEFAULT_MIN_GENERATIONS,
                subsets: int = 100, seed: int = 0) -> MethodFits:
    """Fit every seed's curve and the mean curve (refusals are kept with their reasons)."""
    per_seed = {c.seed: fit_with_robustness(c.generations, c.rates, min_generations=min_generations,
                                            subsets=subsets, seed=seed) for c in curves}
    asymptotes = [r.fit.asymptote for r in per_seed.values() if r.fit is not None]
    generations, rates = mean_curve(curves) if curves else ([], [])
    mean_fit = (fit_with_robustness(generations, rates, min_generations=min_generations, subsets=subsets, seed=seed)
                if generations else None)
    return MethodFits(per_seed, spread(asymptotes) if len(asymptotes) >= 2 else None, mean_fit)


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
