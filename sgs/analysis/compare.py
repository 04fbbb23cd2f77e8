"""The comparison of a sweep: methods over seeds at equal generation budgets.

    python -m tools.compare RUN_DIR [RUN_DIR ...] [--baseline NAME] [--budgets N] [--confidence C]
                            [--min-generations N] [--out DIR]

A RUN_DIR is a run directory or a directory of runs (a Hydra multirun sweep,
several sweeps, loose runs: all are read).  Runs are grouped by their
config's ``experiment``; each run is one seed.  The output, in ``--out``
(default: ``comparison/`` in the first RUN_DIR):

* ``comparison.md``: per method, the seeds, the generations every seed
  reached, the cumulative solve rate at the largest budget every run of the
  sweep reached (mean and t interval over seeds), the final held-out pass@k
  and the scaling-law asymptote (mean over seeds, or why there is no fit);
  then every method against the baseline at equal budgets (the difference
  with its interval, paired by seed when the seeds and starts match,
  :data:`~sgs.analysis.run_curves.START_SETTINGS`), and the same at
  equal Solver samples on the training targets (:func:`target_sample_curve`);
  then the mechanism: how often a target whose conjectures the Conjecturer was trained
  on was solved afterwards, against how often the baseline solved those same
  targets after the same iteration;
* ``comparison.tex``: the first two tables as LaTeX (booktabs) to paste into a paper;
* ``comparison.json``: every number behind the tables;
* ``solve_rate.png`` (mean curve and band per method), ``difference.png``
  (each method minus the baseline against generations, with its band) and
  ``figure1.png`` (laid out like the paper's Figure 1: mean curves with
  bands, each method's fitted scaling law dashed and its asymptote dotted);
* how close the trained-on conjectures stayed to their targets over the
  whole run, beside the chance level (:mod:`sgs.analysis.run_closeness`);
* the fits per seed with their robustness refits (the paper's Figure 8:
  without the last 10/20/30% of the points, and 100 random halves), the
  mechanism's diagnostics per iteration (:mod:`sgs.analysis.diagnostics`,
  also as ``diagnostics.png``) and, per method, the share of the targets its
  paired baseline run never solved that it solved (the paper's Figure 13).

The statistics are :mod:`sgs.analysis.comparison`; the runs are read with
:func:`sgs.analysis.report.read_run` (read-only).  Exit status 2 when a path
is not a run and holds none, or the runs cannot be compared (no overlap in
generations, an unknown baseline).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from sgs.analysis.comparison import (
    DEFAULT_BUDGETS, DEFAULT_CONFIDENCE, Difference, Interval, MethodFits, RunCurve, common_range, curve_band,
    default_budgets, difference_at, method_fits, t_interval)
from sgs.analysis.diagnostics import NeverSolved, diagnostic_rows, never_solved_by_baseline, plot_diagnostics
from sgs.analysis.report.page import markdown_table
from sgs.analysis.report.runs import ReportError, RunData, find_run_dirs, read_run
from sgs.analysis.report.series import followup
from sgs.analysis.run_closeness import RunCloseness, run_closeness
from sgs.analysis.run_curves import (
    baseline_followup, iteration_seconds, run_curve, start_mismatch, target_sample_curve)
from sgs.analysis.scaling import DEFAULT_MIN_GENERATIONS, FitReport

#: The RL baseline's experiment name: the default baseline when the sweep has it.
RL_BASELINE = "reinforce_half_solver_only"
#: Exit status for paths that hold no runs or runs that cannot be compared.
EXIT_USAGE = 2
DPI = 110


class CompareError(Exception):
    """The runs cannot be compared; the message says why."""


@dataclass(frozen=True)
class MethodSummary:
    method: str
    seeds: list[int]
    reached: float
    """Generations every seed of the method reached."""
    at_budget: Interval | None
    """Cumulative solve rate at the sweep's common budget."""
    final: Interval
    """Cumulative solve rate at each seed's last iteration."""
    held_out: Interval | None
    """Held-out pass@k at each seed's last measured policy version (None: not measured)."""
    fits: MethodFits
    followup: tuple[int, int]
    """(targets trained on through a conjecture, of which solved later), summed over seeds."""
    iteration_seconds: list[float]
    """Wall time of every timed iteration of every seed (the phases' sum; a phase finished
    before a resume has no timing, so its iteration is left out)."""
    closeness: list[RunCloseness]
    """Per seed whose Conjecturer was trained, how close its trained-on conjectures stayed to
    their targets over the whole run (:mod:`sgs.analysis.run_closeness`)."""


