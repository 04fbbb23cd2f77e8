"""Scaling-law fit of the cumulative solve rate (SPEC §1.6, paper Appendix A).

The model is a sigmoid in log compute::

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

where C is the run's cumulative number of generations, R(C) the cumulative
solve rate on the targets after C generations, R0 the initial rate (an
observed rate, not a free parameter; see the re-centring below), A the asymptotic
rate, C_mid the midpoint (R is half-way from R0 to A there) and B how fast the
curve approaches A.  Written as ``R0 + (A - R0) * sigmoid(B * (ln C - ln C_mid))``
it can be evaluated without overflow for any C >= 0.

The fit.  Points below ``min_generations`` (100,000 by default) are dropped:
the first iterations gain fast in a way that is not representative of the
longer trend and would dominate the fit.  The rest is re-centred, as the
paper does: C is counted from the first point past the cut and R0 is the
rate there, so the fit models the gains after the low-compute phase
(``recenter=False`` keeps the run's own C and its first rate as R0).  A, C_mid and B are then fitted by
least squares (``scipy.optimize.curve_fit``) with:

- A in [R0, 1]: rates are shares of the targets, so the asymptote cannot
  exceed 1, and a cumulative rate never falls, so it cannot end below where it
  started.
- C_mid > 0 and B > 0: the model needs both (C_mid / C is a ratio of counts, and
  B <= 0 would make the curve flat or falling).  Both are fitted as logarithms,
  which keeps them positive without a bound and puts C_mid, which spans orders
  of magnitude, on the scale the solver works well at.

A fit is refused, with the reason, when fewer than ``MIN_FIT_POINTS`` (6)
points are past the cut: three parameters plus three points' worth of residual
degrees of freedom, so that a fit is never an exact interpolation that says
nothing about how well the model describes the run.  It is also refused when
R0 is already 1 (nothing left to gain), when the least-squares solver does not
converge, and when the fitted gain A - R0 is zero (a flat curve, whose C_mid and
B are then undetermined).

The robustness protocol (paper Figure 8), run around a main fit:

- refit without the last 10%, 20% and 30% of the points past the cut (the
  number dropped is the fraction of the points, rounded to the nearest);
- fit ``subsets`` (100) random halves of those points (half rounded up, drawn
  without replacement with a seeded generator) and report the spread of A over
  them: mean, standard deviation, min, max, 5th and 95th percentiles.

Every refit keeps the run's R0 and follows the same refusal rules; a refit that
is refused is reported as skipped, with its reason.

Command (one or more run directories, or a sweep directory holding several)::

    python -m sgs.analysis.scaling RUN_DIR [RUN_DIR ...] [--min-generations 100000]
                          [--subsets 100] [--seed 0] [--json OUT]

It prints, per run, the fit and its robustness refits, or why there is no fit,
and exits 0; it exits 2 when a directory is missing or a metrics file is
malformed.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import OptimizeWarning, curve_fit
from scipy.special import expit

from sgs.state.run_reader import METRICS_FILE

#: Points below this many cumulative generations are left out of the fit (paper App. A).
DEFAULT_MIN_GENERATIONS = 100_000
#: Fewest points a fit accepts: 3 parameters + 3 residual degrees of freedom.
MIN_FIT_POINTS = 6
#: Shares of the points past the cut that the truncated refits drop from the end.
TRUNCATION_FRACTIONS = (0.1, 0.2, 0.3)
#: Generous cap on model evaluations: a fit that needs more is reported as not converged.
MAX_FUNCTION_EVALUATIONS = 5_000
#: Percentiles of the subset asymptotes that the spread reports.
SPREAD_PERCENTILES = (5.0, 95.0)

_NEEDED = f"a fit needs at least {MIN_FIT_POINTS} (3 parameters plus 3 residual degrees of freedom)"


class FitRefusal(Exception):
    """The data do not support a fit; ``reason`` says why in a sentence."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MetricsError(ValueError):
    """A metrics file that cannot be read as a curve; the message names the file and line."""


