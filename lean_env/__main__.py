"""Entry point of ``python -m lean_env`` (see :mod:`lean_env.cli`)."""

import sys

from lean_env.cli import main

sys.exit(main())
