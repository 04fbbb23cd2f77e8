"""The report's figures: one function per PNG file, each returning its
:class:`Plot` (file, title, caption, and why a panel or run is missing).
The numbers come from :mod:`sgs.analysis.report.series`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from sgs.analysis.metrics import REJECTED_PREFIX
from sgs.analysis.report.runs import BENCHMARK_SUMMARY_FILE, HELD_OUT_FILE, BenchmarkEval, RunData
from sgs.analysis.report.series import (
    TOP_REASONS,
    SolveRateCurve,
    guide_parse_failure_rate,
    guide_reviews,
    guide_score_counts,
    metric_group,
    metric_series,
    rejection_counts,
    solve_rate_histogram,
    target_timeline,
)
from sgs.method.roles.guide import SCORE_TAGS

#: Resolution of the PNG files.
DPI = 110
#: Colours of the verification outcomes (keys of ``verification/<outcome>``).
OUTCOME_COLOURS = {"valid": "tab:green", "invalid": "tab:red", "timeout": "tab:orange",
                   "system_error": "tab:purple", "no_proof": "tab:gray"}


@dataclass(frozen=True)
class Plot:
    """One figure of the report."""

    file: str
    """PNG file name, in the report's directory."""
    title: str
    """Heading on the page."""
    caption: str
    """What the figure shows and how to read it."""
    notes: list[str]
    """Why a panel or a run is missing from it, one sentence each."""


def _colour(index: int) -> str:
    return f"C{index % 10}"


