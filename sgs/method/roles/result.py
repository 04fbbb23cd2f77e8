"""What an extractor returns, and how the loop counts the outcomes.

Model outputs are untrusted text.  Every extractor returns an
:class:`Extraction`: either the extracted value or one :class:`Failure`
reason, never an exception.  :class:`FailureCounter` tallies the outcomes per
role so that every failure is visible in the metrics.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: Longest model output the extractors look at.  A Solver sample is at most
#: 8,192 tokens (a few tens of thousands of characters); anything much longer
#: is garbage, and refusing it keeps every extractor's work bounded.
MAX_OUTPUT_CHARS = 100_000


class Role(str, enum.Enum):
    """The three roles one base model plays (SPEC §1.4)."""

    SOLVER = "solver"
    CONJECTURER = "conjecturer"
    GUIDE = "guide"


class Failure(str, enum.Enum):
    """Why nothing could be extracted from a model output.  The values are the
    strings stored in records and used as metric keys."""

    # any role
    NOT_TEXT = "not_text"  # the output is not a str at all
    TOO_LONG = "too_long"  # longer than MAX_OUTPUT_CHARS
    BAD_CHARACTERS = "bad_characters"  # extracted text holds NUL or a lone surrogate
    # code blocks (Solver, Conjecturer)
    NO_CODE_BLOCK = "no_code_block"
    SEVERAL_BLOCKS = "several_blocks"
    UNCLOSED_BLOCK = "unclosed_block"
    # Solver
    MISSING_BY = "missing_by"  # Lean: no ':= by' in the block
    MISSING_PROOF = "missing_proof"  # Rocq: no 'Proof.' in the block
    MISSING_QED = "missing_qed"  # Rocq: no 'Qed.' after 'Proof.'
    EMPTY_BODY = "empty_body"
    # Conjecturer
    SEVERAL_BY = "several_by"  # Lean: more than one ':= by' in the block
    NOT_A_THEOREM = "not_a_theorem"  # no 'theorem ... : ...' statement
    MISSING_NAME = "missing_name"  # 'theorem' not followed by a name
    SEVERAL_STATEMENTS = "several_statements"  # another command besides the statement
    TRAILING_TEXT = "trailing_text"  # a proof or other text after the statement
    # Guide
    MISSING_TAG = "missing_tag"
    NOT_AN_INTEGER = "not_an_integer"
    OUT_OF_RANGE = "out_of_range"


@dataclass(frozen=True)
class Extraction(Generic[T]):
    """The outcome of extracting something from one model output: exactly one
    of ``value`` and ``failure`` is set.  ``detail`` says more, for humans."""

    value: T | None = None
    failure: Failure | None = None
    detail: str = ""

    @classmethod
    def success(cls, value: T) -> "Extraction[T]":
        return cls(value=value)

    @classmethod
    def fail(cls, failure: Failure, detail: str = "") -> "Extraction[T]":
        return cls(failure=failure, detail=detail)

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def outcome(self) -> str:
        """``"ok"`` or the failure's value: the key the counter uses."""
        return "ok" if self.failure is None else self.failure.value


def screen_output(text: Any) -> Failure | None:
    """The failure that makes ``text`` unreadable before any parsing, if any."""
    if not isinstance(text, str):
        return Failure.NOT_TEXT
    if len(text) > MAX_OUTPUT_CHARS:
        return Failure.TOO_LONG
    return None


def has_bad_characters(text: str) -> bool:
    """True when ``text`` cannot travel to a prover or a log as UTF-8: it holds
    a NUL (which ends C strings and breaks prover I/O) or a lone surrogate
    (which cannot be encoded at all)."""
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class FailureCounter:
    """Extraction outcomes per role: ``ok`` and every :class:`Failure`.

    Keys of :meth:`as_dict` are ``"<role>/<outcome>"``, e.g.
    ``"conjecturer/several_by"``, ready to be logged as metrics.
    """

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()

    def add(self, role: Role | str, result: Extraction) -> None:
        """Count one extraction result for ``role``."""
        self._counts[Role(role).value, result.outcome] += 1

    def update(self, other: "FailureCounter") -> None:
        """Add every count of ``other`` (e.g. from another worker)."""
        self._counts.update(other._counts)

    def count(self, role: Role | str, outcome: Failure | str) -> int:
        """How many results of ``role`` had ``outcome`` (a Failure or ``"ok"``)."""
        key = outcome.value if isinstance(outcome, Failure) else outcome
        return self._counts[Role(role).value, key]

    def total(self, role: Role | str) -> int:
        """How many results of ``role`` were counted."""
        name = Role(role).value
        return sum(n for (r, _), n in self._counts.items() if r == name)

    def failures(self, role: Role | str) -> int:
        """How many results of ``role`` were failures."""
        return self.total(role) - self.count(role, "ok")

    def as_dict(self) -> dict[str, int]:
        return {f"{role}/{outcome}": n for (role, outcome), n in sorted(self._counts.items())}
