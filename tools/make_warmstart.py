#!/usr/bin/env python3
"""Build and check the Rocq warm-start corpus, ``sgs/data/warmstart_rocq.jsonl``.

The tiny default model starts from random weights, so before self-play can
show anything it needs a supervised warm start on the three roles.  This tool
writes that corpus: one JSON object per line,
``{"role", "prompt", "completion", "source", "meta"}``, where ``prompt`` is
rendered by :class:`sgs.method.roles.PromptSet` (``rocq`` templates) exactly as the
loop renders it and ``completion`` is the output the role's extractor
(:func:`sgs.method.roles.extract_proof`, :func:`~sgs.method.roles.extract_conjecture`,
:func:`~sgs.method.roles.extract_guide_scores`) parses.  Everything is generated
here from tables and seeded random choices (:data:`SEED`), so the file is
reproducible and reviewable; every statement and proof in it is checked by
Rocq (below).

Solver pairs (statement -> ``Proof. ... Qed.``)
    * Reference proofs of about 40% (:data:`REFERENCE_FRACTION`) of the
      TRAINING targets, chosen per topic by a seeded hash of the id.  The
      other 60% of training targets are deliberately left out: after the warm
      start the Solver should prove some but not all training targets at
      k = 8, so that self-play has something to learn.  It can reach them
      only by generalising from the rest of the corpus.
    * Generated lemmas that are NOT targets (ids ``ws_<family>_<n>``):
      families of the proof styles the targets use (closed computations,
      ``lia``/``ring``/``nia`` identities, rewrites, library lemmas at
      concrete types, tautologies, witnesses, boolean truth tables, small
      inductions...) with other constants, variables and types, plus type
      instances of training targets (``ws_<target>_at_nat``: ``(A : Type)``
      made ``nat`` or ``bool``, proved by the reference proof minus ``A``).
    * The proved conjectures below, under the name the loop gives a
      conjecture (:func:`sgs.method.roles.conjecture_name`), as the Solver sees them
      during self-play.

Conjecturer pairs (target -> a simpler related lemma, ``Admitted``)
    For training targets only, three kinds of lemma: ``instance`` (a nat, list
    or bool variable of the target set to a constant: the base case and a
    special case, or a closed instance when one of those is unusable; true
    because the target is; never one that makes a premise redundant, such as
    ``5 <= 0 -> ...``), ``library`` (a library lemma the target's reference
    proof cites, stated as a theorem) and ``key`` (a hand-written step,
    generalisation or auxiliary fact for a harder target,
    :data:`KEY_LEMMAS`).  Each has a checking proof when one is known
    (``meta["proof"]``; derived for instances by :func:`instance_proof`);
    every statement is checked to elaborate.

Guide triples (target + conjecture -> three scores)
    A sample of the conjectures above (``positive``) and constructed
    negatives: an ``unrelated`` lemma from another topic, the ``renamed``
    target, a conclusion ``hedged`` with an alternative (a closed instance of
    the same target or an unrelated closed fact), ``many`` unrelated
    alternatives, a ``conjunction`` of two closed instances, and a
    ``redundant`` premise.  The scores are never chosen by hand: they follow
    from the texts by the rules of :func:`guide_scores`:

    * relevance (0-5), from ``S(x)``: the symbols of a statement's canonical
      form (:func:`sgs.method.roles.canonical_form`) other than bound variables,
      brackets, binder keywords, ``nat``, ``Type``, ``Prop``, ``->`` and
      ``=`` (which nearly every statement has);
      ``overlap`` is the Jaccard index of S(target) and S(conjecture).
      0 if the conjecture is the target up to renaming, or shares no symbol
      with it and has no variable (unrelated and trivial); 5 if it is a
      generalisation: S(target) minus numerals is contained in S(conjecture)
      and the conjecture's conclusion uses more bound variables than the
      target's; otherwise 1 if overlap < 0.2, 2 if < 0.4, 3 if < 0.6, else 4.
    * redundancy (0/1): 1 if a bound variable occurs nowhere after its binder,
      or a top-level premise is disconnected from the conclusion: starting
      from the variables of the conclusion, a premise is needed when it
      shares a variable with those reached so far (which then reach its
      variables too); a premise never reached, including one with no
      variable, is redundant.
    * conclusion complexity (0-4), from the conclusion split at top-level
      ``\\/`` into alternatives and, with one alternative, at top-level
      ``/\\`` into conjuncts; a top-level ``<->`` makes it one claim (it
      binds looser than both).  Two parts are linked when they share a bound
      variable or an identifier other than a type, or a premise mentions a
      variable of each; a set of parts is linked when that relation connects
      them all.  One claim: 0; 2-3 linked
      conjuncts: 1; 2-3 unlinked conjuncts or 4 conjuncts: 2; 5 or more
      conjuncts: 3; 2-3 linked alternatives: 2; 2-3 unlinked alternatives or
      4+ linked ones: 3; 4+ unlinked alternatives: 4.

Held-out targets never leak (:func:`leakage_problems`): no held-out id is a
source, and no statement anywhere in the corpus (prompts included) equals a
held-out statement up to renaming, nor up to renaming AND changing numerals
(its "skeleton"), so no family re-teaches a held-out target with other
constants; no proof equals a held-out reference proof of 30 characters or
more that no training target shares.  Generated statements that equal any
target up to renaming are dropped too (the references are the only copies of
targets), and the loop would drop such a conjecture anyway.

Rocq checks reuse ``tools/make_rocq_targets.py``: the lemmas are records of
the target schema, so :func:`make_rocq_targets.schema_problems` applies the
verifier's text policy and :func:`make_rocq_targets.check_targets` compiles
them all in one ``coqc`` run (each statement closed with ``Admitted`` after
a Prop check, each proof with ``Qed`` and ``Print Assumptions``).

Usage::

    python tools/make_warmstart.py             # build, check with Rocq, write
    python tools/make_warmstart.py --no-rocq   # build and write without Rocq
    python tools/make_warmstart.py --verify    # check that the shipped file is
                                               # what the generator builds, and
                                               # check its lemmas with Rocq
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import itertools
import json
import math
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

TOOLS = Path(__file__).resolve().parent
REPO_ROOT = TOOLS.parent
for _path in (REPO_ROOT, TOOLS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import make_rocq_targets as targets_tool  # noqa: E402  (needs tools/ on the path)
from sgs.method.roles import (  # noqa: E402
    Language,
    PromptSet,
    canonical_form,
    conjecture_name,
    extract_conjecture,
    extract_proof,
)
from sgs.method.roles.lexer import Token, tokenize  # noqa: E402

#: where the corpus is shipped (package data of ``sgs``)
OUTPUT = REPO_ROOT / "sgs" / "data" / "warmstart_rocq.jsonl"

#: the target set the corpus is built around
TARGETS = targets_tool.OUTPUT

#: seed of every random choice; change it and the corpus changes
SEED = 20260424

#: share of each topic's training targets whose reference proof is included
REFERENCE_FRACTION = 0.4

#: at most this many instance conjectures per training target
INSTANCES_PER_TARGET = 2

#: Conjecturer practice beyond the targets: instance conjectures of the
#: generated variant lemmas (not targets).  The tiny model needs many more
#: examples of the Conjecturer's move (copy a statement, set one variable)
#: than the training targets give to write statements that elaborate.
VARIANT_CONJECTURES = True

#: guide triples per kind (positives, then each kind of negative)
GUIDE_POSITIVES = 220
GUIDE_NEGATIVES = 50

#: a held-out reference proof this long (tactics, whitespace collapsed) is
#: specific enough that seeing it verbatim would leak the target
LEAK_PROOF_CHARS = 30

#: keys of one corpus line, in the order they are written
FIELDS = ("role", "prompt", "completion", "source", "meta")

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
_BINDER_WORDS = frozenset({"forall", "exists", "fun"})


def _tokens(text: str) -> list[Token]:
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


def _first_comma(tokens: Sequence[Token]) -> int | None:
    """Index of the first comma outside brackets (ends a binder list)."""
    depths = _depths(tokens)
    return next((i for i, t in enumerate(tokens) if depths[i] == 0 and t.text == ","), None)


@dataclass(frozen=True)
class Binder:
    """One binder group: names and their type text (``None`` when untyped)."""

    names: tuple[str, ...]
    type: str | None


def _binder_groups(text: str) -> list[Binder] | None:
    """The groups of ``forall <text>,``: ``a b : T`` or ``(a : T) (b c : U)``;
    ``None`` for anything else."""
    tokens = _tokens(text)
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
        sub = _binder_groups(inner) if inner and not inner.lstrip().startswith("(") else None
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
        tokens = _tokens(rest)
        depths = _depths(tokens)
        if tokens and tokens[0].text == "forall":
            comma = _first_comma(tokens)
            groups = None if comma is None else _binder_groups(rest[tokens[0].end:tokens[comma].start])
            if groups is None:
                break
            binders += groups
            rest = rest[tokens[comma].end:].strip()
            continue
        arrow = None
        for i, token in enumerate(tokens):
            if depths[i] != 0:
                continue
            if token.text in _BINDER_WORDS:
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
        tokens = _tokens(text)
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
    tokens = _tokens(text)
    depths = _depths(tokens)
    parts, start = [], 0
    for i, token in enumerate(tokens):
        if depths[i] != 0:
            continue
        if token.text in _BINDER_WORDS:
            break
        if token.text == operator:
            parts.append(text[start:token.start].strip())
            start = token.end
    parts.append(text[start:].strip())
    return parts


def _identifiers(text: str) -> set[str]:
    return {t.text for t in _tokens(text) if t.kind == "ident"}


# ---------------------------------------------------------------------------
# Guide rules (module docstring): features of a (target, conjecture) pair

#: canonical-form tokens that are structure rather than content (equality
#: too: nearly every statement has one, so sharing it says nothing)
_STRUCTURE = frozenset({"(", ")", "[", "]", "{", "}", ",", ":", ";", "forall", "exists", "fun", "=>",
                        "nat", "Type", "Prop", "->", "=", "Theorem", "Lemma"})
#: identifiers that name types: shared types do not link two claims
_TYPES = frozenset({"nat", "bool", "list", "option", "Type", "Prop"})


def symbols(statement: str) -> frozenset[str]:
    """S(x): the non-variable content symbols of a statement."""
    return frozenset(token for token in canonical_form(statement, ROCQ).split()
                     if not token.startswith("$v") and token not in _STRUCTURE)


def _bound_used(part: str, variables: Iterable[str]) -> set[str]:
    return _identifiers(part) & set(variables)


def relevance(target: str, conjecture: str) -> int:
    """The relevance rule (0-5) of the module docstring."""
    if canonical_form(target, ROCQ) == canonical_form(conjecture, ROCQ):
        return 0
    t_sym, c_sym = symbols(target), symbols(conjecture)
    union = t_sym | c_sym
    overlap = len(t_sym & c_sym) / len(union) if union else 0.0
    c_shape, t_shape = shape(prop_of(conjecture)), shape(prop_of(target))
    if not t_sym & c_sym and not c_shape.variables:
        return 0
    generalises = {s for s in t_sym if not s.isdigit()} <= c_sym and (
        len(_bound_used(c_shape.conclusion, c_shape.variables))
        > len(_bound_used(t_shape.conclusion, t_shape.variables)))
    if generalises:
        return 5
    for score, bound in ((1, 0.2), (2, 0.4), (3, 0.6)):
        if overlap < bound:
            return score
    return 4


def redundancy(statement: str) -> int:
    """The redundancy rule (0/1) of the module docstring."""
    s = shape(prop_of(statement))
    variables = set(s.variables)
    # a variable is used when a premise, the conclusion or the type of
    # another binder (``l : list A`` uses ``A``) mentions it
    used = set().union(*(_identifiers(text) for text in [*s.premises, s.conclusion]))
    for group in s.binders:
        used |= _identifiers(group.type or "") - set(group.names)
    if variables - used:
        return 1
    reached = _bound_used(s.conclusion, variables)
    pending: list[set[str] | None] = [_bound_used(premise, variables) for premise in s.premises]
    changed = True
    while changed:
        changed = False
        for i, uses in enumerate(pending):
            if uses is not None and uses & reached:
                reached |= uses
                pending[i] = None
                changed = True
    return int(any(uses is not None for uses in pending))


def _linked(parts: Sequence[str], premises: Sequence[str], variables: Iterable[str]) -> bool:
    """Whether all ``parts`` are connected by the relation "share a bound
    variable or an identifier other than a type, or a premise mentions a
    variable of each"."""
    keys = [_identifiers(part) - _TYPES - _BINDER_WORDS for part in parts]
    premise_uses = [_bound_used(premise, variables) for premise in premises]

    def related(i: int, j: int) -> bool:
        return bool(keys[i] & keys[j]) or any(uses & keys[i] and uses & keys[j] for uses in premise_uses)

    seen, frontier = {0}, [0]
    while frontier:
        i = frontier.pop()
        for j in range(len(parts)):
            if j not in seen and related(i, j):
                seen.add(j)
                frontier.append(j)
    return len(seen) == len(parts)


