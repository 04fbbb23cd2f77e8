"""A verdict cache keyed by content: backend version, header, statement, proof.

Only verdicts that depend on the proof alone are cached (``valid`` and
``invalid``).  A ``timeout`` depends on machine load and a ``system_error`` on
the infrastructure, so both are always re-checked.

The cache can persist to an append-only JSONL file so a restarted run does not
re-verify proofs it has already checked.  Verdicts keep their ``audit`` field
(the pool's second opinion), so an audited proof is not audited again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from pathlib import Path
from typing import Optional

from lean_env.verdict import Status, Verdict

log = logging.getLogger(__name__)

CACHEABLE = frozenset({Status.VALID, Status.INVALID})


class VerdictCache:
    """In-memory map ``key -> Verdict``, optionally mirrored to a JSONL file."""

    def __init__(self, path: Optional[str | os.PathLike] = None, max_entries: int = 1_000_000) -> None:
        self.path = Path(path) if path else None
        self.max_entries = max_entries
        self._data: dict[str, Verdict] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        if self.path is not None and self.path.exists():
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        bad = 0
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                    self._data[rec["key"]] = Verdict.from_json(rec["verdict"])
                except (ValueError, KeyError, TypeError):
                    bad += 1  # a line cut short by a killed process: skip it
        if bad:
            log.warning("verdict cache %s: skipped %d unreadable line(s)", self.path, bad)

    def get(self, key: str) -> Optional[Verdict]:
        with self._lock:
            v = self._data.get(key)
            if v is None:
                self.misses += 1
                return None
            self.hits += 1
        return dataclasses.replace(v, messages=list(v.messages), seconds=0.0, cached=True)

    def put(self, key: str, verdict: Verdict) -> None:
        """Store ``verdict``.  A key already present is only overwritten by a
        verdict that differs in status, reason or audit (a cached ``valid``
        audited later); on reload the file's last line for a key wins."""
        if verdict.status not in CACHEABLE:
            return
        with self._lock:
            old = self._data.get(key)
            if old is not None and (old.status, old.reason, old.audit) == (verdict.status, verdict.reason,
                                                                           verdict.audit):
                return
            if old is None and len(self._data) >= self.max_entries:
                return
            self._data[key] = verdict
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"key": key, "verdict": verdict.to_json()}) + "\n")

    def __len__(self) -> int:
        return len(self._data)
