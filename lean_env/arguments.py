"""Argument types shared by the command lines of ``lean_env`` and ``sgs``.

``argparse`` turns a type's ``ArgumentTypeError`` into its usage error
(exit 2, naming the flag and this message), so a check made here is made
before anything starts.
"""

from __future__ import annotations

import argparse
import math


def positive_float(text: str) -> float:
    """A positive, finite number: a time limit, a budget or a rate.  ``float``
    alone reads ``inf`` and ``nan``; an endless time limit would leave a hung
    prover or worker running for ever."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive finite number")
    return value
