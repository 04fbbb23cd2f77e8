"""The records a run keeps: targets, Conjecturer samples, Solver attempts, and
what each iteration concluded about its conjectures.

Every record is a frozen dataclass with ``to_json`` and ``from_json``.
``from_json`` checks field names and types, so a damaged line fails loudly
(the store adds the file name and line number) instead of becoming a
half-filled object that breaks training three phases later.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from collections.abc import Iterable
from typing import Any

from lean_env.verdict import Status, Verdict
from sgs.method.rewards import solve_rate

PROBLEM_KINDS = ("target", "conjecture")


class RecordError(ValueError):
    """A record, or the JSON object meant to describe one, is malformed."""


def prompt_digest(prompt: str) -> str:
    """Hex SHA-256 of a rendered prompt: stored instead of the prompt, which is
    re-rendered from the problem and the template when it is needed."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------
# JSON field checks (shared by every from_json)


def check_fields(d: Any, cls: type) -> None:
    if not isinstance(d, dict):
        raise RecordError(f"{cls.__name__}: expected a JSON object, got {type(d).__name__}")
    expected = set(cls.__dataclass_fields__)
    missing, unknown = expected - d.keys(), d.keys() - expected
    if missing:
        raise RecordError(f"{cls.__name__}: missing field(s) {sorted(missing)}")
    if unknown:
        raise RecordError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}")


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def typed_field(d: dict, name: str, kind: type, optional: bool = False) -> Any:
    """``d[name]`` if it has type ``kind`` (ints pass as floats; bools are not ints)."""
    value = d[name]
    if value is None and optional:
        return None
    if kind is float and _is_number(value):
        return float(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    wanted = kind.__name__ + (" or null" if optional else "")
    raise RecordError(f"field {name!r}: expected {wanted}, got {type(value).__name__}")


# The element types a JSON list of integers / of numbers may hold (a bool is neither).  The
# lists are a completion's tokens, thousands a record: their types are checked as a set.
_INT_TYPES = frozenset({int})
_NUMBER_TYPES = frozenset({int, float})


def _int_list(d: dict, name: str) -> list[int]:
    value = d[name]
    if not isinstance(value, list) or not set(map(type, value)) <= _INT_TYPES:
        raise RecordError(f"field {name!r}: expected a list of integers")
    return value


def _float_list(d: dict, name: str) -> list[float]:
    value = d[name]
    if not isinstance(value, list) or not set(map(type, value)) <= _NUMBER_TYPES:
        raise RecordError(f"field {name!r}: expected a list of numbers")
    return list(map(float, value))


def _exactly_one(cls: type, a: str, a_value: Any, b: str, b_value: Any) -> None:
    if (a_value is None) == (b_value is None):
        raise RecordError(f"{cls.__name__}: exactly one of {a!r} and {b!r} must be set")


# ---------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class Target:
    """A formal statement the run tries to prove."""

    id: str
    """Stable identifier from the target set (unique within the run)."""
    header: str
    """Imports and opens the statement needs (Lean: ``import Mathlib`` ...)."""
    statement: str
    """The trusted statement, up to and including ``:= by`` (Lean) or ``Theorem ... .`` (Rocq)."""
    held_out: bool = False
    """Never trained on and never counted in the cumulative solve rate (an evaluation split)."""
    load_path: tuple[tuple[str, str, str], ...] = ()
    """Rocq targets traced from a project: the ``(flag, directory, name)`` load
    path options its header needs (:attr:`lean_env.verdict.ProofTask.load_path`)."""

    def to_json(self) -> dict:
        d = {"id": self.id, "header": self.header, "statement": self.statement, "held_out": self.held_out}
        if self.load_path:  # written only when there is one, as run directories before it have none
            d["load_path"] = [list(entry) for entry in self.load_path]
        return d

    @classmethod
    def from_json(cls, d: Any) -> "Target":
        check_fields({"load_path": [], **d} if isinstance(d, dict) else d, cls)
        load_path = d.get("load_path", [])
        if not isinstance(load_path, list) or not all(
                isinstance(e, list) and len(e) == 3 and all(isinstance(x, str) for x in e) for e in load_path):
            raise RecordError("field 'load_path': expected a list of [flag, directory, name] strings")
        return cls(
            id=typed_field(d, "id", str),
            header=typed_field(d, "header", str),
            statement=typed_field(d, "statement", str),
            held_out=typed_field(d, "held_out", bool),
            load_path=tuple(tuple(e) for e in load_path),
        )


@dataclass(frozen=True)
class Completion:
    """One sample drawn from a generation engine, as training and metrics need it."""

    prompt_sha256: str
    """``prompt_digest`` of the rendered prompt (the prompt is re-rendered, not stored)."""
    text: str
    """The decoded completion."""
    token_ids: list[int]
    """Completion token ids exactly as sampled (prompt excluded, stopping EOS included)."""
    logprobs: list[float]
    """The sampler's log-probability of each sampled token (pi_old for CISPO)."""
    policy_version: int
    """Version of the weights that sampled it (0 = the initial checkpoint)."""
    finish_reason: str
    """Why generation stopped, as the engine reports it (``stop``, ``length``)."""
    entropy: float
    """Mean token entropy over the sampler's top-10 log-probs, renormalised (SPEC 1.6)."""

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise RecordError(
                f"Completion: {len(self.token_ids)} token ids but {len(self.logprobs)} log-probs"
            )

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    def to_json(self) -> dict:
        return {
            "prompt_sha256": self.prompt_sha256,
            "text": self.text,
            "token_ids": self.token_ids,
            "logprobs": self.logprobs,
            "policy_version": self.policy_version,
            "finish_reason": self.finish_reason,
            "entropy": self.entropy,
        }

    @classmethod
    def from_json(cls, d: Any) -> "Completion":
        check_fields(d, cls)
        return cls(
            prompt_sha256=typed_field(d, "prompt_sha256", str),
            text=typed_field(d, "text", str),
            token_ids=_int_list(d, "token_ids"),
            logprobs=_float_list(d, "logprobs"),
            policy_version=typed_field(d, "policy_version", int),
            finish_reason=typed_field(d, "finish_reason", str),
            entropy=typed_field(d, "entropy", float),
        )


def _verdict_from_json(d: Any) -> Verdict:
    if not isinstance(d, dict):
        raise RecordError(f"field 'verdict': expected an object or null, got {type(d).__name__}")
    try:
        verdict = Verdict.from_json(d)
    except (TypeError, ValueError) as e:  # unknown field, bad status
        raise RecordError(f"field 'verdict': {e}") from None
    if not isinstance(verdict.messages, list) or not all(isinstance(m, str) for m in verdict.messages):
        raise RecordError("field 'verdict.messages': expected a list of strings")
    if not _is_number(verdict.seconds) or not isinstance(verdict.reason, str):
        raise RecordError("field 'verdict': bad 'seconds' or 'reason'")
    return verdict


@dataclass(frozen=True)
class Attempt:
    """One Solver sample for one problem, with its verdict and reward."""

    id: str
    """Unique within the iteration; derive it from (problem, sample index) so a
    resumed phase can tell which samples it already has."""
    iteration: int
    """The iteration that produced it."""
    problem_id: str
    """A target id or a conjecture id."""
    problem_kind: str
    """``target`` or ``conjecture``."""
    completion: Completion
    """What the Solver generated."""
    proof: str | None
    """The extracted proof body, spliced under the original statement for checking."""
    extraction_error: str | None
    """Why no proof body could be extracted (then there is no verdict)."""
    verdict: Verdict | None
    """The prover's verdict on ``proof``; messages are capped by the store."""
    reward: float
    """The Solver reward after penalties (overlong, ``try``)."""

    def __post_init__(self) -> None:
        if self.problem_kind not in PROBLEM_KINDS:
            raise RecordError(f"Attempt: problem_kind must be one of {PROBLEM_KINDS}, got {self.problem_kind!r}")
        _exactly_one(Attempt, "proof", self.proof, "extraction_error", self.extraction_error)
        if (self.proof is None) != (self.verdict is None):
            raise RecordError("Attempt: a verdict is present exactly when a proof was extracted")
        if not math.isfinite(self.reward):
            raise RecordError(f"Attempt: reward must be finite, got {self.reward}")

    @property
    def verified(self) -> bool:
        return self.verdict is not None and self.verdict.status is Status.VALID

    @property
    def rollout_status(self) -> str:
        """The status the solve rate and the objectives use: an output with no
        proof in it is a failed attempt, like a rejected proof."""
        return Status.INVALID.value if self.verdict is None else self.verdict.status.value

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "iteration": self.iteration,
            "problem_id": self.problem_id,
            "problem_kind": self.problem_kind,
            "completion": self.completion.to_json(),
            "proof": self.proof,
            "extraction_error": self.extraction_error,
            "verdict": None if self.verdict is None else self.verdict.to_json(),
            "reward": self.reward,
        }

    @classmethod
    def from_json(cls, d: Any) -> "Attempt":
        check_fields(d, cls)
        return cls(
            id=typed_field(d, "id", str),
            iteration=typed_field(d, "iteration", int),
            problem_id=typed_field(d, "problem_id", str),
            problem_kind=typed_field(d, "problem_kind", str),
            completion=Completion.from_json(d["completion"]),
            proof=typed_field(d, "proof", str, optional=True),
            extraction_error=typed_field(d, "extraction_error", str, optional=True),
            verdict=None if d["verdict"] is None else _verdict_from_json(d["verdict"]),
            reward=typed_field(d, "reward", float),
        )



