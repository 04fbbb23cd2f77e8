"""The Lean adapter of the search (:class:`sgs.search.provers.LeanProver`):
a whole search on the Lean REPL stand-in (a test double that judges tactics
by its rule), and a state lost with its process rebuilt by replaying its path.
The Rocq adapter runs on real Rocq in tests/integration/sgs/test_search_rocq.py."""

from __future__ import annotations

from lean_env.backends import BackendSpec
from lean_env.lean import ProofStateRef, TacticResult, TacticStatus
from lean_env.verdict import ProofTask
from sgs.search.proposers import FixedTactics, RankedProposer
from sgs.search.provers import LeanProver
from sgs.search.settings import SearchSettings
from sgs.search.strategies import search
from tests.unit.lean_env.test_lean_standin import HEADER, standin_command


def test_a_search_on_the_lean_stand_in_finds_and_rechecks_a_proof():
    spec = BackendSpec("lean", {"repl_command": standin_command(), "spare": False, "axiom_check": "repl",
                                "timeout": 30.0, "header_timeout": 30.0})
    backend = spec.create()
    try:
        problem = ProofTask("t", HEADER, "theorem t : ∀ n : ℕ, n + 2 > n := by", "")
        proposer = RankedProposer(FixedTactics(["ring", "intro n", "omega"]))
        result = search(problem, LeanProver(backend), proposer, SearchSettings(finishers=("linarith",)))
    finally:
        backend.close()
    # linarith fails on the ∀ and ring is no step here; after intro n the finisher closes the goal
    assert result.proved and result.tactics == ("intro n", "linarith")
    assert result.proof == "  intro n\n  linarith" and result.stats.errors == 3


class LosingLean:
    """A Lean backend double whose states are tactic paths; :meth:`lose` ends
    the process, and with it every state made so far (what a timeout does)."""

    def __init__(self) -> None:
        self.process, self.starts = 0, 0
        self.paths: list[tuple[str, ...]] = []

    def lose(self) -> None:
        self.process += 1

    def _state(self, path: tuple[str, ...]) -> TacticResult:
        self.paths.append(path)
        return TacticResult(TacticStatus.PROGRESS, ProofStateRef(self.process, len(self.paths) - 1),
                            goals=("⊢ " + " ".join(path),))

    def start_proof(self, header: str, statement: str, timeout: float) -> TacticResult:
        self.starts += 1
        return self._state(())

    def run_tactic(self, state: ProofStateRef, tactic: str, timeout: float) -> TacticResult:
        if state.process != self.process:
            return TacticResult(TacticStatus.SYSTEM_ERROR, reason="state_lost")
        return self._state(self.paths[state.proof_state] + (tactic,))


def test_a_lost_lean_state_is_rebuilt_by_replaying_its_path():
    backend = LosingLean()
    prover = LeanProver(backend)
    root = prover.open(ProofTask("t", "", "theorem t : True := by", ""), 10)
    step = prover.apply(prover.apply(root.handle, "a", 10).handle, "b", 10)
    backend.lose()
    again = prover.apply(step.handle, "c", 10)
    assert (again.kind, again.goals) == ("progress", "⊢ a b c")
    assert backend.starts == 2 and prover.replayed == 2
