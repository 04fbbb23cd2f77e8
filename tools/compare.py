"""The sweep comparison command: methods over seeds at equal generation budgets.

    python -m tools.compare RUN_DIR [RUN_DIR ...] [--baseline NAME] [--budgets N] [--out DIR]

The code is :mod:`sgs.analysis.compare` (see its docstring for what it writes);
this is its command-line entry point.
"""

from sgs.analysis.compare import main

if __name__ == "__main__":
    raise SystemExit(main())
