"""Wire format of the Lean 4 REPL (leanprover-community/repl): framing and
typed responses.

Requests: one JSON object on ONE line followed by exactly one blank line,
non-ASCII sent as raw UTF-8.  The REPL joins the lines of a request without a
separator and dies on invalid JSON or on a second blank line, so the encoder
never emits a raw newline (``json.dumps`` escapes those inside strings) and
refuses text that cannot be encoded as UTF-8 (lone surrogates).

Responses: one pretty-printed JSON object over several lines, followed by a
blank line.  Empty lists are omitted by the REPL, so a missing ``messages`` /
``sorries`` / ``goals`` key means ``[]``.  A top-level ``{"message": ...}`` is
a REPL-level error (unknown environment or proof state, a tactic that threw).

Nothing here touches a process; :mod:`lean_env.lean.repl` moves the bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Union

#: the line that ends a request and a response
_BLANK_LINE = b"\n\n"


class RequestEncodingError(ValueError):
    """A request cannot be put on the wire (e.g. a lone surrogate in a string)."""


class ProtocolError(ValueError):
    """A response is not what the REPL protocol allows (garbled output)."""


# -- framing ---------------------------------------------------------------

def encode_request(request: dict[str, Any]) -> bytes:
    """Frame one request: compact single-line JSON, raw UTF-8, one blank line.

    Raises :class:`RequestEncodingError` for objects that are not JSON
    serialisable or contain text that is not valid Unicode.
    """
    if not isinstance(request, dict):
        raise RequestEncodingError(f"a request is a JSON object, not {type(request).__name__}")
    try:
        line = json.dumps(request, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise RequestEncodingError(f"request is not JSON serialisable: {e}") from e
    try:
        data = line.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RequestEncodingError(f"request contains text that is not valid Unicode: {e.reason} "
                                   f"at character {e.start}") from e
    # json.dumps escapes control characters inside strings and uses no
    # newlines between tokens; this guards the one invariant the REPL needs.
    if b"\n" in data or b"\r" in data:
        raise RequestEncodingError("encoded request spans several lines")
    return data + _BLANK_LINE


def response_frame_end(buffer: bytes) -> Optional[int]:
    """End offset (past the blank line) of the first complete response in
    ``buffer``, or ``None`` while it is incomplete.

    Leading blank lines are skipped: a response is non-blank text followed by
    a blank line.  Pretty-printed JSON never contains an empty line, because
    newlines inside strings are escaped.
    """
    start = 0
    while start < len(buffer) and buffer[start:start + 1] in (b"\n", b" ", b"\r", b"\t"):
        start += 1
    end = buffer.find(_BLANK_LINE, start)
    if end < 0:
        return None
    return end + len(_BLANK_LINE)


def decode_response(frame: bytes) -> dict[str, Any]:
    """Parse one framed response into a JSON object; :class:`ProtocolError`
    when it is not UTF-8, not JSON, or not an object."""
    try:
        text = frame.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError(f"response is not UTF-8: {e}") from e
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProtocolError(f"response is not JSON ({e.msg}): {text[:200]!r}") from e
    if not isinstance(obj, dict):
        raise ProtocolError(f"response is a JSON {type(obj).__name__}, not an object: {text[:200]!r}")
    return obj


# -- requests --------------------------------------------------------------

def command_request(cmd: str, env: Optional[int] = None) -> dict[str, Any]:
    """A Command request: elaborate ``cmd``, continuing from snapshot ``env``
    (``None`` starts a fresh session, where ``import`` is allowed)."""
    request: dict[str, Any] = {"cmd": cmd}
    if env is not None:
        request["env"] = env
    return request


def pickle_request(path: str, env: int) -> dict[str, Any]:
    """A PickleEnvironment request: write environment ``env`` (its imports and
    the constants added after them) to the file ``path``; answered like a
    command, with ``env`` echoed."""
    return {"pickleTo": path, "env": env}


def tactic_request(tactic: str, proof_state: int) -> dict[str, Any]:
    """A ProofStep request: run ``tactic`` on proof state ``proof_state``."""
    return {"tactic": tactic, "proofState": proof_state}


# -- responses -------------------------------------------------------------

@dataclass(frozen=True)
class Position:
    """A place in the command text: 1-based line, 0-based column (codepoints).
    Tactic-mode messages carry 0:0."""

    line: int
    column: int


@dataclass(frozen=True)
class Message:
    """One Lean message."""

    #: "error", "warning", "info" or "trace"
    severity: str
    #: the message text, exactly as Lean printed it
    data: str
    #: start of the range the message is about (``None`` if absent)
    pos: Optional[Position] = None
    #: end of that range (``None`` if absent or null)
    end_pos: Optional[Position] = None

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def render(self) -> str:
        """``severity line:column: text``, for humans and model feedback."""
        where = f" {self.pos.line}:{self.pos.column}" if self.pos else ""
        return f"{self.severity}{where}: {self.data}"


@dataclass(frozen=True)
class Sorry:
    """A ``sorry`` Lean found, with the proof state that stands for its goal."""

    #: the goal the sorry closes, pretty-printed
    goal: str
    #: proof-state id usable in tactic mode (``None`` if the REPL gave none)
    proof_state: Optional[int] = None
    #: where the sorry is (absent for sorries created in tactic mode)
    pos: Optional[Position] = None


@dataclass(frozen=True)
class CommandResponse:
    """The answer to a Command request."""

    #: id of the environment snapshot after the command
    env: int
    messages: tuple[Message, ...] = ()
    sorries: tuple[Sorry, ...] = ()

    @property
    def errors(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.is_error)


@dataclass(frozen=True)
class ProofStepResponse:
    """The answer to a ProofStep (tactic) request."""

    #: id of the proof state after the tactic
    proof_state: int
    #: remaining goals, pretty-printed; empty does NOT mean the proof is done
    goals: tuple[str, ...] = ()
    messages: tuple[Message, ...] = ()
    sorries: tuple[Sorry, ...] = ()
    #: "Completed", "Incomplete: ...", "Error: ..." (REPL >= v4.19); "" if absent
    proof_status: str = ""

    @property
    def errors(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.is_error)

    @property
    def completed(self) -> bool:
        """Kernel-checked completion: ``proofStatus == "Completed"``, no error
        message and no sorry."""
        return self.proof_status == "Completed" and not self.errors and not self.sorries


@dataclass(frozen=True)
class ReplError:
    """A top-level ``{"message": ...}``: the REPL refused or failed the request."""

    message: str


def _field(obj: dict[str, Any], key: str, kind: type, *, default: Any = None, required: bool = False) -> Any:
    if key not in obj or (obj[key] is None and not required):
        if required:
            raise ProtocolError(f"response lacks {key!r}: {str(obj)[:200]}")
        return default
    value = obj[key]
    # bool is an int subclass; no REPL id or count is ever a bool
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"response field {key!r} should be {kind.__name__}, got {value!r:.200}")
    return value


def _position(obj: Any) -> Optional[Position]:
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise ProtocolError(f"a position is an object, got {obj!r:.200}")
    return Position(_field(obj, "line", int, required=True), _field(obj, "column", int, required=True))


def _messages(obj: dict[str, Any]) -> tuple[Message, ...]:
    out = []
    for m in _field(obj, "messages", list, default=[]):
        if not isinstance(m, dict):
            raise ProtocolError(f"a message is an object, got {m!r:.200}")
        out.append(Message(severity=_field(m, "severity", str, required=True),
                           data=_field(m, "data", str, required=True),
                           pos=_position(m.get("pos")), end_pos=_position(m.get("endPos"))))
    return tuple(out)


def _sorries(obj: dict[str, Any]) -> tuple[Sorry, ...]:
    out = []
    for s in _field(obj, "sorries", list, default=[]):
        if not isinstance(s, dict):
            raise ProtocolError(f"a sorry is an object, got {s!r:.200}")
        out.append(Sorry(goal=_field(s, "goal", str, default=""),
                         proof_state=_field(s, "proofState", int),
                         pos=_position(s.get("pos"))))
    return tuple(out)


def _repl_error(obj: dict[str, Any]) -> Optional[ReplError]:
    if "message" in obj and "env" not in obj and "proofState" not in obj:
        return ReplError(_field(obj, "message", str, required=True))
    return None


def parse_command_response(obj: dict[str, Any]) -> Union[CommandResponse, ReplError]:
    """Type a decoded answer to a Command request; :class:`ProtocolError` if
    it is neither a command response nor a REPL-level error."""
    error = _repl_error(obj)
    if error is not None:
        return error
    return CommandResponse(env=_field(obj, "env", int, required=True),
                           messages=_messages(obj), sorries=_sorries(obj))


def parse_tactic_response(obj: dict[str, Any]) -> Union[ProofStepResponse, ReplError]:
    """Type a decoded answer to a ProofStep request; :class:`ProtocolError` if
    it is neither a proof-step response nor a REPL-level error."""
    error = _repl_error(obj)
    if error is not None:
        return error
    goals = _field(obj, "goals", list, default=[])
    if not all(isinstance(g, str) for g in goals):
        raise ProtocolError(f"goals should be strings: {goals!r:.200}")
    return ProofStepResponse(proof_state=_field(obj, "proofState", int, required=True),
                             goals=tuple(goals), messages=_messages(obj), sorries=_sorries(obj),
                             proof_status=_field(obj, "proofStatus", str, default=""))


__all__ = [
    "CommandResponse", "Message", "Position", "ProofStepResponse", "ProtocolError", "ReplError",
    "RequestEncodingError", "Sorry", "command_request", "decode_response", "encode_request",
    "parse_command_response", "parse_tactic_response", "pickle_request", "response_frame_end", "tactic_request",
]
