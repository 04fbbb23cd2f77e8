"""What the Rocq backend's tactic-level API answers, and the proof it keeps
open between steps (:meth:`lean_env.rocq.backend.RocqBackend.start_proof`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional

from lean_env.rocq.checks import Statement
from lean_env.rocq.session import RocqSession
from lean_env.verdict import Verdict


@dataclass
class TacticResult:
    """The answer to one step of the tactic-level API."""

    #: ``goals``: the proof goes on; ``error``: the step was refused or failed
    #: and the proof is unchanged; ``finished``: the proof is closed and
    #: verified (``verdict`` is valid); ``failed``: the proof cannot go on
    #: (``verdict`` says why)
    kind: Literal["goals", "error", "finished", "failed"]
    #: Coq's display of the remaining goals (unchanged after an error)
    goals: str = ""
    #: prover or checker messages about this step
    messages: list[str] = field(default_factory=list)
    #: the final verdict, for ``finished`` and ``failed``
    verdict: Optional[Verdict] = None


@dataclass
class OpenProof:
    """A proof being built through the tactic-level API."""

    #: the session holding the proof (the proof is lost if it is replaced)
    session: RocqSession
    #: the theorem being proved
    statement: Statement
    #: the goals as Coq last displayed them
    goals: str