@dataclass(frozen=True)
class Comparison:
    methods: dict[str, MethodSummary]
    baseline: str
    budgets: list[float]
    common_budget: float
    differences: dict[str, list[Difference | None]]
    """Method -> method minus baseline at each of ``pair_budgets[method]``."""
    pair_budgets: dict[str, list[float]]
    """Method -> the budgets spread over the generations both it and the baseline covered
    (a method that ran longer than a third one is still compared with the baseline to the end)."""
    target_differences: dict[str, list[Difference | None]]
    """Method -> method minus baseline at each of ``target_budgets[method]``, counted in Solver samples
    on the training targets (:func:`target_sample_curve`); absent where a run lacks the counts."""
    target_budgets: dict[str, list[float]]
    """Method -> the budgets of ``target_differences``, in Solver samples on the training targets."""
    baseline_followup: dict[str, tuple[int, int]]
    """Method -> (targets, solved later) for the baseline on the method's trained targets, paired by seed."""
    never_solved: dict[str, NeverSolved]
    """Method -> the targets its paired baseline runs never solved, and how many it solved."""
    diagnostics: list[list[str]]
    """The mechanism's diagnostics table (:func:`sgs.analysis.diagnostics.diagnostic_rows`)."""
    confidence: float
    notes: list[str]
    members: dict[str, list[tuple[RunData, RunCurve]]]
    """Method -> the runs compared, each with its curve (for the figures)."""


def group_runs(runs: Sequence[RunData]) -> tuple[dict[str, list[tuple[RunData, RunCurve]]], list[str]]:
    """The runs that can be compared, by experiment, each with its curve; and the
    reading notes: the runs' own, and why a run was left out."""
    notes = [note for run in runs for note in run.notes]
    grouped: dict[str, list[tuple[RunData, RunCurve]]] = {}
    for run in runs:
        curve = run_curve(run)
        if not run.config.get("experiment"):
            # Its method is unknown: grouped under its folder's name it would pose as a method.
            notes.append(f"{run.run_dir}: its config names no experiment (unreadable?); left out")
        elif curve is None:
            notes.append(f"{run.run_dir}: no recorded iteration; left out")
        else:
            grouped.setdefault(run.experiment, []).append((run, curve))
    return grouped, notes