def complexity(statement: str) -> int:
    """The conclusion-complexity rule (0-4) of the module docstring."""
    s = shape(prop_of(statement))
    if len(split_top(s.conclusion, "<->")) > 1:
        return 0  # an equivalence is one claim: <-> binds looser than /\ and \/
    alternatives = split_top(s.conclusion, "\\/")
    if len(alternatives) == 1:
        conjuncts = split_top(s.conclusion, "/\\")
        n = len(conjuncts)
        if n == 1:
            return 0
        if n >= 5:
            return 3
        if n == 4 or not _linked(conjuncts, s.premises, s.variables):
            return 2
        return 1
    linked = _linked(alternatives, s.premises, s.variables)
    if len(alternatives) <= 3:
        return 2 if linked else 3
    return 3 if linked else 4


def guide_scores(target: str, conjecture: str) -> dict[str, int]:
    """The three sub-scores of ``conjecture`` as a lemma for ``target``."""
    return {"relevance": relevance(target, conjecture), "redundancy": redundancy(conjecture),
            "complexity": complexity(conjecture)}


def guide_completion(scores: Mapping[str, int]) -> str:
    """A review in exactly the tags :func:`sgs.method.roles.extract_guide_scores` reads."""
    return (f"<begin_relevance_score>{scores['relevance']}<end_relevance_score>\n"
            f"<begin_redundancy_score>{scores['redundancy']}<end_redundancy_score>\n"
            f"<begin_conclusion_complexity_score>{scores['complexity']}"
            f"<end_conclusion_complexity_score>")


# ---------------------------------------------------------------------------
# Instances of targets (variables set to constants, type variables to types)

#: values for the base case, per variable type (``[]`` alone may leave its
#: element type to infer, so the empty list is spelled with its type)
_BASE = {"nat": "0", "list nat": "(@nil nat)", "bool": "true"}


def _random_value(kind: str, rng: random.Random) -> str:
    if kind == "nat":
        return str(rng.randint(1, 4))
    if kind == "bool":
        return "false"
    return "[" + "; ".join(str(rng.randint(0, 5)) for _ in range(rng.randint(1, 3))) + "]"


