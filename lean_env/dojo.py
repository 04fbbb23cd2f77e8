"""LeanDojo's ``Dojo`` as the prover behind the tactic-level environment
(``TacticEnv(problems, backend="dojo")``, :mod:`lean_env.envs`).

A Dojo opens one theorem of a repository LeanDojo has traced (the
repository's ``url`` and ``commit``, the theorem's ``file_path`` and
``full_name``: the fields ``tools/trace_targets.py`` writes beside each
target), replacing its proof by LeanDojo's ``repl`` tactic; ``run_tac``
then runs one tactic on any earlier state.  Its answers become the REPL
backend's :class:`~lean_env.lean.TacticResult`, so the environment's
observations and rewards are the same on both:

* ``TacticState`` -> ``PROGRESS`` (its pretty-printed goals, a new state);
* ``ProofFinished`` -> ``COMPLETED`` (no goals left; the environment pays
  only once the whole script passes :meth:`DojoBackend.check_script`, LeanDojo's
  ``check_proof``, which compiles the file with the proof in place);
* ``LeanError`` -> ``ERROR`` (``tactic_error``), the state unchanged;
* ``ProofGivenUp`` (the proof now contains ``sorry``) -> ``ERROR``
  (``sorry``), as the REPL backend treats a step that leaves a ``sorry``;
* ``DojoTacticTimeoutError`` -> ``TIMEOUT`` and ``DojoCrashError`` ->
  ``SYSTEM_ERROR``, the Dojo closed (its process is gone or hung); a
  ``DojoInitError`` when opening -> ``ERROR`` (``dojo_init_error``).

Every tactic first passes the REPL backend's pre-filter
(:func:`lean_env.lean.checks.check_tactic`: no ``sorry``, no commands, ...).
The per-tactic time limit is the one given when the theorem is opened
(LeanDojo fixes it per Dojo).  Opening a Dojo traces the repository first
when LeanDojo's cache lacks it: that needs a Lean toolchain and, for GitHub
repositories, network access; errors of that kind are raised, not turned
into episode outcomes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Optional

from lean_env.lean import CheckPolicy, ProofStateRef, TacticResult, TacticStatus
from lean_env.lean.checks import check_tactic

#: the record fields that locate a theorem for LeanDojo
LOCATION_FIELDS = ("url", "commit", "file_path", "full_name")


@dataclass(frozen=True)
class DojoTheorem:
    """Where a theorem lives, as LeanDojo names it."""

    #: the repository's Git URL (or local path)
    url: str
    #: the traced commit
    commit: str
    #: the theorem's file, relative to the repository
    file_path: str
    #: the theorem's fully qualified name
    full_name: str

    @classmethod
    def from_record(cls, record: Mapping[str, Any], where: str) -> "DojoTheorem":
        """The location held in a target record; ``ValueError`` naming ``where`` when it has none."""
        missing = [key for key in LOCATION_FIELDS if not isinstance(record.get(key), str) or not record[key]]
        if missing:
            raise ValueError(f"{where} needs {', '.join(LOCATION_FIELDS)} for the Dojo backend (a target file "
                             f"written by tools/trace_targets.py has them); missing: {', '.join(missing)}")
        return cls(*(record[key] for key in LOCATION_FIELDS))


#: opens a theorem: ``(theorem, timeout seconds)`` -> a context manager giving ``(dojo, initial state)``
DojoOpener = Callable[[DojoTheorem, int], AbstractContextManager]
#: checks a whole proof (``"by\n  tactic..."``) of a theorem: True when Lean accepts it
ProofChecker = Callable[[DojoTheorem, str], bool]


def _lean_theorem(theorem: DojoTheorem) -> Any:
    from lean_dojo import LeanGitRepo, Theorem

    return Theorem(LeanGitRepo(theorem.url, theorem.commit), theorem.file_path, theorem.full_name)


def open_with_lean_dojo(theorem: DojoTheorem, timeout: int) -> AbstractContextManager:
    """A real ``lean_dojo.Dojo`` on ``theorem``."""
    from lean_dojo import Dojo

    return Dojo(_lean_theorem(theorem), timeout=timeout)


def check_with_lean_dojo(theorem: DojoTheorem, proof: str) -> bool:
    """``lean_dojo.check_proof``: the theorem's file compiled with ``proof`` in place."""
    from lean_dojo import check_proof

    return check_proof(_lean_theorem(theorem), proof)