def compare(runs: Sequence[RunData], *, baseline: str | None = None, budgets: int = DEFAULT_BUDGETS,
            confidence: float = DEFAULT_CONFIDENCE, min_generations: int = DEFAULT_MIN_GENERATIONS) -> Comparison:
    """Group ``runs`` by experiment and compare them (see the module docstring)."""
    grouped, notes = group_runs(runs)
    if not grouped:
        raise CompareError("none of the runs has a recorded iteration and a readable config")
    for method, members in grouped.items():
        seeds = [c.seed for _, c in members]
        if len(set(seeds)) != len(seeds):
            raise CompareError(f"experiment {method!r} has several runs with the same seed "
                               f"({', '.join(str(r.run_dir) for r, _ in members)}): give each run its own seed")
    if baseline is None:
        baseline = RL_BASELINE if RL_BASELINE in grouped else sorted(grouped)[0]
    if baseline not in grouped:
        raise CompareError(f"baseline {baseline!r} is not among the experiments: {', '.join(sorted(grouped))}")
    curves = [c for members in grouped.values() for _, c in members]
    covered = common_range(curves)
    if covered is None:
        raise CompareError("the runs share no range of generations (one ends before another starts): "
                           "compare runs of similar length")
    grid = default_budgets(curves, budgets)
    methods = {}
    for method, members in sorted(grouped.items()):
        method_curves = [c for _, c in members]
        held_out = [run.held_out[-1].pass_at_k for run, _ in members if run.held_out]
        follow = [followup(run) for run, _ in members]
        methods[method] = MethodSummary(
            method=method, seeds=sorted(c.seed for c in method_curves),
            reached=min(c.generations[-1] for c in method_curves),
            at_budget=curve_band(method_curves, [covered[1]], confidence)[0],
            final=t_interval([c.rates[-1] for c in method_curves], confidence),
            held_out=t_interval(held_out, confidence) if len(held_out) == len(members) else None,
            fits=method_fits(method_curves, min_generations=min_generations),
            followup=(sum(len(f.trained_targets) for f in follow), sum(len(f.solved_after) for f in follow)),
            iteration_seconds=[seconds for run, _ in members for seconds in iteration_seconds(run)],
            closeness=[found for run, _ in members if run.trains_conjecturer
                       and (found := run_closeness(run.run_dir)) is not None])
    base_curves = [c for _, c in grouped[baseline]]
    base_by_seed = {c.seed: run for run, c in grouped[baseline]}
    differences, pair_budgets, base_follow, never_solved = {}, {}, {}, {}
    target_differences, target_budgets = {}, {}
    base_target_curves = [target_sample_curve(run) for run, _ in grouped[baseline]]
    for method, members in sorted(grouped.items()):
        if method == baseline:
            continue
        method_curves = [c for _, c in members]
        pair_budgets[method] = default_budgets(method_curves + base_curves, budgets)
        differences[method] = difference_at(method_curves, base_curves, pair_budgets[method], confidence)
        target_curves = [target_sample_curve(run) for run, _ in members]
        if None not in target_curves + base_target_curves:
            target_budgets[method] = default_budgets(target_curves + base_target_curves, budgets)
            target_differences[method] = difference_at(target_curves, base_target_curves, target_budgets[method],
                                                       confidence)
        mismatched = sorted({name for run, c in members if c.seed in base_by_seed
                             for name in start_mismatch(run, base_by_seed[c.seed])})
        if mismatched:
            notes.append(f"runs of {method} and {baseline} with the same seed start differently "
                         f"({', '.join(mismatched)} differ): their differences are Welch's, not paired by seed")
        counts = [baseline_followup(followup(run), base_by_seed[c.seed]) for run, c in members if c.seed in base_by_seed]
        base_follow[method] = (sum(n for n, _ in counts), sum(s for _, s in counts))
        never_solved[method] = never_solved_by_baseline([r for r, _ in members], [r for r, _ in grouped[baseline]])
    diagnostics = diagnostic_rows({method: [r for r, _ in members] for method, members in grouped.items()})
    return Comparison(methods, baseline, grid, covered[1], differences, pair_budgets, target_differences,
                      target_budgets, base_follow, never_solved, diagnostics, confidence, notes, grouped)


# ---------------------------------------------------------------------------
# Tables


def _interval(interval: Interval | None, digits: int = 3) -> str:
    if interval is None:
        return "—"
    if np.isnan(interval.low):
        return f"{interval.mean:.{digits}f} (one seed: no interval)"
    return f"{interval.mean:.{digits}f} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def _asymptote(fits: MethodFits) -> str:
    fitted = [r.fit.asymptote for r in fits.per_seed.values() if r.fit is not None]
    if not fitted:
        reason = next(iter(fits.per_seed.values())).reason if fits.per_seed else "no runs"
        return f"no fit ({reason})"
    if fits.asymptote_over_seeds is None:
        return f"{fitted[0]:.3f} (one seed)"
    s = fits.asymptote_over_seeds
    return f"{s.mean:.3f} (seeds {s.min:.3f}–{s.max:.3f})"


def _share(count: tuple[int, int]) -> str:
    targets, solved = count
    return f"{solved}/{targets} = {solved / targets:.2f}" if targets else "—"


def method_rows(c: Comparison) -> list[list[str]]:
    header = ["method", "seeds", "generations reached", f"solve rate at {c.common_budget:,.0f} gen.",
              "final solve rate", "held-out pass@k", "asymptote A", "s / iteration (median, range)"]
    rows = [header]
    for m in c.methods.values():
        rows.append([m.method, ",".join(map(str, m.seeds)), f"{m.reached:,.0f}", _interval(m.at_budget),
                     _interval(m.final), _interval(m.held_out), _asymptote(m.fits), _seconds(m.iteration_seconds)])
    return rows


