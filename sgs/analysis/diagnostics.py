"""The mechanism behind a comparison, per method and iteration (``python -m tools.compare``).

Whether SGS pulls ahead or not, the reason should be visible in what its
Conjecturer did.  From each run's metrics lines, per method, the seed mean of:

* what the Conjecturer produced: conjectures kept for reward, their Guide
  score, the Conjecturer's mean reward;
* how close its conjectures stayed to their targets
  (:mod:`sgs.analysis.closeness`: statement overlap, the share of the
  target's proof names its conjectures' proofs used);
* the reward hacking the paper describes: conclusions growing longer,
  disjunctions (``A \\/ B`` conclusions are easy to make solvable);
* the Solver: entropy (collapse stops exploration) and proof length.

And, per method against the baseline with the same seed, the paper's
Figure 13: of the targets the baseline never solved, the share the method
solved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from sgs.analysis.report.runs import RunData

#: (metrics key, label) of each diagnostic, in the order shown.
DIAGNOSTICS = (
    ("conjectures_kept", "conjectures kept"),
    ("mean_guide_score", "Guide score"),
    ("mean_conjecturer_reward", "Conjecturer reward"),
    ("conjecture_statement_overlap", "statement overlap with target"),
    ("conjecture_proof_overlap", "target proof names used"),
    ("mean_conclusion_length", "conclusion length"),
    ("disjunctive_share", "disjunctive conclusions"),
    ("solver_entropy", "Solver entropy"),
    ("solver_mean_tokens", "Solver tokens"),
)
#: Iterations shown in the table: these fractions of the shortest run.
TABLE_POINTS = (0.0, 0.25, 0.5, 0.75, 1.0)


def seed_mean_series(runs: Sequence[RunData], key: str) -> list[float | None]:
    """Per iteration (up to the shortest run), the mean of ``key`` over the
    runs that recorded a number for it there; None where none did."""
    length = min((len(run.metrics) for run in runs), default=0)
    series = []
    for iteration in range(length):
        values = [run.metrics[iteration].get(key) for run in runs]
        numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        series.append(float(np.mean(numbers)) if numbers else None)
    return series


def table_iterations(length: int) -> list[int]:
    """The iterations the table shows for runs of ``length`` recorded iterations."""
    return sorted({round(fraction * (length - 1)) for fraction in TABLE_POINTS}) if length else []


def diagnostic_rows(grouped: Mapping[str, Sequence[RunData]]) -> list[list[str]]:
    """One row per method and shown iteration; a column per diagnostic."""
    rows = [["method", "iteration"] + [label for _, label in DIAGNOSTICS]]
    for method, runs in sorted(grouped.items()):
        series = {key: seed_mean_series(runs, key) for key, _ in DIAGNOSTICS}
        length = min(len(run.metrics) for run in runs)
        for iteration in table_iterations(length):
            rows.append([method, str(iteration)] + [_number(series[key][iteration]) for key, _ in DIAGNOSTICS])
    return rows


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


@dataclass(frozen=True)
class NeverSolved:
    """The paper's Figure 13 for one method: the targets its paired baseline run
    never solved, and how many of them the method solved, summed over seeds."""

    targets: int
    solved: int

    @property
    def share(self) -> float | None:
        return self.solved / self.targets if self.targets else None


def never_solved_by_baseline(method_runs: Sequence[RunData], baseline_runs: Sequence[RunData]) -> NeverSolved:
    """Paired by seed: of the training targets the baseline run never solved,
    those the method's run solved.  Seeds without a baseline run are left out."""
    baseline_by_seed = {int(run.config.get("seed", 0)): run for run in baseline_runs}
    targets = solved = 0
    for run in method_runs:
        baseline = baseline_by_seed.get(int(run.config.get("seed", 0)))
        if baseline is None:
            continue
        unsolved = set(baseline.training_target_ids) - set(baseline.solved_at)
        targets += len(unsolved)
        solved += len(unsolved & set(run.solved_at))
    return NeverSolved(targets, solved)


def plot_diagnostics(grouped: Mapping[str, Sequence[RunData]], path) -> None:
    """Small multiples: each diagnostic against iteration, a line per method (seed mean)."""
    columns = 3
    rows = -(-len(DIAGNOSTICS) // columns)
    fig = Figure(figsize=(4 * columns, 2.8 * rows))
    axes = fig.subplots(rows, columns).ravel()
    for ax, (key, label) in zip(axes, DIAGNOSTICS):
        for index, (method, runs) in enumerate(sorted(grouped.items())):
            series = seed_mean_series(runs, key)
            points = [(i, v) for i, v in enumerate(series) if v is not None]
            if points:
                ax.plot([i for i, _ in points], [v for _, v in points], color=f"C{index}", label=method)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("iteration", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[len(DIAGNOSTICS):]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
