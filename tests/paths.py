"""Where things are, for every test wherever it sits under ``tests/``: the
checkout's root, the tests' own folder and their shared data.  A test names
these instead of counting ``parents`` of its own ``__file__``, which changes
with the folder it is in."""

from __future__ import annotations

from pathlib import Path

#: ``tests/``
TESTS = Path(__file__).resolve().parent
#: the checkout's root (``tests/``'s parent)
REPO = TESTS.parent
#: the shared test data: ``tests/data/``
DATA = TESTS / "data"
#: the Lean test doubles and their data: ``tests/lean/``
LEAN = TESTS / "lean"
#: what CI keeps beside the checkout (recorded transcripts, the D3k targets, Rocq projects)
SHARED = REPO.parent / "shared"