def _seconds(values: Sequence[float]) -> str:
    if not values:
        return "—"
    return f"{np.median(values):.0f} ({min(values):.0f}–{max(values):.0f}; {sum(values) / 3600:.1f} h in all)"


def difference_rows(c: Comparison, target_samples: bool = False) -> list[list[str]]:
    """Each method minus the baseline at equal budgets of generations (every sample of every role),
    or with ``target_samples`` of the Solver's samples on the training targets."""
    differences, budgets, unit = ((c.target_differences, c.target_budgets, "target samples") if target_samples
                                  else (c.differences, c.pair_budgets, "generations"))
    rows = [["method", f"budget ({unit})", f"Δ solve rate vs {c.baseline}", "pairing", "interval excludes 0"]]
    for method, diffs in differences.items():
        for budget, diff in zip(budgets[method], diffs):
            if diff is None:
                rows.append([method, f"{budget:,.0f}", "—", "—", "—"])
                continue
            pairing = f"paired by seed (n={diff.interval.n})" if diff.paired else f"Welch (n≥{diff.interval.n})"
            rows.append([method, f"{budget:,.0f}", _interval(diff.interval), pairing,
                         "yes" if diff.interval.excludes_zero else "no"])
    return rows


def _fit_cells(report: FitReport) -> list[str]:
    """A, C_mid and B of a fit, its refits without the end of the data, and the random halves' spread."""
    if report.fit is None:
        return [f"no fit ({report.reason})", "—", "—", "—", "—"]
    fit = report.fit
    truncated = ", ".join("—" if r.fit is None else f"{r.fit.asymptote:.3f}" for r in report.truncated.values())
    halves = report.asymptote_spread
    return [f"{fit.asymptote:.3f}", f"{fit.c_mid:,.0f}", f"{fit.exponent:.3f}", truncated,
            "—" if halves is None else f"{halves.mean:.3f} ± {halves.std:.3f} ({halves.count})"]


def fit_rows(c: Comparison) -> list[list[str]]:
    """Per method, each seed's fit and the seed-mean curve's, with the robustness refits (paper Figure 8)."""
    rows = [["method", "curve", "points past the cut", "A", "C_mid", "B", "A without last 10/20/30%",
             "A over random halves (mean ± sd, n)"]]
    for m in c.methods.values():
        reports = [(f"seed {seed}", report) for seed, report in sorted(m.fits.per_seed.items())]
        if m.fits.mean_curve is not None and len(reports) > 1:
            reports.append(("seed mean", m.fits.mean_curve))
        for label, report in reports:
            rows.append([m.method, label, str(report.points_past_cut)] + _fit_cells(report))
    return rows


def never_solved_rows(c: Comparison) -> list[list[str]]:
    rows = [["method", f"targets {c.baseline} never solved (summed over seeds)", "of which the method solved"]]
    for method, counts in c.never_solved.items():
        share = "—" if counts.share is None else f"{counts.solved} = {counts.share:.2f}"
        rows.append([method, str(counts.targets), share])
    return rows


def mechanism_rows(c: Comparison) -> list[list[str]]:
    rows = [["method", "targets trained on via a conjecture: solved later",
             f"{c.baseline} on the same targets after the same iteration: solved later"]]
    for method, m in c.methods.items():
        if method != c.baseline and m.followup[0]:
            rows.append([method, _share(m.followup), _share(c.baseline_followup.get(method, (0, 0)))])
    return rows


def closeness_rows(c: Comparison) -> list[list[str]]:
    """Per method whose Conjecturer was trained: the closeness of its trained-on conjectures to
    their own targets and to the other targets (chance), seed means."""
    rows = [["method", "conjectures (with a solved target)", "statement overlap: own target",
             "other targets", "target proof names used: own target", "other targets"]]
    for m in c.methods.values():
        if not m.closeness:
            continue
        statements = [r.statements for r in m.closeness]
        proofs = [r.proofs for r in m.closeness]
        rows.append([m.method, f"{sum(s.items for s in statements)} ({sum(p.items for p in proofs)})",
                     _seed_mean([s.own for s in statements]), _seed_mean([s.other for s in statements]),
                     _seed_mean([p.own for p in proofs]), _seed_mean([p.other for p in proofs])])
    return rows


