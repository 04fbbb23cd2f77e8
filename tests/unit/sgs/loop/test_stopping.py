"""The stopping rule (:mod:`sgs.loop.stopping`): hand-computed cases."""

from __future__ import annotations

import pytest

from sgs.config import SGSConfig
from sgs.config.schema import StopConfig
from sgs.config.validation import config_problems
from sgs.loop.stopping import flat_iterations, stop_reason


@pytest.mark.parametrize("rates, flat", [
    ([], 0),
    ([0.3], 0),
    ([0.3, 0.4], 0),
    ([0.3, 0.3], 1),
    ([0.3, 0.4, 0.4, 0.4], 2),
    ([0.3, 0.3, 0.3, 0.5], 0),
    ([0.3, 0.3, 0.4, 0.4, 0.4, 0.4], 3),
])
def test_flat_iterations_counts_the_trailing_iterations_that_added_nothing(rates, flat):
    assert flat_iterations(rates) == flat


def _metrics(rates: list[float]) -> list[dict]:
    return [{"iteration": i, "cumulative_solve_rate": r} for i, r in enumerate(rates)]


def test_without_a_stop_rule_the_run_goes_to_its_iteration_count():
    cfg = SGSConfig(iterations=4)
    assert stop_reason(cfg, _metrics([0.3] * 3)) is None
    assert stop_reason(cfg, _metrics([0.3] * 4)) == "all 4 iterations are done"


def test_a_flat_curve_stops_the_run_once_past_the_minimum():
    cfg = SGSConfig(iterations=40, stop=StopConfig(flat_iterations=2, min_iterations=5))
    # flat for 2 iterations already at 4 done, but the minimum is 5
    assert stop_reason(cfg, _metrics([0.3, 0.4, 0.4, 0.4])) is None
    assert stop_reason(cfg, _metrics([0.3, 0.4, 0.4, 0.4, 0.4])) == (
        "the cumulative solve rate has not risen for 3 iterations (stop.flat_iterations=2) after 5 iterations")
    # a rise resets the count
    assert stop_reason(cfg, _metrics([0.3, 0.4, 0.4, 0.4, 0.5])) is None
    assert stop_reason(cfg, _metrics([0.3, 0.4, 0.4, 0.4, 0.5, 0.5])) is None
    assert stop_reason(cfg, _metrics([0.3, 0.4, 0.4, 0.4, 0.5, 0.5, 0.5])) is not None


def test_the_iteration_count_caps_a_curve_that_keeps_rising():
    cfg = SGSConfig(iterations=3, stop=StopConfig(flat_iterations=2))
    assert stop_reason(cfg, _metrics([0.1, 0.2, 0.3])) == "all 3 iterations are done"


def test_stop_settings_are_validated():
    problems = config_problems(SGSConfig(stop=StopConfig(flat_iterations=0, min_iterations=-1)))
    assert "stop.flat_iterations=0 must be at least 1" in problems
    assert "stop.min_iterations=-1 must be at least 0" in problems