def _empty(ax, note: str) -> None:
    """An empty panel that says why it is empty."""
    ax.text(0.5, 0.5, note, ha="center", va="center", wrap=True, fontsize=9, color="0.35",
            transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _iteration_axis(ax) -> None:
    ax.set_xlabel("iteration")
    # min_n_ticks=1: a one-iteration run gets the tick 0, not fractions of an iteration.
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def _save(fig: Figure, out_dir: Path, name: str) -> str:
    fig.savefig(out_dir / name, dpi=DPI)
    return name


def _line_panels(runs: Sequence[RunData], labels: Sequence[str], panels: Sequence[tuple[str, str]],
                 out_dir: Path, name: str, title: str, caption: str, *, width: float = 4.6) -> Plot:
    """The figure ``name``: one panel per ``(metric key, panel title)``, one
    line per run over the iterations, with a note for each run and metric
    with no value."""
    fig = Figure(figsize=(width * len(panels), 3.6), layout="constrained")
    notes = []
    for ax, (key, panel_title) in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
        drawn = False
        for index, (run, label) in enumerate(zip(runs, labels)):
            iterations, values = metric_series(run.metrics, key)
            if not values:
                notes.append(f"{label}: no `{key}` values")
                continue
            ax.plot(iterations, values, marker="o", color=_colour(index), label=label)
            drawn = True
        ax.set_title(panel_title, fontsize=10)
        if drawn:
            _iteration_axis(ax)
            ax.legend(fontsize=8)
        else:
            _empty(ax, f"no run has {key}")
    return Plot(_save(fig, out_dir, name), title, caption, notes)


def plot_solve_rate(runs: Sequence[RunData], labels: Sequence[str], curves: Sequence[SolveRateCurve],
                    out_dir: Path, min_generations: int) -> Plot:
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.subplots()
    notes = []
    for index, (label, curve) in enumerate(zip(labels, curves)):
        colour = _colour(index)
        if not curve.generations:
            notes.append(f"{label}: no finished iteration yet")
            continue
        ax.plot(curve.generations, curve.rates, marker="o", color=colour, label=label)
        if curve.fit is None:
            notes.append(f"{label}: no fit: {curve.no_fit_reason}")
            # The refusal goes in the legend too, so the figure explains itself off the page.
            ax.plot([], [], " ", label=textwrap.fill(f"no fit: {curve.no_fit_reason}", 60,
                                                     initial_indent="  ", subsequent_indent="  "))
            continue
        fit = curve.fit
        start = min(min(curve.generations), fit.first_generations)
        grid = np.geomspace(max(start, 1), fit.last_generations * 2, 200)
        ax.plot(grid, fit.predict(grid), color=colour, linewidth=1,
                label=f"  fit: A={fit.asymptote:.3f}, C_mid={fit.c_mid:.3g}, B={fit.exponent:.2f}")
        ax.axhline(fit.asymptote, color=colour, linestyle="--", linewidth=1)
        if curve.asymptote_spread is not None:
            ax.axhspan(curve.asymptote_spread.p5, curve.asymptote_spread.p95, color=colour, alpha=0.08)
    if ax.lines:
        ax.set_xscale("log")
        if any(curve.generations and max(curve.generations) >= min_generations for curve in curves):
            ax.axvline(min_generations, color="0.6", linestyle=":", linewidth=1)
        ax.set_xlabel("generations (Solver and Conjecturer samples, cumulative)")
        ax.set_ylabel("cumulative solve rate (training targets)")
        ax.legend(fontsize=8, loc="lower right")
    else:
        _empty(ax, "no run has a finished iteration")
    caption = ("Share of the training targets solved at least once, against cumulative generations (log scale). "
               "Solid thin line: the scaling-law fit R(C) = R0 + (A − R0)/(1 + (C_mid/C)^B) "
               f"on the points at or above {min_generations:,} generations (dotted line), re-centred there as "
               "in the paper (C counted from the first point past the cut, R0 the rate there); dashed line: its "
               "asymptote A; shaded band: 5th–95th percentile of A over 100 random-half refits.")
    return Plot(_save(fig, out_dir, "solve_rate.png"), "Cumulative solve rate against generations", caption, notes)


def plot_pass_at_k(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.subplots()
    notes = []
    for index, (run, label) in enumerate(zip(runs, labels)):
        iterations, values = metric_series(run.metrics, "pass_at_k")
        if values:
            ax.plot(iterations, values, marker="o", color=_colour(index),
                    label=f"{label}: training targets, pass@{run.k}")
        else:
            notes.append(f"{label}: no finished iteration yet")
        if run.held_out:
            ax.plot([e.policy_version for e in run.held_out], [e.pass_at_k for e in run.held_out], marker="s",
                    linestyle="--", color=_colour(index),
                    label=f"{label}: held-out pass@{run.held_out[0].k} ({run.held_out[0].targets} targets)")
        else:
            notes.append(f"{label}: no held-out evaluation ({HELD_OUT_FILE} absent or empty)")
        series: dict[tuple[str, int], list[BenchmarkEval]] = {}
        for result in run.benchmarks:
            if result.policy_version is None:
                notes.append(f"{label}: {result.benchmark} pass@{result.k} = {result.pass_at_k:.3f} of weights whose "
                             "policy version the evaluation could not tell: it has no place on the iteration axis")
            else:
                series.setdefault((result.benchmark, result.k), []).append(result)
        for number, ((benchmark, k), results) in enumerate(series.items()):
            below = [r.pass_at_k - r.ci_low for r in results]
            above = [r.ci_high - r.pass_at_k for r in results]
            ax.errorbar([r.policy_version for r in results], [r.pass_at_k for r in results], yerr=[below, above],
                        marker="^vD<>ph"[number % 7], linestyle=":", capsize=3, color=_colour(index),
                        label=f"{label}: {benchmark} pass@{k}")
    if ax.lines:
        _iteration_axis(ax)
        ax.set_ylabel("pass@k")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
    else:
        _empty(ax, "no pass@k measured in any run")
    caption = ("Solid: share of the training targets sampled in each iteration (its batch; under expert iteration "
               "only the targets it sampled) with a verified proof among their k samples. "
               "Dashed squares: pass@k on the held-out targets of the Solver at policy version v, drawn at "
               "iteration v, the iteration those weights sample (v = 0: before self-play; the last point: the "
               "final weights).  Dotted, with confidence intervals: benchmark evaluations found in the run "
               f"directory ({BENCHMARK_SUMMARY_FILE} of `python -m sgs.evaluate`), at their policy version.")
    return Plot(_save(fig, out_dir, "pass_at_k.png"), "pass@k per iteration", caption, notes)


def plot_conjecturer_reward(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    caption = ("The Conjecturer's reward R = R_guide · R_solve, averaged over every attempted conjecture (zeros "
               "included), and its two factors: the solve-rate term R_solve = 1 − s for kept conjectures "
               "(0 for the others) and the Guide's score over the reviewed ones.  A run without a Guide has "
               "no R_guide.")
    return _line_panels(runs, labels, [("mean_conjecturer_reward", "Conjecturer reward R (mean)"),
                                        ("mean_r_solve", "R_solve = 1 − s (kept; 0 otherwise)"),
                                        ("mean_guide_score", "R_guide (mean over reviews)")],
                        out_dir, "conjecturer_reward.png", "Conjecturer reward and its components", caption)


def plot_guide(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    fig = Figure(figsize=(17, 3.8), layout="constrained")
    axes = fig.subplots(1, len(SCORE_TAGS) + 1)
    notes = []
    reviewed = [(i, run, label) for i, (run, label) in enumerate(zip(runs, labels)) if guide_reviews(run.scores)]
    for run, label in zip(runs, labels):
        if not guide_reviews(run.scores):
            why = "its experiment has no Guide" if not run.uses_guide else "no finished review phase"
            notes.append(f"{label}: no Guide reviews ({why})")
    width = 0.8 / max(len(reviewed), 1)
    for ax, sub_score in zip(axes, SCORE_TAGS):
        ax.set_title(f"{sub_score} (parsed reviews)", fontsize=10)
        if not reviewed:
            _empty(ax, "no Guide reviews")
            continue
        for slot, (index, run, label) in enumerate(reviewed):
            counts = guide_score_counts(run.scores, sub_score)
            total = sum(counts.values())
            shares = [n / total if total else 0.0 for n in counts.values()]
            ax.bar(np.array(list(counts)) + (slot - (len(reviewed) - 1) / 2) * width, shares, width,
                   color=_colour(index), label=label)
        ax.set_xlabel("score")
        ax.set_ylabel("share of reviews")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=8)
    ax = axes[-1]
    ax.set_title("Guide parse-failure rate", fontsize=10)
    for index, run, label in reviewed:
        iterations, rates = guide_parse_failure_rate(run.scores)
        ax.plot(iterations, rates, marker="o", color=_colour(index), label=label)
    if reviewed:
        _iteration_axis(ax)
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
    else:
        _empty(ax, "no Guide reviews")
    caption = ("Distribution of the Guide's three sub-scores over all parsed reviews of the run (relevance 0–5, "
               "redundancy 0/1, conclusion complexity 0–4), and per iteration the share of reviews whose "
               "scores could not be parsed (their R_guide is then the batch mean).")
    return Plot(_save(fig, out_dir, "guide.png"), "Guide sub-scores and parse failures", caption, notes)


def plot_entropy(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    caption = ("Mean token entropy of each role's samples per iteration, over the sampler's top-10 "
               "log-probabilities renormalised (nats).  A fall towards 0 means the policy is collapsing.")
    return _line_panels(runs, labels, [("solver_entropy", "Solver token entropy"),
                                        ("conjecturer_entropy", "Conjecturer token entropy")],
                        out_dir, "entropy.png", "Solver and Conjecturer entropy", caption)


def plot_solve_rate_hist(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    kinds = ("target", "conjecture")
    fig = Figure(figsize=(11, 3.2 * len(runs) + 0.4), layout="constrained")
    axes = fig.subplots(len(runs), len(kinds), squeeze=False)
    notes = []
    for row, (run, label) in zip(axes, zip(runs, labels)):
        for ax, kind in zip(row, kinds):
            hist = solve_rate_histogram(run.metrics, kind)
            ax.set_title(f"{label}: {kind}s", fontsize=10)
            if not hist.iterations or not hist.counts.any():
                notes.append(f"{label}: no {kind} attempted")
                _empty(ax, f"no {kind} attempted")
                continue
            image = ax.imshow(hist.counts, origin="lower", aspect="auto", cmap="viridis",
                              extent=(hist.iterations[0] - 0.5, hist.iterations[-1] + 0.5,
                                      hist.buckets[0] - 0.5, hist.buckets[-1] + 0.5))
            if hist.counts.size <= 200:  # small enough to read the numbers
                for (b, i), n in np.ndenumerate(hist.counts):
                    ax.text(hist.iterations[i], hist.buckets[b], str(n), ha="center", va="center", fontsize=7,
                            color="white" if n < hist.counts.max() / 2 else "black")
            fig.colorbar(image, ax=ax, label="problems", ticks=MaxNLocator(integer=True))
            _iteration_axis(ax)
            ax.set_ylabel(f"valid attempts out of {hist.buckets[-1]}")
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    caption = ("Per iteration, how many problems got j valid attempts out of k (targets left, conjectures "
               "right).  Problems with only system errors are not counted.  Mass at j = 0 and j = k carries "
               "no learning signal for REINFORCE½; conjectures are kept for reward when 0 < s ≤ the p70.")
    return Plot(_save(fig, out_dir, "solve_rate_hist.png"), "Solve-rate histogram over iterations", caption, notes)


def plot_collapse(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    caption = ("The paper's collapse signals over the conjectures that were attempted: a Conjecturer that games "
               "its reward drifts to disjunctive conclusions (easy to prove one side of) and to long, "
               "padded conclusions.")
    return _line_panels(runs, labels, [("disjunctive_share", "share of conjectures with a disjunctive conclusion"),
                                        ("mean_conclusion_length", "mean conclusion length")],
                        out_dir, "collapse.png", "Conjecture collapse signals", caption, width=5.2)


def _stacked_bars(runs: Sequence[RunData], labels: Sequence[str], prefix: str, colours: Mapping[str, str],
                  ylabel: str, out_dir: Path, name: str, missing_why: str,
                  group_of: Callable[[Sequence[Mapping[str, Any]]], dict[str, list[float | None]]] | None = None
                  ) -> list[str]:
    """Per run one panel of bars per iteration stacking the ``<prefix>/<name>``
    metrics (or the series ``group_of`` makes of a run's metrics); returns notes
    for runs without any, and for missing values."""
    fig = Figure(figsize=(max(6.0, 5.0 * len(runs)), 4.2), layout="constrained")
    notes = []
    for ax, (run, label) in zip(fig.subplots(1, len(runs), squeeze=False)[0], zip(runs, labels)):
        ax.set_title(label, fontsize=10)
        group = metric_group(run.metrics, prefix) if group_of is None else group_of(run.metrics)
        if not group:
            notes.append(f"{label}: no `{prefix}/…` metrics")
            _empty(ax, f"no {prefix} metrics")
            continue
        iterations = [m["iteration"] for m in run.metrics]
        bottom = np.zeros(len(iterations))
        for part, values in group.items():
            missing = [i for i, v in zip(iterations, values) if v is None]
            if missing:
                notes.append(f"{label}: no `{prefix}/{part}` in iteration(s) {_ranges(missing)} ({missing_why})")
            heights = np.array([0.0 if v is None else float(v) for v in values])
            ax.bar(iterations, heights, bottom=bottom, color=colours.get(part), label=part)
            bottom += heights
        _iteration_axis(ax)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    _save(fig, out_dir, name)
    return notes


def _ranges(numbers: Sequence[int]) -> str:
    """``0-2, 5`` for [0, 1, 2, 5]."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def plot_verification(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    notes = _stacked_bars(runs, labels, "verification", OUTCOME_COLOURS, "attempts", out_dir, "verification.png",
                          "not recorded by that iteration")
    caption = ("Solver attempts per iteration by outcome: valid, invalid, timeout, system error (an "
               "infrastructure failure, never training signal; must stay under 1%) and no proof (nothing "
               "could be extracted from the output).")
    return Plot("verification.png", "Verification outcomes", caption, notes)


def plot_rejections(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    reasons = list(dict.fromkeys(r for run in runs for r in rejection_counts(run.metrics)))
    colours = {reason: _colour(index) for index, reason in enumerate(reasons)}
    notes = _stacked_bars(runs, labels, REJECTED_PREFIX, colours, "rejected proofs", out_dir, "rejections.png",
                          "", group_of=rejection_counts)
    for run, label in zip(runs, labels):
        disagreements = sum(m.get("verifier/audit_disagreements") or 0 for m in run.metrics)
        audited = sum(m.get("verifier/audited") or 0 for m in run.metrics)
        if audited:
            notes.append(f"{label}: the audit re-checked {audited} valid proofs and disagreed on {disagreements}")
    caption = (f"Proofs the verifier rejected in each iteration, by its reason (the {TOP_REASONS} most frequent "
               "over the run; the rest as other). Reward hacking shows as a reason that rises: the Solver "
               "learning a shape the checks refuse. `audit_disagreement` counts proofs accepted by the first "
               "check and rejected by the independent audit (their reward is withheld).")
    return Plot("rejections.png", "Rejection reasons", caption, notes)


def plot_phase_seconds(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    phases = list(dict.fromkeys(p for run in runs for p in metric_group(run.metrics, "phase_seconds")))
    colours = {phase: _colour(index) for index, phase in enumerate(phases)}
    notes = _stacked_bars(runs, labels, "phase_seconds", colours, "seconds", out_dir, "phase_seconds.png",
                          "a phase finished before the run was resumed is not timed")
    caption = "Wall time of each phase of each iteration, stacked."
    return Plot("phase_seconds.png", "Time per phase", caption, notes)


def plot_targets(runs: Sequence[RunData], labels: Sequence[str], out_dir: Path) -> Plot:
    timelines = [target_timeline(run) for run in runs]
    rows = max([len(t.target_ids) for t in timelines] + [1])
    fig = Figure(figsize=(max(6.0, 4.5 * len(runs)), min(30.0, 3.0 + 0.12 * rows)), layout="constrained")
    notes = []
    trained_colour, solved_colour = np.array([0.13, 0.4, 0.75]), np.array([0.78, 0.92, 0.78])
    for ax, (run, label, timeline) in zip(fig.subplots(1, len(runs), squeeze=False)[0],
                                          zip(runs, labels, timelines)):
        ax.set_title(label, fontsize=10)
        if not timeline.target_ids or not timeline.iterations:
            why = "no training targets" if not timeline.target_ids else "no finished iteration"
            notes.append(f"{label}: {why}")
            _empty(ax, why)
            continue
        if not run.trains_conjecturer:
            notes.append(f"{label}: the Conjecturer is not trained in this experiment; only solves are shown")
        elif not timeline.trained.any():
            notes.append(f"{label}: no conjecture was trained on")
        # White: nothing; green: solved by then; blue, darker for more conjectures: trained on.
        image = np.ones((len(timeline.target_ids), len(timeline.iterations), 3))
        for r, solved in enumerate(timeline.solved_at):
            if solved is not None:
                image[r, solved:] = solved_colour
        shade = timeline.trained / max(timeline.trained.max(), 1)
        blue = 1 - (0.35 + 0.65 * shade[..., None]) * (1 - trained_colour)
        image = np.where(timeline.trained[..., None] > 0, blue, image)
        ax.imshow(image, aspect="auto", interpolation="nearest",
                  extent=(-0.5, len(timeline.iterations) - 0.5, len(timeline.target_ids) - 0.5, -0.5))
        first = [(s, r) for r, s in enumerate(timeline.solved_at) if s is not None]
        if first:
            ax.scatter(*zip(*first), marker="*", s=30 if rows <= 80 else 12, color="black", zorder=3)
        _iteration_axis(ax)
        if len(timeline.target_ids) <= 60:
            ax.set_yticks(range(len(timeline.target_ids)), timeline.target_ids, fontsize=6)
        else:
            ax.set_yticks([])
        solved = sum(s is not None for s in timeline.solved_at)
        ax.set_title(f"{label}: {solved} of {len(timeline.target_ids)} training targets solved", fontsize=10)
        ax.set_ylabel("training target")
    fig.legend(handles=[Patch(color=trained_colour, label="its conjectures trained on"),
                        Patch(color=solved_colour, label="solved"),
                        Line2D([], [], marker="*", color="black", linestyle="", label="first solved")],
               loc="outside lower center", ncols=3, fontsize=8)
    caption = ("One row per training target, one column per iteration (the paper's Figure 5).  Blue: the "
               "Conjecturer was trained on conjectures conditioned on this target in this iteration (kept by "
               "selection or given a weight; darker: more of them); star: the iteration of the target's first "
               "verified proof; green: solved.  Rows: solved targets by when they were solved, then unsolved ones.")
    return Plot(_save(fig, out_dir, "targets.png"), "Per-target view", caption, notes)