def _seed_mean(values: Sequence[float | None]) -> str:
    measured = [v for v in values if v is not None]
    return f"{np.mean(measured):.3f}" if measured else "—"


def latex_table(rows: Sequence[Sequence[str]], caption: str) -> str:
    def cell(text: str) -> str:
        for plain, escaped in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"),
                               ("#", r"\#"), ("Δ", r"$\Delta$"), ("≥", r"$\geq$"), ("—", "--"), ("–", "--")):
            text = text.replace(plain, escaped)
        return text

    lines = [r"\begin{table}[t]", r"\centering", r"\begin{tabular}{" + "l" * len(rows[0]) + "}", r"\toprule",
             " & ".join(cell(x) for x in rows[0]) + r" \\", r"\midrule"]
    lines += [" & ".join(cell(x) for x in row) + r" \\" for row in rows[1:]]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{cell(caption)}}}", r"\end{table}"]
    return "\n".join(lines)


def _section(title: str, rows: list[list[str]], explanation: str) -> list[str]:
    """A titled table with its explanation; nothing when the table has no row below its header."""
    return ["", f"## {title}", "", explanation, ""] + markdown_table(rows) if len(rows) > 1 else []


def render_markdown(c: Comparison) -> str:
    level = f"{c.confidence:.0%}"
    lines = ["# SGS sweep comparison", "",
             f"Intervals are {level} t intervals over seeds; differences are paired by seed when both methods "
             f"ran the same seeds from the same start (same seed, same iteration-0 samples), Welch's otherwise.", "",
             "## Methods", ""] + markdown_table(method_rows(c))
    lines += ["", f"## Against {c.baseline} at equal generation budgets", ""] + markdown_table(difference_rows(c))
    lines += _section(
        f"Against {c.baseline} at equal samples on the targets", difference_rows(c, target_samples=True),
        "The same difference, with the budget counted in the Solver's samples on the training targets alone: "
        "what a method spends on conjectures and reviews is left out, so this asks whether its attempts at the "
        "targets did better, whatever they cost.")
    lines += _section(
        "The Conjecturer's mechanism", mechanism_rows(c),
        "A target counts when one of its conjectures was trained on in iteration i and the target had not been "
        "solved by then; it is solved later if first solved in an iteration after i. The baseline column asks "
        "the same of the baseline run with the same seed, on the same targets, from the same iteration.")
    lines += _section(
        "How close the conjectures stayed to their targets", closeness_rows(c),
        "Every conjecture the Conjecturer was trained on, over the whole run: its statement against its target's "
        "(Jaccard of canonical symbols), and the names its valid proofs used against those of every valid proof "
        "the run found for its target (the share covered; only conjectures whose target was solved). Each also "
        "against every other target: the chance level.")
    min_generations = next((r.min_generations for m in c.methods.values() for r in m.fits.per_seed.values()), None)
    lines += ["", "## Scaling-law fits", "",
              f"R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), fitted past {min_generations:,} generations and "
              "re-centred there (sgs.analysis.scaling); the refits are the paper's robustness protocol.", ""]
    lines += markdown_table(fit_rows(c))
    if c.never_solved:
        lines += ["", f"## Targets {c.baseline} never solved", "",
                  "Paired by seed, as the paper's Figure 13.", ""] + markdown_table(never_solved_rows(c))
    lines += ["", "## Diagnostics per iteration", "",
              "Seed means of each run's metrics lines (sgs.analysis.diagnostics); — where a method has none.",
              ""] + markdown_table(c.diagnostics)
    lines += ["", "![Figure 1 layout](figure1.png)", "", "![cumulative solve rate](solve_rate.png)", "",
              "![difference](difference.png)", "", "![diagnostics](diagnostics.png)"]
    if c.notes:
        lines += ["", "## Reading notes", ""] + [f"- {note}" for note in c.notes]
    return "\n".join(lines) + "\n"


