"""The prover side of a search: proof states as handles a search can go back to.

A search needs two operations (:class:`Prover`): ``open(problem)`` gives the
root state's handle and goals, ``apply(handle, tactic)`` runs one tactic on
the state ``handle`` names, whichever state the prover was at before, and
answers an :class:`Outcome`: ``progress`` (a new handle and its goals),
``completed`` (the prover closed and accepted the proof), ``error`` (the
tactic failed; nothing changed) or ``ended`` (a timeout or a failure of the
machinery: the tactic is dropped, and the adapter brings the proof back on
the next call if it was lost).

* :class:`RocqProver`: coqtop keeps one line of states, and going back to a
  state forgets the states after it
  (:meth:`lean_env.rocq.backend.RocqBackend.run_tactic` with ``at=``).  A
  handle is therefore the path of tactics from the root; the adapter keeps
  the line it is on and, to reach a state off that line, goes back to the
  longest shared prefix and replays the rest of the path (counted in
  :attr:`RocqProver.replayed`: each replayed step costs a tactic step).
* :class:`LeanProver`: the Lean REPL's proof-state ids already are handles
  (any of them can be stepped from); a state lost with its process (after a
  timeout) is rebuilt by replaying its path on a fresh one.

LeanDojo's ``Dojo`` answers like the REPL (its ``run_tactic(state, tactic)``)
but opens theorems by repository and checks scripts its own way; an adapter
for it is left for where Lean exists.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional, Protocol, Sequence

from lean_env.lean import TacticStatus
from lean_env.verdict import ProofTask, Verdict

__all__ = ["Outcome", "Prover", "RocqProver", "LeanProver"]


@dataclass(frozen=True)
class Outcome:
    """What opening a proof or running one tactic gave."""

    #: ``progress``, ``completed``, ``error`` or ``ended`` (see the module's docstring)
    kind: str
    #: for ``progress``: the new state, to pass to :meth:`Prover.apply`
    handle: Any = None
    #: the goals of the new state, as the prover displays them
    goals: str = ""
    messages: tuple[str, ...] = ()
    #: the prover's short classification (``timeout``, ``replay_failed``, ...)
    reason: str = ""


class Prover(Protocol):
    """A prover a search can drive (see the module's docstring)."""

    #: tactic steps run again to bring back a state (the cost of backtracking on a linear prover)
    replayed: int

    def open(self, problem: ProofTask, timeout: float) -> Outcome:
        """Open ``problem``'s statement: ``progress`` with the root state, or why not."""

    def apply(self, handle: Any, tactic: str, timeout: float) -> Outcome:
        """Run ``tactic`` on the state ``handle`` (from this prover, on the open problem)."""

    def proof_text(self, tactics: Sequence[str]) -> str:
        """The tactic path as one proof, in the form of :attr:`ProofTask.proof`."""

    def check(self, task: ProofTask, timeout: float) -> Verdict:
        """The whole proof checked under the same rules as every proof."""


def rocq_sentence(tactic: str) -> str:
    """A tactic as a Rocq sentence: its final period added when missing, so
    that a finisher setting may say ``lia`` as well as ``lia.``."""
    text = tactic.strip()
    return text if text.endswith(".") else text + "."


class RocqProver:
    """:class:`Prover` over :class:`lean_env.rocq.backend.RocqBackend` (handles are tactic paths)."""

    def __init__(self, backend, reopen_seconds: float = 60.0) -> None:
        self.backend = backend
        #: time allowed to open the proof again after a timeout closed it
        self.reopen_seconds = reopen_seconds
        self.replayed = 0
        self._problem: Optional[ProofTask] = None
        #: coqtop state numbers along the current line: ``_line[i]`` is the state after ``_path[:i]``;
        #: ``None`` while no proof is open (a timeout closed it)
        self._line: Optional[list[int]] = None
        self._path: tuple[str, ...] = ()

    def open(self, problem: ProofTask, timeout: float) -> Outcome:
        self._problem = problem
        return self._start(timeout)

    def _start(self, timeout: float) -> Outcome:
        problem = self._problem
        assert problem is not None, "open a problem first"
        result = self.backend.start_proof(problem.header, problem.statement, timeout, load_path=problem.load_path)
        if result.kind != "goals":
            self._line = None
            return Outcome("ended", messages=tuple(result.messages),
                           reason=result.verdict.reason if result.verdict is not None else result.kind)
        self._line, self._path = [result.state], ()
        return Outcome("progress", handle=(), goals=result.goals)

    def _step(self, index: int, sentence: str, timeout: float):
        """Run ``sentence`` from the state after ``_path[:index]``; keep the line in step with coqtop's."""
        assert self._line is not None
        result = self.backend.run_tactic(sentence, timeout, at=self._line[index])
        del self._line[index + 1:]
        self._path = self._path[:index]
        if result.kind == "goals":
            self._line.append(result.state)
            self._path += (sentence,)
        elif result.kind != "error":
            self._line = None   # finished or failed: coqtop has left the proof
        return result

    def apply(self, handle: tuple[str, ...], tactic: str, timeout: float) -> Outcome:
        if self._line is None:
            # Reopening (the header again) is not the tactic's work: it gets the time a
            # header may take, and the tactic's own limit starts after it (on a loaded
            # machine a header alone can take longer than a tactic's second).
            reopened = self._start(max(timeout, self.reopen_seconds))
            if reopened.kind != "progress":
                return reopened
        deadline = time.monotonic() + timeout
        shared = 0
        while shared < min(len(handle), len(self._path)) and handle[shared] == self._path[shared]:
            shared += 1
        for index in range(shared, len(handle)):
            self.replayed += 1
            if self._step(index, handle[index], max(deadline - time.monotonic(), 0.001)).kind != "goals":
                return Outcome("ended", reason="replay_failed",
                               messages=(f"replaying {handle[index]!r} did not reach the state again",))
        sentence = rocq_sentence(tactic)
        result = self._step(len(handle), sentence, max(deadline - time.monotonic(), 0.001))
        if result.kind == "goals":
            return Outcome("progress", handle=handle + (sentence,), goals=result.goals)
        if result.kind == "error":
            return Outcome("error", messages=tuple(result.messages))
        reason = result.verdict.reason if result.verdict is not None else result.kind
        # finished means Qed went through the backend's checks; anything else ended the proof
        kind = "completed" if result.kind == "finished" else "ended"
        return Outcome(kind, messages=tuple(result.messages), reason=reason)

    def proof_text(self, tactics: Sequence[str]) -> str:
        return "Proof.\n" + "".join(f"  {rocq_sentence(t)}\n" for t in tactics) + "Qed."

    def check(self, task: ProofTask, timeout: float) -> Verdict:
        return self.backend.check_proof(task, timeout)


@dataclass(frozen=True)
class LeanHandle:
    """A Lean proof state: the REPL's reference, and the path that rebuilds it."""

    path: tuple[str, ...]
    ref: Any


_LEAN_KINDS = {TacticStatus.PROGRESS: "progress", TacticStatus.COMPLETED: "completed", TacticStatus.ERROR: "error"}


class LeanProver:
    """:class:`Prover` over :class:`lean_env.lean.LeanBackend` (handles are proof-state ids)."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.replayed = 0
        self._problem: Optional[ProofTask] = None

    def open(self, problem: ProofTask, timeout: float) -> Outcome:
        self._problem = problem
        return self._outcome((), self.backend.start_proof(problem.header, problem.statement, timeout))

    @staticmethod
    def _outcome(path: tuple[str, ...], result) -> Outcome:
        kind = _LEAN_KINDS.get(result.status, "ended")
        handle = LeanHandle(path, result.state) if kind == "progress" else None
        return Outcome(kind, handle=handle, goals="\n\n".join(result.goals), messages=tuple(result.messages),
                       reason=result.reason)

    def apply(self, handle: LeanHandle, tactic: str, timeout: float) -> Outcome:
        deadline = time.monotonic() + timeout
        result = self.backend.run_tactic(handle.ref, tactic, timeout)
        if result.status is TacticStatus.SYSTEM_ERROR and result.reason == "state_lost":
            ref = self._rebuild(handle.path, deadline)
            if ref is None:
                return Outcome("ended", reason="replay_failed", messages=("the lost state could not be rebuilt",))
            result = self.backend.run_tactic(ref, tactic, max(deadline - time.monotonic(), 0.001))
        return self._outcome(handle.path + (tactic,), result)

    def _rebuild(self, path: tuple[str, ...], deadline: float) -> Any:
        """The state after ``path`` on a fresh process (``None`` when a step no longer goes through)."""
        assert self._problem is not None
        result = self.backend.start_proof(self._problem.header, self._problem.statement,
                                          max(deadline - time.monotonic(), 0.001))
        for tactic in path:
            if result.status is not TacticStatus.PROGRESS:
                return None
            self.replayed += 1
            result = self.backend.run_tactic(result.state, tactic, max(deadline - time.monotonic(), 0.001))
        return result.state if result.status is TacticStatus.PROGRESS else None

    def proof_text(self, tactics: Sequence[str]) -> str:
        """The body of the ``by`` block, one tactic a line (as :class:`lean_env.envs.TacticEnv` rechecks)."""
        return "\n".join("  " + line for t in tactics for line in t.splitlines())

    def check(self, task: ProofTask, timeout: float) -> Verdict:
        return self.backend.check_proof(task, timeout)
