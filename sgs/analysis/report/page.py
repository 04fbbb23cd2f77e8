"""The report's page and command: the table of runs, the page in markdown or
HTML, :func:`report` (the library function ``python -m sgs`` calls when a run
ends) and :func:`main`, the command::

    python -m tools.report RUN_DIR [RUN_DIR ...] [--out DIR] [--min-generations N] [--format md|html]
"""

from __future__ import annotations

import argparse
import html
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sgs.analysis.report.figures import (
    Plot,
    plot_collapse,
    plot_conjecturer_reward,
    plot_entropy,
    plot_guide,
    plot_pass_at_k,
    plot_phase_seconds,
    plot_rejections,
    plot_solve_rate,
    plot_solve_rate_hist,
    plot_targets,
    plot_verification,
)
from sgs.analysis.report.runs import ReportError, RunData, find_run_dirs, read_run, run_labels
from sgs.analysis.report.series import SolveRateCurve, followup, kept_conjectures, solve_rate_curve
from sgs.analysis.scaling import DEFAULT_MIN_GENERATIONS

#: Exit status for a path that is not a run (the same as argparse's usage errors).
EXIT_NOT_A_RUN = 2


def _summary_rows(runs: Sequence[RunData], labels: Sequence[str], curves: Sequence[SolveRateCurve]
                  ) -> list[list[str]]:
    """The page's table of runs: a header row, then one row per run."""
    header = ["run", "directory", "iterations", "generations", "generations count", "cumulative solve rate",
              "held-out pass@k by policy version", "scaling fit"]
    rows = [header]
    for run, label, curve in zip(runs, labels, curves):
        last = run.metrics[-1] if run.metrics else {}
        held_out = " → ".join(f"v{result.policy_version}: {result.pass_at_k:.3f}" for result in run.held_out) or "—"
        if curve.fit is not None:
            fit = f"A = {curve.fit.asymptote:.3f}, C_mid = {curve.fit.c_mid:.3g}, B = {curve.fit.exponent:.2f}"
            if curve.asymptote_spread is not None:
                fit += f" (A over random halves: {curve.asymptote_spread.p5:.3f}–{curve.asymptote_spread.p95:.3f})"
        else:
            fit = f"no fit: {curve.no_fit_reason}"
        rate = ("—" if not curve.rates else
                f"{curve.rates[0]:.3f} → {curve.rates[-1]:.3f}" if len(curve.rates) > 1 else f"{curve.rates[0]:.3f}")
        rows.append([label, str(run.run_dir), str(len(run.metrics)), f"{last.get('generations', 0):,}",
                     f"every Conjecturer and Solver sample: {run.generation_count}", rate, held_out, fit])
    return rows


@dataclass(frozen=True)
class Table:
    """A table of the page below the figures."""

    title: str
    caption: str
    rows: list[list[str]]
    """The header row, then the body."""


def markdown_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Lines of a markdown table (header row first); ``|`` in a cell is escaped."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    return (["| " + " | ".join(cell(c) for c in rows[0]) + " |", "|" + "---|" * len(rows[0])]
            + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows[1:]])


def render_markdown(rows: Sequence[Sequence[str]], plots: Sequence[Plot], tables: Sequence[Table],
                    reading_notes: Sequence[str]) -> str:
    lines = ["# SGS run report", ""] + markdown_table(rows)
    for number, plot in enumerate(plots, 1):
        lines += ["", f"## {number}. {plot.title}", "", f"![{plot.title}]({plot.file})", "", plot.caption]
        if plot.notes:
            lines += ["", "Missing from this figure:", ""] + [f"- {note}" for note in plot.notes]
    for table in tables:
        lines += ["", f"## {table.title}", "", table.caption, ""] + markdown_table(table.rows)
    if reading_notes:
        lines += ["", "## Reading notes", ""] + [f"- {note}" for note in reading_notes]
    return "\n".join(lines) + "\n"


