"""Reading the service's requests: raw bytes in, a checked request or a 4xx out.

Pure functions, no Ray: :func:`read_body` turns a request body into a JSON
object, and :func:`prove_request`, :func:`verify_request` and
:func:`generate_request` turn that object into a typed request.  Every
problem raises :class:`BadRequest` with the HTTP status and one message
naming it:

* 413: a body over ``serve.max_request_bytes`` (checked before parsing);
* 400: a body that is not UTF-8, not JSON or not a JSON object; a missing
  field, a field of the wrong type, a field the endpoint does not know, text
  with unpaired surrogates; ``attempts`` or ``timeout`` out of the server's
  bounds; an unknown prover; an unknown ``mode``;
* 422: well-formed but unusable: a prover the server does not run, a
  statement or header the verifier's own text checks refuse
  (:func:`sgs.state.benchmarks.problem_text`), or one of the other language;
  a search (``mode`` ``search`` or ``both``) on a server that checks Lean.

Whether a statement *elaborates* needs the prover; the front asks the
verifier for that (:mod:`sgs.serve.api`) and answers 422 the same way.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from sgs.config import ProverBackend, ServeConfig
from sgs.state.benchmarks import problem_text


class BadRequest(Exception):
    """A request the service refuses: ``status`` (4xx) and one message naming the problem."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


#: ``/prove``'s modes: whole proofs sampled, a tactic-level search, or sampling then the search
PROVE_MODES = ("sample", "search", "both")


@dataclass(frozen=True)
class ProveRequest:
    """``POST /prove``: find a proof of ``statement`` within ``timeout`` seconds, by
    ``attempts`` samples, a search, or both (``mode``)."""

    header: str
    statement: str
    attempts: int
    timeout: float
    mode: str = "sample"


@dataclass(frozen=True)
class VerifyRequest:
    """``POST /verify``: check ``proof`` (a body, as the verifier takes it) of ``statement``."""

    header: str
    statement: str
    proof: str
    timeout: float


@dataclass(frozen=True)
class GenerateRequest:
    """``POST /generate`` in LeanCopilot's external-generator format: ``input``
    is a goal (or a statement), ``prefix`` what each output must start with."""

    name: str
    input: str
    prefix: str


def read_body(body: bytes, max_bytes: int) -> dict:
    """The request body as a JSON object."""
    if len(body) > max_bytes:
        raise too_large(len(body), max_bytes)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadRequest(400, f"the request body is not UTF-8 (byte {error.start}: "
                              f"{body[error.start:error.start + 1]!r})") from None
    if not text.strip():
        raise BadRequest(400, "the request body is empty; send a JSON object")
    try:
        obj = json.loads(text)
    except ValueError as error:
        raise BadRequest(400, f"the request body is not valid JSON: {error}") from None
    if not isinstance(obj, dict):
        raise BadRequest(400, f"the request body must be a JSON object, got {_json_type(obj)}")
    return obj


def too_large(size: int, max_bytes: int) -> BadRequest:
    """The 413 for a body of ``size`` bytes."""
    return BadRequest(413, f"the request body has {size} bytes; this server takes at most {max_bytes} "
                           "(serve.max_request_bytes)")


def prove_request(obj: dict, serve: ServeConfig, prover: str) -> ProveRequest:
    """A ``/prove`` body: ``header`` (optional), ``statement``, ``attempts`` and
    ``timeout`` (optional, within the server's bounds), ``prover`` and ``mode`` (optional)."""
    _known_fields(obj, ("header", "statement", "attempts", "timeout", "prover", "mode"))
    _check_prover(obj, prover)
    mode = _text(obj, "mode", default="sample") if obj.get("mode") is not None else "sample"
    if mode not in PROVE_MODES:
        raise BadRequest(400, f"unknown mode {mode!r}; modes are {', '.join(PROVE_MODES)}")
    header, statement = _problem(obj, prover)
    attempts = _integer(obj, "attempts", serve.default_attempts)
    if not 1 <= attempts <= serve.max_attempts:
        raise BadRequest(400, f"attempts={attempts} must lie in 1..{serve.max_attempts} (serve.max_attempts)")
    return ProveRequest(header, statement, attempts, _timeout(obj, serve), mode)