def to_json(c: Comparison) -> dict:
    return {
        "baseline": c.baseline, "confidence": c.confidence, "budgets": c.budgets, "common_budget": c.common_budget,
        "methods": {name: {
            "seeds": m.seeds, "generations_reached": m.reached,
            "solve_rate_at_common_budget": None if m.at_budget is None else m.at_budget.to_json(),
            "final_solve_rate": m.final.to_json(),
            "held_out_pass_at_k": None if m.held_out is None else m.held_out.to_json(),
            "fits": {str(seed): r.to_json() for seed, r in m.fits.per_seed.items()},
            "asymptote_over_seeds": None if m.fits.asymptote_over_seeds is None else m.fits.asymptote_over_seeds.to_json(),
            "mean_curve_fit": None if m.fits.mean_curve is None else m.fits.mean_curve.to_json(),
            "followup": {"trained_targets": m.followup[0], "solved_later": m.followup[1]},
            "iteration_seconds": m.iteration_seconds,
            "closeness": [{"statements": asdict(r.statements), "proofs": asdict(r.proofs)} for r in m.closeness],
        } for name, m in c.methods.items()},
        "differences": {name: [None if d is None else {"budget": d.budget, "paired": d.paired, **d.interval.to_json()}
                               for d in diffs] for name, diffs in c.differences.items()},
        "target_sample_differences": {
            name: [None if d is None else {"target_samples": d.budget, "paired": d.paired, **d.interval.to_json()}
                   for d in diffs] for name, diffs in c.target_differences.items()},
        "baseline_followup": {name: {"targets": n, "solved_later": s} for name, (n, s) in c.baseline_followup.items()},
        "never_solved_by_baseline": {name: {"targets": n.targets, "solved": n.solved}
                                     for name, n in c.never_solved.items()},
        "diagnostics": c.diagnostics,
        "notes": c.notes,
    }


# ---------------------------------------------------------------------------
# Figures


def _grid(budgets: Sequence[float]) -> np.ndarray:
    """Fifty points from the first budget to the last, for drawing."""
    return np.linspace(budgets[0], budgets[-1], 50) if len(budgets) > 1 else np.array(budgets)