def render_html(rows: Sequence[Sequence[str]], plots: Sequence[Plot], tables: Sequence[Table],
                reading_notes: Sequence[str]) -> str:
    e = html.escape

    def html_table(table_rows: Sequence[Sequence[str]]) -> list[str]:
        return (["<table>", "<tr>" + "".join(f"<th>{e(c)}</th>" for c in table_rows[0]) + "</tr>"]
                + ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in table_rows[1:]]
                + ["</table>"])

    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>SGS run report</title>',
             "<style>body{font-family:sans-serif;max-width:1400px;margin:auto;padding:1em}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
             "img{max-width:100%}.notes{color:#555}</style></head><body>", "<h1>SGS run report</h1>"]
    parts += html_table(rows)
    for number, plot in enumerate(plots, 1):
        parts += [f"<h2>{number}. {e(plot.title)}</h2>", f'<img src="{e(plot.file)}" alt="{e(plot.title)}">',
                  f"<p>{e(plot.caption)}</p>"]
        if plot.notes:
            parts.append('<div class="notes">Missing from this figure:<ul>'
                         + "".join(f"<li>{e(note)}</li>" for note in plot.notes) + "</ul></div>")
    for table in tables:
        parts += [f"<h2>{e(table.title)}</h2>", f"<p>{e(table.caption)}</p>"] + html_table(table.rows)
    if reading_notes:
        parts += ["<h2>Reading notes</h2>", "<ul>" + "".join(f"<li>{e(n)}</li>" for n in reading_notes) + "</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


#: Rows of the mechanism table shown per run; the rest is counted in its caption.
MAX_MECHANISM_ROWS = 60


def mechanism_table(runs: Sequence[RunData], labels: Sequence[str]) -> Table | None:
    """Each conjecture the Conjecturer was trained on, its parent target and whether
    that target was solved afterwards; None when no run trained on any."""
    rows = [["run", "iteration", "conjecture", "parent target", "target first solved"]]
    summaries, left_out = [], 0
    for run, label in zip(runs, labels):
        kept = kept_conjectures(run)
        if not kept:
            continue
        follow = followup(run)
        summaries.append(f"{label}: {len(follow.solved_after)} of the {len(follow.trained_targets)} targets "
                         f"trained on through a conjecture were solved afterwards ({follow.share:.0%})")
        for k in kept[:MAX_MECHANISM_ROWS]:
            solved = ("not yet" if k.target_solved_at is None else
                      f"iteration {k.target_solved_at}" + (" (after)" if k.target_solved_at > k.iteration else ""))
            rows.append([label, str(k.iteration), k.conjecture_id, k.target_id, solved])
        left_out += max(0, len(kept) - MAX_MECHANISM_ROWS)
    if not summaries:
        return None
    caption = ("The self-guided mechanism: a conjecture is written for an unsolved target; when the "
               "Conjecturer is trained on it, does the target fall later? " + "; ".join(summaries) + "."
               + (f" ({left_out} more rows left out.)" if left_out else "")
               + " `python -m tools.compare` sets this against the RL baseline on the same targets.")
    return Table("The Conjecturer's mechanism", caption, rows)


FORMATS = {"md": render_markdown, "html": render_html}


def report(run_dirs: Sequence[str | Path], out_dir: str | Path, *, min_generations: int = DEFAULT_MIN_GENERATIONS,
           page_format: str = "md") -> Path:
    """Write the figures and the page for ``run_dirs`` (runs or sweep
    directories) into ``out_dir``; return the page's path.  Raises
    ReportError when a path is not a run directory and holds none."""
    if page_format not in FORMATS:
        raise ValueError(f"page_format must be one of {sorted(FORMATS)}, got {page_format!r}")
    runs = [read_run(run_dir) for run_dir in find_run_dirs(run_dirs)]
    labels = run_labels(runs)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    curves = [solve_rate_curve(run.metrics, min_generations) for run in runs]
    plots = [
        plot_solve_rate(runs, labels, curves, out_dir, min_generations),
        plot_pass_at_k(runs, labels, out_dir),
        plot_conjecturer_reward(runs, labels, out_dir),
        plot_guide(runs, labels, out_dir),
        plot_entropy(runs, labels, out_dir),
        plot_solve_rate_hist(runs, labels, out_dir),
        plot_collapse(runs, labels, out_dir),
        plot_verification(runs, labels, out_dir),
        plot_rejections(runs, labels, out_dir),
        plot_phase_seconds(runs, labels, out_dir),
        plot_targets(runs, labels, out_dir),
    ]
    reading_notes = [f"{label}: {note}" for run, label in zip(runs, labels) for note in run.notes]
    tables = [table for table in (mechanism_table(runs, labels),) if table is not None]
    page = out_dir / f"report.{page_format}"
    page.write_text(FORMATS[page_format](_summary_rows(runs, labels, curves), plots, tables, reading_notes),
                    encoding="utf-8")
    return page


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.report",
                                     description="Plots and one page about one or more SGS runs.")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="a run directory, or a directory of runs (a multirun sweep)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="where to write the page and the figures (default: RUN_DIR/report of the first RUN_DIR)")
    parser.add_argument("--min-generations", type=int, default=DEFAULT_MIN_GENERATIONS, metavar="N",
                        help="the scaling-law fit leaves out points below this many generations (default: %(default)s)")
    parser.add_argument("--format", choices=sorted(FORMATS), default="md", help="page format (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.min_generations < 1:
        parser.error(f"--min-generations must be at least 1, got {args.min_generations}")
    try:
        page = report(args.run_dirs, args.out or Path(args.run_dirs[0]) / "report",
                      min_generations=args.min_generations, page_format=args.format)
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_NOT_A_RUN
    print(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
