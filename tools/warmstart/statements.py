"""Generated statements and how their text is read.

A :class:`Lemma` is one generated statement and, when known, its tactics: a
record of the target schema (``tools/make_rocq_targets.py``), so the target
tool can check it.  :func:`shape` reads a proposition as ``forall binders,
premise -> ... -> conclusion`` and :func:`split_top` splits a text at a
top-level operator: a token-level reading that is enough for the statements
generated here, not a Rocq parser.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Mapping, Sequence

from sgs.method.roles import Language, conjecture_name
from sgs.method.roles.lexer import Token, tokenize
from tools import make_rocq_targets as targets_tool

ROCQ = Language.ROCQ
HEADER = targets_tool.HEADER


# ---------------------------------------------------------------------------
# Lemmas: records of the target schema, so the target tool can check them


@dataclass(frozen=True)
class Lemma:
    """A generated statement: ``Theorem <name> : <prop>.`` and, when known,
    its tactics (without ``Proof.``/``Qed.``)."""

    name: str
    prop: str
    tactics: str | None
    topic: str
    difficulty: int
    family: str

    @property
    def statement(self) -> str:
        return f"Theorem {self.name} : {self.prop}."

    @property
    def proof(self) -> str | None:
        return targets_tool.render_proof(self.tactics)

    def renamed(self) -> "Lemma":
        """This lemma under the name the loop gives a conjecture."""
        name = conjecture_name(self.statement, ROCQ)
        return Lemma(name, self.prop, self.tactics, self.topic, self.difficulty, self.family)

    def record(self) -> dict:
        """A record of the target schema (:data:`make_rocq_targets.FIELDS`)."""
        return {"id": self.name, "header": HEADER, "statement": self.statement, "proof": self.proof,
                "difficulty": self.difficulty, "topic": self.topic, "held_out": False}


def prop_of(statement: str) -> str:
    """The proposition of ``Theorem name : prop.``."""
    return statement.split(" : ", 1)[1].rstrip()[:-1]


def tactics_of(proof: str | None) -> str | None:
    """The tactics of a proof written by :func:`make_rocq_targets.render_proof`
    (its inverse)."""
    if proof is None:
        return None
    return "\n".join(line[2:] for line in proof.splitlines()[1:-1])


def target_lemma(target: Mapping) -> Lemma:
    """A target as a :class:`Lemma` (its reference proof as tactics)."""
    return Lemma(target["id"], prop_of(target["statement"]), tactics_of(target["proof"]), target["topic"],
                 target["difficulty"], "reference")


# ---------------------------------------------------------------------------
# Statement shape: binders, premises, conclusion (a token-level reading that
# is enough for the statements generated here, not a Rocq parser)

_OPEN = {"(": ")", "[": "]", "{": "}"}
BINDER_WORDS = frozenset({"forall", "exists", "fun"})


def rocq_tokens(text: str) -> list[Token]:
    return [t for t in tokenize(text, ROCQ) if t.kind != "end"]


def _depths(tokens: Sequence[Token]) -> list[int]:
    """Bracket depth before each token."""
    depth, depths = 0, []
    for token in tokens:
        if token.text in _OPEN.values():
            depth -= 1
        depths.append(depth)
        if token.text in _OPEN:
            depth += 1
    return depths


def first_comma(tokens: Sequence[Token]) -> int | None:
    """Index of the first comma outside brackets (ends a binder list)."""
    depths = _depths(tokens)
    return next((i for i, t in enumerate(tokens) if depths[i] == 0 and t.text == ","), None)


@dataclass(frozen=True)
class Binder:
    """One binder group: names and their type text (``None`` when untyped)."""

    names: tuple[str, ...]
    type: str | None


def binder_groups(text: str) -> list[Binder] | None:
    """The groups of ``forall <text>,``: ``a b : T`` or ``(a : T) (b c : U)``;
    ``None`` for anything else."""
    tokens = rocq_tokens(text)
    if not tokens:
        return None
    if tokens[0].text != "(":
        colon = next((i for i, t in enumerate(tokens) if t.text == ":"), None)
        names = tokens if colon is None else tokens[:colon]
        if not names or any(t.kind != "ident" for t in names):
            return None
        kind = None if colon is None else text[tokens[colon].end:].strip()
        return [Binder(tuple(t.text for t in names), kind)]
    groups, i, depths = [], 0, _depths(tokens)
    while i < len(tokens):
        if tokens[i].text != "(":
            return None
        close = next((j for j in range(i + 1, len(tokens))
                      if depths[j] == depths[i] and tokens[j].text == ")"), None)
        inner = text[tokens[i].end:tokens[close].start] if close is not None else ""
        sub = binder_groups(inner) if inner and not inner.lstrip().startswith("(") else None
        if close is None or sub is None or sub[0].type is None:
            return None
        groups += sub
        i = close + 1
    return groups


@dataclass(frozen=True)
class Shape:
    """A proposition read as ``forall binders, premise -> ... -> conclusion``
    (binders and premises may interleave; only the top level is read)."""

    binders: tuple[Binder, ...]
    premises: tuple[str, ...]
    conclusion: str

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(name for group in self.binders for name in group.names)


@functools.lru_cache(maxsize=None)
def shape(prop: str) -> Shape:
    """Peel leading ``forall`` groups and top-level premises off ``prop``."""
    binders: list[Binder] = []
    premises: list[str] = []
    rest = prop.strip()
    while True:
        tokens = rocq_tokens(rest)
        depths = _depths(tokens)
        if tokens and tokens[0].text == "forall":
            comma = first_comma(tokens)
            groups = None if comma is None else binder_groups(rest[tokens[0].end:tokens[comma].start])
            if groups is None:
                break
            binders += groups
            rest = rest[tokens[comma].end:].strip()
            continue
        arrow = None
        for i, token in enumerate(tokens):
            if depths[i] != 0:
                continue
            if token.text in BINDER_WORDS:
                break  # an arrow after this belongs to the binder's body
            if token.text == "->":
                arrow = i
                break
        if arrow is None:
            break
        premises.append(rest[:tokens[arrow].start].strip())
        rest = rest[tokens[arrow].end:].strip()
    return Shape(tuple(binders), tuple(premises), rest)


def _strip_parens(text: str) -> str:
    """``text`` without brackets that enclose all of it."""
    while True:
        tokens = rocq_tokens(text)
        if len(tokens) < 2 or tokens[0].text != "(" or tokens[-1].text != ")":
            return text
        depths = _depths(tokens)
        if any(depths[i] == 0 for i in range(1, len(tokens) - 1)):
            return text
        text = text[tokens[0].end:tokens[-1].start].strip()


def split_top(text: str, operator: str) -> list[str]:
    """``text`` split at top-level occurrences of ``operator``; a top-level
    binder keyword ends the splitting (its body runs to the end)."""
    text = _strip_parens(text)
    tokens = rocq_tokens(text)
    depths = _depths(tokens)
    parts, start = [], 0
    for i, token in enumerate(tokens):
        if depths[i] != 0:
            continue
        if token.text in BINDER_WORDS:
            break
        if token.text == operator:
            parts.append(text[start:token.start].strip())
            start = token.end
    parts.append(text[start:].strip())
    return parts


def identifiers(text: str) -> set[str]:
    return {t.text for t in rocq_tokens(text) if t.kind == "ident"}
