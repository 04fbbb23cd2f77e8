"""Instances of training targets: bound variables set to constants (the
Conjecturer's ``instance`` lemmas, with a proof derived from the target's
when a rule gives one) and type variables set to ``nat`` or ``bool`` (the
Solver's ``type_instance`` lemmas)."""

from __future__ import annotations

import random
import re
from typing import Mapping, Sequence

from .guide import redundancy
from .statements import BINDER_WORDS, Binder, Lemma, binder_groups, first_comma, identifiers, rocq_tokens, shape


#: values for the base case, per variable type (``[]`` alone may leave its
#: element type to infer, so the empty list is spelled with its type)
_BASE = {"nat": "0", "list nat": "(@nil nat)", "bool": "true"}


def _random_value(kind: str, rng: random.Random) -> str:
    if kind == "nat":
        return str(rng.randint(1, 4))
    if kind == "bool":
        return "false"
    return "[" + "; ".join(str(rng.randint(0, 5)) for _ in range(rng.randint(1, 3))) + "]"


def replace_identifiers(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every identifier token named in ``values`` replaced."""
    pieces, last = [], 0
    for token in rocq_tokens(text):
        if token.kind == "ident" and token.text in values:
            pieces += [text[last:token.start], values[token.text]]
            last = token.end
    return "".join(pieces) + text[last:]


def substitute(text: str, values: Mapping[str, str]) -> str | None:
    """``text`` with each free identifier named in ``values`` replaced;
    ``None`` when ``text`` rebinds one of those names."""
    tokens = rocq_tokens(text)
    for i, token in enumerate(tokens):
        if token.text in BINDER_WORDS:
            for later in tokens[i + 1:]:
                if later.text in {",", "=>"}:
                    break
                if later.text in values:
                    return None
    return replace_identifiers(text, values)


def render_binders(groups: Sequence[Binder]) -> str:
    if len(groups) == 1:
        return f"{' '.join(groups[0].names)} : {groups[0].type}"
    return " ".join(f"({' '.join(g.names)} : {g.type})" for g in groups)


def instantiate(prop: str, values: Mapping[str, str]) -> str | None:
    """``prop`` with the leading bound variables in ``values`` replaced by
    their values and dropped from the binders (``None`` if impossible)."""
    tokens = rocq_tokens(prop)
    if not tokens or tokens[0].text != "forall":
        return None
    comma = first_comma(tokens)
    if comma is None:
        return None
    groups = binder_groups(prop[tokens[0].end:tokens[comma].start])
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
    if s.binders or s.premises or identifiers(prop) & {"exists", "forall", "fun", "In", "Forall"}:
        return None
    texts = [t.text for t in rocq_tokens(s.conclusion)]
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
