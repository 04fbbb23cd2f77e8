"""The comparison statistics (:mod:`sgs.analysis.comparison`): hand-computed
intervals, and synthetic sweeps whose true difference is known."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from sgs.analysis.comparison import (
    RunCurve, common_range, curve_band, default_budgets, difference_at, mean_curve, method_fits, paired_by_seed,
    t_interval, welch_interval)
from sgs.analysis.scaling import scaling_curve


def curve(method: str, seed: int, generations, rates) -> RunCurve:
    return RunCurve(method, seed, f"{method}/{seed}", tuple(map(float, generations)), tuple(map(float, rates)))


def test_t_interval_by_hand():
    # mean 2, s = 1, t(0.975, 2) = 4.302653, half width 4.302653 / sqrt(3) = 2.484138
    interval = t_interval([1.0, 2.0, 3.0])
    assert interval.mean == 2.0 and interval.n == 3
    assert interval.low == pytest.approx(2.0 - 2.484138, abs=1e-6)
    assert interval.high == pytest.approx(2.0 + 2.484138, abs=1e-6)
    assert not interval.excludes_zero
    one = t_interval([0.4])
    assert one.mean == 0.4 and math.isnan(one.low) and math.isnan(one.high) and not one.excludes_zero


def test_welch_interval_by_hand():
    # a = [1, 2, 3]: var/n = 1/3; b = [0, 0, 0, 0]: 0.  df = (1/3)^2 / ((1/3)^2 / 2) = 2.
    interval = welch_interval([1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0])
    assert interval.mean == 2.0
    assert interval.high - interval.mean == pytest.approx(4.302653 / math.sqrt(3), abs=1e-6)
    assert interval.excludes_zero is False
    assert math.isnan(welch_interval([1.0], [0.0, 1.0]).low)
    with pytest.raises(ValueError, match="at least one value"):
        welch_interval([], [1.0])
    with pytest.raises(ValueError, match="confidence"):
        t_interval([1.0, 2.0], confidence=1.5)


def test_rate_at_interpolates_and_never_extrapolates():
    c = curve("m", 0, [100, 200, 400], [0.2, 0.4, 0.5])
    values = c.rate_at([50, 100, 150, 300, 400, 500])
    assert np.isnan(values[0]) and np.isnan(values[-1])
    assert values[1:5] == pytest.approx([0.2, 0.3, 0.45, 0.5])


def test_bad_curves_are_refused_by_name():
    with pytest.raises(ValueError, match="m/0: generations must increase"):
        curve("m", 0, [100, 100], [0.1, 0.2])
    with pytest.raises(ValueError, match="m/0: 2 generation counts but 1 rates"):
        curve("m", 0, [100, 200], [0.1])
    with pytest.raises(ValueError, match="no recorded iteration"):
        curve("m", 0, [], [])


def test_common_range_and_budgets():
    a = curve("a", 0, [100, 300, 500], [0.1, 0.2, 0.3])
    b = curve("b", 0, [150, 350, 450], [0.1, 0.2, 0.3])
    assert common_range([a, b]) == (150, 450)
    assert default_budgets([a, b], 4) == pytest.approx([150, 250, 350, 450])
    assert default_budgets([a, curve("c", 0, [600, 700], [0.1, 0.2])]) == []


def test_band_is_the_t_interval_of_the_seeds_rates():
    runs = [curve("m", s, [100, 200], [0.2 + 0.1 * s, 0.4 + 0.1 * s]) for s in range(3)]
    band = curve_band(runs, [100, 150, 250])
    # at 150: rates 0.3, 0.4, 0.5
    assert band[1].mean == pytest.approx(0.4)
    assert band[1].high - band[1].mean == pytest.approx(4.302653 * 0.1 / math.sqrt(3), abs=1e-6)
    assert band[2] is None


def synthetic_sweep(gain: float, seeds: int, noise: float, *, shared_noise: bool, rng: np.random.Generator,
                    method: str) -> list[RunCurve]:
    """Curves R(C) of a known law plus ``gain``, with seed noise that is either
    shared between methods with the same seed (paired starts) or independent."""
    generations = np.arange(1, 11) * 2_000.0
    runs = []
    for seed in range(seeds):
        offset = (np.random.default_rng(1000 + seed) if shared_noise else rng).normal(0, noise)
        rates = scaling_curve(generations, r0=0.3, asymptote=0.6 + gain, c_mid=8_000, exponent=1.5) + offset
        runs.append(curve(method, seed, generations, np.clip(rates, 0, 1)))
    return runs


def test_a_known_difference_is_found_paired_and_its_interval_covers_it():
    rng = np.random.default_rng(0)
    a = synthetic_sweep(0.10, 5, 0.05, shared_noise=True, rng=rng, method="a")
    b = synthetic_sweep(0.00, 5, 0.05, shared_noise=True, rng=rng, method="b")
    assert paired_by_seed(a, b)
    budget = 20_000.0
    true_gap = float(scaling_curve([budget], r0=0.3, asymptote=0.7, c_mid=8_000, exponent=1.5)[0]
                     - scaling_curve([budget], r0=0.3, asymptote=0.6, c_mid=8_000, exponent=1.5)[0])
    (diff,) = difference_at(a, b, [budget])
    assert diff.paired
    # the shared seed offsets cancel: the per-seed differences are all the true gap
    assert diff.interval.mean == pytest.approx(true_gap, abs=1e-9)
    assert diff.interval.excludes_zero


def test_runs_of_one_seed_from_different_starts_are_not_paired():
    """Same seeds, but one side started from other weights: its iteration-0 samples
    differ, so nothing is shared to pair on."""
    rng = np.random.default_rng(2)
    a = synthetic_sweep(0.0, 3, 0.03, shared_noise=True, rng=rng, method="a")
    b = synthetic_sweep(0.0, 3, 0.03, shared_noise=True, rng=rng, method="b")
    wider = [RunCurve("b", c.seed, c.label, c.generations, c.rates, start="wider model") for c in b]
    assert paired_by_seed(a, b) and not paired_by_seed(a, wider)
    one_differs = [replace(c, start="wider model") if c.seed == 0 else c for c in b]
    assert not paired_by_seed(a, one_differs)
    assert not any(d.paired for d in difference_at(a, wider, default_budgets(a + wider, 3)))


def test_unpaired_runs_use_welch_and_equal_methods_are_not_told_apart():
    rng = np.random.default_rng(1)
    a = synthetic_sweep(0.0, 4, 0.03, shared_noise=False, rng=rng, method="a")
    b = [RunCurve("b", c.seed + 10, c.label, c.generations, c.rates)
         for c in synthetic_sweep(0.0, 4, 0.03, shared_noise=False, rng=rng, method="b")]
    assert not paired_by_seed(a, b)
    diffs = difference_at(a, b, default_budgets(a + b, 3))
    assert all(d is not None and not d.paired for d in diffs)
    assert not any(d.interval.excludes_zero for d in diffs)


def test_welch_coverage_on_many_synthetic_sweeps():
    """The 95% interval covers the true difference in about 95% of repetitions."""
    rng = np.random.default_rng(2)
    covered = 0
    repetitions = 400
    for _ in range(repetitions):
        a = rng.normal(0.55, 0.04, 3)
        b = rng.normal(0.50, 0.04, 3)
        interval = welch_interval(a, b)
        covered += interval.low <= 0.05 <= interval.high
    assert 0.90 <= covered / repetitions <= 0.99


def test_method_fits_report_the_asymptote_spread_over_seeds():
    rng = np.random.default_rng(3)
    generations = np.linspace(120_000, 3_000_000, 12)
    runs = []
    for seed, asymptote in enumerate((0.62, 0.65, 0.68)):
        rates = scaling_curve(generations, r0=0.4, asymptote=asymptote, c_mid=600_000, exponent=1.2)
        runs.append(curve("m", seed, generations, rates + rng.normal(0, 0.002, len(rates))))
    fits = method_fits(runs, subsets=5)
    assert set(fits.per_seed) == {0, 1, 2}
    assert fits.asymptote_over_seeds is not None and fits.asymptote_over_seeds.count == 3
    assert fits.asymptote_over_seeds.mean == pytest.approx(0.65, abs=0.02)
    assert fits.mean_curve is not None and fits.mean_curve.fit is not None


def test_small_runs_get_the_fit_refusal_not_a_crash():
    runs = [curve("m", s, [2_000, 4_000, 6_000], [0.3, 0.4, 0.45]) for s in range(2)]
    fits = method_fits(runs, subsets=5)
    assert all(r.fit is None and "only 0 of the 3 points are at or above 100,000" in r.reason
               for r in fits.per_seed.values())
    assert fits.asymptote_over_seeds is None
    assert mean_curve(runs) == ([2_000, 4_000, 6_000], [0.3, 0.4, 0.45])
