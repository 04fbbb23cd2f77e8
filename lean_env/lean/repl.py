"""One Lean REPL process: requests with deadlines, headers run once.

:class:`ReplProcess` owns a :class:`~lean_env.sandbox.SandboxedProcess` and
turns every way the process can fail into one of two exceptions, after which
the process is dead (its process group killed, its scratch directory gone):

* :class:`ReplTimeout`: no answer before the deadline (the REPL has no timeout
  of its own, so the only way to stop a runaway command is to kill it);
* :class:`ReplCrashed`: the process died, closed its output, printed something
  that is not a REPL answer, or answered a command with a REPL-level error.

Environment and proof-state ids live in one process and die with it.
"""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import threading
import time
from collections import OrderedDict
from typing import Any, Optional, Union

from lean_env.lean.checks import rendered
from lean_env.lean.protocol import (
    CommandResponse, ProofStepResponse, ProtocolError, ReplError, command_request, decode_response,
    encode_request, parse_command_response, parse_tactic_response, pickle_request, response_frame_end,
    tactic_request)
from lean_env.sandbox import Limits, OutputTooLarge, ProcessDied, ReadTimeout, SandboxedProcess
from lean_env.scratch import make_scratch_dir

#: writes larger than a pipe's buffer can block on a REPL that stopped
#: reading; those get a watchdog that kills the process at the deadline
_PIPE_CAPACITY = 64 << 10

_serials = itertools.count(1)


class ReplFailure(RuntimeError):
    """The REPL process failed and has been killed.  ``reason`` is the short
    classification used in verdicts."""

    reason = "crash"

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        #: the last part of the process's stderr, for diagnosis
        self.stderr = stderr


class ReplTimeout(ReplFailure):
    """No answer before the deadline."""

    reason = "timeout"


class ReplCrashed(ReplFailure):
    """The process died or answered something unusable."""

    def __init__(self, message: str, stderr: str = "", reason: str = "crash") -> None:
        super().__init__(message, stderr)
        self.reason = reason


class HeaderError(RuntimeError):
    """A header does not elaborate.  The header is trusted configuration, so
    this is a setup problem, not a verdict on any proof; the process is fine."""

    def __init__(self, messages: tuple[str, ...]) -> None:
        super().__init__("the header does not elaborate: " + " | ".join(messages)[:1000])
        #: Lean's messages about the header
        self.messages = messages


class ReplProcess:
    """A running REPL, one request at a time."""

    def __init__(self, argv: list[str], *, cwd: Optional[str] = None, env: Optional[dict[str, str]] = None,
                 limits: Limits = Limits(), max_headers: int = 4, name: str = "lean-repl") -> None:
        """``cwd`` is the working directory (``None``: a scratch directory
        that is deleted with the process)."""
        #: unique number of this process within our Python process; tactic-mode
        #: proof states are tied to it
        self.serial = next(_serials)
        #: requests answered so far
        self.commands = 0
        self._max_headers = max(1, max_headers)
        self._headers: OrderedDict[str, int] = OrderedDict()
        #: a private directory for files the REPL writes for us (environment pickles);
        #: removed with the process
        self.exchange_dir = make_scratch_dir(f"{name}-{self.serial}-exchange")
        limits = dataclasses.replace(limits, writable_paths=(*limits.writable_paths, self.exchange_dir))
        try:
            self._proc = SandboxedProcess(argv, cwd=cwd, env=env, limits=limits, name=f"{name}-{self.serial}")
        except BaseException:
            shutil.rmtree(self.exchange_dir, ignore_errors=True)
            raise

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc.alive

    def rss_bytes(self) -> int:
        """Resident memory of the REPL and its children."""
        return self._proc.rss_bytes()

    def stderr_tail(self) -> str:
        return self._proc.stderr_tail()

    def kill(self) -> None:
        """Kill the process group; idempotent."""
        self._proc.kill()
        shutil.rmtree(self.exchange_dir, ignore_errors=True)

    # -- requests ---------------------------------------------------------
    def request(self, request: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Send one request and return the decoded answer.

        ``deadline`` is a ``time.monotonic()`` value.  Raises
        :class:`~lean_env.lean.protocol.RequestEncodingError` (process
        untouched) for a request that cannot be encoded, and
        :class:`ReplTimeout` / :class:`ReplCrashed` (process killed)."""
        data = encode_request(request)
        if not self.alive:
            self.kill()
            raise ReplCrashed("the REPL process is not running", self.stderr_tail())
        try:
            self._write(data, deadline)
            frame = self._proc.read_until(response_frame_end, deadline)
            answer = decode_response(frame)
        except ReadTimeout as e:
            self.kill()
            raise ReplTimeout(str(e)) from e
        except ProcessDied as e:
            self.kill()  # the sandbox's message already ends with the stderr tail
            raise ReplCrashed(str(e)) from e
        except OutputTooLarge as e:
            self.kill()
            raise ReplCrashed(str(e), self.stderr_tail(), reason="output_too_large") from e
        except ProtocolError as e:
            self.kill()
            raise ReplCrashed(str(e), self.stderr_tail(), reason="garbled") from e
        self.commands += 1
        return answer

    def _write(self, data: bytes, deadline: float) -> None:
        if len(data) <= _PIPE_CAPACITY:
            self._proc.write(data)
            return
        fired = threading.Event()

        def expire() -> None:
            fired.set()
            self.kill()

        watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            self._proc.write(data)
        except ProcessDied as e:
            if fired.is_set():
                raise ReadTimeout("the REPL did not read its input before the deadline") from e
            raise
        finally:
            watchdog.cancel()

    def command(self, cmd: str, env: Optional[int], deadline: float) -> Union[CommandResponse, ReplError]:
        """Elaborate ``cmd`` in environment ``env``."""
        return self._typed(parse_command_response, self.request(command_request(cmd, env), deadline))

    def pickle(self, path: str, env: int, deadline: float) -> Union[CommandResponse, ReplError]:
        """Write environment ``env`` to ``path`` (the REPL's ``pickleTo``)."""
        return self._typed(parse_command_response, self.request(pickle_request(path, env), deadline))

    def tactic(self, tactic: str, proof_state: int, deadline: float) -> Union[ProofStepResponse, ReplError]:
        """Run ``tactic`` on ``proof_state``."""
        return self._typed(parse_tactic_response, self.request(tactic_request(tactic, proof_state), deadline))

    def _typed(self, parse, answer: dict[str, Any]):
        try:
            return parse(answer)
        except ProtocolError as e:
            self.kill()
            raise ReplCrashed(str(e), self.stderr_tail(), reason="garbled") from e

    # -- headers ----------------------------------------------------------
    def header_env(self, header: str, deadline: float) -> int:
        """The environment after ``header``, running it on first use.

        Raises :class:`HeaderError` when the header has errors and
        :class:`ReplCrashed` when the REPL refuses it."""
        if header in self._headers:
            self._headers.move_to_end(header)
            return self._headers[header]
        answer = self.command(header, None, deadline)
        if isinstance(answer, ReplError):
            self.kill()
            raise ReplCrashed(f"the REPL refused the header: {answer.message}", self.stderr_tail(),
                              reason="repl_error")
        if answer.errors:
            raise HeaderError(rendered(answer.messages))
        self._headers[header] = answer.env
        while len(self._headers) > self._max_headers:
            self._headers.popitem(last=False)
        return answer.env

    def has_header(self, header: str) -> bool:
        """Whether ``header`` has already run here."""
        return header in self._headers


__all__ = ["HeaderError", "ReplCrashed", "ReplFailure", "ReplProcess", "ReplTimeout"]
