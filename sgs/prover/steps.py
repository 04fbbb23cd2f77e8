"""Tactic steps read from the corpus, in the form every learner here uses.

The corpus (:mod:`sgs.corpus`) keeps each step's goals exactly as ``coqtop``
printed them, with a header line such as ``1 goal (ID 8)`` whose counter
depends on the session's history.  A learner must see the same text for the
same proof state wherever it comes from (the corpus, or a live ``TacticEnv``
session in a search), so :func:`proof_state` drops that counter and the
display's indentation, and :func:`tactic_key` gives the form two tactics are
compared in (accuracy, de-duplication).

Only ``tactic`` steps are examples: bullets and braces only focus goals, and a
search works on the first goal anyway.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from sgs.corpus.records import TheoremRecord, read_meta, read_theorems, shards

__all__ = ["StepExample", "proof_state", "tactic_key", "theorem_steps", "load_theorems", "load_steps"]

_GOAL_HEADER = re.compile(r"^\d+ goals?(?: \(ID \d+\))?$")
_SUBGOAL_ID = re.compile(r"^goal (\d+) \(ID \d+\) is:$")
_COMMENT = re.compile(r"\(\*.*?\*\)", re.S)


@dataclass(frozen=True)
class StepExample:
    """One tactic applied to one proof state, and where it comes from."""

    #: the goals before the tactic (:func:`proof_state`)
    state: str
    #: the tactic as written in the source (one sentence, with its final period)
    tactic: str
    #: fully qualified constants the tactic names (``Coq.Arith.PeanoNat.Nat.add_comm``)
    lemmas: tuple[str, ...]
    library: str
    file: str
    #: the theorem the step belongs to, and the step's position among its tactic steps
    theorem: str
    index: int
    split: str


def proof_state(goals: str) -> str:
    """The goal display without its ``N goals (ID k)`` counter line and indentation.

    The ``(ID k)`` of later goals (``goal 2 (ID 17) is:``) goes too: it counts
    the session's existential variables, not anything about the state.
    """
    lines = []
    for raw in goals.splitlines():
        line = raw.strip()
        if not line or _GOAL_HEADER.match(line):
            continue
        numbered = _SUBGOAL_ID.match(line)
        lines.append(f"goal {numbered.group(1)} is:" if numbered else line)
    return "\n".join(lines)


def tactic_key(tactic: str) -> str:
    """A tactic's comparison form: comments removed, whitespace collapsed,
    no space before the final period (``intros  n .`` and ``intros n.`` agree)."""
    text = " ".join(_COMMENT.sub(" ", tactic).split())
    return text[:-1].rstrip() + "." if text.endswith(".") else text


def theorem_steps(theorem: TheoremRecord) -> list[StepExample]:
    """The tactic steps of one finished proof (none for an unfinished one)."""
    if not theorem.closed:
        return []
    examples = []
    for step in theorem.steps:
        if step.kind != "tactic" or not step.goals:
            continue
        examples.append(StepExample(
            state=proof_state(step.goals), tactic=step.tactic.strip(), lemmas=tuple(step.lemmas),
            library=theorem.library, file=theorem.file, theorem=theorem.name, index=len(examples),
            split=theorem.split))
    return examples


def load_theorems(corpus: Path, splits: Iterable[str] = ("train",),
                  libraries: Optional[Iterable[str]] = None) -> Iterator[TheoremRecord]:
    """Every theorem of the chosen splits and libraries, file by file in path
    order (within a file, in source order: what an online learner sees)."""
    wanted_splits = set(splits)
    wanted_libraries = set(libraries) if libraries is not None else None
    for shard in shards(Path(corpus)):
        meta = read_meta(shard)
        if meta is None or meta.split not in wanted_splits:
            continue
        if wanted_libraries is not None and meta.library not in wanted_libraries:
            continue
        yield from read_theorems(shard)


def load_steps(corpus: Path, splits: Iterable[str] = ("train",),
               libraries: Optional[Iterable[str]] = None) -> Iterator[StepExample]:
    """Every tactic step of the chosen splits and libraries, in source order."""
    for theorem in load_theorems(corpus, splits, libraries):
        yield from theorem_steps(theorem)
