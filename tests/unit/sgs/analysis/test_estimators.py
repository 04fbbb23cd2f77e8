"""pass@k estimator: hand-computed cases, brute force over all k-subsets, the interval."""

import itertools
import math

import pytest

from sgs.analysis.estimators import estimate_pass_at_k, pass_at_k


def brute_force(n: int, c: int, k: int) -> float:
    """Share of the k-subsets of n samples (c of them correct) that hold a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_matches_brute_force_on_every_small_case(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_force(n, c, k), abs=1e-12), (n, c, k)


def test_hand_computed_cases():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the valid share
    # 1 - C(2, 2) / C(4, 2) = 1 - 1/6
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)
    assert pass_at_k(8, 1, 8) == 1.0  # the one correct sample is always drawn
    assert pass_at_k(8, 7, 2) == 1.0


def test_large_n_has_no_overflow():
    # C(1000, 500) overflows a float; the product form does not.
    expected = 1.0 - math.comb(900, 500) / math.comb(1000, 500)
    assert pass_at_k(1000, 100, 500) == pytest.approx(expected)


@pytest.mark.parametrize("n, c, k, error", [
    (4, 5, 1, ValueError), (4, -1, 1, ValueError), (3, 1, 4, ValueError), (4, 1, 0, ValueError),
    (4.0, 1, 1, TypeError),
])
def test_bad_input_is_named(n, c, k, error):
    with pytest.raises(error):
        pass_at_k(n, c, k)


def test_estimate_is_the_mean_with_an_interval_around_it():
    counts = [(8, 0)] * 30 + [(8, 8)] * 10 + [(8, 2)] * 10
    est = estimate_pass_at_k(counts, 1)
    assert est.value == pytest.approx((10 * 1.0 + 10 * 0.25) / 50)
    assert est.low < est.value < est.high
    assert est.problems == 50 and est.k == 1
    # The bootstrap is seeded: the same call gives the same interval.
    assert estimate_pass_at_k(counts, 1) == est
    # Ten times the problems: a narrower interval around the same value.
    wide, narrow = est, estimate_pass_at_k(counts * 10, 1)
    assert narrow.value == pytest.approx(wide.value)
    assert narrow.high - narrow.low < (wide.high - wide.low) / 2


def test_interval_covers_the_truth_about_95_percent_of_the_time():
    import numpy as np

    rng = np.random.default_rng(1)
    true_rate, covered, trials = 0.3, 0, 200
    for trial in range(trials):
        correct = rng.binomial(1, true_rate, size=60)
        est = estimate_pass_at_k([(1, int(x)) for x in correct], 1, resamples=2000, seed=trial)
        covered += est.low <= true_rate <= est.high
    assert 0.88 <= covered / trials <= 0.99


def test_constant_results_give_a_point_interval():
    est = estimate_pass_at_k([(4, 4)] * 5, 2)
    assert est.value == est.low == est.high == 1.0


def test_empty_and_bad_settings_are_refused():
    with pytest.raises(ValueError, match="empty"):
        estimate_pass_at_k([], 1)
    with pytest.raises(ValueError, match="confidence"):
        estimate_pass_at_k([(1, 1)], 1, confidence=1.5)
