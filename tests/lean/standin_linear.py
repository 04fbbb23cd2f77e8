"""Arithmetic deciders of the Lean REPL stand-in (``lean_standin.py``, a TEST
DOUBLE): what its ``linarith`` and ``omega`` accept.

``linarith`` (:func:`linarith_refutes`): every hypothesis and the negated goal
become linear constraints over the rationals, whose atoms are variables and
the subterms linarith does not look into (products of two non-constants,
powers, function applications); the goal holds when Fourier–Motzkin
elimination finds the constraints infeasible.  That is what linarith decides
(it finds a certificate for exactly these cases), with its preprocessing of
ℕ atoms (nonnegative) and of strict integer inequalities (``a < b`` becomes
``a + 1 ≤ b``).

``omega`` (:func:`omega_counterexample`): omega is complete for linear
integer arithmetic, and the stand-in approximates it by searching for a
counterexample: each atom (an ℕ or ℤ variable, or a nonlinear subterm, which
omega treats as an atom too) ranges over small values and the neighbours of
the formula's literals (so ``x ≤ 1000`` fails at 1001); every combination is
tried when there are at most :data:`SEARCH_LIMIT` of them, else a seeded
sample of that many.  A formula with no counterexample found is proved.
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from typing import Optional

from tests.lean.standin_eval import compile_arith, compile_prop
from tests.lean.standin_terms import (
    Call, Cast, Const, NotClosed, Num, Op, Quant, Term, domain, lean_text, literals_in, names_in, relation_domain, show)

#: largest number of points the omega search tries
SEARCH_LIMIT = 5_000
#: every atom takes the values 0..SMALL (and -SMALL..-1 in ℤ)
SMALL = 12
#: Fourier–Motzkin gives up beyond this many constraints
MAX_CONSTRAINTS = 4000

#: a linear form: atom key -> coefficient, the constant under ""
Linear = dict[str, Fraction]
#: ``(form, strict)``: form < 0 when strict, else form ≤ 0
Constraint = tuple[Linear, bool]


class NotLinear(ValueError):
    """A formula outside linear arithmetic over atoms."""


# -- linarith ------------------------------------------------------------------

def linear_form(term: Term, dom: str, types: dict[str, Optional[str]], atom_domains: dict[str, str]) -> Linear:
    """``term`` as a linear combination of atoms; records each atom's domain."""
    if isinstance(term, Num):
        if term.decimal and dom in "NZ":
            raise NotLinear("a decimal in ℕ or ℤ")
        return {"": term.value}
    if isinstance(term, Cast):
        return linear_form(term.expr, term.domain, types, atom_domains)
    if isinstance(term, Op) and term.op in ("+", "-") and not (term.op == "-" and dom == "N"):
        left, right = (linear_form(a, dom, types, atom_domains) for a in term.args)
        return _combine(left, right, 1 if term.op == "+" else -1)
    if isinstance(term, Op) and term.op == "neg":
        return _scale(linear_form(term.args[0], dom, types, atom_domains), Fraction(-1))
    if isinstance(term, Op) and term.op in ("*", "/"):
        left, right = (linear_form(a, dom, types, atom_domains) for a in term.args)
        if term.op == "*" and _constant(left) is not None:
            return _scale(right, _constant(left))
        if _constant(right) is not None and (term.op == "*" or (dom in "QR" and _constant(right) != 0)):
            return _scale(left, _constant(right) if term.op == "*" else 1 / _constant(right))
    if not names_in(term):
        try:
            return {"": compile_arith(term, dom, types, {})(())}
        except NotClosed:
            pass
    key = show(term)
    atom_domains[key] = domain(term, types) or dom
    return {key: Fraction(1)}


def _constant(form: Linear) -> Optional[Fraction]:
    return form.get("", Fraction(0)) if all(k == "" for k in form) else None


def _scale(form: Linear, factor: Fraction) -> Linear:
    return {k: v * factor for k, v in form.items() if v * factor != 0}


def _combine(left: Linear, right: Linear, sign: int) -> Linear:
    out = dict(left)
    for k, v in right.items():
        out[k] = out.get(k, Fraction(0)) + sign * v
    return {k: v for k, v in out.items() if v != 0}