class DojoBackend:
    """Tactic mode on LeanDojo's Dojo, one open theorem at a time.

    ``open_dojo`` and ``check_proof`` default to LeanDojo's; tests pass
    stand-ins for the interaction, since Lean cannot run everywhere.
    """

    name = "dojo"

    def __init__(self, open_dojo: DojoOpener = open_with_lean_dojo,
                 check_proof: ProofChecker = check_with_lean_dojo, policy: CheckPolicy = CheckPolicy()) -> None:
        try:  # fail here, with the fix, rather than at the first episode
            import lean_dojo  # noqa: F401
        except ImportError:
            raise RuntimeError("the Dojo backend needs the lean-dojo package: pip install 'sgs[lean]'") from None
        self._open_dojo, self._check_proof, self._policy = open_dojo, check_proof, policy
        self._context: Optional[AbstractContextManager] = None
        self._dojo: Any = None
        #: the open Dojo's serial number: states of an earlier one are gone
        self._serial = 0
        self._states: dict[int, Any] = {}

    def start_proof(self, theorem: DojoTheorem, timeout: float) -> TacticResult:
        """Open ``theorem`` (closing the theorem open before): its goals and first state."""
        from lean_dojo import DojoCrashError, DojoInitError, DojoTacticTimeoutError

        start = time.monotonic()
        self.close()
        self._serial += 1
        context = self._open_dojo(theorem, max(1, round(timeout)))
        try:
            self._dojo, state = context.__enter__()
        except DojoInitError as error:
            return TacticResult(TacticStatus.ERROR, messages=(str(error),), reason="dojo_init_error",
                                seconds=time.monotonic() - start)
        except DojoTacticTimeoutError:
            return TacticResult(TacticStatus.TIMEOUT, reason="timeout", seconds=time.monotonic() - start)
        except DojoCrashError as error:
            return TacticResult(TacticStatus.SYSTEM_ERROR, messages=(str(error),), reason="dojo_crash",
                                seconds=time.monotonic() - start)
        self._context = context
        return self._progress(state, start)

    def run_tactic(self, state: ProofStateRef, tactic: str, timeout: Optional[float] = None) -> TacticResult:
        """Run one untrusted ``tactic`` on ``state`` (``timeout``: the limit the Dojo was opened with)."""
        from lean_dojo import (DojoCrashError, DojoTacticTimeoutError, LeanError, ProofFinished, ProofGivenUp,
                               TacticState)

        start = time.monotonic()
        rejection = check_tactic(tactic, self._policy)
        if rejection is not None:
            return TacticResult(TacticStatus.ERROR, state, messages=rejection.messages, reason=rejection.reason)
        if self._dojo is None or state.process != self._serial or state.proof_state not in self._states:
            return TacticResult(TacticStatus.SYSTEM_ERROR, messages=("the proof state's Dojo is gone",),
                                reason="state_lost")
        try:
            answer = self._dojo.run_tac(self._states[state.proof_state], tactic)
        except DojoTacticTimeoutError:
            self.close()
            return TacticResult(TacticStatus.TIMEOUT, reason="timeout", seconds=time.monotonic() - start)
        except DojoCrashError as error:
            self.close()
            return TacticResult(TacticStatus.SYSTEM_ERROR, messages=(str(error),), reason="dojo_crash",
                                seconds=time.monotonic() - start)
        seconds = time.monotonic() - start
        if isinstance(answer, TacticState):
            return self._progress(answer, start)
        if isinstance(answer, ProofFinished):
            return TacticResult(TacticStatus.COMPLETED, ProofStateRef(self._serial, answer.tactic_state_id),
                                messages=_messages(answer.message), reason="ok", seconds=seconds)
        if isinstance(answer, LeanError):
            return TacticResult(TacticStatus.ERROR, state, messages=(answer.error,), reason="tactic_error",
                                seconds=seconds)
        if isinstance(answer, ProofGivenUp):
            return TacticResult(TacticStatus.ERROR, state, messages=("the proof now contains `sorry`",),
                                reason="sorry", seconds=seconds)
        return TacticResult(TacticStatus.SYSTEM_ERROR, messages=(f"unexpected Dojo answer {answer!r}",),
                            reason="dojo_answer", seconds=seconds)

    def check_script(self, theorem: DojoTheorem, body: str) -> bool:
        """Whether Lean accepts ``by`` + ``body`` (indented tactic lines) as the theorem's proof."""
        return self._check_proof(theorem, "by\n" + body)

    def _progress(self, state: Any, start: float) -> TacticResult:
        """A Dojo ``TacticState`` as progress: remembered, so later tactics can start from it."""
        self._states[state.id] = state
        return TacticResult(TacticStatus.PROGRESS, ProofStateRef(self._serial, state.id), goals=(state.pp,),
                            messages=_messages(state.message), reason="ok", seconds=time.monotonic() - start)

    def close(self) -> None:
        """Leave the open Dojo (LeanDojo kills its Lean process).  Idempotent."""
        context, self._context, self._dojo = self._context, None, None
        self._states = {}
        if context is not None:
            context.__exit__(None, None, None)


def _messages(message: Optional[str]) -> tuple[str, ...]:
    return (message,) if message else ()