def verify_request(obj: dict, serve: ServeConfig, prover: str) -> VerifyRequest:
    """A ``/verify`` body: ``header`` (optional), ``statement``, ``proof``,
    ``timeout`` and ``prover`` (optional)."""
    _known_fields(obj, ("header", "statement", "proof", "timeout", "prover"))
    _check_prover(obj, prover)
    header, statement = _problem(obj, prover)
    proof = _text(obj, "proof")
    if not proof.strip():
        raise BadRequest(400, "'proof' is empty")
    return VerifyRequest(header, statement, proof, _timeout(obj, serve))


def generate_request(obj: dict) -> GenerateRequest:
    """A ``/generate`` body in LeanCopilot's format: ``name``, ``input`` and
    ``prefix`` (null or absent: no constraint).  Other fields are ignored, as
    LeanCopilot's own server ignores them."""
    name = _text(obj, "name", default="")
    goal = _text(obj, "input")
    if not goal.strip():
        raise BadRequest(400, "'input' is empty; send the goal to prove")
    prefix = _text(obj, "prefix", default="") if obj.get("prefix") is not None else ""
    return GenerateRequest(name, goal, prefix)


# --------------------------------------------------------------------------
# Fields
# --------------------------------------------------------------------------


def _known_fields(obj: dict, known: tuple[str, ...]) -> None:
    unknown = sorted(set(obj) - set(known))
    if unknown:
        raise BadRequest(400, f"unknown field(s) {', '.join(map(repr, unknown))}; this endpoint takes "
                              f"{', '.join(known)}")


def _check_prover(obj: dict, served: str) -> None:
    if "prover" not in obj or obj["prover"] is None:
        return
    prover = obj["prover"]
    if not isinstance(prover, str):
        raise BadRequest(400, f"'prover' must be a string, got {_json_type(prover)}")
    if prover not in tuple(ProverBackend):
        raise BadRequest(400, f"unknown prover {prover!r}; provers are {', '.join(ProverBackend)}")
    if prover != served:
        raise BadRequest(422, f"this server checks {served} proofs, not {prover} ones; start one with prover={prover}")


def _problem(obj: dict, prover: str) -> tuple[str, str]:
    """``header`` and ``statement``, as the verifier will take them, or why they are not a problem."""
    header = _text(obj, "header", default="")
    statement = _text(obj, "statement")
    if not statement.strip():
        raise BadRequest(400, "'statement' is empty")
    text = problem_text(statement, header, prover)
    if text.other_language is not None:
        raise BadRequest(422, f"the statement is a {text.other_language} statement; this server checks "
                              f"{prover} proofs")
    if text.problem is not None:
        raise BadRequest(422, f"the statement or header is not a {prover} problem: {text.problem}")
    return header, text.statement


def _text(obj: dict, key: str, default: str | None = None) -> str:
    if key not in obj:
        if default is None:
            raise BadRequest(400, f"missing field {key!r}")
        return default
    value = obj[key]
    if not isinstance(value, str):
        raise BadRequest(400, f"{key!r} must be a string, got {_json_type(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise BadRequest(400, f"{key!r} holds an unpaired surrogate at character {error.start} "
                              "(\\ud800-\\udfff escapes are not text)") from None
    return value


def _integer(obj: dict, key: str, default: int) -> int:
    value = obj.get(key)
    if value is None:
        return default
    # bool is an int subclass; true is not the number 1 here.
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(400, f"{key!r} must be an integer, got {_json_type(value)}")
    return value


def _timeout(obj: dict, serve: ServeConfig) -> float:
    value = obj.get("timeout")
    if value is None:
        return serve.default_timeout_s
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadRequest(400, f"'timeout' must be a number of seconds, got {_json_type(value)}")
    if not 0 < value <= serve.max_timeout_s:
        raise BadRequest(400, f"timeout={value} must lie in (0, {serve.max_timeout_s}] seconds (serve.max_timeout_s)")
    return float(value)


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type (with the value when it is short)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, bool) or value is None:
        return f"{names[type(value)]} ({json.dumps(value)})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    return names.get(type(value), type(value).__name__)