def solve_rates(attempts: Iterable[Attempt]) -> dict[str, float | None]:
    """s(x) per problem id (:func:`sgs.method.rewards.solve_rate`; None: only system errors)."""
    statuses: dict[str, list[str]] = {}
    for attempt in attempts:
        statuses.setdefault(attempt.problem_id, []).append(attempt.rollout_status)
    return {problem: solve_rate(found) for problem, found in statuses.items()}

@dataclass(frozen=True)
class Conjecture:
    """One Conjecturer sample for one unsolved target, malformed ones included."""

    id: str
    """Unique across the run (attempts on it use it as their ``problem_id``)."""
    iteration: int
    """The iteration that produced it."""
    target_id: str
    """The target it was conditioned on (lineage); it inherits that target's header."""
    completion: Completion
    """What the Conjecturer generated."""
    statement: str | None
    """The extracted statement, ending in ``:= by``."""
    extraction_error: str | None
    """Why it was dropped before proving: malformed, duplicate of a target or of
    another conjecture of this iteration, or its statement failed to elaborate."""

    def __post_init__(self) -> None:
        _exactly_one(Conjecture, "statement", self.statement, "extraction_error", self.extraction_error)

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "iteration": self.iteration,
            "target_id": self.target_id,
            "completion": self.completion.to_json(),
            "statement": self.statement,
            "extraction_error": self.extraction_error,
        }

    @classmethod
    def from_json(cls, d: Any) -> "Conjecture":
        check_fields(d, cls)
        return cls(
            id=typed_field(d, "id", str),
            iteration=typed_field(d, "iteration", int),
            target_id=typed_field(d, "target_id", str),
            completion=Completion.from_json(d["completion"]),
            statement=typed_field(d, "statement", str, optional=True),
            extraction_error=typed_field(d, "extraction_error", str, optional=True),
        )


