"""The data that crosses the prover boundary: a proof task in, a verdict out.

Every backend (Lean REPL, Rocq) and the Ray verifier pool speak only these
types, so the rest of SGS never sees a prover-specific object.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import asdict, dataclass, field


class Status(str, enum.Enum):
    """Outcome of one check.

    Only ``VALID`` earns reward.  ``SYSTEM_ERROR`` means the infrastructure
    failed (crash, OOM, lost worker, garbled output): it says nothing about the
    proof, is retried on a fresh process, and must never become training signal.
    """

    VALID = "valid"
    INVALID = "invalid"
    TIMEOUT = "timeout"
    SYSTEM_ERROR = "system_error"


@dataclass(frozen=True)
class ProofTask:
    """One (problem, proof) pair to check.

    ``statement`` is the trusted statement text: for Lean the theorem up to and
    including ``:= by``; for Rocq ``Theorem name ... .``.  ``proof`` is the
    untrusted model-written body: for Lean the tactic block after ``:= by``;
    for Rocq the text from ``Proof.`` to ``Qed.``.
    """

    id: str
    header: str
    statement: str
    proof: str
    #: Rocq only: the ``(flag, directory, logical name)`` options (``-R``/``-Q``)
    #: that bind a project's compiled libraries for the header's ``Require``s
    #: (:mod:`lean_env.rocq.load_path`); empty for headers that load only the
    #: standard library
    load_path: tuple[tuple[str, str, str], ...] = ()

    def key(self, backend_version: str) -> str:
        """Content hash used for the verdict cache and in-flight deduplication."""
        h = hashlib.sha256()
        for part in (backend_version, self.header, self.statement, self.proof):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        # only when there is one, so that the keys of tasks without one stay as they were
        for entry in self.load_path:
            for part in entry:
                h.update(b"\x01" + str(part).encode("utf-8", "surrogatepass"))
        return h.hexdigest()


@dataclass
class Verdict:
    """The result of checking one :class:`ProofTask`.

    ``reason`` is a short machine-readable classification (``ok``,
    ``prover_error``, ``sorry``, ``axioms``, ``banned:<token>``, ``empty``,
    ``statement_mismatch``, ``timeout``, ``crash``, ...) used for counting;
    ``messages`` are the prover's own messages (for humans and for feedback).
    """

    status: Status
    reason: str = ""
    messages: list[str] = field(default_factory=list)
    seconds: float = 0.0
    worker: str = ""
    cached: bool = False
    #: the second opinion on a ``valid`` verdict (:meth:`ProverBackend.audit`):
    #: "" = not audited, "agree" = the independent path accepted it too,
    #: "disagree" = it did not (the pool then turns the verdict ``invalid``
    #: with reason ``audit_disagreement``, so the proof earns no reward)
    audit: str = ""

    @property
    def valid(self) -> bool:
        return self.status is Status.VALID

    def to_json(self) -> dict:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Verdict":
        d = dict(d)
        d["status"] = Status(d["status"])
        return cls(**d)
