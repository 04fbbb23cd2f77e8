"""A run's curves and timings as the sweep comparison reads them (:mod:`sgs.analysis.compare`).

Each curve is a :class:`~sgs.analysis.comparison.RunCurve`: the cumulative
solve rate against generations (:func:`run_curve`) or against the Solver's
samples on the training targets (:func:`target_sample_curve`), carrying what
decides the run's iteration-0 samples (:data:`START_SETTINGS`), so that runs
of one seed pair only when they share their start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from sgs.analysis.comparison import RunCurve
from sgs.analysis.report.runs import RunData
from sgs.analysis.report.series import Followup
from sgs.config import SolverConfig

#: The config settings that decide a run's iteration-0 samples: the base weights (the model and
#: its warm start; not ``model.learning_rate_scale``, which only self-play training reads), how
#: the Solver samples, and on which targets and prover.  Runs of one seed pair only when they
#: agree on all of them; a lever that changes one (a wider model) starts elsewhere.  A Solver
#: that searches (``solver.mode``) shares no samples with one that samples.
START_SETTINGS = ("model.name", "model.path", "model.tokenizer_path", "model.tiny", "model.dtype", "warmstart",
                  "sampling.solver", "sampling.share_start_samples", "resources.engine_backend", "targets",
                  "prover.backend", "method.num_solver_samples", "training.max_seq_len", "solver.mode")


def baseline_followup(method_run: Followup, baseline: RunData) -> tuple[int, int]:
    """On the same targets, from the same iterations: (targets the baseline had not solved
    by then, of which it solved later).  The baseline's first-solve rate to set against
    the Conjecturer's."""
    eligible = [(t, i) for t, i in method_run.trained_targets.items() if baseline.solved_at.get(t, i + 1) > i]
    return len(eligible), sum(1 for t, i in eligible if t in baseline.solved_at)


def iteration_seconds(run: RunData) -> list[float]:
    """The wall time of each iteration whose every phase this run's sessions timed (an
    iteration resumed mid-way lacks the phases finished before the resume)."""
    phases = [[value for key, value in line.items() if key.startswith("phase_seconds/")] for line in run.metrics]
    every = max((len(p) for p in phases), default=0)
    return [float(sum(p)) for p in phases if p and len(p) == every]


def run_curve(run: RunData) -> RunCurve | None:
    """The run's (generations, cumulative solve rate) curve; None without a recorded iteration."""
    points = [(m["generations"], m["cumulative_solve_rate"]) for m in run.metrics
              if m.get("generations") is not None and m.get("cumulative_solve_rate") is not None]
    return _curve(run, points)


def target_sample_curve(run: RunData) -> RunCurve | None:
    """The run's cumulative solve rate against the Solver's samples on the training targets alone
    (targets attempted x ``method.num_solver_samples``, summed over iterations): what SGS spends on
    its conjectures and their reviews is left out, so that methods are compared per attempt at the
    targets themselves.  None when a metrics line lacks ``targets_attempted``, and for a Solver
    that searches (``search/attempts``): its budget is its model calls, which the lines do not
    split between targets and conjectures."""
    per_target = run.config.get("method", {}).get("num_solver_samples")
    if per_target is None or any(m.get("targets_attempted") is None or "search/attempts" in m for m in run.metrics):
        return None
    samples, points = 0, []
    for m in run.metrics:
        samples += m["targets_attempted"] * per_target
        if m.get("cumulative_solve_rate") is not None:
            points.append((samples, m["cumulative_solve_rate"]))
    return _curve(run, points)


def start_settings(config: Mapping) -> dict[str, object]:
    """The run's :data:`START_SETTINGS` (None for one its config lacks)."""
    found = {}
    for dotted in START_SETTINGS:
        value = config
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        found[dotted] = value
    if found["solver.mode"] is None:  # a run from before the setting sampled whole proofs
        found["solver.mode"] = str(SolverConfig().mode)
    return found


def start_mismatch(a: RunData, b: RunData) -> list[str]:
    """The :data:`START_SETTINGS` on which two runs differ (none when they share their start)."""
    settings_a, settings_b = start_settings(a.config), start_settings(b.config)
    return [name for name in START_SETTINGS if settings_a[name] != settings_b[name]]


def _curve(run: RunData, points: Sequence[tuple[float, float]]) -> RunCurve | None:
    if not points:
        return None
    return RunCurve(run.experiment, int(run.config.get("seed", 0)), str(run.run_dir),
                    tuple(float(g) for g, _ in points), tuple(float(r) for _, r in points),
                    start=json.dumps(start_settings(run.config), sort_keys=True, default=str))