def comparison_constraints(term: Term, types: dict[str, Optional[str]], atom_domains: dict[str, str],
                           negate: bool = False) -> list[list[Constraint]]:
    """The constraints a comparison states (or, ``negate``d, denies), as
    alternatives: ``a = b`` negated is ``a < b`` or ``a > b``."""
    if not isinstance(term, Op) or term.op not in ("<", "≤", "=", ">", "≥"):
        raise NotLinear("not a comparison")
    dom = relation_domain(term, types)
    if dom == "C":
        raise NotLinear("ℂ is not ordered")
    a, b = (linear_form(x, dom, types, atom_domains) for x in term.args)
    less, less_eq = (_combine(a, b, -1), True), (_combine(a, b, -1), False)    # a - b < 0, ≤ 0
    more, more_eq = (_combine(b, a, -1), True), (_combine(b, a, -1), False)
    if not negate:
        return [{"<": [less], "≤": [less_eq], "=": [less_eq, more_eq], ">": [more], "≥": [more_eq]}[term.op]]
    return {"<": [[more_eq]], "≤": [[more]], "=": [[less], [more]], ">": [[less_eq]], "≥": [[less]]}[term.op]


def linarith_refutes(hypotheses: list[Term], goal: Term, types: dict[str, Optional[str]]) -> bool:
    """Whether the hypotheses (conjunctions split, non-comparisons ignored)
    refute every way the comparison ``goal`` (or ``False``) could fail."""
    atom_domains: dict[str, str] = {}
    facts: list[Constraint] = []
    for hypothesis in hypotheses:
        for part in _conjuncts(hypothesis):
            try:
                [alternative] = comparison_constraints(part, types, atom_domains)
            except NotLinear:
                continue
            facts += alternative
    if isinstance(goal, Const) and not goal.value:
        cases: list[list[Constraint]] = [[]]
    else:
        cases = comparison_constraints(goal, types, atom_domains, negate=True)
    nonneg = [({key: Fraction(-1)}, False) for key, dom in atom_domains.items() if dom == "N"]
    integral = {key for key, dom in atom_domains.items() if dom in "NZ"}
    return all(_infeasible([_tighten(c, integral) for c in facts + case + nonneg]) for case in cases)


def _conjuncts(term: Term) -> list[Term]:
    if isinstance(term, Op) and term.op == "∧":
        return _conjuncts(term.args[0]) + _conjuncts(term.args[1])
    return [term]


def _tighten(constraint: Constraint, integral: set[str]) -> Constraint:
    """``e < 0`` over integer atoms with integer coefficients is ``e + 1 ≤ 0``."""
    form, strict = constraint
    if strict and all(k in integral for k in form if k) and all(v.denominator == 1 for v in form.values()):
        return {**form, "": form.get("", Fraction(0)) + 1}, False
    return constraint


def _infeasible(constraints: list[Constraint]) -> bool:
    """Fourier–Motzkin: whether no rational point satisfies every constraint."""
    while True:
        for form, strict in constraints:
            if all(k == "" for k in form):
                value = form.get("", Fraction(0))
                if value > 0 or (strict and value >= 0):
                    return True
        atoms = {k for form, _ in constraints for k in form if k}
        if not atoms:
            return False
        atom = min(atoms, key=lambda a: sum(1 for f, _ in constraints if f.get(a, 0) > 0)
                   * sum(1 for f, _ in constraints if f.get(a, 0) < 0))
        upper = [(f, s) for f, s in constraints if f.get(atom, 0) > 0]
        lower = [(f, s) for f, s in constraints if f.get(atom, 0) < 0]
        rest = [(f, s) for f, s in constraints if f.get(atom, 0) == 0]
        for (f, s), (g, t) in itertools.product(upper, lower):
            combined = _combine(_scale(f, -g[atom]), _scale(g, f[atom]), 1)
            rest.append(({k: v for k, v in combined.items() if k != atom}, s or t))
        constraints = list({_key(c): c for c in rest}.values())
        if len(constraints) > MAX_CONSTRAINTS:
            return False


def _key(constraint: Constraint) -> tuple:
    form, strict = constraint
    scale = max((abs(v) for k, v in form.items() if k), default=Fraction(1))
    return tuple(sorted((k, v / scale) for k, v in form.items())), strict


# -- omega ---------------------------------------------------------------------------

def omega_atoms(term: Term, types: dict[str, Optional[str]], found: dict[str, str]) -> None:
    """Record the atoms omega sees in ``term`` (key -> ``N`` or ``Z``):
    variables and the nonlinear subterms it cannot look into."""
    if isinstance(term, (Num, Const)):
        return
    if isinstance(term, Quant):
        raise NotLinear("omega does not handle quantifiers")
    if isinstance(term, Cast):
        if term.domain not in "NZ":
            raise NotLinear(f"a cast to {term.domain}")
        return omega_atoms(term.expr, types, found)
    linear_ops = ("+", "-", "neg", "not", "∧", "∨", "→", "↔", "=", "≠", "<", "≤", ">", "≥", "∣")
    if isinstance(term, Op) and (term.op in linear_ops or (term.op == "*" and any(not names_in(a) for a in term.args))
                                 or (term.op in ("/", "%") and not names_in(term.args[1]))):
        for arg in term.args:
            omega_atoms(arg, types, found)
        return
    if isinstance(term, (Call, Op)) and not names_in(term):
        return
    dom = domain(term, types)
    if dom not in ("N", "Z"):
        raise NotLinear(f"`{lean_text(term)}` is not an integer")
    found[show(term)] = dom


