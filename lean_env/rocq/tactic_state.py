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
    #: for ``goals``: coqtop's number of the state reached, which a later step
    #: may start from (``run_tactic(..., at=state)``) while the proof stays open
    state: Optional[int] = None


@dataclass
class OpenProof:
    """A proof being built through the tactic-level API."""

    #: the session holding the proof (the proof is lost if it is replaced)
    session: RocqSession
    #: the theorem being proved
    statement: Statement
    #: the goals as Coq last displayed them
    goals: str
    #: the goals of each state the proof can go back to, by coqtop state number
    goals_at: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.reached(self.goals)

    @property
    def state(self) -> int:
        assert self.session.prompt is not None
        return self.session.prompt.state

    def reached(self, goals: str) -> None:
        """Record the session's current state, whose goals are ``goals``."""
        self.goals = self.goals_at[self.state] = goals

    def rewind(self, state: int, deadline: float) -> None:
        """Go back to ``state``, one this proof reached and has not gone back
        before since: coqtop forgets every state after the one it goes back to
        (new ones get new numbers), so those are forgotten here too."""
        if state not in self.goals_at:
            raise ValueError(f"state {state} is not one this proof can go back to")
        if state != self.state:
            self.session.back_to(state, deadline, pending=(self.statement.name,))
            for later in [s for s in self.goals_at if s > state]:
                del self.goals_at[later]
        self.goals = self.goals_at[state]
