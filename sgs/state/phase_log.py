"""The streaming record log of one running phase (``iter_NNNN/<phase>.partial.jsonl``).

:meth:`sgs.state.store.Store.begin_phase` opens it; the phase appends each
record as it arrives (flushed, so a killed process loses at most the line it
was writing); :meth:`~sgs.state.store.Store.mark_done` commits it.  The log
refuses a record it cannot hold: one of another iteration, on an unknown
target, or with an id it already has (which is what keeps a redone phase from
counting a sample twice).  A verdict's prover messages are capped, so a
runaway error dump cannot bloat the log.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from sgs.state.files import json_line
from sgs.state.records import (
    RECORD_NAMES,
    RECORD_TYPES,
    Attempt,
    Conjecture,
    Record,
    Target,
    record_key,
    record_to_line,
)
from sgs.state.solved import StoredProof

@dataclass(frozen=True)
class PhaseStats:
    """What one phase did in this process: every phase returns one (the loop
    adds the wall time).  Observability only, not stored as records."""

    seconds: float = 0.0
    """Wall time of the phase."""
    tokens: int = 0
    """Tokens the engines generated in the phase."""
    verifications: int = 0
    """Verdicts the verifier pool returned in the phase."""

    def __add__(self, other: "PhaseStats") -> "PhaseStats":
        return PhaseStats(self.seconds + other.seconds, self.tokens + other.tokens,
                          self.verifications + other.verifications)


# Prover messages kept per verdict (characters, all messages together): enough
# to read the first errors, bounded so a runaway error dump cannot bloat a log.
VERDICT_MESSAGES_CAP = 4000


def cap_messages(messages: Sequence[str], cap: int = VERDICT_MESSAGES_CAP) -> list[str]:
    """Keep messages in order until ``cap`` characters; cut the one that
    crosses it and say how much was dropped."""
    kept, left = [], cap
    for i, message in enumerate(messages):
        if len(message) > left:
            dropped = sum(len(m) for m in messages[i:]) - left
            kept.append(message[:left] + f" ... [{dropped} characters cut by the store]")
            break
        kept.append(message)
        left -= len(message)
    return kept


class PhaseLog:
    """The streaming record log of one running phase (``Store.begin_phase``).

    Records are appended and flushed one by one; they count only once the
    store's ``mark_done`` commits the phase.  One writer: append from one thread.
    """

    def __init__(self, path: Path, iteration: int, phase: str, targets: Mapping[str, Target], recovered: list[Record]):
        self.path = path
        self.iteration = iteration
        self.phase = phase
        self.recovered = recovered
        """Complete records that an earlier, killed run of this phase wrote.
        They are part of this log already: skip their work, do not rewrite them."""
        self._targets = targets
        self._ids: dict[str, set[str]] = {name: set() for name in RECORD_TYPES}
        self._target_proofs: list[StoredProof] = []
        for record in recovered:
            self._register(record)
        self._file = open(path, "ab")

    def append(self, record: Record) -> None:
        """Append one record and flush it to the operating system (it survives
        a killed process; ``mark_done`` fsyncs the file for power loss)."""
        self._check(record)
        if isinstance(record, Attempt) and record.verdict is not None:
            record = replace(record, verdict=replace(record.verdict, messages=cap_messages(record.verdict.messages)))
        self._file.write(json_line(record_to_line(record)))
        self._file.flush()
        self._register(record)

    def ids(self, record_type: str) -> frozenset[str]:
        """Ids of the records of ``record_type`` (``attempt``, ``conjecture``,
        ``conjecture_score``) this log holds, recovered ones included."""
        return frozenset(self._ids[record_type])

    def counts(self) -> dict[str, int]:
        """Records per type in this log, recovered ones included."""
        return {name: len(ids) for name, ids in self._ids.items()}

    def verified_target_proofs(self) -> list[StoredProof]:
        """The proofs of this log's verified attempts on targets, in log order."""
        return list(self._target_proofs)

    def _check(self, record: Record) -> None:
        """Raise ValueError if ``record`` cannot go into this log."""
        if type(record) not in RECORD_NAMES:
            raise ValueError(f"cannot store a {type(record).__name__}; expected one of {sorted(RECORD_TYPES)}")
        if isinstance(record, (Attempt, Conjecture)) and record.iteration != self.iteration:
            raise ValueError(f"{type(record).__name__} {record.id!r} is from iteration {record.iteration}, "
                             f"this is the log of iteration {self.iteration}")
        if isinstance(record, Attempt) and record.problem_kind == "target" and record.problem_id not in self._targets:
            raise ValueError(f"attempt {record.id!r} is on unknown target {record.problem_id!r}")
        if isinstance(record, Conjecture) and record.target_id not in self._targets:
            raise ValueError(f"conjecture {record.id!r} has unknown parent target {record.target_id!r}")
        name, key = RECORD_NAMES[type(record)], record_key(record)
        if key in self._ids[name]:
            raise ValueError(f"{self.path} already holds {name} {key!r} "
                             "(a resumed phase must skip the work in PhaseLog.recovered)")

    def _register(self, record: Record) -> None:
        self._ids[RECORD_NAMES[type(record)]].add(record_key(record))
        if isinstance(record, Attempt) and record.problem_kind == "target" and record.verified:
            self._target_proofs.append(StoredProof(
                target_id=record.problem_id, iteration=record.iteration, attempt_id=record.id, proof=record.proof,
                reward=record.reward))

    def close(self) -> None:
        """Flush, fsync and close the file.  This does not commit the phase."""
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
