"""The Rocq (Coq 8.16) prover backend.

This is a reward function: a proof it wrongly accepts is a proof self-play
learns to write.  A proof is valid when all of this holds:

1. the header, the statement and the body pass :mod:`lean_env.rocq.checks`
   (``Proof.``/``Proof using``/``Proof with``, then tactic sentences and the
   print-only queries :mod:`lean_env.rocq.commands` allows, then ``Qed.`` or
   ``Defined.``, nothing after it; nothing that reaches a known bug of Coq
   8.16, :mod:`lean_env.rocq.known_bugs`, unless the config allows it);
2. in a coqtop session at the state right after the header (and the
   configured tactic libraries, which must leave the statement's term as it
   was: :mod:`lean_env.rocq.tactic_libraries`), the trusted statement opens
   exactly the proof of its name;
3. every body sentence, sent one at a time, moves Coq to a new state and
   prints no error (the first failure ends the check), and each reply has
   exactly the structure :mod:`lean_env.rocq.output` expects;
4. after ``Qed.`` no proof is open, and ``Print Assumptions Top.name.``
   answers "Closed under the global context" or lists only
   ``RocqConfig.allowed_axioms``; when the axiom census
   (:mod:`lean_env.rocq.census`) has shown that nothing a proof under this
   header can reach is an axiom or unsafe, that answer is known in advance
   and the query is skipped;
5. the theorem's term, printed by the session under the checker's own
   printing settings, contains no local fixpoint that is not a copy of a
   library's, and no VM cast where the proof reaches primitive integers,
   floats or arrays, unless the config allows those features
   (:mod:`lean_env.rocq.term_check`: text checks see words, and a term can
   be built without them).  The proof's final ``Defined.`` is sent as
   ``Qed.``, which checks the same term and inlines what ``abstract``
   declared, so the printed term is everything the proof built.

A task with a load path (a target traced from a Rocq project,
:mod:`lean_env.rocq.load_path`) runs in a coqtop with those ``-R``/``-Q``
options, under a header that is the project file's text before the theorem
(trusted, so any command may appear in it; other headers may only load
libraries and open scopes).  The census and the audit use the same load
path; while such a header has axioms of its own (or no census yet) every
proof under it gets ``Print Assumptions``.

Because we send the trusted statement ourselves and the body may hold
nothing but tactics and queries, the body cannot swap the statement; the checks after
``Qed`` confirm that the named theorem now exists and depends on nothing
unexpected.  Before every piece of work the session goes back (``BackTo``)
to the state right after the header, so proofs never see each other.

Failures of the machinery are classified: a hung check is killed and answers
``timeout``; a dead coqtop is replaced and the check retried before it
answers ``system_error``, unless it died running the task's own text on two
fresh sessions: then the text is at fault (``invalid``, ``prover_crash``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import random
import re
import socket
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Literal, Optional

from lean_env.backend import ProverBackend
from lean_env.rocq.audit import audit_proof
from lean_env.rocq.checks import (
    RocqTextError, Sentence, Statement, check_characters, split_sentences, validate_header, validate_proof,
    validate_statement, validate_tactics)
from lean_env.rocq.census import AxiomCensus
from lean_env.rocq.config import CHECKS_VERSION, TOPLEVEL_MODULE, RocqConfig
from lean_env.rocq.load_path import LoadPath, LoadPathError, load_path_argv, parse_load_path
from lean_env.rocq.output import Reply, parse_assumptions
from lean_env.rocq.session import RocqSession, SessionDied, SessionError, SessionGarbled, SessionTimeout
from lean_env.rocq.tactic_libraries import MeaningCache, library_sentences, meaning_changed
from lean_env.rocq.tactic_state import OpenProof, TacticResult
from lean_env.rocq.term_check import PRINT_SETTINGS, nothing_to_look_for, objection, scan_term, unexplained_in_session
from lean_env.verdict import ProofTask, Status, Verdict

log = logging.getLogger(__name__)

#: fresh sessions a task's text must kill before the crash is its fault
CRASHES_TO_BLAME = 2
#: most sessions one piece of work may use: the first may be a long-lived
#: one, so blaming the text can take two more
MAX_ATTEMPTS = 3

#: a final ``Defined.`` (comments blanked)
_DEFINED = re.compile(r"Defined\s*\.")
#: fails unless the goal is a proposition (its type is exactly ``Prop``)
PROP_CHECK = "lazymatch goal with |- ?G => let s := type of G in constr_eq s Prop end."


@dataclass(frozen=True)
class _Outcome:
    """What one piece of work concluded (a verdict without timing)."""

    #: the verdict status
    status: Status
    #: the verdict reason (``ok``, ``prover_error``, ``banned:<word>``, ...)
    reason: str
    #: prover or checker messages
    messages: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        return self.status == Status.VALID


class _ProofCrashed(SessionDied):
    """coqtop died while it ran the task's own text (a proof sentence, the
    statement, or the checks after ``Qed``), not while it started or loaded
    the header."""


class _Stop(Exception):
    """Ends a piece of work early with its outcome."""

    def __init__(self, status: Status, reason: str, messages: tuple[str, ...]) -> None:
        super().__init__(reason)
        self.outcome = _Outcome(status, reason, messages)


class RocqBackend(ProverBackend):
    """Checks Rocq proofs on one persistent coqtop session (plus a spare)."""

    name = "rocq"

    def __init__(self, config: Optional[RocqConfig] = None, *, worker: str = "") -> None:
        """Raises :class:`~lean_env.rocq.config.RocqConfigError` when coqtop
        cannot be found or does not report a version."""
        self.config = config or RocqConfig()
        self._argv = self.config.argv()
        self._coq_version = self.config.probe_version()
        self._env = self.config.child_env()
        self._limits = self.config.limits()
        self._allowed_axioms = frozenset(self.config.allowed_axioms)
        #: known-bug classes this deployment lets through (:mod:`lean_env.rocq.known_bugs`)
        self._allowed_features = frozenset(self.config.allow_bug_prone_features)
        #: ``Require`` sentences run after every header (:mod:`lean_env.rocq.tactic_libraries`)
        self._libraries = library_sentences(self.config.tactic_libraries)
        self._meanings = MeaningCache()
        #: the axiom census (``None`` when disabled or coqchk is unusable)
        self.census = AxiomCensus.create(self.config, self._coq_version) if self.config.axiom_census else None
        #: draws which census-covered proofs are audited anyway (seeded: reproducible)
        self._audit_rng = random.Random(0)
        #: ``Print Assumptions`` queries run so far (the census saves them)
        self.assumption_checks = 0
        #: name reported in every verdict
        self.worker = worker or f"rocq:{socket.gethostname()}:{os.getpid()}"
        self._session: Optional[RocqSession] = None
        self._spare: Optional[RocqSession] = None
        self._proof: Optional[OpenProof] = None

    @property
    def version(self) -> str:
        return f"rocq-{self._coq_version}|checks-{CHECKS_VERSION}|{self.config.policy_fingerprint()}"

    @property
    def pid(self) -> Optional[int]:
        """Process id of the current coqtop session, if one is running."""
        return self._session.pid if self._session is not None else None

    # -- whole proofs -----------------------------------------------------
    def check_proof(self, task: ProofTask, timeout: Optional[float] = None) -> Verdict:
        started = time.monotonic()
        limit = self._timeout(timeout)
        try:
            load_path = parse_load_path(getattr(task, "load_path", ()))
            header, statement, body = self._validate_task(task, load_path)
        except LoadPathError as e:
            return self._verdict(_bad_load_path(e), started)
        except RocqTextError as e:
            return self._verdict(_Outcome(Status.INVALID, e.reason, (e.detail,)), started)
        return self._attempt(self._with_libraries(
            header, statement, limit, lambda session, loaded: self._prove(session, loaded, statement, body, limit)),
            started, load_path)

    def _validate_task(self, task: ProofTask, load_path: LoadPath) -> tuple[list[Sentence], Statement, list[Sentence]]:
        """The task's header, statement and proof split into checked sentences;
        raises :class:`RocqTextError` for text the checks refuse."""
        header = self._validate_header(getattr(task, "header", None), load_path)
        statement = self._validate_statement(getattr(task, "statement", None))
        body = validate_proof(getattr(task, "proof", None), max_chars=self.config.max_proof_chars,
                              max_sentences=self.config.max_sentences, allowed=self._allowed_features)
        return header, statement, body

    def check_statement(self, header: str, statement: str, timeout: Optional[float] = None, *,
                        load_path: object = ()) -> Verdict:
        """``load_path`` as :attr:`ProofTask.load_path`."""
        started = time.monotonic()
        limit = self._timeout(timeout)
        try:
            paths = parse_load_path(load_path)
            sentences = self._validate_header(header, paths)
            parsed = self._validate_statement(statement)
        except LoadPathError as e:
            return self._verdict(_bad_load_path(e), started)
        except RocqTextError as e:
            return self._verdict(_Outcome(Status.INVALID, e.reason, (e.detail,)), started)
        return self._attempt(self._with_libraries(
            sentences, parsed, limit, lambda session, loaded: self._elaborate(session, loaded, parsed, limit)),
            started, paths)

    def audit(self, task: ProofTask, timeout: Optional[float] = None) -> Verdict:
        """The second opinion (:mod:`lean_env.rocq.audit`): the whole file
        compiled by ``coqc`` in a fresh sandbox, checked by ``coqchk`` and
        its assumptions listed by a second ``coqc``.  Text the normal checks
        refuse is ``audit_text_rejected`` without running anything."""
        started = time.monotonic()
        limit = self._timeout(timeout)
        try:
            load_path = parse_load_path(getattr(task, "load_path", ()))
            header, statement, body = self._validate_task(task, load_path)
        except LoadPathError as e:
            return self._verdict(_bad_load_path(e), started)
        except RocqTextError as e:
            return self._verdict(_Outcome(Status.INVALID, "audit_text_rejected", (f"{e.reason}: {e.detail}",)),
                                 started)
        config = dataclasses.replace(self.config, extra_args=(*self.config.extra_args, *load_path_argv(load_path)))
        # a project header may declare axioms of its own: only the theorem itself may not be one
        found = audit_proof(config, header, statement, body, limit, own_header=bool(load_path),
                            libraries=self._libraries)
        messages = tuple(m[:self.config.max_message_chars] for m in found.messages)
        return self._verdict(_Outcome(found.status, found.reason, messages), started)

    def _prove(self, session: RocqSession, header: list[Sentence], statement: Statement,
               body: list[Sentence], timeout: float) -> _Outcome:
        deadline = self._enter(session, header, timeout)
        with self._input_blamed():
            self._open(session, statement, deadline)
            for i, sentence in enumerate(body):
                # a final Defined. is sent as Qed., which checks the same term and inlines what
                # abstract declared, so that the term check sees all of it (the theorem is
                # discarded after the check either way); anything else goes as written
                last = i == len(body) - 1
                reply = session.run("Qed." if last and _DEFINED.fullmatch(sentence.code) else sentence.text,
                                    deadline)
                if not reply.ok:
                    raise _Stop(Status.INVALID, "prover_error", self._messages(reply))
                expected = () if i == len(body) - 1 else (statement.name,)
                if reply.prompt.pending != expected:
                    raise _Stop(Status.INVALID, "proof_not_closed" if not expected else "protocol_violation",
                                (f"after {sentence.text[:80]!r} the open proofs are {reply.prompt.pending}",))
            return self._closed(session, statement.name, deadline)

    def _elaborate(self, session: RocqSession, header: list[Sentence], statement: Statement,
                   timeout: float) -> _Outcome:
        deadline = self._enter(session, header, timeout)
        with self._input_blamed():
            self._open(session, statement, deadline)
            if not session.run(PROP_CHECK, deadline).ok:
                raise _Stop(Status.INVALID, "not_a_proposition", ("the statement is not a proposition",))
            closed = session.run("Admitted.", deadline)
            if not closed.ok or not closed.prompt.top_level:
                raise _Stop(Status.INVALID, "statement_error", self._messages(closed))
        return _Outcome(Status.VALID, "ok")

    def _open(self, session: RocqSession, statement: Statement, deadline: float) -> Reply:
        """Send the statement; it must open exactly the proof of its name."""
        opened = session.run(statement.sentence.text, deadline)
        if not opened.ok or opened.prompt.pending != (statement.name,):
            raise _Stop(Status.INVALID, "statement_error", self._messages(opened))
        return opened

    def _closed(self, session: RocqSession, name: str, deadline: float) -> _Outcome:
        """The final checks after a successful ``Qed``: the assumptions, then
        what the proof term contains (:mod:`lean_env.rocq.term_check`)."""
        outcome, axioms = self._assumptions(session, name, deadline)
        if not outcome.valid:
            return outcome
        return self._term_check(session, name, deadline, axioms)

    def _assumptions(self, session: RocqSession, name: str, deadline: float) -> tuple[_Outcome, tuple[str, ...]]:
        """``Print Assumptions`` (skipped when the census is clean), and the
        axioms it listed (none when skipped: a clean census means none)."""
        census_clean = self.census is not None and self.census.is_clean(session.environment)
        if census_clean and self._audit_rng.random() >= self.config.census_audit_fraction:
            return _Outcome(Status.VALID, "ok"), ()
        self.assumption_checks += 1
        # qualified, so that no notation or library constant of that name can stand in
        reply = session.run(f"Print Assumptions {TOPLEVEL_MODULE}.{name}.", deadline)
        found = parse_assumptions(reply.output)
        if not reply.ok:
            outcome = _Outcome(Status.INVALID, "not_defined", self._messages(reply))
        elif not found.acceptable(self._allowed_axioms):
            outcome = _Outcome(Status.INVALID, "axioms", self._messages(reply))
        else:
            return _Outcome(Status.VALID, "ok"), found.axioms
        if census_clean:
            log.error("the axiom census said %s needs no assumption check, but Print Assumptions "
                      "rejected it (%s); the census is switched off for this backend", name, outcome.reason)
            self.census.close()
            self.census = None
        return outcome, ()

    def _term_check(self, session: RocqSession, name: str, deadline: float, axioms: tuple[str, ...]) -> _Outcome:
        """Print the declared theorem under our own printing settings and
        refuse the known-bug features its term contains (the words of the
        proof text were checked already; a term built through Ltac2's unsafe
        API has none of them)."""
        if nothing_to_look_for(axioms, self._allowed_features):
            return _Outcome(Status.VALID, "ok")   # spare the printing
        for setting in PRINT_SETTINGS:
            if not session.run(setting, deadline).ok:
                raise SessionGarbled("protocol_violation", f"{setting!r} failed")
        reply = session.run(f"Print {TOPLEVEL_MODULE}.{name}.", deadline)
        if not reply.ok:
            return _Outcome(Status.INVALID, "term_unreadable", self._messages(reply))
        found = scan_term(reply.output)
        if found.fixpoints and "fixpoints" not in self._allowed_features:
            def run(sentence: str) -> tuple[bool, str]:
                answer = session.run(sentence, deadline)
                return answer.ok, answer.output
            found = dataclasses.replace(found, fixpoints=unexplained_in_session(run, reply.output))
        refused = objection(found, axioms, self._allowed_features)
        if refused is not None:
            return _Outcome(Status.INVALID, refused.reason, (refused.message,))
        return _Outcome(Status.VALID, "ok")

    @contextlib.contextmanager
    def _input_blamed(self) -> Iterator[None]:
        """While untrusted text runs, output that breaks the protocol (forged
        prompts, a flood of output) is the text's fault: invalid."""
        try:
            yield
        except SessionGarbled as e:
            raise _Stop(Status.INVALID, e.reason, (str(e)[:self.config.max_message_chars],)) from e
        except _ProofCrashed:
            raise
        except SessionDied as e:
            # whose fault it is depends on whether it happens again (see _attempt)
            raise _ProofCrashed(str(e)) from e

    # -- tactic-level API -------------------------------------------------
    def start_proof(self, header: str, statement: str, timeout: Optional[float] = None, *,
                    load_path: object = ()) -> TacticResult:
        """Open ``statement`` under ``header`` for :meth:`run_tactic`; any
        proof opened earlier is abandoned.  Returns ``goals`` with the initial
        goal, or ``failed`` with the verdict explaining why it cannot open.
        ``load_path`` as :attr:`ProofTask.load_path`."""
        started = time.monotonic()
        limit = self._timeout(timeout)
        self._proof = None
        try:
            paths = parse_load_path(load_path)
            sentences = self._validate_header(header, paths)
            parsed = self._validate_statement(statement)
        except LoadPathError as e:
            verdict = self._verdict(_bad_load_path(e), started)
            return TacticResult("failed", messages=list(verdict.messages), verdict=verdict)
        except RocqTextError as e:
            verdict = self._verdict(_Outcome(Status.INVALID, e.reason, (e.detail,)), started)
            return TacticResult("failed", messages=list(verdict.messages), verdict=verdict)

        def work(session: RocqSession, loaded: list[Sentence]) -> _Outcome:
            deadline = self._enter(session, loaded, limit)
            with self._input_blamed():
                opened = self._open(session, parsed, deadline)
                if not session.run("Proof.", deadline).ok:
                    raise _Stop(Status.INVALID, "statement_error", ("'Proof.' failed",))
            self._proof = OpenProof(session=session, statement=parsed, goals=opened.message)
            return _Outcome(Status.VALID, "open")

        verdict = self._attempt(self._with_libraries(sentences, parsed, limit, work), started, paths)
        if self._proof is None:
            return TacticResult("failed", messages=list(verdict.messages), verdict=verdict)
        return TacticResult("goals", goals=self._proof.goals, state=self._proof.state)

    def run_tactic(self, tactic: str, timeout: Optional[float] = None, *, at: Optional[int] = None) -> TacticResult:
        """Run one step (one or more tactic sentences) on the proof opened by :meth:`start_proof`, from
        ``at`` (a :attr:`TacticResult.state` it reached; going back forgets the states after it) or from where
        it is.  A step is atomic: if any sentence fails, the proof returns to where it was before the step.
        When no goal is left the proof is closed with ``Qed`` and verified like :meth:`check_proof`.  Raises
        ``RuntimeError`` when no proof is open, ``ValueError`` for an ``at`` it cannot go back to."""
        started = time.monotonic()
        limit = self._timeout(timeout)
        proof = self._proof
        if proof is None or proof.session is not self._session or proof.session.broken:
            raise RuntimeError("no proof in progress: call start_proof first")
        try:
            sentences = validate_tactics(tactic, max_chars=self.config.max_proof_chars,
                                         max_sentences=self.config.max_sentences, allowed=self._allowed_features)
        except RocqTextError as e:
            return TacticResult("error", goals=proof.goals, messages=[e.detail])
        session = proof.session
        name = proof.statement.name
        deadline = time.monotonic() + limit
        try:
            if at is not None:
                proof.rewind(at, deadline)
            before = proof.state
            for sentence in sentences:
                reply = session.run(sentence.text, deadline)
                if not reply.ok:
                    session.back_to(before, deadline, pending=(name,))
                    return TacticResult("error", goals=proof.goals, messages=list(self._messages(reply)))
                if reply.prompt.pending != (name,):
                    raise SessionGarbled("protocol_violation", f"open proofs became {reply.prompt.pending}")
            proof.reached(reply.message)
            # Coq's own wording is only a hint to try Qed; Qed decides.
            if re.search(r"^No more goals", proof.goals, re.M):
                closed = session.run("Qed.", deadline)
                if closed.ok and closed.prompt.top_level:
                    return self._end_proof(self._closed(session, name, deadline), started)
            return TacticResult("goals", goals=proof.goals, state=proof.state)
        except SessionTimeout:
            return self._end_proof(_Outcome(Status.TIMEOUT, "timeout", ("no answer before the time limit",)),
                                   started)
        except SessionGarbled as e:
            return self._end_proof(_Outcome(Status.INVALID, e.reason, (str(e)[:self.config.max_message_chars],)),
                                   started)
        except SessionError as e:
            return self._end_proof(_Outcome(Status.SYSTEM_ERROR, "crash", (str(e)[:self.config.max_message_chars],)),
                                   started)

    def _end_proof(self, outcome: _Outcome, started: float) -> TacticResult:
        self._proof = None
        self._recycle_if_needed()
        verdict = self._verdict(outcome, started)
        kind: Literal["finished", "failed"] = "finished" if verdict.valid else "failed"
        return TacticResult(kind, messages=list(verdict.messages), verdict=verdict)

    # -- sessions ---------------------------------------------------------
    def _attempt(self, work: Callable[[RocqSession], _Outcome], started: float, load_path: LoadPath) -> Verdict:
        """Run ``work`` on a session ready with ``load_path``; a session that
        dies or garbles our own commands is replaced and the work retried.

        A coqtop that dies while running the task's own text (out of memory,
        say) is not at fault by itself: a long-lived session may have grown.
        When the same work has killed :data:`CRASHES_TO_BLAME` fresh sessions
        (no earlier check on them), the text is: ``invalid`` with reason
        ``prover_crash``, cached like any invalid verdict, so that a proof that
        kills the prover is not free to retry.  Any other failure, a header
        that does not load included, stays ``system_error``."""
        error: Optional[SessionError] = None
        fresh_crashes = failures = 0
        for _ in range(MAX_ATTEMPTS):
            fresh = False
            try:
                session = self._ready_session(load_path)
                fresh = session.uses == 0
                outcome = work(session)
            except _Stop as stop:
                outcome = stop.outcome
            except SessionTimeout:
                self._discard()
                outcome = _Outcome(Status.TIMEOUT, "timeout", ("no answer before the time limit",))
            except _ProofCrashed as e:
                self._discard()
                error = e
                fresh_crashes += fresh
                if fresh_crashes >= CRASHES_TO_BLAME:
                    return self._verdict(_Outcome(Status.INVALID, "prover_crash", (
                        f"coqtop died running this text in {fresh_crashes} fresh sessions: "
                        f"{str(e)[:self.config.max_message_chars]}",)), started)
                continue
            except SessionError as e:
                self._discard()
                error = e
                failures += 1
                if failures >= 2:
                    break   # twice outside the task's text: the machinery's fault
                continue
            self._recycle_if_needed()
            return self._verdict(outcome, started)
        return self._verdict(_Outcome(Status.SYSTEM_ERROR, "crash", (str(error)[:self.config.max_message_chars],)),
                             started)

    def _with_libraries(self, header: list[Sentence], statement: Statement, timeout: float,
                        work: Callable[[RocqSession, list[Sentence]], _Outcome]) -> Callable[[RocqSession], _Outcome]:
        """``work`` under the header followed by the tactic libraries, once
        they are known to leave the statement's term unchanged (asked once per
        header, statement and libraries: :mod:`lean_env.rocq.tactic_libraries`)."""
        if not self._libraries:
            return lambda session: work(session, header)
        key = MeaningCache.key(header, statement, self._libraries)

        def run(session: RocqSession) -> _Outcome:
            known, found = self._meanings.get(key)
            if not known:
                deadline = self._enter(session, header, timeout, identify=False)
                with self._input_blamed():
                    found = meaning_changed(lambda text: session.run(text, deadline), statement, self._libraries)
                self._meanings.put(key, found)
            if found is not None:
                return _Outcome(Status(found.status), found.reason, found.messages)
            return work(session, [*header, *self._libraries])
        return run

    def _enter(self, session: RocqSession, header: list[Sentence], timeout: float, identify: bool = True) -> float:
        """Bring ``session`` to the state right after ``header`` (with its own
        time limit) and return the deadline for the work that follows;
        ``identify``: have the census look at the state."""
        self._proof = None
        header_deadline = time.monotonic() + self.config.header_timeout
        try:
            failed = session.enter(tuple(s.text for s in header), header_deadline)
            if failed is None and identify and self.census is not None and session.environment is None:
                session.environment = self.census.identify(session, header_deadline)
        except SessionTimeout as e:
            raise _Stop(Status.SYSTEM_ERROR, "header_timeout",
                        (f"the header did not load within {self.config.header_timeout} s",)) from e
        if failed is not None:
            raise _Stop(Status.INVALID, "header_error", self._messages(failed))
        return time.monotonic() + timeout

    def _ready_session(self, load_path: LoadPath) -> RocqSession:
        """The session, started with ``load_path`` (a session or spare started
        with another one is replaced)."""
        if self._session is not None and self._session.load_path != load_path:
            self._discard()
        if self._spare is not None and self._spare.load_path != load_path:
            self._spare.kill()
            self._spare = None
        if self._session is None or not self._session.alive:
            self._discard()
            spare, self._spare = self._spare, None
            if spare is not None and not spare.alive:
                spare.kill()
                spare = None
            self._session = spare or self._spawn(load_path)
            try:
                self._session.wait_ready(time.monotonic() + self.config.start_timeout)
            except SessionTimeout as e:
                raise SessionDied(f"coqtop did not start within {self.config.start_timeout} s") from e
        if self.config.spare and self._spare is None:
            self._spare = self._spawn(load_path)
        return self._session

    def _spawn(self, load_path: LoadPath) -> RocqSession:
        argv = self.config.argv(load_path_argv(load_path)) if load_path else self._argv
        session = RocqSession(argv, env=self._env, limits=self._limits, name="coqtop")
        session.load_path = load_path
        return session

    def _discard(self) -> None:
        if self._session is not None:
            self._session.kill()
            self._session = None
        self._proof = None

    def _recycle_if_needed(self) -> None:
        """Count one use of the session; replace it when broken, worn out or
        too big (never in the middle of a tactic-level proof)."""
        session = self._session
        if session is None:
            return
        if session.broken:
            self._discard()
            return
        if self._proof is not None:
            return
        session.uses += 1
        too_big = self.config.max_rss_bytes > 0 and session.rss_bytes() > self.config.max_rss_bytes
        if session.uses >= self.config.max_checks or too_big:
            self._discard()

    def close(self) -> None:
        if self.census is not None:
            self.census.close()
        self._discard()
        if self._spare is not None:
            self._spare.kill()
            self._spare = None

    # -- helpers ----------------------------------------------------------
    def _validate_header(self, header: object, load_path: LoadPath) -> list[Sentence]:
        """A header without a load path may only load libraries and open
        scopes; a project header (with one) is any trusted Rocq text."""
        if not load_path:
            return validate_header(header, max_chars=self.config.max_header_chars)
        text = check_characters(header, max_chars=self.config.max_project_header_chars, what="header")
        return split_sentences(text, trusted=True)

    def _validate_statement(self, statement: object) -> Statement:
        return validate_statement(statement, max_chars=self.config.max_statement_chars,
                                  allowed=self._allowed_features)

    def _timeout(self, timeout: Optional[float]) -> float:
        value = self.config.timeout if timeout is None else timeout
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value > 0 and math.isfinite(value)):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        return float(value)

    def _messages(self, reply: Reply) -> tuple[str, ...]:
        text = reply.message or "Coq did not accept the sentence"
        return (text[:self.config.max_message_chars],)

    def _verdict(self, outcome: _Outcome, started: float) -> Verdict:
        return Verdict(status=outcome.status, reason=outcome.reason, messages=list(outcome.messages),
                       seconds=time.monotonic() - started, worker=self.worker)


def _bad_load_path(error: LoadPathError) -> _Outcome:
    """A task whose load path is malformed or names a missing directory: the
    data or the machine is at fault, not the proof, so it is no training signal."""
    return _Outcome(Status.SYSTEM_ERROR, "load_path", (str(error),))
