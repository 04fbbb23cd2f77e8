"""The comparison's diagnostics (sgs/analysis/diagnostics.py) on hand-written metrics lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sgs.analysis.diagnostics import diagnostic_rows, plot_diagnostics, seed_mean_series, table_iterations
from sgs.analysis.report import read_run


def run_with(run_dir: Path, seed: int, lines: list[dict]) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"experiment": "standard", "seed": seed}))
    rows = [{"iteration": i, "generations": 100 * (i + 1), "cumulative_solve_rate": 0.1 * i, **line}
            for i, line in enumerate(lines)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return run_dir


def test_series_are_seed_means_up_to_the_shortest_run_skipping_missing_values(tmp_path):
    a = read_run(run_with(tmp_path / "a", 0, [{"solver_entropy": 1.0}, {"solver_entropy": 0.5},
                                                {"solver_entropy": 0.1}]))
    b = read_run(run_with(tmp_path / "b", 1, [{"solver_entropy": 0.6}, {"solver_entropy": None}]))
    assert seed_mean_series([a, b], "solver_entropy") == pytest.approx([0.8, 0.5])
    assert seed_mean_series([a, b], "conjecture_proof_overlap") == [None, None]


def test_the_table_shows_five_points_of_the_shortest_run(tmp_path):
    assert table_iterations(0) == []
    assert table_iterations(1) == [0]
    assert table_iterations(21) == [0, 5, 10, 15, 20]
    runs = [read_run(run_with(tmp_path / "a", 0, [{"conjectures_kept": n} for n in range(9)]))]
    rows = diagnostic_rows({"standard": runs})
    assert rows[0][:3] == ["method", "iteration", "conjectures kept"]
    assert [row[:3] for row in rows[1:]] == [["standard", str(i), str(i)] for i in (0, 2, 4, 6, 8)]
    assert rows[1][-1] == "—"   # no Solver tokens recorded
    plot_diagnostics({"standard": runs}, tmp_path / "d.png")
    assert (tmp_path / "d.png").stat().st_size > 10_000
