"""The report of one or more SGS runs: eleven PNG figures and one page.

    python -m tools.report RUN_DIR [RUN_DIR ...] [--out DIR] [--min-generations N] [--format md|html]

(``tools/report.py`` is the command; the code lives here, in the package,
so that ``python -m sgs`` writes a report from any working directory.)

A RUN_DIR is a run directory, or a directory of runs such as a Hydra
multirun sweep (every directory below it with a ``metrics.jsonl``).  All runs
share each figure, one colour per run, labelled by experiment name, so an
ablation sweep reads as one comparison.  The page (``report.md`` or
``report.html``) goes to ``--out`` (default: ``report/`` in the first
RUN_DIR) with the figures beside it.  :func:`report` is the same as a library
function; ``python -m sgs`` calls it when a run ends.

The figures:

 1. ``solve_rate.png``        cumulative solve rate against generations, with the scaling-law fit
                              (:mod:`sgs.analysis.scaling`) and its asymptote, or why there is no fit;
 2. ``pass_at_k.png``         pass@k on the training targets each iteration sampled, held-out and benchmark pass@k;
 3. ``conjecturer_reward.png`` the Conjecturer's reward and its two factors;
 4. ``guide.png``             Guide sub-score distributions and parse-failure rate;
 5. ``entropy.png``           Solver and Conjecturer token entropy;
 6. ``solve_rate_hist.png``   problems per solve-rate bucket, iteration by bucket;
 7. ``collapse.png``          disjunctive conclusions and conclusion length (the collapse signals);
 8. ``verification.png``      verification outcomes per iteration;
 9. ``rejections.png``        the verifier's rejection reasons per iteration;
10. ``phase_seconds.png``     wall time per phase per iteration;
11. ``targets.png``           per target and iteration: conjectures trained on, and when it was
                              first solved (the paper's Figure 5).

The modules, in reading order: :mod:`~sgs.analysis.report.runs` (which
directories are runs, and reading one through the store's read-only
:class:`~sgs.state.run_reader.RunReader`: no lock, no write, damage noted on
the page), :mod:`~sgs.analysis.report.series` (the numbers each figure shows,
pure), :mod:`~sgs.analysis.report.figures` (drawing them) and
:mod:`~sgs.analysis.report.page` (the page, :func:`report` and the command).
"""

from sgs.analysis.report.page import main, report
from sgs.analysis.report.runs import ReportError, read_run

__all__ = ["ReportError", "main", "read_run", "report"]
