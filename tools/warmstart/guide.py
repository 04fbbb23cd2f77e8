"""The Guide's scores of a conjecture for a target (relevance, redundancy,
conclusion complexity), by the rules that ``tools/make_warmstart.py``'s
docstring states, and the review a Guide example completes with."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from sgs.method.roles import canonical_form

from .statements import BINDER_WORDS, ROCQ, identifiers, prop_of, shape, split_top


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
    return identifiers(part) & set(variables)


def relevance(target: str, conjecture: str) -> int:
    """The relevance rule (0-5) of ``tools/make_warmstart.py``'s docstring."""
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
    """The redundancy rule (0/1) of ``tools/make_warmstart.py``'s docstring."""
    s = shape(prop_of(statement))
    variables = set(s.variables)
    # a variable is used when a premise, the conclusion or the type of
    # another binder (``l : list A`` uses ``A``) mentions it
    used = set().union(*(identifiers(text) for text in [*s.premises, s.conclusion]))
    for group in s.binders:
        used |= identifiers(group.type or "") - set(group.names)
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
    keys = [identifiers(part) - _TYPES - BINDER_WORDS for part in parts]
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
    """The conclusion-complexity rule (0-4) of ``tools/make_warmstart.py``'s docstring."""
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