def omega_counterexample(hypotheses: list[Term], goal: Term, types: dict[str, Optional[str]],
                         seed: str) -> Optional[dict[str, Fraction]]:
    """Atom values under which the hypotheses hold and ``goal`` fails, if the
    search finds any; :class:`NotLinear` when the goal is outside omega's
    fragment.  Hypotheses outside it are ignored, as omega ignores them."""
    atoms: dict[str, str] = {}
    omega_atoms(goal, types, atoms)
    usable = []
    for hypothesis in hypotheses:
        try:
            omega_atoms(hypothesis, types, dict(atoms))
        except NotLinear:
            continue
        omega_atoms(hypothesis, types, atoms)
        usable.append(hypothesis)
    keys = sorted(atoms)
    index = {key: i for i, key in enumerate(keys)}
    try:
        claim = compile_prop(goal, types, index, allowed="NZ")
        facts = [compile_prop(h, types, index, allowed="NZ") for h in usable]
    except NotClosed as error:
        raise NotLinear(str(error)) from None
    solved = _solved_atoms(usable, types, atoms)
    free = [key for key in keys if key not in solved]
    literals = {abs(int(v)) for t in [goal, *usable] for v in literals_in(t) if v.denominator == 1}
    candidates = [_candidates(atoms[key], literals) for key in free]
    for point in _points(candidates, seed):
        values = dict(zip(free, point))
        for key, form in solved.items():
            values[key] = form.get("", Fraction(0)) + sum(c * values[k] for k, c in form.items() if k)
        if any(atoms[key] == "N" and values[key] < 0 for key in solved):
            continue
        vector = [values[key] for key in keys]
        try:
            if all(f(vector) for f in facts) and not claim(vector):
                return dict(zip(keys, vector))
        except NotClosed:
            continue
    return None


def _solved_atoms(hypotheses: list[Term], types: dict[str, Optional[str]], atoms: dict[str, str]) -> dict[str, Linear]:
    """Atoms the equality hypotheses determine: Gaussian elimination on those
    with an atom of coefficient ±1, so that the search tries only points that
    satisfy them.  Each solved atom maps to a linear form over free atoms."""
    solved: dict[str, Linear] = {}
    for hypothesis in hypotheses:
        for part in _conjuncts(hypothesis):
            if not (isinstance(part, Op) and part.op == "="):
                continue
            try:
                dom = relation_domain(part, types)
                found: dict[str, str] = {}
                left, right = (linear_form(side, dom, types, found) for side in part.args)
            except (NotLinear, NotClosed):
                continue
            if dom == "N" and _uses_minus(part) or not set(found) <= set(atoms):
                continue
            form = _combine(left, right, -1)
            for key, definition in solved.items():
                form = _substituted(form, key, definition)
            pivot = next((k for k, c in sorted(form.items()) if k and abs(c) == 1), None)
            if pivot is None:
                continue
            definition = _scale({k: c for k, c in form.items() if k != pivot}, -1 / form[pivot])
            solved = {k: _substituted(f, pivot, definition) for k, f in solved.items()}
            solved[pivot] = definition
    return solved


def _substituted(form: Linear, atom: str, definition: Linear) -> Linear:
    if atom not in form:
        return form
    rest = {k: c for k, c in form.items() if k != atom}
    return _combine(rest, _scale(definition, form[atom]), 1)


def _uses_minus(term: Term) -> bool:
    """ℕ subtraction truncates, so an equation with it cannot be solved linearly."""
    if isinstance(term, Op):
        return term.op == "-" or any(_uses_minus(a) for a in term.args)
    if isinstance(term, (Call,)):
        return any(_uses_minus(a) for a in term.args)
    if isinstance(term, Cast):
        return _uses_minus(term.expr)
    return False


def _candidates(dom: str, literals: set[int]) -> list[Fraction]:
    values = set(range(SMALL + 1))
    for c in literals:
        values |= {c - 1, c, c + 1, 2 * c}
    if dom == "Z":
        values |= {-v for v in values}
    return [Fraction(v) for v in sorted(v for v in values if dom == "Z" or v >= 0)]


def _points(candidates: list[list[Fraction]], seed: str):
    total = 1
    for values in candidates:
        total *= len(values)
    if total <= SEARCH_LIMIT:
        yield from itertools.product(*candidates)
        return
    rng = random.Random(seed)
    for _ in range(SEARCH_LIMIT):
        yield tuple(rng.choice(values) for values in candidates)
