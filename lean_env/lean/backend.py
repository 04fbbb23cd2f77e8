"""The production prover: Lean 4 through the REPL, with header reuse.

One :class:`LeanBackend` owns one live REPL process and, optionally, a warm
spare started in the background with the last header already run.  Each
header runs once per process (environment ``H``); each proof then runs as
``{"cmd": statement + "\\n" + body, "env": H}``, so proofs never see each other.
The theorem's axioms are then read by the trusted checker from the environment
the REPL pickles (:mod:`lean_env.lean.axiom_check`), or, with
``axiom_check="repl"``, by ``#print axioms`` in the proof's environment.

Failure handling:

* a proof that does not answer within its timeout: the process group is
  killed and the verdict is ``timeout`` (no retry: it would burn another
  timeout);
* a dead or garbled process, or a REPL-level ``{"message": ...}`` answer to a
  command: the work is retried once on a fresh process, then
  ``system_error``; but when the process died while running the input both
  times (after its header had run), the input is to blame: ``invalid`` with
  reason ``prover_crash`` (a proof that exits the REPL or exhausts its memory
  must cost the model something, and not two restarts each time);
* a header that does not elaborate: ``system_error`` (reason
  ``header_error``) at once, since it fails the same way every time.

Processes are recycled between requests after ``max_commands`` commands or
above ``max_rss_bytes``; the spare takes over so the caller does not wait for
a new ``import Mathlib``.

The tactic-mode API (:meth:`LeanBackend.start_proof`,
:meth:`LeanBackend.run_tactic`) drives the REPL's proof states for the
tactic-level gym environment.  A proof state belongs to one process; it is
lost when that process is recycled (only at :meth:`start_proof`, never between
tactics) or killed.  ``completed`` is reported only for ``proofStatus ==
"Completed"`` with no error message and no sorry; callers should still
re-check the assembled proof with :meth:`check_proof` before paying reward.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Callable, Optional, TypeVar, Union

from lean_env.backend import ProverBackend
from lean_env.lean.checks import (
    PreparedProof, Rejection, check_conjecture, check_tactic, check_text, check_trusted_statement,
    judge_axioms, judge_command, prepare_proof, rendered)
from lean_env.lean.audit import audit_proof
from lean_env.lean.axiom_check import checker_command, judge_report, new_nonce
from lean_env.lean.config import LeanConfig
from lean_env.lean.protocol import CommandResponse, ReplError, RequestEncodingError
from lean_env.lean.repl import HeaderError, ReplCrashed, ReplFailure, ReplProcess, ReplTimeout
from lean_env.sandbox import run_batch
from lean_env.verdict import ProofTask, Status, Verdict

log = logging.getLogger(__name__)

#: headers are trusted configuration, but still text we put on the wire
_MAX_HEADER_CHARS = 1_000_000
_UNBOUNDED_HEARTBEATS = re.compile(r"set_option\s+maxHeartbeats\s+0\b")


class TacticStatus(str, enum.Enum):
    """Outcome of one tactic-mode step."""

    #: the tactic ran; ``goals`` remain
    PROGRESS = "progress"
    #: the proof is finished and kernel-checked (proofStatus "Completed")
    COMPLETED = "completed"
    #: the tactic (or statement) was rejected; the state is unchanged
    ERROR = "error"
    #: no answer in time; the process was killed and its states are lost
    TIMEOUT = "timeout"
    #: the infrastructure failed (crash, lost state); not the model's fault
    SYSTEM_ERROR = "system_error"


@dataclass(frozen=True)
class ProofStateRef:
    """A tactic-mode proof state: valid only on the process that made it."""

    #: serial number of the owning REPL process
    process: int
    #: the REPL's proof-state id
    proof_state: int


@dataclass(frozen=True)
class TacticResult:
    """The answer to :meth:`LeanBackend.start_proof` or :meth:`LeanBackend.run_tactic`."""

    status: TacticStatus
    #: state to continue from: the new one after progress / completion, the
    #: one given on error, ``None`` when no state exists (or it was lost)
    state: Optional[ProofStateRef] = None
    #: open goals after the step, pretty-printed
    goals: tuple[str, ...] = ()
    #: Lean's messages (errors first), or the pre-filter's explanation
    messages: tuple[str, ...] = ()
    #: the REPL's ``proofStatus`` text ("" before REPL v4.19 or on errors)
    proof_status: str = ""
    #: short classification (``ok``, ``prover_error``, ``tactic_error``,
    #: ``incomplete``, ``sorry``, ``banned:<token>``, ``state_lost``, ...)
    reason: str = ""
    #: wall-clock seconds spent
    seconds: float = 0.0


@dataclass(frozen=True)
class _Outcome:
    """What one attempt concluded (before timing and worker are added)."""

    status: Status
    reason: str
    messages: tuple[str, ...] = ()


class _RetryOnFreshProcess(Exception):
    """This attempt's process is unusable; try once more on a fresh one."""

    def __init__(self, reason: str, messages: tuple[str, ...]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.messages = messages


_T = TypeVar("_T")


class LeanBackend(ProverBackend):
    """Lean 4 REPL sessions for checking proofs, statements and tactics."""

    name = "lean"

    def __init__(self, config: Optional[LeanConfig] = None) -> None:
        """``config`` defaults to :meth:`LeanConfig.from_env`.  Validates the
        configuration (raises :class:`~lean_env.lean.config.LeanConfigError`);
        starts nothing until the first request or :meth:`warm_up`."""
        config = LeanConfig.from_env() if config is None else config
        self.config = config
        self._argv = config.argv()
        self._env = config.child_env()
        self._limits = config.limits()
        self._policy = config.policy()
        self._version = config.version()
        self._active: Optional[ReplProcess] = None
        self._spare: Optional[Future] = None
        self._starting: set[ReplProcess] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._warned_headers: set[str] = set()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lean-spare")

    # -- ProverBackend ----------------------------------------------------
    @property
    def version(self) -> str:
        return self._version

    @property
    def pid(self) -> Optional[int]:
        """Process id of the live REPL, if one is running."""
        proc = self._active
        return proc.pid if proc is not None and proc.alive else None

    def warm_up(self, header: str) -> None:
        """Start the live process (and the spare) with ``header`` already run,
        so the first proof does not pay for the import.  Raises
        :class:`~lean_env.lean.repl.HeaderError` or
        :class:`~lean_env.lean.repl.ReplFailure` when that fails."""
        proc = self._process_for(header)
        proc.header_env(header, time.monotonic() + self.config.header_timeout)

    def check_proof(self, task: ProofTask, timeout: float) -> Verdict:
        start = time.monotonic()
        prepared = prepare_proof(task.statement, task.proof, self._policy)
        if isinstance(prepared, Rejection):
            return _verdict(_Outcome(Status.INVALID, prepared.reason, prepared.messages), start)
        outcome, worker = self._run(task.header, timeout, lambda proc, env, deadline:
                                    self._proof_attempt(proc, env, prepared, deadline))
        return _verdict(outcome, start, worker)

    def audit(self, task: ProofTask, timeout: float) -> Verdict:
        """The second opinion (:mod:`lean_env.lean.audit`): header, statement and
        the pre-filtered body compiled by ``lake env lean -o`` in a fresh sandbox,
        then the trusted axiom checker on the module.  Text the pre-filter refuses is
        ``audit_text_rejected`` without running anything."""
        start = time.monotonic()
        prepared = prepare_proof(task.statement, task.proof, self._policy)
        if isinstance(prepared, Rejection):
            return _verdict(_Outcome(Status.INVALID, "audit_text_rejected",
                                     (f"{prepared.reason}", *prepared.messages)), start)
        found = audit_proof(self.config, task.header, prepared, timeout)
        return _verdict(_Outcome(found.status, found.reason, found.messages), start, "lean-audit")

    def check_statement(self, header: str, statement: str, timeout: float) -> Verdict:
        start = time.monotonic()
        checked = check_conjecture(statement, self._policy)
        if isinstance(checked, Rejection):
            return _verdict(_Outcome(Status.INVALID, checked.reason, checked.messages), start)
        command = statement.rstrip() + " sorry"
        outcome, worker = self._run(header, timeout, lambda proc, env, deadline:
                                    self._statement_attempt(proc, env, command, deadline))
        return _verdict(outcome, start, worker)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            starting = list(self._starting)
            spare, self._spare = self._spare, None
            active, self._active = self._active, None
        for proc in starting:
            proc.kill()
        if spare is not None:
            spare.add_done_callback(_kill_result)
        if active is not None:
            active.kill()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- tactic mode -------------------------------------------------------
    def start_proof(self, header: str, statement: str, timeout: Optional[float] = None) -> TacticResult:
        """Open a proof of the trusted ``statement`` (ending in ``:= by``):
        the root proof state and its goal."""
        start = time.monotonic()
        rejection = check_trusted_statement(statement, self._policy)
        if rejection is not None:
            return TacticResult(TacticStatus.ERROR, messages=rejection.messages, reason=rejection.reason)
        command = statement.rstrip() + " sorry"

        def attempt(proc: ReplProcess, env: int, deadline: float) -> TacticResult:
            answer = proc.command(command, env, deadline)
            if isinstance(answer, ReplError):
                raise _RetryOnFreshProcess("repl_error", (answer.message,))
            roots = [s for s in answer.sorries if s.proof_state is not None]
            if answer.errors or len(roots) != 1:
                reason = "prover_error" if answer.errors else "no_proof_state"
                return TacticResult(TacticStatus.ERROR, messages=rendered(answer.messages), reason=reason)
            return TacticResult(TacticStatus.PROGRESS, ProofStateRef(proc.serial, roots[0].proof_state),
                                goals=(roots[0].goal,), reason="ok")

        result, _ = self._run(header, self._timeout(timeout), attempt)
        if isinstance(result, _Outcome):
            status = {Status.TIMEOUT: TacticStatus.TIMEOUT, Status.SYSTEM_ERROR: TacticStatus.SYSTEM_ERROR}.get(
                result.status, TacticStatus.ERROR)
            result = TacticResult(status, messages=result.messages, reason=result.reason)
        return replace(result, seconds=time.monotonic() - start)

    def run_tactic(self, state: ProofStateRef, tactic: str, timeout: Optional[float] = None) -> TacticResult:
        """Run one untrusted ``tactic`` on ``state``."""
        start = time.monotonic()
        rejection = check_tactic(tactic, self._policy)
        if rejection is not None:
            return TacticResult(TacticStatus.ERROR, state, messages=rejection.messages, reason=rejection.reason)
        proc = self._active
        if proc is None or proc.serial != state.process or not proc.alive:
            return TacticResult(TacticStatus.SYSTEM_ERROR, messages=("the proof state's process is gone",),
                                reason="state_lost")
        try:
            answer = proc.tactic(tactic, state.proof_state, start + self._timeout(timeout))
        except ReplTimeout:
            return TacticResult(TacticStatus.TIMEOUT, reason="timeout", seconds=time.monotonic() - start)
        except ReplCrashed as e:
            return TacticResult(TacticStatus.SYSTEM_ERROR, messages=_failure_messages(e), reason=e.reason,
                                seconds=time.monotonic() - start)
        seconds = time.monotonic() - start
        if isinstance(answer, ReplError):
            # the tactic threw (parse error, failing `exact?`...) or the id is unknown
            return TacticResult(TacticStatus.ERROR, state, messages=(answer.message,), reason="tactic_error",
                                seconds=seconds)
        messages = rendered(answer.messages)
        if answer.errors:
            return TacticResult(TacticStatus.ERROR, state, messages=messages, proof_status=answer.proof_status,
                                reason="prover_error", seconds=seconds)
        if answer.sorries:
            return TacticResult(TacticStatus.ERROR, state, messages=messages, proof_status=answer.proof_status,
                                reason="sorry", seconds=seconds)
        new_state = ProofStateRef(proc.serial, answer.proof_state)
        if answer.completed:
            return TacticResult(TacticStatus.COMPLETED, new_state, messages=messages,
                                proof_status=answer.proof_status, reason="ok", seconds=seconds)
        if not answer.goals:
            # no goals left, yet not "Completed" (metavariables, kernel error...)
            return TacticResult(TacticStatus.ERROR, state, messages=messages, proof_status=answer.proof_status,
                                reason="incomplete", seconds=seconds)
        return TacticResult(TacticStatus.PROGRESS, new_state, goals=answer.goals, messages=messages,
                            proof_status=answer.proof_status, reason="ok", seconds=seconds)

    # -- attempts ----------------------------------------------------------
    def _proof_attempt(self, proc: ReplProcess, env: int, prepared: PreparedProof, deadline: float) -> _Outcome:
        answer = proc.command(prepared.command, env, deadline)
        if isinstance(answer, ReplError):
            raise _RetryOnFreshProcess("repl_error", (answer.message,))
        rejection = judge_command(answer)
        if rejection is not None:
            return _Outcome(Status.INVALID, rejection.reason, rejection.messages)
        name = prepared.name if prepared.name.startswith("_root_.") else f"_root_.{prepared.name}"
        if self.config.axiom_check == "process":
            return self._axioms_from_checker(proc, answer, name, deadline)
        axioms = proc.command(f"#print axioms {name}", answer.env, deadline)
        if isinstance(axioms, ReplError):
            raise _RetryOnFreshProcess("repl_error", (axioms.message,))
        rejection = judge_axioms(axioms, self._policy.allowed_axioms)
        if rejection is not None:
            return _Outcome(Status.INVALID, rejection.reason, rejection.messages)
        return _Outcome(Status.VALID, "ok", rendered(answer.messages))

    def _axioms_from_checker(self, proc: ReplProcess, answer: CommandResponse, name: str,
                             deadline: float) -> _Outcome:
        """The axiom check in a separate process (:mod:`lean_env.lean.axiom_check`):
        the REPL pickles the proof's environment, the trusted checker replays it
        through the kernel and lists the theorem's axioms."""
        nonce = new_nonce()
        pickle = os.path.join(proc.exchange_dir, f"env-{nonce}.olean")
        try:
            written = proc.pickle(pickle, answer.env, deadline)
            if isinstance(written, ReplError):
                raise _RetryOnFreshProcess("repl_error", (written.message,))
            argv = checker_command(self.config.lake_command, self.config.project_dir, nonce, "pickle", pickle, name)
            try:
                [result] = run_batch([argv], files={}, deadline=deadline, env=self._env, limits=self._limits,
                                     name="lean-axioms")
            except FileNotFoundError as error:
                return _Outcome(Status.SYSTEM_ERROR, "axiom_check_unavailable", (str(error),))
        finally:
            with contextlib.suppress(OSError):
                os.unlink(pickle)
        report = judge_report(result, nonce, name, self._policy.allowed_axioms)
        if report.status is not Status.VALID:
            return _Outcome(report.status, report.reason, report.messages)
        return _Outcome(Status.VALID, "ok", (*rendered(answer.messages), *report.messages))

    def _statement_attempt(self, proc: ReplProcess, env: int, command: str, deadline: float) -> _Outcome:
        answer = proc.command(command, env, deadline)
        if isinstance(answer, ReplError):
            raise _RetryOnFreshProcess("repl_error", (answer.message,))
        if answer.errors:
            return _Outcome(Status.INVALID, "prover_error", rendered(answer.messages))
        return _Outcome(Status.VALID, "ok", rendered(answer.messages))

    def _run(self, header: str, timeout: float, job: Callable[[ReplProcess, int, float], _T]
             ) -> tuple[Union[_T, _Outcome], str]:
        """Run ``job(process, header_env, deadline)`` on a process that has
        ``header``, retrying once on a fresh process when the process fails.
        Returns the job's result, or the classified failure, and the worker."""
        rejection = check_text(header, _MAX_HEADER_CHARS)
        if rejection is not None:
            return _Outcome(Status.INVALID, "bad_header", rejection.messages), "lean"
        self._warn_about_header(header)
        failure = _Outcome(Status.SYSTEM_ERROR, "crash")
        worker = "lean"
        crashes_on_input = 0
        for _ in range(2):
            proc: Optional[ReplProcess] = None
            running_job = False
            try:
                proc = self._process_for(header)
                worker = f"lean:{proc.pid}"
                env = proc.header_env(header, time.monotonic() + self.config.header_timeout)
                running_job = True
                return job(proc, env, time.monotonic() + timeout), worker
            except RequestEncodingError as e:
                return _Outcome(Status.INVALID, "bad_encoding", (str(e),)), worker
            except HeaderError as e:
                return _Outcome(Status.SYSTEM_ERROR, "header_error", e.messages), worker
            except ReplTimeout as e:
                if proc is not None and proc.has_header(header):
                    return _Outcome(Status.TIMEOUT, "timeout", (str(e),)), worker
                failure = _Outcome(Status.SYSTEM_ERROR, "header_timeout", (str(e),))
            except ReplFailure as e:
                failure = _Outcome(Status.SYSTEM_ERROR, e.reason, _failure_messages(e))
                crashes_on_input += running_job and isinstance(e, ReplCrashed)
            except _RetryOnFreshProcess as e:
                if proc is not None:
                    proc.kill()
                failure = _Outcome(Status.SYSTEM_ERROR, e.reason, e.messages)
            if self._closed:
                break
            log.warning("Lean REPL failed (%s): %s", failure.reason, " | ".join(failure.messages)[:500])
        if crashes_on_input == 2:
            # the header ran on both processes and each died on this input: the input's doing
            # (a proof that exits the process or exhausts memory), not the machinery's
            return _Outcome(Status.INVALID, "prover_crash",
                            ("the REPL died on this input in two fresh processes", *failure.messages)), worker
        return failure, worker

    # -- processes ---------------------------------------------------------
    def _process_for(self, header: str) -> ReplProcess:
        """The live process, replacing it (by the spare when there is one)
        when it is dead or due for recycling."""
        if self._closed:
            raise ReplCrashed("the backend is closed", reason="closed")
        proc = self._active
        if proc is not None and proc.alive and not self._due_for_recycling(proc):
            return proc
        if proc is not None:
            proc.kill()
        self._active = None
        fresh = self._take_spare() or self._spawn(header)
        with self._lock:  # close() may run on another thread
            if self._closed:
                fresh.kill()
                raise ReplCrashed("the backend is closed", reason="closed")
            self._active = fresh
            if self.config.spare:
                self._spare = self._executor.submit(self._spawn, header)
        return fresh

    def _take_spare(self) -> Optional[ReplProcess]:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is None:
            return None
        try:
            proc = spare.result(timeout=self.config.header_timeout)
        except Exception as e:  # a failed spare is replaced by a foreground start
            log.warning("Lean REPL spare failed to start: %s", e)
            spare.add_done_callback(_kill_result)
            return None
        if proc.alive:
            return proc
        proc.kill()
        return None

    def _spawn(self, header: str) -> ReplProcess:
        """Start a process and run ``header`` on it (also in the background)."""
        proc = ReplProcess(self._argv, cwd=self.config.cwd(), env=self._env, limits=self._limits,
                           max_headers=self.config.max_headers)
        with self._lock:
            if self._closed:
                proc.kill()
                raise ReplCrashed("the backend is closed", reason="closed")
            self._starting.add(proc)
        try:
            proc.header_env(header, time.monotonic() + self.config.header_timeout)
        except BaseException:
            proc.kill()
            raise
        finally:
            with self._lock:
                self._starting.discard(proc)
        return proc

    def _due_for_recycling(self, proc: ReplProcess) -> bool:
        if proc.commands >= self.config.max_commands:
            log.info("recycling Lean REPL %d after %d commands", proc.pid, proc.commands)
            return True
        if self.config.max_rss_bytes and proc.rss_bytes() > self.config.max_rss_bytes:
            log.info("recycling Lean REPL %d above %d bytes RSS", proc.pid, self.config.max_rss_bytes)
            return True
        return False

    # -- helpers -----------------------------------------------------------
    def _timeout(self, timeout: Optional[float]) -> float:
        return self.config.timeout if timeout is None else timeout

    def _warn_about_header(self, header: str) -> None:
        if header not in self._warned_headers and _UNBOUNDED_HEARTBEATS.search(header):
            self._warned_headers.add(header)
            log.warning("the header sets maxHeartbeats 0: every runaway proof will cost a wall-clock "
                        "timeout and a REPL restart; prefer a finite limit such as 400000")


def _verdict(outcome: _Outcome, start: float, worker: str = "lean") -> Verdict:
    return Verdict(status=outcome.status, reason=outcome.reason, messages=list(outcome.messages),
                   seconds=time.monotonic() - start, worker=worker)


def _failure_messages(failure: ReplFailure) -> tuple[str, ...]:
    return (str(failure), f"stderr: {failure.stderr[-1000:]}") if failure.stderr else (str(failure),)


def _kill_result(future: Future) -> None:
    """Done-callback: kill the process a background start produced."""
    if not future.cancelled() and future.exception() is None:
        future.result().kill()


__all__ = ["LeanBackend", "ProofStateRef", "TacticResult", "TacticStatus"]
