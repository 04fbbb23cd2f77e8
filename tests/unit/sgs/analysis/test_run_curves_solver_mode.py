"""The sweep comparison's curves of runs whose Solver searches (``solver.mode=search``):
never paired with a sampling run of their seed, and no per-target sample budget."""

from __future__ import annotations

from pathlib import Path

from sgs.analysis.report.runs import RunData
from sgs.analysis.run_curves import run_curve, start_mismatch, target_sample_curve


def run(config: dict, metrics: list[dict]) -> RunData:
    return RunData(run_dir=Path("runs/x"), experiment="standard", config=config, metrics=metrics,
                   training_target_ids=[], solved_at={}, conjecture_target={}, scores={}, held_out=[], benchmarks=[])


LINES = [{"iteration": 0, "generations": 40, "cumulative_solve_rate": 0.5, "targets_attempted": 3}]
SEARCHED = [{**LINES[0], "search/attempts": 12, "search/model_calls": 30}]
BASE = {"seed": 0, "method": {"num_solver_samples": 8}}


def test_a_searching_run_starts_elsewhere_than_a_sampling_one_and_an_older_run_sampled():
    older, sampling = run(BASE, LINES), run({**BASE, "solver": {"mode": "sample"}}, LINES)
    searching = run({**BASE, "solver": {"mode": "search"}}, SEARCHED)
    assert start_mismatch(older, sampling) == []
    assert start_mismatch(sampling, searching) == ["solver.mode"]
    assert run_curve(searching).generations == (40.0,)


def test_a_searching_run_has_no_curve_against_samples_on_the_targets():
    assert target_sample_curve(run({**BASE, "solver": {"mode": "sample"}}, LINES)).generations == (24.0,)
    assert target_sample_curve(run({**BASE, "solver": {"mode": "search"}}, SEARCHED)) is None