def plot(c: Comparison, curves: Mapping[str, Sequence[RunCurve]], out_dir: Path) -> None:
    """``solve_rate.png``: each method's mean curve with its band, over the generations
    all its seeds cover; ``difference.png``: each method minus the baseline with its
    band, over the generations both cover."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for index, (method, method_curves) in enumerate(sorted(curves.items())):
        for curve in method_curves:
            ax.plot(curve.generations, curve.rates, color=f"C{index}", alpha=0.25, linewidth=0.8)
        grid = _grid(default_budgets(method_curves, 2))
        band = [b for b in curve_band(method_curves, grid, c.confidence)]
        ax.plot(grid, [b.mean for b in band], color=f"C{index}", label=f"{method} ({len(method_curves)} seeds)")
        ax.fill_between(grid, [b.low for b in band], [b.high for b in band], color=f"C{index}", alpha=0.2)
    ax.set_xlabel("generations")
    ax.set_ylabel("cumulative solve rate")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "solve_rate.png", dpi=DPI)

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    ax.axhline(0.0, color="black", linewidth=0.8)
    for index, (method, method_curves) in enumerate(sorted(curves.items())):
        if method == c.baseline:
            continue
        grid = _grid(c.pair_budgets[method])
        diffs = difference_at(method_curves, curves[c.baseline], grid, c.confidence)
        points = [(g, d.interval) for g, d in zip(grid, diffs) if d is not None]
        ax.plot([g for g, _ in points], [i.mean for _, i in points], color=f"C{index}", label=method)
        ax.fill_between([g for g, _ in points], [i.low for _, i in points], [i.high for _, i in points],
                        color=f"C{index}", alpha=0.2)
    ax.set_xlabel("generations")
    ax.set_ylabel(f"solve rate minus {c.baseline}")
    if c.differences:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "difference.png", dpi=DPI)


def plot_figure1(c: Comparison, curves: Mapping[str, Sequence[RunCurve]], path: Path) -> None:
    """The paper's Figure 1 (right) layout: per method the mean curve with its band over
    seeds, the seed-mean curve's fitted scaling law (dashed, over the points it was fitted on
    and a little beyond) and its asymptote (dotted, labelled)."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for index, (method, method_curves) in enumerate(sorted(curves.items())):
        color = f"C{index}"
        # The range every seed covers: seeds of SGS start at different budgets (their
        # iteration 0 samples as many conjectures as the warm Conjecturer writes).
        grid = _grid(default_budgets(method_curves, 2))
        band = curve_band(method_curves, grid, c.confidence)
        ax.plot(grid, [100 * b.mean for b in band], color=color, label=method)
        ax.fill_between(grid, [100 * b.low for b in band], [100 * b.high for b in band], color=color, alpha=0.15)
        report = c.methods[method].fits.mean_curve if method in c.methods else None
        if report is not None and report.fit is not None:
            fit = report.fit
            fitted = np.linspace(fit.first_generations, 1.25 * fit.last_generations, 60)
            ax.plot(fitted, 100 * fit.predict(fitted), color=color, linestyle="--", linewidth=1)
            ax.axhline(100 * fit.asymptote, color=color, linestyle=":", linewidth=1)
            ax.annotate(f"{100 * fit.asymptote:.1f}%", (fitted[-1], 100 * fit.asymptote), color=color,
                        fontsize=8, xytext=(2, 2), textcoords="offset points")
    ax.plot([], [], color="gray", linestyle="--", label="fit")
    ax.plot([], [], color="gray", linestyle=":", label="asymptote")
    ax.set_xlabel("Number of generations")
    ax.set_ylabel("Cumulative solve rate (%)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)


def write(c: Comparison, curves: Mapping[str, Sequence[RunCurve]], runs: Mapping[str, Sequence[RunData]],
          out_dir: Path) -> Path:
    """The comparison's files in ``out_dir``; ``runs``: the runs by method."""
    out_dir.mkdir(parents=True, exist_ok=True)
    page = out_dir / "comparison.md"
    page.write_text(render_markdown(c), encoding="utf-8")
    (out_dir / "comparison.tex").write_text(
        latex_table(method_rows(c), "Cumulative solve rate per method (mean and interval over seeds).") + "\n\n"
        + latex_table(difference_rows(c), f"Difference to {c.baseline} at equal generation budgets.") + "\n",
        encoding="utf-8")
    (out_dir / "comparison.json").write_text(json.dumps(to_json(c), indent=2) + "\n", encoding="utf-8")
    plot(c, curves, out_dir)
    plot_figure1(c, curves, out_dir / "figure1.png")
    plot_diagnostics(runs, out_dir / "diagnostics.png")
    return page


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.compare",
                                     description="Compare the methods of one or more sweeps over seeds.")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a run directory or a directory of runs")
    parser.add_argument("--baseline", help=f"the experiment the others are compared to (default: {RL_BASELINE} "
                                           "when present, else the first name)")
    parser.add_argument("--budgets", type=int, default=DEFAULT_BUDGETS, metavar="N",
                        help="equal-generation budgets to compare at (default: %(default)s)")
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE, metavar="C",
                        help="coverage of the intervals (default: %(default)s)")
    parser.add_argument("--min-generations", type=int, default=DEFAULT_MIN_GENERATIONS, metavar="N",
                        help="the scaling-law fits leave out points below this (default: %(default)s)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="default: RUN_DIR/comparison of the first RUN_DIR")
    args = parser.parse_args(argv)
    if args.budgets < 1:
        parser.error(f"--budgets must be at least 1, got {args.budgets}")
    if not 0 < args.confidence < 1:
        parser.error(f"--confidence must lie in (0, 1), got {args.confidence}")
    if args.min_generations < 1:
        parser.error(f"--min-generations must be at least 1, got {args.min_generations}")
    try:
        runs = [read_run(path) for path in find_run_dirs(args.run_dirs)]
        comparison = compare(runs, baseline=args.baseline, budgets=args.budgets, confidence=args.confidence,
                             min_generations=args.min_generations)
    except (ReportError, CompareError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    curves = {method: [c for _, c in members] for method, members in comparison.members.items()}
    by_method = {method: [run for run, _ in members] for method, members in comparison.members.items()}
    page = write(comparison, curves, by_method, args.out or Path(args.run_dirs[0]) / "comparison")
    print("\n".join(markdown_table(method_rows(comparison))))
    print()
    print("\n".join(markdown_table(difference_rows(comparison))))
    print(f"\n{page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
