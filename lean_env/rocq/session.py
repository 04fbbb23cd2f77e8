"""One ``coqtop -emacs`` process and the sentence-by-sentence protocol with it.

A :class:`RocqSession` sends one sentence at a time, each followed by a
barrier (see :mod:`lean_env.rocq.output`), and tracks the document state id
from the prompts.  It loads a header once, remembers the state id after it,
and returns to that state with ``BackTo`` before every new piece of work, so
work items never see each other.  Switching to another header goes back to
the state after the longest prefix of sentences the two headers share (the
initial state when they share none, which unloads the previous header's
libraries) and runs the rest of the new one.

Any failure of the process or of the protocol raises a :class:`SessionError`
and marks the session :attr:`~RocqSession.broken`; the owner must then throw
it away.  Whether a failure is the input's fault is for the owner to decide.
"""

from __future__ import annotations

from typing import Callable, Optional

from lean_env.rocq.environment import Environment
from lean_env.rocq.output import (
    Barrier,
    Prompt,
    ProtocolError,
    Reply,
    first_prompt_end,
    has_error,
    parse_banner,
    parse_reply,
)
from lean_env.sandbox import Limits, OutputTooLarge, ProcessDied, ReadTimeout, SandboxedProcess


class SessionError(RuntimeError):
    """The session cannot be used any more."""


class SessionDied(SessionError):
    """coqtop exited, closed its output or could not be started."""


class SessionTimeout(SessionError):
    """No answer before the deadline (coqtop is busy or hung)."""


class SessionGarbled(SessionError):
    """coqtop's output broke the protocol, or was too large."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        #: ``protocol_violation`` or ``output_too_large``
        self.reason = reason


class RocqSession:
    """A started coqtop process (see the module docstring)."""

    def __init__(self, argv: list[str], *, env: dict[str, str], limits: Limits, name: str) -> None:
        """Start coqtop; raises :class:`SessionDied` when it cannot start."""
        try:
            self._proc = SandboxedProcess(argv, env=env, limits=limits, name=name, merge_stderr=True)
        except OSError as e:
            raise SessionDied(f"cannot start {argv[0]}: {e}") from e
        #: the last prompt seen (``None`` until :meth:`wait_ready`)
        self.prompt: Optional[Prompt] = None
        #: state id right after start-up
        self.initial_state = 0
        #: the header sentences currently loaded (``None``: none yet)
        self.header: Optional[tuple[str, ...]] = None
        #: state id right after the header
        self.header_state = 0
        #: the header sentences run from the initial state, in order (those of
        #: the header loaded, or of the part of one that loaded before a failure)
        self._run_sentences: list[str] = []
        #: ``_states_after[k]``: the state id after the first ``k`` of them
        self._states_after: list[int] = [0]
        #: what the owner's axiom census found about the state right after the
        #: header (``None``: not looked at yet); reset whenever a header is loaded
        self.environment: Optional[Environment] = None
        #: work items run on this session (for recycling)
        self.uses = 0
        #: set when a :class:`SessionError` was raised; the session is unusable
        self.broken = False
        #: the load path coqtop was started with (set by the owner; ``()``: none)
        self.load_path: tuple = ()

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc.alive and not self.broken

    def rss_bytes(self) -> int:
        return self._proc.rss_bytes()

    def kill(self) -> None:
        """Kill the process group and remove the scratch directory."""
        self.broken = True
        self._proc.kill()

    # -- protocol ---------------------------------------------------------
    def wait_ready(self, deadline: float) -> None:
        """Read the start-up banner up to the first prompt (once)."""
        if self.prompt is not None:
            return
        raw = self._read(first_prompt_end, deadline)
        try:
            self.prompt = parse_banner(raw)
        except ProtocolError as e:
            raise self._fail(SessionGarbled("protocol_violation", str(e)))
        self.initial_state = self.header_state = self.prompt.state
        self._forget_header()

    def run(self, sentence: str, deadline: float) -> Reply:
        """Send one sentence and return coqtop's reply to it."""
        if self.prompt is None or self.broken:
            raise SessionError("session not ready")
        barrier = Barrier.fresh()
        try:
            self._proc.write(f"{sentence}\n{barrier.command}\n".encode("utf-8"))
        except ProcessDied as e:
            raise self._fail(SessionDied(str(e)))
        raw = self._read(barrier.frame, deadline)
        try:
            reply = parse_reply(raw, barrier, before=self.prompt.state)
        except ProtocolError as e:
            raise self._fail(SessionGarbled("protocol_violation", str(e)))
        self.prompt = reply.prompt
        # coqtop runs nothing between sentences: what a tactic started and left (a
        # forked worker, a watchdog, a shell) ends with the sentence, not with the session
        self._proc.end_strays()
        return reply

    def back_to(self, state: int, deadline: float, pending: tuple[str, ...] = ()) -> None:
        """Return to a saved state, in which exactly the proofs ``pending``
        are open (none: a top-level state)."""
        reply = self.run(f"BackTo {state}.", deadline)
        if reply.prompt.state != state or reply.prompt.pending != pending or has_error(reply.output):
            raise self._fail(SessionGarbled("protocol_violation", f"BackTo {state} answered {reply.output[:300]!r} "
                                            f"at state {reply.prompt.state}"))

    def enter(self, header: tuple[str, ...], deadline: float) -> Optional[Reply]:
        """Make the state right after ``header`` current.  Only the sentences
        after the longest prefix it shares with the sentences already run are
        sent: the headers of the targets of one project file are prefixes of
        one another, so moving from one to the next runs just the text
        between them, and moving back is one ``BackTo``.  Returns the failing
        reply when a header sentence fails (the session is then back at its
        initial state)."""
        if self.header == header:
            if self.prompt is not None and self.prompt.state != self.header_state:
                self.back_to(self.header_state, deadline)
            return None
        shared = 0
        while shared < min(len(self._run_sentences), len(header)) and \
                self._run_sentences[shared] == header[shared]:
            shared += 1
        del self._run_sentences[shared:]
        del self._states_after[shared + 1:]
        if self.prompt is not None and self.prompt.state != self._states_after[-1]:
            self.back_to(self._states_after[-1], deadline)
        self.header = None
        self.environment = None
        for sentence in header[shared:]:
            reply = self.run(sentence, deadline)
            if not reply.ok:
                self._forget_header()
                self.back_to(self.initial_state, deadline)
                return reply
            assert self.prompt is not None
            self._run_sentences.append(sentence)
            self._states_after.append(self.prompt.state)
        assert self.prompt is not None
        self.header, self.header_state = header, self.prompt.state
        return None

    def _forget_header(self) -> None:
        self.header = None
        self._run_sentences = []
        self._states_after = [self.initial_state]

    # -- helpers ----------------------------------------------------------
    def _read(self, frame: Callable[[bytes], Optional[int]], deadline: float) -> bytes:
        try:
            return self._proc.read_until(frame, deadline)
        except ReadTimeout as e:
            raise self._fail(SessionTimeout(str(e)))
        except ProcessDied as e:
            raise self._fail(SessionDied(str(e)))
        except OutputTooLarge as e:
            raise self._fail(SessionGarbled("output_too_large", str(e)))

    def _fail(self, error: SessionError) -> SessionError:
        self.broken = True
        return error