def scaling_curve(generations: ArrayLike, *, r0: float, asymptote: float, c_mid: float,
                  exponent: float) -> np.ndarray:
    """R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) at each C in ``generations`` (C >= 0)."""
    c = np.asarray(generations, dtype=float)
    with np.errstate(divide="ignore"):  # ln 0 = -inf gives the C -> 0 limit, R0
        log_c = np.log(c)
    return r0 + (asymptote - r0) * expit(exponent * (log_c - math.log(c_mid)))


@dataclass(frozen=True)
class ScalingFit:
    """A fitted scaling law and what it was fitted on."""

    r0: float
    """Initial rate R0: the first observed rate of the run, held fixed."""
    asymptote: float
    """Fitted asymptotic rate A, in [R0, 1]."""
    c_mid: float
    """Fitted midpoint C_mid, in generations."""
    exponent: float
    """Fitted exponent B: how fast the curve approaches A."""
    points: int
    """Points the fit used (those at or above ``min_generations``)."""
    min_generations: int
    """The cut: points below this many generations were left out."""
    first_generations: float
    """Generations of the first point used; the fit says nothing about earlier."""
    last_generations: float
    """Generations of the last point used; beyond it the curve is extrapolation."""
    rmse: float
    """Root mean square residual of the fit over the points used, in rate units."""
    origin: float = 0.0
    """Generations where the fitted curve starts (C is counted from here): the
    first point past the cut for a re-centred fit, 0 otherwise."""

    def predict(self, generations: ArrayLike) -> np.ndarray:
        """The fitted rate at each of ``generations`` (R0 at and before the origin)."""
        shifted = np.maximum(np.asarray(generations, dtype=float) - self.origin, 0.0)
        return scaling_curve(shifted, r0=self.r0, asymptote=self.asymptote,
                             c_mid=self.c_mid, exponent=self.exponent)

    def to_json(self) -> dict:
        return {"r0": self.r0, "asymptote": self.asymptote, "c_mid": self.c_mid, "exponent": self.exponent,
                "origin": self.origin, "points": self.points, "min_generations": self.min_generations,
                "first_generations": self.first_generations, "last_generations": self.last_generations,
                "rmse": self.rmse}


