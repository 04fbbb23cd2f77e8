"""The run report command: ten PNG figures and one page for one or more runs.

    python -m tools.report RUN_DIR [RUN_DIR ...] [--out DIR] [--min-generations N] [--format md|html]

The code is :mod:`sgs.analysis.report` (see its docstring for the figures); this is
its command-line entry point.
"""

from sgs.analysis.report import main

if __name__ == "__main__":
    raise SystemExit(main())