@dataclass(frozen=True)
class ConjectureScore:
    """What an iteration concluded about one conjecture: its solve rate, whether
    selection kept it, the Guide's review, and the Conjecturer's reward."""

    conjecture_id: str
    """The conjecture this scores."""
    solve_rate: float
    """Verified Solver attempts / k in this iteration."""
    kept: bool
    """Selected for reward: 0 < s <= p70 of the solve rates in (0, 1)."""
    relevance: int | None
    """Guide sub-score 0..5; null when not reviewed or unparsable."""
    redundancy: int | None
    """Guide sub-score 0/1 (1: some premise is not needed)."""
    complexity: int | None
    """Guide conclusion-complexity sub-score 0..4."""
    guide_output: str | None
    """The Guide's raw text; null when the Guide did not review it."""
    guide_parse_error: str | None
    """Why the review could not be parsed (then ``r_guide`` is the batch mean)."""
    r_guide: float | None
    """The Guide score used in the reward (parsed, or imputed); null when not reviewed."""
    reward: float
    """R = R_guide * (1 - s) (or 1 - s without a Guide) when kept, else 0."""
    weight: float
    """The Conjecturer's training weight: ``reward`` after min-max normalisation."""

    def to_json(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, d: Any) -> "ConjectureScore":
        check_fields(d, cls)
        return cls(
            conjecture_id=typed_field(d, "conjecture_id", str),
            solve_rate=typed_field(d, "solve_rate", float),
            kept=typed_field(d, "kept", bool),
            relevance=typed_field(d, "relevance", int, optional=True),
            redundancy=typed_field(d, "redundancy", int, optional=True),
            complexity=typed_field(d, "complexity", int, optional=True),
            guide_output=typed_field(d, "guide_output", str, optional=True),
            guide_parse_error=typed_field(d, "guide_parse_error", str, optional=True),
            r_guide=typed_field(d, "r_guide", float, optional=True),
            reward=typed_field(d, "reward", float),
            weight=typed_field(d, "weight", float),
        )


Record = Attempt | Conjecture | ConjectureScore

# The name each record type has in a phase log line: {"attempt": {...}}.
RECORD_TYPES: dict[str, type] = {"attempt": Attempt, "conjecture": Conjecture, "conjecture_score": ConjectureScore}
RECORD_NAMES: dict[type, str] = {cls: name for name, cls in RECORD_TYPES.items()}


def record_key(record: Record) -> str:
    """The id that must be unique per record type within one phase."""
    return record.conjecture_id if isinstance(record, ConjectureScore) else record.id


def record_to_line(record: Record) -> dict:
    return {RECORD_NAMES[type(record)]: record.to_json()}


def record_from_line(d: Any) -> Record:
    if not isinstance(d, dict) or len(d) != 1:
        raise RecordError(f"expected an object with one key out of {sorted(RECORD_TYPES)}")
    (name, body), = d.items()
    if name not in RECORD_TYPES:
        raise RecordError(f"unknown record type {name!r}; expected one of {sorted(RECORD_TYPES)}")
    return RECORD_TYPES[name].from_json(body)
