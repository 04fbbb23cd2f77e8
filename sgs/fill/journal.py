"""The fill's journal: each lemma's round kept as soon as it ends, so that a stopped fill resumes.

A fill of a large project runs for hours (lemmas x ``--time-per-lemma`` /
``--workers``).  ``python -m sgs.fill`` appends one line to
``<out>.progress.jsonl`` for every (round, lemma) it finishes, fsynced; the
same command run again after a kill, a crash or Ctrl-C replays those lines
instead of trying the lemmas again in those rounds, so a lemma's time and
every round's outcome are what they would have been (a lemma caught mid-round
is tried again in that round).  The finished report replaces the journal.

The first line names what the results depend on (:func:`journal_key`: the
project's sources as they are, and the settings that change what a round
finds); a journal written for other sources or settings is set aside,
renamed ``.stale``, and the fill starts over.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from sgs.state.files import Problems, append_line, cut_torn_tail, jsonl_rows

JOURNAL_VERSION = 1


@dataclass(frozen=True)
class Entry:
    """One round's outcome for one lemma, as :func:`sgs.fill.attempts.attempt_all` records it."""

    round: str
    lemma: str
    proof: Optional[str]
    seconds: float
    statuses: dict[str, int] = field(default_factory=dict)


def journal_path(out: Path) -> Path:
    """Where the fill reporting to ``out`` keeps its journal."""
    return out.with_suffix(".progress.jsonl")


def journal_key(sources: dict[str, str], **settings: Any) -> dict[str, Any]:
    """What a journal's results depend on, in the plain JSON form it is stored in:
    the source files' hashes and ``settings`` (tuples and sets become sorted or
    ordered lists, so that the key read back compares equal)."""
    def plain(value: Any) -> Any:
        if isinstance(value, (set, frozenset)):
            return sorted(plain(v) for v in value)
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)
    return plain({"sources": sources, "settings": settings})


class Journal:
    """The journal of one fill: :meth:`replay` what an earlier run of the same
    key finished, :meth:`record` what this one finishes (from any thread)."""

    def __init__(self, path: Path, key: dict[str, Any], entries: list[Entry], note: str) -> None:
        self.path, self.key = path, key
        self._entries = entries
        #: lemma rounds an earlier, stopped run finished (their time is not in this run's)
        self.finished_before = len(entries)
        #: what opening it found, for the fill's log
        self.note = note
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path, key: dict[str, Any]) -> "Journal":
        """The journal at ``path`` for ``key``: its entries when it was written for
        ``key``; otherwise a new one (an old journal of another key renamed ``.stale``)."""
        entries, note = [], ""
        if path.exists():
            cut_torn_tail(path)        # a line cut off by a kill: that round is tried again
            rows = [row for _, row in jsonl_rows(path, Problems(strict=False))]
            if rows and rows[0] == {"journal": JOURNAL_VERSION, "key": key}:
                entries = [Entry(**row) for row in rows[1:] if _is_entry(row)]
                if entries:
                    note = f"resuming from {path}: {len(entries)} lemma rounds finished before"
            else:
                stale = path.with_suffix(".stale")
                path.replace(stale)
                note = f"{path} was written for other sources or settings: set aside as {stale}, starting over"
        if not entries:
            path.unlink(missing_ok=True)
            append_line(path, {"journal": JOURNAL_VERSION, "key": key})
        return cls(path, key, entries, note)

    def replay(self, round_name: str) -> dict[str, Entry]:
        """The entries an earlier run finished in ``round_name``, by lemma id."""
        return {entry.lemma: entry for entry in self._entries if entry.round == round_name}

    def record(self, entry: Entry) -> None:
        with self._lock:
            append_line(self.path, entry.__dict__)
            self._entries.append(entry)

    def remove(self) -> None:
        """Once the report that supersedes it is written."""
        self.path.unlink(missing_ok=True)


def _is_entry(row: Any) -> bool:
    return (isinstance(row, dict) and set(row) == {"round", "lemma", "proof", "seconds", "statuses"}
            and isinstance(row["round"], str) and isinstance(row["lemma"], str)
            and (row["proof"] is None or isinstance(row["proof"], str))
            and isinstance(row["seconds"], (int, float)) and isinstance(row["statuses"], dict))