def _checked_curve(generations: ArrayLike, rates: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The curve as float arrays, after checking it is a curve a fit can read."""
    c = np.asarray(generations, dtype=float)
    r = np.asarray(rates, dtype=float)
    if c.ndim != 1 or r.ndim != 1 or len(c) != len(r):
        raise ValueError(f"generations and rates must be two flat sequences of one length, "
                         f"got shapes {c.shape} and {r.shape}")
    if not (np.all(np.isfinite(c)) and np.all(np.isfinite(r))):
        raise ValueError("generations and rates must be finite numbers")
    if np.any(c < 0):
        raise ValueError("generations must not be negative")
    if np.any(np.diff(c) < 0):
        raise ValueError("generations must not decrease: they are cumulative counts in iteration order")
    if np.any((r < 0) | (r > 1)):
        raise ValueError("rates must lie in [0, 1]: they are shares of the targets")
    return c, r


def _check_min_generations(min_generations: int) -> None:
    if min_generations < 1:
        raise ValueError(f"min_generations must be at least 1 (the model is defined for C > 0), "
                         f"got {min_generations}")


def _least_squares_fit(generations: np.ndarray, rates: np.ndarray, *, r0: float,
                       min_generations: int, origin: float = 0.0) -> ScalingFit:
    """Fit A, C_mid and B to points that are all past the cut, R0 held fixed,
    with C counted from ``origin`` (the point at the origin itself is R0 by
    construction and adds nothing to the least squares).

    Needs r0 < 1 and at least ``MIN_FIT_POINTS`` points (the callers check
    both, each with its own reason).  Raises ``FitRefusal`` when the solver
    does not converge or the fitted curve is flat.
    """
    used = len(rates)
    beyond = generations > origin
    first, last = float(generations[0]), float(generations[-1])
    generations, rates = generations[beyond] - origin, rates[beyond]
    log_generations = np.log(generations)

    def model(log_c: np.ndarray, asymptote: float, log_c_mid: float, log_exponent: float) -> np.ndarray:
        return r0 + (asymptote - r0) * expit(math.exp(log_exponent) * (log_c - log_c_mid))

    # Start from the highest rate seen, the middle of the data in log compute and B = 1.
    start = (float(np.clip(rates.max(), r0, 1.0)), float(np.median(log_generations)), 0.0)
    bounds = ([r0, -np.inf, -np.inf], [1.0, np.inf, np.inf])
    with warnings.catch_warnings():
        # A flat direction makes the covariance unestimable; it is not used here.
        warnings.simplefilter("ignore", OptimizeWarning)
        try:
            params, _ = curve_fit(model, log_generations, rates, p0=start, bounds=bounds,
                                  max_nfev=MAX_FUNCTION_EVALUATIONS)
        except RuntimeError as error:
            raise FitRefusal(f"the least-squares fit did not converge on {used} points: {error}") from None
    asymptote, log_c_mid, log_exponent = (float(p) for p in params)
    if asymptote - r0 <= 1e-9:  # rates are shares, so an absolute tolerance
        raise FitRefusal(f"the fitted asymptote equals R0 = {r0:.4f}: the curve does not rise past the cut, "
                         f"so C_mid and B are undetermined")
    residuals = rates - model(log_generations, asymptote, log_c_mid, log_exponent)
    return ScalingFit(r0=r0, asymptote=asymptote, c_mid=math.exp(log_c_mid), exponent=math.exp(log_exponent),
                      points=used, min_generations=min_generations, first_generations=first,
                      last_generations=last, rmse=float(np.sqrt(np.mean(residuals ** 2))), origin=origin)


def fit_scaling_law(generations: ArrayLike, rates: ArrayLike, *, r0: float | None = None,
                    min_generations: int = DEFAULT_MIN_GENERATIONS, recenter: bool = True) -> ScalingFit:
    """Fit the scaling law to a run's curve (cumulative generations and
    cumulative solve rates, in iteration order).

    Points below ``min_generations`` are left out of the fit.  ``recenter``
    (the paper's protocol) counts C from the first point past the cut and
    takes R0 there: the fit models the gains after the low-compute phase.
    Otherwise C is the run's own count and R0 the curve's first rate.  An
    explicit ``r0`` replaces either.  Raises ``FitRefusal`` when the data do
    not support a fit, ``ValueError`` when they are not a curve.
    """
    _check_min_generations(min_generations)
    c, r = _checked_curve(generations, rates)
    if r0 is not None and not 0.0 <= r0 <= 1.0:
        raise ValueError(f"r0 must lie in [0, 1], got {r0}")
    if len(r) == 0:
        raise FitRefusal("the curve has no points")
    past_cut = c >= min_generations
    kept = int(past_cut.sum())
    origin = float(c[past_cut][0]) if recenter and kept else 0.0
    if r0 is None:
        r0 = float(r[past_cut][0]) if recenter and kept else float(r[0])
    if r0 >= 1.0:
        raise FitRefusal("R0 is already 1: every target was solved at the start, there is no gain to fit")
    if kept < MIN_FIT_POINTS:
        raise FitRefusal(f"only {kept} of the {len(c)} points are at or above {min_generations:,} generations; "
                         f"{_NEEDED}")
    return _least_squares_fit(c[past_cut], r[past_cut], r0=r0, min_generations=min_generations, origin=origin)


@dataclass(frozen=True)
class TruncatedRefit:
    """The fit without the last part of the points past the cut."""

    fraction_dropped: float
    """Share of the points past the cut that was dropped from the end, e.g. 0.1."""
    points: int
    """Points the refit had (past the cut, after dropping)."""
    fit: ScalingFit | None
    """The refit, or None when it was skipped."""
    reason: str | None
    """Why the refit was skipped, or None when there is a fit."""

    def to_json(self) -> dict:
        return {"fraction_dropped": self.fraction_dropped, "points": self.points,
                "fit": None if self.fit is None else self.fit.to_json(), "reason": self.reason}


@dataclass(frozen=True)
class Spread:
    """Summary of a set of values (here, the subset asymptotes)."""

    count: int
    """Values summarised."""
    mean: float
    """Their mean."""
    std: float
    """Their sample standard deviation (n - 1 in the denominator)."""
    min: float
    """The smallest value."""
    max: float
    """The largest value."""
    p5: float
    """5th percentile (linear interpolation)."""
    p95: float
    """95th percentile (linear interpolation)."""

    def to_json(self) -> dict:
        return {"count": self.count, "mean": self.mean, "std": self.std, "min": self.min, "max": self.max,
                "p5": self.p5, "p95": self.p95}


def spread(values: Sequence[float]) -> Spread:
    """Mean, standard deviation, extremes and 5th/95th percentiles of at least two values."""
    if len(values) < 2:
        raise ValueError(f"a spread needs at least 2 values, got {len(values)}")
    v = np.asarray(values, dtype=float)
    low, high = np.percentile(v, SPREAD_PERCENTILES)
    return Spread(count=len(v), mean=float(v.mean()), std=float(v.std(ddof=1)), min=float(v.min()),
                  max=float(v.max()), p5=float(low), p95=float(high))


@dataclass(frozen=True)
class FitReport:
    """The main fit of a run with its robustness refits, or why there is none."""

    points: int
    """Points in the whole curve."""
    points_past_cut: int
    """Points at or above ``min_generations``."""
    min_generations: int
    """The cut, in generations."""
    r0: float | None
    """R0, the first rate of the curve; None for an empty curve."""
    fit: ScalingFit | None
    """The main fit, or None when it was refused."""
    reason: str | None
    """Why the main fit was refused, or None when there is one."""
    truncated: Mapping[float, TruncatedRefit]
    """Refits without the end of the data, by fraction dropped; empty without a main fit."""
    subsets: int
    """Random half subsets asked for."""
    seed: int
    """Seed of the generator that drew the subsets."""
    subset_asymptotes: tuple[float, ...]
    """A of each subset fit that succeeded, in draw order."""
    subset_failures: tuple[str, ...]
    """Reason of each subset fit that was refused."""
    subsets_skipped: str | None
    """Why no subset was fitted at all (too few points for a half), or None."""
    asymptote_spread: Spread | None
    """Spread of ``subset_asymptotes``; None with fewer than 2 of them."""

    def to_json(self) -> dict:
        return {
            "points": self.points, "points_past_cut": self.points_past_cut,
            "min_generations": self.min_generations, "r0": self.r0,
            "fit": None if self.fit is None else self.fit.to_json(), "reason": self.reason,
            "truncated": {f"{fraction:g}": refit.to_json() for fraction, refit in self.truncated.items()},
            "subsets": self.subsets, "seed": self.seed,
            "subset_asymptotes": list(self.subset_asymptotes),
            "subset_failures": list(self.subset_failures), "subsets_skipped": self.subsets_skipped,
            "asymptote_spread": None if self.asymptote_spread is None else self.asymptote_spread.to_json(),
        }


def _truncated_refit(generations: np.ndarray, rates: np.ndarray, fraction: float, *, r0: float,
                     min_generations: int, origin: float) -> TruncatedRefit:
    # Round half up: int(x + 0.5), not Python's round-half-to-even.
    kept = len(rates) - int(len(rates) * fraction + 0.5)
    if kept < MIN_FIT_POINTS:
        return TruncatedRefit(fraction, kept, None, f"dropping the last {fraction:.0%} of {len(rates)} points "
                                                    f"leaves {kept}; {_NEEDED}")
    try:
        fit = _least_squares_fit(generations[:kept], rates[:kept], r0=r0, min_generations=min_generations,
                                 origin=origin)
    except FitRefusal as refusal:
        return TruncatedRefit(fraction, kept, None, refusal.reason)
    return TruncatedRefit(fraction, kept, fit, None)


def fit_with_robustness(generations: ArrayLike, rates: ArrayLike, *,
                        min_generations: int = DEFAULT_MIN_GENERATIONS, subsets: int = 100,
                        seed: int = 0, recenter: bool = True) -> FitReport:
    """The main fit of a curve plus the truncated and random-subset refits,
    all with the main fit's R0 and origin (see :func:`fit_scaling_law`).

    Never raises for lack of data: a refused fit is a report with its reason.
    Raises ``ValueError`` when the input is not a curve.
    """
    _check_min_generations(min_generations)
    if subsets < 0:
        raise ValueError(f"subsets must not be negative, got {subsets}")
    c, r = _checked_curve(generations, rates)
    past_cut = c >= min_generations
    c_cut, r_cut = c[past_cut], r[past_cut]
    r0 = float(r_cut[0]) if recenter and len(r_cut) else float(r[0]) if len(r) else None
    base = dict(points=len(c), points_past_cut=len(c_cut), min_generations=min_generations, r0=r0,
                subsets=subsets, seed=seed)
    try:
        fit = fit_scaling_law(c, r, min_generations=min_generations, recenter=recenter)
    except FitRefusal as refusal:
        return FitReport(**base, fit=None, reason=refusal.reason, truncated={}, subset_asymptotes=(),
                         subset_failures=(), subsets_skipped=None, asymptote_spread=None)

    truncated = {fraction: _truncated_refit(c_cut, r_cut, fraction, r0=fit.r0, min_generations=min_generations,
                                            origin=fit.origin)
                 for fraction in TRUNCATION_FRACTIONS}

    half = (len(c_cut) + 1) // 2
    asymptotes: list[float] = []
    failures: list[str] = []
    skipped = None
    if subsets > 0 and half < MIN_FIT_POINTS:
        skipped = f"a random half of the {len(c_cut)} points past the cut has {half}; {_NEEDED}"
    else:
        rng = np.random.default_rng(seed)
        for _ in range(subsets):
            chosen = np.sort(rng.choice(len(c_cut), size=half, replace=False))  # sorted keeps C non-decreasing
            try:
                asymptotes.append(_least_squares_fit(c_cut[chosen], r_cut[chosen], r0=fit.r0,
                                                     min_generations=min_generations, origin=fit.origin).asymptote)
            except FitRefusal as refusal:
                failures.append(refusal.reason)
    return FitReport(**base, fit=fit, reason=None, truncated=truncated, subset_asymptotes=tuple(asymptotes),
                     subset_failures=tuple(failures), subsets_skipped=skipped,
                     asymptote_spread=spread(asymptotes) if len(asymptotes) >= 2 else None)


# -- reading runs -----------------------------------------------------------

def load_curve(run_dir: str | Path) -> tuple[list[int], list[float]]:
    """Cumulative generations and cumulative solve rates of a run, one point
    per line of ``<run_dir>/metrics.jsonl``, in file (iteration) order.

    Raises ``FileNotFoundError`` when the file is missing and ``MetricsError``,
    naming the file and line, when a line is not JSON, lacks a key, holds a
    value of the wrong kind, or breaks the order of iterations or generations.
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: no {METRICS_FILE} in this directory")
    generations: list[int] = []
    rates: list[float] = []
    last_iteration = None
    with open(path, encoding="utf-8") as lines:
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except ValueError as error:
                raise MetricsError(f"{where}: not valid JSON ({error})") from None
            if not isinstance(row, dict):
                raise MetricsError(f"{where}: expected a JSON object, got {type(row).__name__}")
            missing = [key for key in ("iteration", "generations", "cumulative_solve_rate") if key not in row]
            if missing:
                raise MetricsError(f"{where}: missing {', '.join(missing)}")
            iteration, count, rate = row["iteration"], row["generations"], row["cumulative_solve_rate"]
            if not _is_int(iteration) or not _is_int(count) or count < 0:
                raise MetricsError(f"{where}: iteration and generations must be non-negative integers, "
                                   f"got {iteration!r} and {count!r}")
            if not _is_number(rate) or not 0.0 <= rate <= 1.0:
                raise MetricsError(f"{where}: cumulative_solve_rate must be a number in [0, 1], got {rate!r}")
            if last_iteration is not None and iteration <= last_iteration:
                raise MetricsError(f"{where}: iteration {iteration} follows iteration {last_iteration}")
            if generations and count < generations[-1]:
                raise MetricsError(f"{where}: generations fell from {generations[-1]} to {count}; "
                                   f"they are cumulative")
            last_iteration = iteration
            generations.append(count)
            rates.append(float(rate))
    return generations, rates


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _natural_key(path: Path) -> list:
    # Sweep jobs are numbered directories: job 10 sorts after job 9, not after job 1.
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.as_posix())]


