"""A fake prover for the search's unit tests: its states are the keys of a
small graph, ``graph[state][tactic]`` the state a tactic reaches, or one of
:data:`QED` (the proof completes), :data:`ENDED` (a timeout); any other
tactic fails.  A state's goals are its name unless ``goals`` says otherwise
(two states with the same goals are one state to the search)."""

from __future__ import annotations

import time

from lean_env.verdict import ProofTask, Status, Verdict
from sgs.search.proposers import Proposal
from sgs.search.provers import Outcome

QED = "QED"
ENDED = "ENDED"


class GraphProver:
    def __init__(self, graph: dict[str, dict[str, str]], goals: dict[str, str] | None = None, *,
                 seconds_per_tactic: float = 0.0, valid: bool = True) -> None:
        self.graph, self.goals = graph, goals or {}
        self.seconds_per_tactic, self.valid = seconds_per_tactic, valid
        self.replayed = 0
        #: every apply: (state, tactic, timeout)
        self.calls: list[tuple[str, str, float]] = []
        self.checked: list[ProofTask] = []

    def _goals(self, state: str) -> str:
        return self.goals.get(state, state)

    def open(self, problem: ProofTask, timeout: float) -> Outcome:
        return Outcome("progress", handle="root", goals=self._goals("root"))

    def apply(self, handle: str, tactic: str, timeout: float) -> Outcome:
        self.calls.append((handle, tactic, timeout))
        time.sleep(self.seconds_per_tactic)
        reached = self.graph.get(handle, {}).get(tactic)
        if reached is None:
            return Outcome("error", messages=("no such step",))
        if reached == QED:
            return Outcome("completed")
        if reached == ENDED:
            return Outcome("ended", reason="timeout")
        return Outcome("progress", handle=reached, goals=self._goals(reached))

    def proof_text(self, tactics) -> str:
        return " ".join(tactics)

    def check(self, task: ProofTask, timeout: float) -> Verdict:
        self.checked.append(task)
        return Verdict(Status.VALID if self.valid else Status.INVALID, "ok" if self.valid else "prover_error")

    def expanded_states(self) -> list[str]:
        """The states tactics ran on, in the order first tried."""
        return list(dict.fromkeys(state for state, _, _ in self.calls))


class TableProposer:
    """``table[goals]``: the (tactic, log-probability) pairs proposed there."""

    def __init__(self, table: dict[str, list[tuple[str, float]]], seconds: float = 0.0) -> None:
        self.table, self.seconds = table, seconds
        self.asked: list[str] = []

    def propose(self, state: str, k: int) -> list[Proposal]:
        self.asked.append(state)
        time.sleep(self.seconds)
        return [Proposal(t, p) for t, p in self.table.get(state, [])[:k]]