def _replace_identifiers(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every identifier token named in ``values`` replaced."""
    pieces, last = [], 0
    for token in _tokens(text):
        if token.kind == "ident" and token.text in values:
            pieces += [text[last:token.start], values[token.text]]
            last = token.end
    return "".join(pieces) + text[last:]


def substitute(text: str, values: Mapping[str, str]) -> str | None:
    """``text`` with each free identifier named in ``values`` replaced;
    ``None`` when ``text`` rebinds one of those names."""
    tokens = _tokens(text)
    for i, token in enumerate(tokens):
        if token.text in _BINDER_WORDS:
            for later in tokens[i + 1:]:
                if later.text in {",", "=>"}:
                    break
                if later.text in values:
                    return None
    return _replace_identifiers(text, values)


def render_binders(groups: Sequence[Binder]) -> str:
    if len(groups) == 1:
        return f"{' '.join(groups[0].names)} : {groups[0].type}"
    return " ".join(f"({' '.join(g.names)} : {g.type})" for g in groups)


def instantiate(prop: str, values: Mapping[str, str]) -> str | None:
    """``prop`` with the leading bound variables in ``values`` replaced by
    their values and dropped from the binders (``None`` if impossible)."""
    tokens = _tokens(prop)
    if not tokens or tokens[0].text != "forall":
        return None
    comma = _first_comma(tokens)
    if comma is None:
        return None
    groups = _binder_groups(prop[tokens[0].end:tokens[comma].start])
    if groups is None or any(g.type is None for g in groups):
        return None
    kept = []
    for group in groups:
        names = tuple(n for n in group.names if n not in values)
        if names:
            kind = substitute(group.type, values)
            if kind is None:
                return None
            kept.append(Binder(names, kind))
    body = substitute(prop[tokens[comma].end:].strip(), values)
    if body is None:
        return None
    return f"forall {render_binders(kept)}, {body}" if kept else body


def type_instance(prop: str, kind: str) -> str | None:
    """``prop`` with its leading ``(A : Type)`` variable set to ``kind``."""
    s = shape(prop)
    names = [n for g in s.binders for n in g.names if g.type == "Type"]
    if len(names) != 1 or not prop.startswith("forall (" + names[0] + " : Type)"):
        return None
    return instantiate(prop, {names[0]: kind})


_INTROS_THEN = re.compile(r"intros(?: [\w']+)*\. (ring|lia|nia|reflexivity|tauto|firstorder)\.")
_NAMED_INTROS = re.compile(r"intros((?: [\w']+)+)\.\s*(.*)", re.S)
_CLOSERS = ("lia.", "nia.", "ring.", "tauto.", "firstorder.", "reflexivity.")


def instance_proof(parent_tactics: str | None, prop: str, values: Mapping[str, str]) -> str | None:
    """A proof for ``prop``, the instance of a target with the variables in
    ``values`` set to those values, when one of these rules gives one:

    * the parent's proof is one closing tactic (after ``intros``): the same;
    * the parent's proof starts by introducing plain names: the same proof
      with the instantiated names left out of ``intros`` and replaced by
      their values in the rest, unless the rest does case analysis,
      induction or ``subst`` on one of them or rewrites with an introduced
      hypothesis;
    * a closed instance: ``reflexivity`` for an equation, ``simpl. lia.`` for
      an order.

    ``None`` otherwise: the instance is still true, being an instance of a
    proved target."""
    tactics = " ".join((parent_tactics or "").split())
    if tactics in _CLOSERS:
        return f"intros. {tactics}"
    match = _INTROS_THEN.fullmatch(tactics)
    if match:
        return f"intros. {match.group(1)}."
    named = _NAMED_INTROS.fullmatch(parent_tactics or "")
    if named:
        names = named.group(1).split()
        rest = named.group(2)
        # case analysis, induction or substitution on a value is meaningless,
        # and rewriting with a hypothesis that now equates a constant
        # rewrites every occurrence of that constant
        cased = any(re.search(rf"\b(?:destruct|induction|subst)\s+{re.escape(name)}\b", rest) for name in values)
        rewrites = any(re.search(rf"\brewrite\s+(?:<-\s*)?{re.escape(name)}\b", rest) for name in names)
        if set(values) <= set(names) and not cased and not rewrites:
            kept = [name for name in names if name not in values]
            body = substitute(rest, values)
            if body is not None:
                return f"intros {' '.join(kept)}.\n{body}" if kept else body
    s = shape(prop)
    if s.binders or s.premises or _identifiers(prop) & {"exists", "forall", "fun", "In", "Forall"}:
        return None
    texts = [t.text for t in _tokens(s.conclusion)]
    if texts.count("=") == 1 and not set(texts) & {"~", "<>", "/\\", "\\/", "<->"}:
        return "reflexivity."
    if set(texts) & {"<", "<="} and not set(texts) & {"/\\", "\\/", "<->", "~"}:
        return "simpl. lia."
    return None


def instances(target: Lemma, rng: random.Random) -> list[Lemma]:
    """Instances of a training target, in this order: the base case (the
    first nat, list or bool variable set to 0, the empty list or ``true``), a
    special case (that variable set to another value) and, when every
    variable can be set, a closed instance; type variables become ``nat``.
    An instance that would make a premise redundant is left out."""
    prop = target.prop
    s = shape(prop)
    values: dict[str, str] = {}
    variables = []
    for group in s.binders:
        for name in group.names:
            if group.type == "Type":
                values[name] = "nat"
            else:
                variables.append((name, group.type))

    def kind_of(type_text: str | None) -> str | None:
        text = substitute(type_text or "", values)
        return text if text in _BASE else None

    simple = [(n, kind_of(t)) for n, t in variables if kind_of(t)]
    if not simple:
        return []
    first, first_kind = simple[0]
    choices = [("base", {first: _BASE[first_kind]}),
               ("case", {first: _random_value(first_kind, rng)})]
    if len(simple) == len(variables):
        choices.append(("closed", {n: _random_value(k, rng) for n, k in simple}))
    made = []
    for kind, assignment in choices:
        assigned = {**values, **assignment}
        new = instantiate(prop, assigned)
        # an instance must not make a premise redundant (a constant can turn
        # it into a closed or vacuous one, like 5 <= 0)
        if new is None or redundancy(f"Theorem t : {new}.") > redundancy(target.statement):
            continue
        made.append(Lemma(f"{target.name}_{kind}", new, instance_proof(target.tactics, new, assigned),
                          target.topic, max(1, target.difficulty - 1), f"instance_{kind}"))
    return made


# ---------------------------------------------------------------------------
# Library lemmas that reference proofs cite: name -> proposition (as Rocq
# 8.16 states it; Rocq checks each against the library by applying it)

LIBRARY = {
    "app_length": "forall (A : Type) (l l' : list A), length (l ++ l') = length l + length l'",
    "rev_length": "forall (A : Type) (l : list A), length (rev l) = length l",
    "map_length": "forall (A B : Type) (f : A -> B) (l : list A), length (map f l) = length l",
    "map_app": "forall (A B : Type) (f : A -> B) (l l' : list A), map f (l ++ l') = map f l ++ map f l'",
    "app_assoc": "forall (A : Type) (l m n : list A), l ++ m ++ n = (l ++ m) ++ n",
    "app_nil_r": "forall (A : Type) (l : list A), l ++ [] = l",
    "map_map": "forall (A B C : Type) (f : A -> B) (g : B -> C) (l : list A), "
               "map g (map f l) = map (fun x => g (f x)) l",
    "firstn_skipn": "forall (A : Type) (n : nat) (l : list A), firstn n l ++ skipn n l = l",
    "list_sum_app": "forall l1 l2 : list nat, list_sum (l1 ++ l2) = list_sum l1 + list_sum l2",
    "map_rev": "forall (A B : Type) (f : A -> B) (l : list A), map f (rev l) = rev (map f l)",
    "seq_S": "forall len start : nat, seq start (S len) = seq start len ++ [start + len]",
    "seq_length": "forall len start : nat, length (seq start len) = len",
    "repeat_length": "forall (A : Type) (x : A) (n : nat), length (repeat x n) = n",
    "in_or_app": "forall (A : Type) (l m : list A) (a : A), In a l \\/ In a m -> In a (l ++ m)",
    "in_map": "forall (A B : Type) (f : A -> B) (l : list A) (x : A), In x l -> In (f x) (map f l)",
    "in_rev": "forall (A : Type) (l : list A) (x : A), In x l <-> In x (rev l)",
    "in_split": "forall (A : Type) (x : A) (l : list A), In x l -> exists l1 l2 : list A, l = l1 ++ x :: l2",
    "Forall_app": "forall (A : Type) (P : A -> Prop) (l1 l2 : list A), "
                  "Forall P (l1 ++ l2) <-> Forall P l1 /\\ Forall P l2",
    "existsb_app": "forall (A : Type) (f : A -> bool) (l1 l2 : list A), "
                   "existsb f (l1 ++ l2) = existsb f l1 || existsb f l2",
    "nth_error_None": "forall (A : Type) (l : list A) (n : nat), nth_error l n = None <-> length l <= n",
    "Nat.add_comm": "forall n m : nat, n + m = m + n",
    "Nat.div_le_upper_bound": "forall a b q : nat, b <> 0 -> a <= b * q -> a / b <= q",
    "Nat.div_mod": "forall x y : nat, y <> 0 -> x = y * (x / y) + x mod y",
    "Nat.eq_0_gt_0_cases": "forall n : nat, n = 0 \\/ 0 < n",
    "Nat.eqb_neq": "forall x y : nat, (x =? y) = false <-> x <> y",
    "Nat.even_spec": "forall n : nat, Nat.even n = true <-> Nat.Even n",
    "Nat.le_exists_sub": "forall n m : nat, n <= m -> exists p : nat, m = p + n /\\ 0 <= p",
    "Nat.le_ge_cases": "forall n m : nat, n <= m \\/ m <= n",
    "Nat.leb_le": "forall n m : nat, (n <=? m) = true <-> n <= m",
    "Nat.lt_trichotomy": "forall n m : nat, n < m \\/ n = m \\/ m < n",
    "Nat.ltb_lt": "forall n m : nat, (n <? m) = true <-> n < m",
    "Nat.min_l": "forall n m : nat, n <= m -> Nat.min n m = n",
    "Nat.mod_add": "forall a b c : nat, c <> 0 -> (a + b * c) mod c = a mod c",
    "Nat.mod_mod": "forall a n : nat, n <> 0 -> (a mod n) mod n = a mod n",
    "Nat.mod_mul": "forall a b : nat, b <> 0 -> (a * b) mod b = 0",
    "Nat.mod_small": "forall a b : nat, a < b -> a mod b = a",
    "Nat.mod_upper_bound": "forall a b : nat, b <> 0 -> a mod b < b",
    "Nat.mul_add_distr_r": "forall n m p : nat, (n + m) * p = n * p + m * p",
    "Nat.mul_sub_distr_l": "forall n m p : nat, p * (n - m) = p * n - p * m",
    "Nat.mul_sub_distr_r": "forall n m p : nat, (n - m) * p = n * p - m * p",
    "Nat.negb_even": "forall n : nat, negb (Nat.even n) = Nat.odd n",
    "Nat.pow_nonzero": "forall a b : nat, a <> 0 -> a ^ b <> 0",
    "lt_O_fact": "forall n : nat, 0 < fact n",
}


def library_lemmas(target: Lemma) -> list[Lemma]:
    """The library lemmas that ``target``'s reference proof cites, as
    conjectures proved by applying the lemma itself."""
    cited = set(re.findall(r"[A-Za-z_][\w.']*", target.tactics or ""))
    made = []
    for name, prop in LIBRARY.items():
        if name in cited:
            suffix = name.replace("Nat.", "").lower()
            made.append(Lemma(f"{target.name}_uses_{suffix}", prop, f"intros. apply {name}; assumption.",
                              target.topic, 2, "library"))
    return made


# ---------------------------------------------------------------------------
# Hand-written key lemmas for harder training targets: target id -> rows of
# (proposition, tactics): a step of the induction, a generalisation the
# proof needs, or an auxiliary fact

KEY_LEMMAS = {
    "ind_fold_add": [("forall (l : list nat) (a : nat), fold_left Nat.add l a = list_sum l + a",
                      "induction l as [|x l IH]; intros a.\n- simpl. lia.\n- simpl. rewrite IH. lia.")],
    "ind_gauss_sum": [("forall n : nat, list_sum (seq 1 (S n)) = list_sum (seq 1 n) + S n",
                       "intros n. rewrite seq_S, list_sum_app. simpl. lia.")],
    "ind_odd_sum": [("forall n : nat, list_sum (map (fun i => 2 * i + 1) (seq 0 (S n))) = "
                     "list_sum (map (fun i => 2 * i + 1) (seq 0 n)) + (2 * n + 1)",
                     "intros n. rewrite seq_S, map_app, list_sum_app. simpl. lia.")],
    "ind_squares_sum": [("forall n : nat, list_sum (map (fun i => i * i) (seq 0 (S n))) = "
                         "list_sum (map (fun i => i * i) (seq 0 n)) + n * n",
                         "intros n. rewrite seq_S, map_app, list_sum_app. simpl. lia.")],
    "ind_geometric_sum": [("forall n : nat, list_sum (map (fun i => 2 ^ i) (seq 0 (S n))) = "
                           "list_sum (map (fun i => 2 ^ i) (seq 0 n)) + 2 ^ n",
                           "intros n. rewrite seq_S, map_app, list_sum_app. simpl. lia.")],
    "ind_square_lt_pow2": [("forall n : nat, 5 <= n -> 2 * n + 1 < n * n", "intros n H. nia.")],
    "ind_postage": [("forall k : nat, exists a b : nat, k + 8 = 3 * a + 5 * b",
                     "induction k as [|k [a [b Hab]]].\n- exists 1, 1. reflexivity.\n- destruct b as [|b].\n"
                     "  + exists (a - 3), 2. lia.\n  + exists (a + 2), b. lia.")],
    "ind_fact_ge": [("forall n : nat, 1 <= fact n", "intros n. pose proof (lt_O_fact n). lia.")],
    "ind_pow3_ge_pow2": [("forall n : nat, 2 ^ n <= 3 ^ n", "intros n. apply Nat.pow_le_mono_l. lia.")],
    "ind_pow_ge_1": [("forall a b : nat, 1 <= a -> 1 <= b -> 1 <= a * b", "intros a b Ha Hb. nia.")],
    "ind_strictly_increasing": [("forall f : nat -> nat, (forall n, f n < f (S n)) -> forall n, f n + 1 <= f (S n)",
                                 "intros f Hf n. specialize (Hf n). lia.")],
    "ind_monotone": [("forall f : nat -> nat, (forall n, f n <= f (S n)) -> forall n k, f n <= f (n + k)",
                      "intros f Hf n k. induction k as [|k IH].\n- rewrite Nat.add_0_r. lia.\n"
                      "- rewrite Nat.add_succ_r. specialize (Hf (n + k)). lia.")],
    "ind_sum_repeat": [("forall n c : nat, list_sum (repeat c (S n)) = c + list_sum (repeat c n)",
                        "intros n c. reflexivity.")],
    "list_sum_rev": [("forall (l : list nat) (x : nat), list_sum (l ++ [x]) = list_sum l + x",
                      "intros l x. rewrite list_sum_app. simpl. lia.")],
    "list_sum_map_succ": [("forall (x : nat) (l : list nat), list_sum (map S (x :: l)) = S x + list_sum (map S l)",
                           "intros x l. reflexivity.")],
    "list_rev_fold": [("forall (A : Type) (l acc : list A), fold_left (fun acc x => x :: acc) l acc = rev l ++ acc",
                       "intros A l. induction l as [|x l IH]; intros acc.\n- reflexivity.\n"
                       "- simpl. rewrite IH, <- app_assoc. reflexivity.")],
    "list_rev_inj": [("forall (A : Type) (l m : list A), l = m -> rev l = rev m",
                      "intros A l m H. rewrite H. reflexivity.")],
    "list_firstn_app_length": [("forall (A : Type) (x : A) (l m : list A), "
                                "firstn (length (x :: l)) ((x :: l) ++ m) = x :: firstn (length l) (l ++ m)",
                                "intros A x l m. reflexivity.")],
    "list_filter_length_le": [("forall (f : nat -> bool) (x : nat) (l : list nat), "
                               "length (filter f (x :: l)) <= S (length (filter f l))",
                               "intros f x l. simpl. destruct (f x); simpl; lia.")],
    "list_sum_ge_length": [("forall (x : nat) (l : list nat), 1 <= x -> length l <= list_sum l -> "
                            "length (x :: l) <= list_sum (x :: l)", "intros x l Hx H. simpl. lia.")],
    "list_sum_zero": [("forall x y : nat, x + y = 0 -> x = 0 /\\ y = 0", "intros x y H. lia.")],
    "logic_em_not_not": [("forall P : Prop, ~ (P \\/ ~ P) -> ~ P", "intros P H HP. apply H. left. exact HP.")],
    "logic_no_largest_nat": [("forall n : nat, ~ S n <= n", "intros n. lia.")],
    "logic_diagonal": [("forall (f : nat -> nat -> nat) (n : nat), S (f n n) <> f n n", "intros f n. lia.")],
    "logic_surj_compose": [("forall f : nat -> nat, (forall y, exists x, f x = y) -> forall z, exists y, f y = z",
                            "intros f Hf z. apply Hf.")],
    "nt_even_mul_l": [("forall a m : nat, 2 * a * m = 2 * (a * m)", "intros a m. ring.")],
    "nt_odd_square": [("forall k : nat, (2 * k + 1) * (2 * k + 1) = 2 * (2 * k * k + 2 * k) + 1",
                       "intros k. ring.")],
    "nt_mod_2_cases": [("forall n : nat, n mod 2 < 2", "intros n. apply Nat.mod_upper_bound. discriminate.")],
    "nt_even_consecutive_product": [("forall k : nat, Nat.Even (2 * k * (2 * k + 1))",
                                     "intros k. exists (k * (2 * k + 1)). ring.")],
    "nt_three_divides_cube_plus": [("forall n : nat, (n + 1) * (n + 1) * (n + 1) + 2 * (n + 1) = "
                                    "n * n * n + 2 * n + 3 * (n * n + n + 1)", "intros n. ring.")],
    "nt_square_mod_4": [("forall k : nat, (2 * k * (2 * k)) mod 4 = 0",
                         "intros k. replace (2 * k * (2 * k)) with (k * k * 4) by ring.\n"
                         "apply Nat.mod_mul. discriminate.")],
    "nt_sqrt2_irrational": [("forall p : nat, Nat.Even (p * p) -> Nat.Even p",
                             "intros p [m Hm]. destruct (Nat.Even_or_Odd p) as [Hp | [k Hk]].\n- exact Hp.\n"
                             "- exfalso. subst p. nia.")],
    "nt_not_even_and_odd": [("forall a b : nat, 2 * a <> 2 * b + 1", "intros a b. lia.")],
    "nt_divide_sub": [("forall d x y : nat, d * x - d * y = d * (x - y)",
                       "intros d x y. symmetry. apply Nat.mul_sub_distr_l.")],
    "ineq_am_gm": [("forall a k : nat, 2 * a * (a + k) <= a * a + (a + k) * (a + k)", "intros a k. nia.")],
    "ineq_square_inj": [("forall a b : nat, a < b -> a * a < b * b", "intros a b H. nia.")],
    "ineq_sum_bounded": [("forall (x : nat) (l : list nat), x <= 10 -> list_sum l <= 10 * length l -> "
                          "list_sum (x :: l) <= 10 * length (x :: l)", "intros x l Hx H. simpl. lia.")],
    "bool_even_succ_succ": [("forall n : nat, Nat.even (S (S n)) = Nat.even n", "intros n. reflexivity.")],
    "minmax_list_max_app": [("forall (x : nat) (l : list nat), list_max (x :: l) = Nat.max x (list_max l)",
                             "intros x l. reflexivity.")],
    "minmax_list_max_in": [("forall (x : nat) (l : list nat), x <= list_max (x :: l)",
                            "intros x l. simpl. lia.")],
    "opt_nth_error_map": [("forall (f : nat -> nat) (x : nat) (l : list nat), "
                           "nth_error (map f (x :: l)) 0 = Some (f x)", "intros f x l. reflexivity.")],
    "arith_diff_squares": [("forall a b : nat, a * (a - b) = a * a - a * b",
                            "intros a b. apply Nat.mul_sub_distr_l.")],
}


def key_lemmas(target: Lemma) -> list[Lemma]:
    return [Lemma(f"{target.name}_key{i}", prop, tactics, target.topic, max(1, target.difficulty - 1), "key")
            for i, (prop, tactics) in enumerate(KEY_LEMMAS.get(target.name, []))]


# ---------------------------------------------------------------------------
# Families of generated Solver lemmas.  Each yields (prop, tactics,
# difficulty); the values are computed here and Rocq confirms them.

Row = tuple[str, str, int]


def _coq_list(values: Iterable[int]) -> str:
    return "[" + "; ".join(str(v) for v in values) + "]"


def _power(rng: random.Random) -> str:
    base, e = rng.randint(2, 4), rng.randint(2, 5)
    return f"{base} ^ {e} = {base ** e}"


#: closed arithmetic equations over drawn a, b, c (the power draws its own numbers)
_ARITH_EVAL_FORMS: tuple[Callable[[int, int, int, random.Random], str], ...] = (
    lambda a, b, c, rng: f"{a} * {b} + {c} = {a * b + c}",
    lambda a, b, c, rng: f"({a} + {b}) * {c % 9 + 1} = {(a + b) * (c % 9 + 1)}",
    lambda a, b, c, rng: _power(rng),
    lambda a, b, c, rng: f"{a * b + c} / {a} = {(a * b + c) // a}",
    lambda a, b, c, rng: f"{a} - {b} + {c} = {max(a - b, 0) + c}",
    lambda a, b, c, rng: f"{a} * ({b} + {c}) = {a * (b + c)}",
)


def fam_arith_eval(rng: random.Random) -> Iterator[Row]:
    """Closed arithmetic, by computation."""
    for _ in range(40):
        a, b, c = rng.randint(2, 30), rng.randint(2, 30), rng.randint(0, 40)
        form = _ARITH_EVAL_FORMS[rng.randrange(len(_ARITH_EVAL_FORMS))]
        yield form(a, b, c, rng), "reflexivity.", 1


def fam_arith_linear(rng: random.Random) -> Iterator[Row]:
    """Linear equations in one or two unknowns, by ``lia``."""
    for _ in range(24):
        s, b, a = rng.randint(1, 12), rng.randint(1, 20), rng.randint(2, 6)
        form = rng.randrange(3)
        if form == 0:
            yield f"forall x : nat, x + {b} = {s + b} -> x = {s}", "lia.", 1
        elif form == 1:
            yield f"forall x : nat, {a} * x = {a * s} -> x = {s}", "lia.", 1
        else:
            yield f"forall x : nat, {b} + {a} * x = {b + a * s} -> x = {s}", "intros x H. lia.", 1
    for _ in range(10):
        x, y = rng.randint(5, 20), rng.randint(0, 5)
        yield (f"forall x y : nat, x + y = {x + y} -> x - y = {x - y} -> y = {y}",
               "intros x y H1 H2. lia.", 1)


def fam_arith_ring(rng: random.Random) -> Iterator[Row]:
    """Polynomial identities, by ``ring``."""
    for k in range(2, 9):
        yield f"forall a b : nat, (a + {k}) * b = a * b + {k} * b", "intros a b. ring.", 1
        yield f"forall a : nat, (a + {k}) * (a + {k}) = a * a + {2 * k} * a + {k * k}", "intros a. ring.", 1
        yield f"forall a b : nat, {k} * (a + b) = {k} * a + {k} * b", "intros a b. ring.", 1
        yield f"forall n : nat, {k} * n + n = {k + 1} * n", "intros n. ring.", 1
    for _ in range(8):
        k, m = rng.randint(1, 6), rng.randint(1, 6)
        yield (f"forall a b : nat, (a + {k}) * (b + {m}) = a * b + {m} * a + {k} * b + {k * m}",
               "intros a b. ring.", 1)
    yield "forall a b c : nat, (a + b) * c = a * c + b * c", "intros a b c. ring.", 1
    yield "forall a b : nat, (a + b) * (a + b) * (a + b) = a * a * a + 3 * a * a * b + 3 * a * b * b + b * b * b", \
        "intros a b. ring.", 2
    yield "forall a b c : nat, a * b * c = c * b * a", "intros a b c. ring.", 1


def fam_arith_rearrange(rng: random.Random) -> Iterator[Row]:
    """Sums rearranged, by ``lia``."""
    names = ["a", "b", "c", "d"]
    for _ in range(20):
        n = rng.randint(2, 4)
        used = names[:n]
        k = rng.randint(1, 9)
        left = used + [str(k)]
        right = left[:]
        while right == left:
            rng.shuffle(right)
        yield f"forall {' '.join(used)} : nat, {' + '.join(left)} = {' + '.join(right)}", "lia.", 1


def fam_rewrite(rng: random.Random) -> Iterator[Row]:
    """Rewriting under an opaque function, with a library fact or a hypothesis."""
    for result in ("nat", "bool", "list nat"):
        for op, lemma in (("+", "Nat.add_comm"), ("*", "Nat.mul_comm")):
            yield (f"forall (g : nat -> {result}) (a b : nat), g (b {op} a) = g (a {op} b)",
                   f"intros g a b. rewrite {lemma}. reflexivity.", 2)
        yield (f"forall (g : nat -> {result}) (a b : nat), g (Nat.min a b) = g (Nat.min b a)",
               "intros g a b. rewrite Nat.min_comm. reflexivity.", 2)
    yield ("forall (g : nat -> nat -> nat) (a b c : nat), g (a + b) c = g (b + a) c",
           "intros g a b c. rewrite Nat.add_comm. reflexivity.", 2)
    for k in range(2, 10):
        yield (f"forall (f : nat -> nat) (x y : nat), x = y + {k} -> f x = f ({k} + y)",
               "intros f x y H. rewrite H, Nat.add_comm. reflexivity.", 2)
        yield (f"forall (f : nat -> nat) (x y : nat), x = y -> f (x + {k}) = f (y + {k})",
               "intros f x y H. rewrite H. reflexivity.", 2)
    for kind in ("nat", "bool", "list nat"):
        yield (f"forall a b c d : {kind}, a = b -> b = c -> c = d -> a = d",
               "intros a b c d H1 H2 H3. rewrite H1, H2. exact H3.", 1)
        yield (f"forall a b : {kind}, a = b -> b = a", "intros a b H. rewrite H. reflexivity.", 1)
    yield ("forall (l : list nat) (x : nat), (l ++ []) ++ [x] = l ++ [x]",
           "intros l x. rewrite app_nil_r. reflexivity.", 2)
    yield ("forall l m : list nat, rev (rev l ++ m) = rev m ++ l",
           "intros l m. rewrite rev_app_distr, rev_involutive. reflexivity.", 2)


#: list lemmas stated at a concrete element type: (proposition with {T},
#: tactics); they teach the library lemma, not a target's exact statement
_LIST_LEMMAS = [
    ("forall l m : list {T}, length (l ++ m) = length l + length m", "intros l m. apply app_length."),
    ("forall l : list {T}, length (rev l) = length l", "intros l. apply rev_length."),
    ("forall l : list {T}, l ++ [] = l", "intros l. apply app_nil_r."),
    ("forall l m n : list {T}, l ++ (m ++ n) = (l ++ m) ++ n", "intros l m n. apply app_assoc."),
    ("forall (x : {T}) (n : nat), length (repeat x n) = n", "intros x n. apply repeat_length."),
    ("forall (l : list {T}) (n : nat), firstn n l ++ skipn n l = l", "intros l n. apply firstn_skipn."),
    ("forall (x : {T}) (l : list {T}), length (x :: l) = 1 + length l", "intros x l. reflexivity."),
    ("forall (x : {T}) (l : list {T}), rev (l ++ [x]) = x :: rev l",
     "intros x l. rewrite rev_app_distr. reflexivity."),
    ("forall (x : {T}) (l m : list {T}), In x l -> In x (m ++ l)",
     "intros x l m H. apply in_or_app. right. exact H."),
    ("forall (x : {T}) (l : list {T}), In x (x :: l)", "intros x l. left. reflexivity."),
    ("forall l : list {T}, [] ++ l = l", "intros l. reflexivity."),
    ("forall l m : list {T}, length (l ++ m) = length (m ++ l)", "intros l m. rewrite !app_length. lia."),
]


def fam_list_types(rng: random.Random) -> Iterator[Row]:
    """List library lemmas at concrete element types."""
    for template, tactics in _LIST_LEMMAS:
        for kind in ("nat", "bool", "(list nat)", "(option nat)"):
            yield template.replace("{T}", kind), tactics, 2


def _seq(rng: random.Random) -> str:
    start, n = rng.randint(0, 5), rng.randint(1, 4)
    return f"seq {start} {n} = {_coq_list(range(start, start + n))}"


#: computations on drawn lists xs and ys and a cut k inside xs (the seq draws its own bounds)
_LIST_EVAL_FORMS: tuple[Callable[[list[int], list[int], int, random.Random], str], ...] = (
    lambda xs, ys, k, rng: f"rev {_coq_list(xs)} = {_coq_list(xs[::-1])}",
    lambda xs, ys, k, rng: f"map S {_coq_list(xs)} = {_coq_list(x + 1 for x in xs)}",
    lambda xs, ys, k, rng: f"list_sum {_coq_list(xs)} = {sum(xs)}",
    lambda xs, ys, k, rng: f"length {_coq_list(xs)} = {len(xs)}",
    lambda xs, ys, k, rng: f"{_coq_list(xs)} ++ {_coq_list(ys)} = {_coq_list(xs + ys)}",
    lambda xs, ys, k, rng: f"firstn {k} {_coq_list(xs)} = {_coq_list(xs[:k])}",
    lambda xs, ys, k, rng: f"skipn {k} {_coq_list(xs)} = {_coq_list(xs[k:])}",
    lambda xs, ys, k, rng: f"filter Nat.odd {_coq_list(xs)} = {_coq_list(x for x in xs if x % 2)}",
    lambda xs, ys, k, rng: f"list_max {_coq_list(xs)} = {max(xs)}",
    lambda xs, ys, k, rng: f"map (fun x => x * 2) {_coq_list(xs)} = {_coq_list(2 * x for x in xs)}",
    lambda xs, ys, k, rng: _seq(rng),
)


def fam_list_eval(rng: random.Random) -> Iterator[Row]:
    """Computations on concrete lists."""
    for _ in range(70):
        xs = [rng.randint(0, 9) for _ in range(rng.randint(2, 6))]
        ys = [rng.randint(0, 9) for _ in range(rng.randint(1, 3))]
        form = _LIST_EVAL_FORMS[rng.randrange(len(_LIST_EVAL_FORMS))]
        k = rng.randint(1, len(xs) - 1)
        yield form(xs, ys, k, rng), "reflexivity.", 1


def fam_list_induction(rng: random.Random) -> Iterator[Row]:
    """Short inductions on lists of naturals."""
    for k in range(1, 7):
        yield (f"forall l : list nat, list_sum (map (fun x => x + {k}) l) = list_sum l + {k} * length l",
               "induction l as [|x l IH].\n- reflexivity.\n- simpl. rewrite IH. lia.", 3)
        # x * k, not k * x: simpl would unfold k * x inside the map and
        # the induction hypothesis would no longer match
        yield (f"forall l : list nat, list_sum (map (fun x => x * {k + 1}) l) = {k + 1} * list_sum l",
               "induction l as [|x l IH].\n- reflexivity.\n- simpl. rewrite IH. lia.", 3)
        yield (f"forall l : list nat, length (map (fun x => x * {k}) l) = length l",
               "intros l. apply map_length.", 2)
    yield ("forall l : list nat, length (map S l) = length l",
           "induction l as [|x l IH].\n- reflexivity.\n- simpl. rewrite IH. reflexivity.", 3)
    yield ("forall l : list nat, list_sum (l ++ l) = 2 * list_sum l",
           "intros l. rewrite list_sum_app. lia.", 2)


#: tautologies over X, Y, Z; ``{V}`` in the tactics stands for the bound
#: proposition names, which are introduced first
_TAUTOLOGIES = [
    ("X -> Y -> X", "intros {V} HX HY. exact HX."),
    ("X /\\ Y -> X", "intros {V} [HX HY]. exact HX."),
    ("X /\\ Y -> Y", "intros {V} [HX HY]. exact HY."),
    ("X -> X \\/ Y", "intros {V} HX. left. exact HX."),
    ("Y -> X \\/ Y", "intros {V} HY. right. exact HY."),
    ("X -> Y -> X /\\ Y", "intros {V} HX HY. split.\n- exact HX.\n- exact HY."),
    ("(X -> Y) -> (Y -> Z) -> X -> Z", "intros {V} HXY HYZ HX. apply HYZ. apply HXY. exact HX."),
    ("X /\\ Y -> Y /\\ X", "tauto."),
    ("(X /\\ Y) /\\ Z -> X /\\ (Y /\\ Z)", "tauto."),
    ("X \\/ (Y \\/ Z) -> (X \\/ Y) \\/ Z", "tauto."),
    ("X -> ~ ~ X", "intros {V} HX HnX. exact (HnX HX)."),
    ("~ (X \\/ Y) -> ~ X", "tauto."),
    ("(X <-> Y) -> (Y <-> X)", "tauto."),
    ("(X -> Y /\\ Z) -> X -> Z", "tauto."),
    ("(X -> Y) -> (X -> Z) -> X -> Y /\\ Z", "tauto."),
    ("X /\\ ~ X -> Y", "tauto."),
    ("(X -> Y -> Z) -> Y -> X -> Z", "intros {V} H HY HX. apply H.\n- exact HX.\n- exact HY."),
    ("(X <-> Y) -> X -> Y", "intros {V} [H1 H2] HX. apply H1. exact HX."),
    ("(X \\/ Y) /\\ ~ X -> Y", "tauto."),
    ("~ X -> X -> Y", "intros {V} HnX HX. exfalso. exact (HnX HX)."),
    ("X \\/ Y -> (X -> Z) -> (Y -> Z) -> Z", "tauto."),
    ("(X /\\ Y -> Z) -> X -> Y -> Z", "tauto."),
]


def fam_logic_prop(rng: random.Random) -> Iterator[Row]:
    """Propositional tautologies, each under two assignments of P, Q, R to
    its letters (the binders stay in alphabetical order)."""
    for template, tactics in _TAUTOLOGIES:
        binders = ["P", "Q", "R"] if "Z" in template else ["P", "Q"]
        orders = list(itertools.permutations(binders))
        rng.shuffle(orders)
        for order in orders[:2]:
            names = dict(zip("XYZ", order))
            prop = re.sub(r"\b[XYZ]\b", lambda m: names[m.group()], template)
            yield f"forall {' '.join(binders)} : Prop, {prop}", tactics.replace("{V}", " ".join(binders)), 1


def fam_logic_first_order(rng: random.Random) -> Iterator[Row]:
    """Quantifier facts over several domains, and witnesses."""
    for kind in ("nat", "bool", "(list nat)"):
        yield (f"forall P Q : {kind} -> Prop, (forall x, P x /\\ Q x) -> forall x, P x", "firstorder.", 1)
        yield (f"forall P Q : {kind} -> Prop, (exists x, P x /\\ Q x) -> exists x, Q x", "firstorder.", 1)
        yield (f"forall P : {kind} -> Prop, ~ (exists x, P x) -> forall x, ~ P x", "firstorder.", 1)
        yield (f"forall (P : {kind} -> Prop) (Q : Prop), (forall x, P x -> Q) -> (exists x, P x) -> Q",
               "intros P Q H [x Hx]. apply (H x). exact Hx.", 2)
        yield (f"forall P Q : {kind} -> Prop, (forall x, P x -> Q x) -> (forall x, P x) -> forall x, Q x",
               "intros P Q H HP x. apply H. apply HP.", 1)
    for k in range(2, 9):
        yield f"forall P : nat -> Prop, (forall n, P n) -> P {k}", "intros P H. apply H.", 1
    for _ in range(16):
        k = rng.randint(1, 15)
        form = rng.randrange(4)
        if form == 0:
            yield f"exists n : nat, n + n = {2 * k}", f"exists {k}. reflexivity.", 1
        elif form == 1:
            a = rng.randint(2, 5)
            yield f"exists n : nat, {a} * n = {a * k}", f"exists {k}. reflexivity.", 1
        elif form == 2:
            yield f"exists n : nat, {k} < n", f"exists {k + 1}. lia.", 1
        else:
            yield f"forall n : nat, exists m, m = n + {k}", f"intros n. exists (n + {k}). reflexivity.", 1


def fam_number_eval(rng: random.Random) -> Iterator[Row]:
    """Concrete gcd, modulo and divisibility facts."""
    for _ in range(36):
        form = rng.randrange(3)
        if form == 0:
            g = rng.randint(2, 9)
            a, b = g * rng.randint(1, 12), g * rng.randint(1, 12)
            yield f"Nat.gcd {a} {b} = {math.gcd(a, b)}", "reflexivity.", 1
        elif form == 1:
            a, b = rng.randint(10, 150), rng.randint(2, 12)
            yield f"{a} mod {b} = {a % b}", "reflexivity.", 1
        else:
            d, q = rng.randint(2, 12), rng.randint(2, 12)
            yield f"Nat.divide {d} {d * q}", f"exists {q}. reflexivity.", 1


def fam_number_forms(rng: random.Random) -> Iterator[Row]:
    """Divisibility, parity and modulo facts with a variable."""
    for k in range(2, 10):
        yield f"forall n : nat, Nat.divide {k} ({k} * n)", "intros n. exists n. lia.", 1
        yield f"forall n : nat, Nat.divide {k} (n * {k})", "intros n. exists n. reflexivity.", 1
        yield (f"forall n : nat, (n mod {k}) mod {k} = n mod {k}",
               "intros n. apply Nat.mod_mod. discriminate.", 2)
        yield (f"forall n : nat, n < {k} -> n mod {k} = n", "intros n H. apply Nat.mod_small. exact H.", 2)
        yield (f"forall a b : nat, (a + b * {k}) mod {k} = a mod {k}",
               "intros a b. apply Nat.mod_add. discriminate.", 2)
        yield (f"forall n : nat, n mod {k} < {k}", "intros n. apply Nat.mod_upper_bound. discriminate.", 2)
    for k in range(1, 6):
        yield f"forall n : nat, Nat.Even (2 * n + {2 * k})", f"intros n. exists (n + {k}). lia.", 2
        yield f"forall n : nat, Nat.Odd (2 * n + {2 * k + 1})", f"intros n. exists (n + {k}). lia.", 2
        yield f"forall n : nat, Nat.Even ({2 * k} * n)", f"intros n. exists ({k} * n). lia.", 2
    yield ("forall a b : nat, Nat.Even a -> Nat.Even (a + 2 * b)",
           "intros a b [k Hk]. exists (k + b). lia.", 2)
    yield ("forall n m : nat, Nat.Odd n -> Nat.Even m -> Nat.Odd (n + m)",
           "intros n m [a Ha] [b Hb]. exists (a + b). lia.", 2)
    yield ("forall d a : nat, Nat.divide d a -> Nat.divide d (a * a)",
           "intros d a [x Hx]. exists (x * a). rewrite Hx. ring.", 2)


def _par(text: str) -> str:
    return f"({text})" if " " in text else text


def _bool_expressions() -> list[tuple[str, Callable[[bool, bool, bool], bool]]]:
    """Small boolean expressions over a, b, c with their truth functions."""
    leaves = [("a", lambda a, b, c: a), ("b", lambda a, b, c: b), ("c", lambda a, b, c: c),
              ("true", lambda a, b, c: True), ("false", lambda a, b, c: False)]
    exprs = list(leaves)
    for text, fn in leaves[:3]:
        exprs.append((f"negb {text}", lambda a, b, c, fn=fn: not fn(a, b, c)))
    binary = []
    for (t1, f1), (t2, f2) in itertools.product(exprs, exprs):
        if t1 == t2:
            continue
        binary.append((f"{_par(t1)} && {_par(t2)}", lambda a, b, c, f1=f1, f2=f2: f1(a, b, c) and f2(a, b, c)))
        binary.append((f"{_par(t1)} || {_par(t2)}", lambda a, b, c, f1=f1, f2=f2: f1(a, b, c) or f2(a, b, c)))
        binary.append((f"xorb {_par(t1)} {_par(t2)}", lambda a, b, c, f1=f1, f2=f2: f1(a, b, c) != f2(a, b, c)))
    negated = [(f"negb ({text})", lambda a, b, c, fn=fn: not fn(a, b, c))
               for text, fn in binary if not text.startswith("xorb")]
    return exprs + binary + negated


def fam_bool(rng: random.Random) -> Iterator[Row]:
    """Boolean identities that hold on every row of their truth table, and
    closed boolean computations."""
    exprs = _bool_expressions()
    table = list(itertools.product((False, True), repeat=3))
    by_truth: dict[tuple[bool, ...], list[str]] = {}
    for text, fn in exprs:
        by_truth.setdefault(tuple(fn(*row) for row in table), []).append(text)
    def variables(text: str) -> list[str]:
        return [v for v in "abc" if re.search(rf"\b{v}\b", text)]

    pairs = [(x, y) for texts in by_truth.values() for x, y in itertools.combinations(texts, 2)
             if variables(x) and variables(y)]
    rng.shuffle(pairs)
    for left, right in pairs[:36]:
        names = variables(left + " " + right)
        yield (f"forall {' '.join(names)} : bool, {left} = {right}",
               f"intros {' '.join(names)}. destruct {', '.join(names)}; reflexivity.", 1)
    for _ in range(20):
        a, b = rng.randint(0, 20), rng.randint(0, 20)
        op, fn = rng.choice([("=?", lambda x, y: x == y), ("<=?", lambda x, y: x <= y),
                             ("<?", lambda x, y: x < y)])
        yield f"({a} {op} {b}) = {str(fn(a, b)).lower()}", "reflexivity.", 1
    for k in range(1, 6):
        yield f"forall n : nat, (n <=? n + {k}) = true", "intros n. apply Nat.leb_le. lia.", 2
        yield f"forall n : nat, (n + {k} <=? n) = false", "intros n. apply Nat.leb_gt. lia.", 2
        yield f"forall n : nat, (n =? n + {k}) = false", "intros n. apply Nat.eqb_neq. lia.", 2
    yield "forall n : nat, (n <=? n) = true", "intros n. apply Nat.leb_refl.", 2
    yield "forall n : nat, (n <? n) = false", "intros n. apply Nat.ltb_irrefl.", 2
    for form in ("x + y", "x * y", "Nat.max x y"):
        yield (f"forall (b : bool) (x y : nat), (if b then x else y) <= {form} + x + y",
               "intros b x y. destruct b; lia.", 2)


def fam_option(rng: random.Random) -> Iterator[Row]:
    """Options: computations, and facts about ``Some`` at several types."""
    for _ in range(16):
        a, k = rng.randint(0, 20), rng.randint(1, 9)
        xs = [rng.randint(0, 9) for _ in range(rng.randint(1, 5))]
        i = rng.randint(0, len(xs) + 1)
        form = rng.randrange(3)
        if form == 0:
            yield f"option_map (fun x => x + {k}) (Some {a}) = Some {a + k}", "reflexivity.", 1
        elif form == 1:
            answer = f"Some {xs[i]}" if i < len(xs) else "None"
            yield f"nth_error {_coq_list(xs)} {i} = {answer}", "reflexivity.", 1
        else:
            yield f"hd_error {_coq_list(xs)} = Some {xs[0]}", "reflexivity.", 1
    for kind in ("bool", "(list nat)", "(nat * nat)"):
        yield f"forall x : {kind}, Some x <> None", "intros x. discriminate.", 1
        yield (f"forall x y : {kind}, Some x = Some y -> x = y",
               "intros x y H. injection H as E. exact E.", 1)
    for k in range(1, 6):
        yield (f"forall x : nat, option_map (fun y => y * {k + 1}) (Some x) = Some (x * {k + 1})",
               "intros x. reflexivity.", 1)
    yield ("forall (f : nat -> nat) (o : option nat), o = None -> option_map f o = None",
           "intros f o H. rewrite H. reflexivity.", 2)


def fam_inequality(rng: random.Random) -> Iterator[Row]:
    """Order facts, by ``lia`` or ``nia``."""
    for k in range(1, 8):
        yield f"forall a b : nat, a <= b -> a + {k} <= b + {k}", "lia.", 1
        yield f"forall n : nat, n < n + {k}", "lia.", 1
        yield f"forall n : nat, n <= {k} * n", "lia.", 1
        yield f"forall a b : nat, a + b <= {k} -> a <= {k}", "lia.", 1
        yield f"forall a b : nat, a <= b -> {k + 1} * a <= {k + 1} * b", "intros a b H. lia.", 1
    yield "forall a b c : nat, a < b -> b < c -> a < c", "lia.", 1
    yield "forall a b c : nat, a <= b -> b < c -> a < c", "lia.", 1
    yield "forall n : nat, 1 <= n -> n <= n * n", "intros n H. nia.", 2
    yield "forall a b : nat, a * b <= (a + b) * (a + b)", "intros a b. nia.", 2
    yield "forall a b c : nat, a <= b -> a * c <= b * c", "intros a b c H. nia.", 2


def fam_minmax(rng: random.Random) -> Iterator[Row]:
    """Minimum and maximum, by ``lia`` or computation."""
    for k in range(1, 6):
        yield f"forall a b : nat, Nat.max (a + {k}) (b + {k}) = {k} + Nat.max a b", "lia.", 1
        yield f"forall a : nat, Nat.min a (a + {k}) = a", "lia.", 1
        yield f"forall a : nat, Nat.max a (a + {k}) = a + {k}", "lia.", 1
    yield "forall a b : nat, Nat.min a b <= Nat.max a b", "lia.", 1
    yield "forall a : nat, Nat.max a 0 = a", "lia.", 1
    yield "forall a : nat, Nat.min a 0 = 0", "lia.", 1
    yield "forall a b : nat, Nat.min a b + Nat.max a b = a + b", "lia.", 1
    yield "forall a b c : nat, Nat.min a (Nat.min b c) = Nat.min (Nat.min a b) c", "lia.", 1
    for _ in range(10):
        a, b = rng.randint(0, 30), rng.randint(0, 30)
        fn = rng.choice(["max", "min"])
        yield f"Nat.{fn} {a} {b} = {max(a, b) if fn == 'max' else min(a, b)}", "reflexivity.", 1


def fam_induction(rng: random.Random) -> Iterator[Row]:
    """Short inductions on naturals."""
    for k in range(2, 8):
        yield (f"forall n : nat, list_sum (repeat {k} n) = {k} * n",
               "induction n as [|n IH].\n- reflexivity.\n- simpl. rewrite IH. lia.", 3)
        yield f"forall n : nat, length (seq {k} n) = n", "intros n. apply seq_length.", 2
    yield ("forall f : nat -> nat, (forall n, f (S n) = f n) -> forall n, f n = f 0",
           "intros f Hf n. induction n as [|n IH].\n- reflexivity.\n- rewrite Hf. exact IH.", 3)
    yield ("forall f : nat -> nat, (forall n, f n <= f (S n)) -> forall n, f 0 <= f n",
           "intros f Hf n. induction n as [|n IH].\n- lia.\n- specialize (Hf n). lia.", 3)
    yield ("forall n : nat, 1 <= fact n", "intros n. pose proof (lt_O_fact n). lia.", 2)
    yield ("forall n : nat, list_sum (seq 0 n) <= n * n",
           "induction n as [|n IH].\n- simpl. lia.\n- rewrite seq_S, list_sum_app. simpl. lia.", 3)


FAMILIES: tuple[tuple[str, str, Callable[[random.Random], Iterator[Row]]], ...] = (
    ("arith_eval", "arith", fam_arith_eval),
    ("arith_linear", "arith", fam_arith_linear),
    ("arith_ring", "arith", fam_arith_ring),
    ("arith_sum", "arith", fam_arith_rearrange),
    ("rewrite", "rewrite", fam_rewrite),
    ("list_types", "lists", fam_list_types),
    ("list_eval", "lists", fam_list_eval),
    ("list_induction", "lists", fam_list_induction),
    ("logic_prop", "logic", fam_logic_prop),
    ("logic_fo", "logic", fam_logic_first_order),
    ("nt_eval", "number_theory", fam_number_eval),
    ("nt_forms", "number_theory", fam_number_forms),
    ("bool", "bool", fam_bool),
    ("option", "option", fam_option),
    ("ineq", "inequality", fam_inequality),
    ("minmax", "minmax", fam_minmax),
    ("induction", "induction", fam_induction),
)


def family_lemmas(rng: random.Random) -> list[Lemma]:
    """Every family's rows as lemmas ``ws_<family>_<n>``."""
    lemmas = []
    for family, topic, make in FAMILIES:
        for i, (prop, tactics, difficulty) in enumerate(make(rng)):
            lemmas.append(Lemma(f"ws_{family}_{i}", prop, tactics, topic, difficulty, family))
    return lemmas


def type_instances(target: Lemma) -> list[Lemma]:
    """A training target with its ``(A : Type)`` set to ``nat`` and ``bool``;
    the reference proof, minus the introduction of ``A``, proves it."""
    tactics = target.tactics or ""
    if not re.match(r"intros A\b", tactics):
        return []
    made = []
    for kind in ("nat", "bool"):
        prop = type_instance(target.prop, kind)
        if prop is None:
            continue
        rest = re.sub(r"^intros A\.\s*", "", re.sub(r"^intros A (?=\w)", "intros ", tactics))
        if re.search(r"\bA\b", rest):
            return []  # the proof names the type variable again
        made.append(Lemma(f"ws_{target.name}_at_{kind}", prop, rest, target.topic, target.difficulty,
                          "type_instance"))
    return made


# ---------------------------------------------------------------------------
# Leakage and duplicates


def skeleton(statement: str) -> str:
    """The canonical form with every numeral replaced by ``#``."""
    return " ".join("#" if token.isdigit() else token for token in canonical_form(statement, ROCQ).split())


def _tactic_text(proof: str | None) -> str:
    """A proof's tactics with ``Proof.``/``Qed.`` dropped and whitespace collapsed."""
    if proof is None:
        return ""
    text = " ".join(proof.split())
    return text.removeprefix("Proof.").removesuffix("Qed.").strip()


@dataclass(frozen=True)
class Guard:
    """What the corpus must not contain, computed from the target set."""

    held_ids: frozenset[str]
    held_forms: frozenset[str]
    held_skeletons: frozenset[str]
    held_proofs: frozenset[str]
    target_forms: frozenset[str]

    @classmethod
    def from_targets(cls, targets: Sequence[Mapping]) -> "Guard":
        held = [t for t in targets if t["held_out"]]
        training_proofs = {_tactic_text(t["proof"]) for t in targets if not t["held_out"]}
        return cls(
            held_ids=frozenset(t["id"] for t in held),
            held_forms=frozenset(canonical_form(t["statement"], ROCQ) for t in held),
            held_skeletons=frozenset(skeleton(t["statement"]) for t in held),
            held_proofs=frozenset(p for t in held if len(p := _tactic_text(t["proof"])) >= LEAK_PROOF_CHARS
                                  and p not in training_proofs),
            target_forms=frozenset(canonical_form(t["statement"], ROCQ) for t in targets),
        )

    def statement_leaks(self, statement: str) -> bool:
        return (canonical_form(statement, ROCQ) in self.held_forms
                or skeleton(statement) in self.held_skeletons)

    def admits(self, lemma: Lemma) -> bool:
        """Whether a generated lemma may enter the corpus: not a target (up
        to renaming), no held-out skeleton, no held-out proof."""
        return (canonical_form(lemma.statement, ROCQ) not in self.target_forms
                and not self.statement_leaks(lemma.statement)
                and _tactic_text(lemma.proof) not in self.held_proofs)


def _dedupe(lemmas: Iterable[Lemma], guard: Guard, seen: set[str]) -> list[Lemma]:
    """The admitted lemmas whose canonical form is not in ``seen`` (updated)."""
    kept = []
    for lemma in lemmas:
        form = canonical_form(lemma.statement, ROCQ)
        if form in seen or not guard.admits(lemma):
            continue
        seen.add(form)
        kept.append(lemma)
    return kept


def leakage_problems(examples: Sequence[Mapping], targets: Sequence[Mapping]) -> list[str]:
    """Every way ``examples`` (corpus lines) leak a held-out target."""
    guard = Guard.from_targets(targets)
    problems = []
    for i, example in enumerate(examples):
        where = f"line {i + 1} ({example['role']}, {example['source']})"
        if example["source"] in guard.held_ids or any(
                value in guard.held_ids for value in example["meta"].values() if isinstance(value, str)):
            problems.append(f"{where}: names a held-out target")
        for statement in statements_in(example):
            if guard.statement_leaks(statement):
                problems.append(f"{where}: states a held-out target (up to renaming or numerals)")
        for proof in proofs_in(example):
            if _tactic_text(proof) in guard.held_proofs:
                problems.append(f"{where}: holds a held-out reference proof")
    return problems


_COQ_BLOCK = re.compile(r"```coq\n(.*?)```", re.S)


def statements_in(example: Mapping) -> list[str]:
    """Every theorem statement a corpus line shows, in prompt or completion."""
    found = []
    for block in _COQ_BLOCK.findall(example["prompt"] + "\n" + example["completion"]):
        for line in block.splitlines():
            if line.startswith(("Theorem ", "Lemma ")):
                found.append(line.strip())
    return found


def proofs_in(example: Mapping) -> list[str]:
    """The proofs a corpus line holds: a solver completion's, a conjecture's
    checking proof."""
    proofs = []
    if example["role"] == "solver":
        extracted = extract_proof(example["completion"], ROCQ)
        if extracted.ok:
            proofs.append(extracted.value)
    if example["meta"].get("proof"):
        proofs.append(example["meta"]["proof"])
    return proofs


# ---------------------------------------------------------------------------
# The corpus


def _hash_order(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def reference_ids(targets: Sequence[Mapping], seed: int = SEED) -> list[str]:
    """The training targets whose reference proof is in the corpus: in each
    topic, the first :data:`REFERENCE_FRACTION` (rounded) in seeded hash order."""
    by_topic: dict[str, list[Mapping]] = {}
    for target in targets:
        if not target["held_out"] and target["proof"] is not None:
            by_topic.setdefault(target["topic"], []).append(target)
    chosen = set()
    for members in by_topic.values():
        ordered = sorted(members, key=lambda t: _hash_order(seed, t["id"]))
        chosen.update(t["id"] for t in ordered[:round(REFERENCE_FRACTION * len(ordered))])
    return [t["id"] for t in targets if t["id"] in chosen]


def solver_example(prompts: PromptSet, lemma: Lemma, source: str, kind: str) -> dict:
    return {
        "role": "solver",
        "prompt": prompts.solver(HEADER, lemma.statement),
        "completion": f"```coq\n{lemma.statement}\n{lemma.proof}\n```",
        "source": source,
        "meta": {"kind": kind, "family": lemma.family, "topic": lemma.topic, "difficulty": lemma.difficulty},
    }


def conjecturer_example(prompts: PromptSet, target: Lemma, lemma: Lemma) -> dict:
    return {
        "role": "conjecturer",
        "prompt": prompts.conjecturer(target.statement),
        "completion": f"```coq\n{lemma.statement}\nAdmitted.\n```",
        "source": target.name,
        "meta": {"kind": lemma.family, "lemma": lemma.name, "topic": target.topic, "proof": lemma.proof},
    }


def guide_example(prompts: PromptSet, target: Lemma, conjecture: str, kind: str) -> dict:
    scores = guide_scores(target.statement, conjecture)
    return {
        "role": "guide",
        "prompt": prompts.guide(target.statement, conjecture),
        "completion": guide_completion(scores),
        "source": target.name,
        "meta": {"kind": kind, "topic": target.topic, "scores": scores},
    }


def _fresh(used: Iterable[str], pool: Sequence[str] = ("k", "j", "q", "r", "t", "u", "w", "z")) -> str:
    taken = set(used)
    return next(name for name in pool if name not in taken)


def _rename_bound(prop: str) -> str | None:
    """``prop`` with each leading bound variable renamed (``n`` -> ``n0``)."""
    s = shape(prop)
    if not s.variables:
        return None
    return _replace_identifiers(prop, {name: name + "0" for name in s.variables})


def _with_conclusion(prop: str, new_conclusion: Callable[[str], str]) -> str:
    """``prop`` with its conclusion text replaced by ``new_conclusion(old)``."""
    s = shape(prop)
    start = prop.rfind(s.conclusion)
    return prop[:start] + new_conclusion(s.conclusion)


def _closed(lemmas: Sequence[Lemma]) -> list[Lemma]:
    return [lemma for lemma in lemmas if not shape(lemma.prop).variables and not shape(lemma.prop).premises]


def guide_conjectures(target: Lemma, related: Sequence[Lemma], other: Sequence[Lemma],
                      closed_other: Sequence[Lemma], rng: random.Random) -> list[tuple[str, str]]:
    """Negative conjectures for ``target``: ``(kind, proposition)`` pairs.
    ``other`` is the pool of lemmas to draw unrelated ones from, and
    ``closed_other`` its closed members (no variable, no premise)."""
    made = []
    unrelated = [lemma for lemma in other if lemma.topic != target.topic]
    closed_unrelated = [lemma for lemma in closed_other if lemma.topic != target.topic]
    pick = rng.choice(unrelated)
    made.append(("unrelated", pick.prop))
    renamed = _rename_bound(target.prop)
    if renamed:
        made.append(("renamed", renamed))
    if related:
        base = rng.choice(related)
        # the alternative is a closed instance of the same target when there
        # is one (often a related alternative), else an unrelated fact
        closed_related = [lemma for lemma in _closed(related) if lemma is not base]
        fact = rng.choice(closed_related if closed_related and rng.random() < 0.5 else closed_unrelated).prop
        made.append(("hedged", _with_conclusion(base.prop, lambda c: f"({c}) \\/ ({fact})")))
        facts = [f"({lemma.prop})" for lemma in rng.sample(closed_unrelated, 3)]
        made.append(("many", _with_conclusion(base.prop, lambda c: f"({c}) \\/ " + " \\/ ".join(facts))))
        name = _fresh(_identifiers(base.prop))
        made.append(("redundant", f"forall {name} : nat, {name} <= {rng.randint(2, 9)} -> {base.prop}"))
        closed = _closed(related)
        if len(closed) >= 2:
            first, second = rng.sample(closed, 2)
            made.append(("conjunction", f"{first.prop} /\\ {second.prop}"))
    return made


@dataclass
class Corpus:
    """The corpus lines and every lemma they state, for the Rocq check."""

    examples: list[dict]
    lemmas: list[Lemma]


def build_corpus(targets: Sequence[Mapping], seed: int = SEED) -> Corpus:
    """The whole corpus, deterministically from ``targets`` and ``seed``."""
    rng = random.Random(seed)
    prompts = PromptSet("rocq")
    guard = Guard.from_targets(targets)
    training = [target_lemma(t) for t in targets if not t["held_out"] and t["proof"] is not None]
    by_id = {lemma.name: lemma for lemma in training}
    seen: set[str] = set()

    # Conjectures, per training target
    conjectures: dict[str, list[Lemma]] = {}
    for target in training:
        candidates = instances(target, rng)[:INSTANCES_PER_TARGET] + library_lemmas(target) + key_lemmas(target)
        conjectures[target.name] = _dedupe(candidates, guard, seen)

    # Solver lemmas
    variants = _dedupe(family_lemmas(rng), guard, seen)
    variants += _dedupe((inst for t in training for inst in type_instances(t)), guard, seen)

    examples = []
    for target_id in reference_ids(targets, seed):
        examples.append(solver_example(prompts, by_id[target_id], target_id, "reference"))
    for lemma in variants:
        examples.append(solver_example(prompts, lemma, lemma.name, "variant"))
    proved = [lemma for lemmas in conjectures.values() for lemma in lemmas if lemma.tactics]
    for lemma in proved:
        examples.append(solver_example(prompts, lemma.renamed(), lemma.name, "conjecture"))

    for target in training:
        for lemma in conjectures[target.name]:
            examples.append(conjecturer_example(prompts, target, lemma))

    # Guide: a sample of the positives, then the negatives
    guide_lemmas: list[Lemma] = []
    pairs = [(target, lemma) for target in training for lemma in conjectures[target.name]]
    for target, lemma in rng.sample(pairs, min(GUIDE_POSITIVES, len(pairs))):
        renamed = lemma.renamed()
        examples.append(guide_example(prompts, target, renamed.statement, "positive"))
    negatives: dict[str, list[tuple[Lemma, str]]] = {}
    pool = variants + proved
    closed_pool = _closed(pool)
    for target in training:
        for kind, prop in guide_conjectures(target, conjectures[target.name], pool, closed_pool, rng):
            negatives.setdefault(kind, []).append((target, prop))
    for kind in sorted(negatives):
        chosen = negatives[kind]
        for target, prop in rng.sample(chosen, min(GUIDE_NEGATIVES, len(chosen))):
            lemma = Lemma("guide_conjecture", prop, None, target.topic, 1, f"guide_{kind}").renamed()
            if guard.statement_leaks(lemma.statement):
                continue
            guide_lemmas.append(lemma)
            examples.append(guide_example(prompts, target, lemma.statement, kind))

    # Conjecturer practice on the variants (drawn last: the lines above stay as they were)
    practice: list[Lemma] = []
    if VARIANT_CONJECTURES:
        for variant in variants:
            for lemma in _dedupe(instances(variant, rng)[:INSTANCES_PER_TARGET], guard, seen):
                practice.append(lemma)
                examples.append(conjecturer_example(prompts, variant, lemma))

    lemmas = variants + [lemma for lemmas in conjectures.values() for lemma in lemmas]
    lemmas += [lemma.renamed() for lemma in proved] + guide_lemmas + practice
    return Corpus(examples, lemmas)


def to_jsonl(examples: Iterable[Mapping]) -> str:
    """One JSON object per line, keys in :data:`FIELDS` order."""
    return "".join(json.dumps({k: e[k] for k in FIELDS}, ensure_ascii=False) + "\n" for e in examples)


def check_records(lemmas: Iterable[Lemma]) -> list[dict]:
    """Records of the target schema for every distinct lemma (by name)."""
    records: dict[str, dict] = {}
    for lemma in lemmas:
        record = lemma.record()
        if record["id"] not in records or (records[record["id"]]["proof"] is None and record["proof"]):
            records[record["id"]] = record
    return list(records.values())


def records_from_corpus(examples: Sequence[Mapping]) -> list[dict]:
    """Records of the target schema for what the corpus lines state, read
    back from the lines themselves: each solver completion's statement and
    proof, each conjecture with its checking proof, each guide conjecture."""
    lemmas = []
    for example in examples:
        if example["role"] == "solver":
            statement = statements_in({"prompt": "", "completion": example["completion"]})[0]
            proof = extract_proof(example["completion"], ROCQ).value
        elif example["role"] == "conjecturer":
            statement = extract_conjecture(example["completion"], ROCQ).value
            proof = example["meta"].get("proof")
        else:
            statement = extract_conjecture(example["prompt"], ROCQ).value
            proof = None
        name = statement.split()[1]
        lemmas.append(Lemma(name, prop_of(statement), tactics_of(proof), "corpus", 1, example["role"]))
    return check_records(lemmas)


def _summary(examples: Sequence[Mapping]) -> str:
    roles = Counter(e["role"] for e in examples)
    kinds = Counter((e["role"], e["meta"]["kind"]) for e in examples)
    scores = Counter(json.dumps(e["meta"]["scores"], sort_keys=True) for e in examples if e["role"] == "guide")
    return (f"{len(examples)} examples: {dict(roles)}\nkinds: {dict(sorted(kinds.items()))}\n"
            f"distinct guide reviews: {len(scores)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the JSONL")
    parser.add_argument("--targets", type=Path, default=TARGETS, help="the target set")
    parser.add_argument("--no-rocq", action="store_true", help="skip the Rocq check")
    parser.add_argument("--verify", action="store_true",
                        help="check that the output file is what the generator builds, instead of writing it")
    parser.add_argument("--coqc", default=None, help="coqc binary (default: from PATH)")
    args = parser.parse_args(argv)

    targets = targets_tool.load_jsonl(args.targets)
    corpus = build_corpus(targets)
    text = to_jsonl(corpus.examples)
    ok = True
    if args.verify and (not args.output.is_file() or args.output.read_text(encoding="utf-8") != text):
        print(f"{args.output} is not what the generator builds: run python tools/make_warmstart.py",
              file=sys.stderr)
        ok = False
    for problem in leakage_problems(corpus.examples, targets):
        print(f"leak: {problem}", file=sys.stderr)
        ok = False
    records = check_records(corpus.lemmas)
    problems = targets_tool.schema_problems(records)
    failures = [] if args.no_rocq or problems else targets_tool.check_targets(records, coqc=args.coqc)
    for problem in problems:
        print(f"schema: {problem}", file=sys.stderr)
    for failure in failures:
        print(f"rocq: {failure.target_id}: {failure.detail}", file=sys.stderr)
    ok = ok and not problems and not failures
    if not ok:
        return 1
    if not args.verify:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output} ({len(text.encode()):,} bytes)")
    print(f"{len(records)} distinct lemmas checked{' (schema only)' if args.no_rocq else ' by Rocq'}")
    print(_summary(corpus.examples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