def find_runs(path: str | Path) -> list[Path]:
    """The run directories at ``path``: itself when it holds a metrics file,
    else every directory below it that does (a sweep), in sorted order
    (numbered sweep jobs in numeric order).  Raises ``FileNotFoundError`` when
    ``path`` is not a directory.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"{path}: no such directory")
    if (root / METRICS_FILE).is_file():
        return [root]
    return sorted((found.parent for found in root.rglob(METRICS_FILE) if found.is_file()), key=_natural_key)


# -- the command ------------------------------------------------------------

def _describe_fit(fit: ScalingFit) -> str:
    return (f"A = {fit.asymptote:.4f}  C_mid = {fit.c_mid:,.0f}  B = {fit.exponent:.3f}  "
            f"rmse = {fit.rmse:.4f}")


def format_report(run: str, report: FitReport) -> str:
    """The command's text for one run."""
    plural = "" if report.points == 1 else "s"
    lines = [f"{run}: {report.points} point{plural}, {report.points_past_cut} at or above "
             f"{report.min_generations:,} generations"]
    if report.fit is None:
        lines.append(f"  no fit: {report.reason}")
        return "\n".join(lines)
    lines.append(f"  R0 = {report.r0:.4f}  {_describe_fit(report.fit)}")
    for fraction, refit in report.truncated.items():
        label = f"  without the last {fraction:.0%} ({refit.points} points):"
        lines.append(f"{label} {_describe_fit(refit.fit)}" if refit.fit else f"{label} skipped: {refit.reason}")
    if report.subsets_skipped is not None:
        lines.append(f"  random halves: skipped: {report.subsets_skipped}")
    elif report.subsets:
        failed = f", {len(report.subset_failures)} refused" if report.subset_failures else ""
        head = f"  A over {report.subsets} random halves ({len(report.subset_asymptotes)} fitted{failed}):"
        s = report.asymptote_spread
        lines.append(f"{head} too few fits for a spread" if s is None else
                     f"{head} mean {s.mean:.4f}  std {s.std:.4f}  min {s.min:.4f}  max {s.max:.4f}  "
                     f"p5 {s.p5:.4f}  p95 {s.p95:.4f}")
    return "\n".join(lines)


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Fit and print the scaling law of each run; 0 on success, 2 on bad input."""
    parser = argparse.ArgumentParser(
        prog="python -m sgs.analysis.scaling",
        description="Fit R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) to the cumulative solve rate of runs "
                    "(SPEC §1.6) and check the fit's robustness.")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="a run directory (holding metrics.jsonl) or a sweep directory holding several")
    parser.add_argument("--min-generations", type=_positive_int, default=DEFAULT_MIN_GENERATIONS, metavar="N",
                        help="leave out points below this many cumulative generations (default: %(default)s)")
    parser.add_argument("--subsets", type=_non_negative_int, default=100, metavar="N",
                        help="random half subsets to refit (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="seed of the subset draws (default: %(default)s)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the reports to this JSON file")
    args = parser.parse_args(argv)

    # Read every curve before fitting any, so bad input fails before any output.
    curves: dict[Path, tuple[list[int], list[float]]] = {}
    try:
        for given in args.run_dirs:
            runs = find_runs(given)
            if not runs:
                raise FileNotFoundError(f"{given}: no {METRICS_FILE} in it or below it")
            for run in runs:
                curves[run] = load_curve(run)
    except (OSError, MetricsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    reports = {run: fit_with_robustness(generations, rates, min_generations=args.min_generations,
                                        subsets=args.subsets, seed=args.seed)
               for run, (generations, rates) in curves.items()}
    print("\n\n".join(format_report(str(run), report) for run, report in reports.items()))
    if args.json is not None:
        try:
            args.json.write_text(json.dumps({str(run): report.to_json() for run, report in reports.items()},
                                            indent=2) + "\n", encoding="utf-8")
        except OSError as error:
            print(f"error: cannot write {args.json}: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
