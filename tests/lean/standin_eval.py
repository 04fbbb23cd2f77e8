"""Evaluation for the Lean REPL stand-in (``lean_standin.py``, a TEST DOUBLE):
the terms of :mod:`tests.lean.standin_terms` computed exactly.

Terms are compiled once into Python closures over a vector of atom values
(an atom is a variable, or a subterm a tactic does not interpret, keyed by
:func:`~tests.lean.standin_terms.show`), so that a tactic can evaluate a
formula at many points.  Numbers are :class:`fractions.Fraction`; each
relation is computed in its domain (:func:`~tests.lean.standin_terms.relation_domain`):
in ℕ subtraction truncates at 0 and division rounds down; in ℤ division and
``%`` are Euclidean; in ℚ and ℝ division is exact; division by zero is 0
everywhere, as in Lean.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable, Optional, Sequence

from tests.lean.standin_terms import (
    ARITHMETIC, CONNECTIVES, RELATIONS, Call, Cast, Const, Name, NotClosed, Num, Op, Quant, Term, function_name,
    names_in, relation_domain, show)

#: functions :func:`compile_arith` computes (others are atoms)
_FUNCTIONS = {"abs", "min", "max", "gcd", "lcm", "factorial", "choose", "sqrt"}


Values = Sequence[Fraction]
Compiled = Callable[[Values], Fraction]


def compile_arith(term: Term, dom: str, types: dict[str, Optional[str]], atoms: dict[str, int]) -> Compiled:
    """``term`` as a function of the atom values, computed in domain ``dom``.
    Raises :class:`NotClosed` for a name that is not an atom, or a function
    the stand-in does not compute; the function raises it for values it
    cannot compute (a huge power)."""
    key = show(term)
    if key in atoms:
        index = atoms[key]
        return lambda v: v[index]
    if isinstance(term, Num):
        if term.decimal and dom in "NZ":
            raise NotClosed("a decimal literal in ℕ or ℤ")
        value = term.value
        return lambda v: value
    if isinstance(term, Cast):
        # Lean's binop% elaborator puts the coercions at the leaves: the whole
        # tree under the ascription is computed in its domain
        return compile_arith(term.expr, term.domain, types, atoms)
    if isinstance(term, Call):
        return _compile_call(term, dom, types, atoms)
    if not isinstance(term, Op) or term.op not in (*ARITHMETIC, "neg", "abs", "fact"):
        raise NotClosed(show(term))
    if term.op == "neg" and dom == "N":
        raise NotClosed("no negation in ℕ")
    args = [compile_arith(a, "N" if (i and term.op == "^") else dom, types, atoms) for i, a in enumerate(term.args)]
    op = _OPERATIONS[term.op]
    if len(args) == 1:
        (f,) = args
        return lambda v: op(f(v), None, dom)
    f, g = args
    return lambda v: op(f(v), g(v), dom)


def _power(a: Fraction, b: Fraction, dom: str) -> Fraction:
    if b.denominator != 1 or not 0 <= b <= 64 or abs(a) > 10**6:
        raise NotClosed("a power the stand-in does not compute")
    return a ** int(b)


def _divide(a: Fraction, b: Fraction, dom: str, remainder: bool = False) -> Fraction:
    if dom in "NZ":
        if a.denominator != 1 or b.denominator != 1:
            raise NotClosed("a fraction in ℕ or ℤ")
        q, r = _euclid(int(a), int(b))
        return Fraction(r if remainder else q)
    if remainder:
        raise NotClosed("% outside ℕ and ℤ")
    return a / b if b else Fraction(0)


_OPERATIONS: dict[str, Callable[[Fraction, Optional[Fraction], str], Fraction]] = {
    "+": lambda a, b, d: a + b,
    "-": lambda a, b, d: max(a - b, Fraction(0)) if d == "N" else a - b,
    "*": lambda a, b, d: a * b,
    "/": _divide,
    "%": lambda a, b, d: _divide(a, b, d, remainder=True),
    "^": _power,
    "neg": lambda a, b, d: -a,
    "abs": lambda a, b, d: abs(a),
    "fact": lambda a, b, d: Fraction(_factorial(a)),
}


def _euclid(a: int, b: int) -> tuple[int, int]:
    """Lean's ``Int.ediv``/``Int.emod`` (and ℕ's division): remainder in [0, |b|), x/0 = 0."""
    if b == 0:
        return 0, a
    q = a // b if b > 0 else -(a // -b)
    return q, a - b * q


def _factorial(n: Fraction) -> int:
    if n.denominator != 1 or not 0 <= n <= 20:
        raise NotClosed("factorial of a non-small number")
    return math.factorial(int(n))


def _compile_call(term: Call, dom: str, types: dict[str, Optional[str]], atoms: dict[str, int]) -> Compiled:
    base = function_name(term.fn)
    namespace = term.fn.rsplit(".", 1)[0] if "." in term.fn else ""
    if base not in _FUNCTIONS or namespace not in ("", "Nat", "Int", "Real"):
        raise NotClosed(term.fn)
    arity = {"abs": 1, "factorial": 1, "sqrt": 1}.get(base, 2)
    if len(term.args) != arity:
        raise NotClosed(f"{term.fn} with {len(term.args)} arguments")
    inner = "N" if base in ("factorial", "choose") or namespace == "Nat" else dom
    args = [compile_arith(a, inner, types, atoms) for a in term.args]
    function = _CALLS[base]
    return lambda v: function(*(f(v) for f in args))


def _integers(function: Callable[..., int]) -> Callable[..., Fraction]:
    def call(*args: Fraction) -> Fraction:
        if any(a.denominator != 1 for a in args):
            raise NotClosed("an integer function of a fraction")
        return Fraction(function(*(int(a) for a in args)))
    return call


def _choose(n: int, k: int) -> int:
    if not 0 <= n <= 200:
        raise NotClosed("choose of a large number")
    return math.comb(n, k) if 0 <= k <= n else 0


def _exact_sqrt(x: Fraction) -> Fraction:
    """√x when x is the square of a fraction (the only case the stand-in computes); √x = 0 for x < 0."""
    if x < 0:
        return Fraction(0)
    num, den = math.isqrt(x.numerator), math.isqrt(x.denominator)
    if num * num != x.numerator or den * den != x.denominator:
        raise NotClosed("an irrational square root")
    return Fraction(num, den)


_CALLS: dict[str, Callable[..., Fraction]] = {
    "abs": abs, "min": min, "max": max, "sqrt": _exact_sqrt,
    "factorial": lambda n: Fraction(_factorial(n)),
    "gcd": _integers(math.gcd), "lcm": _integers(math.lcm), "choose": _integers(_choose),
}

_COMPARE: dict[str, Callable[[Fraction, Fraction], bool]] = {
    "=": lambda a, b: a == b, "≠": lambda a, b: a != b, "<": lambda a, b: a < b, "≤": lambda a, b: a <= b,
    ">": lambda a, b: a > b, "≥": lambda a, b: a >= b,
    "∣": lambda a, b: b == 0 if a == 0 else (a.denominator == 1 and (b / a).denominator == 1),
}


def compile_prop(term: Term, types: dict[str, Optional[str]], atoms: dict[str, int],
                 allowed: str = "NZQRC") -> Callable[[Values], bool]:
    """A proposition (relations, connectives, ``True``/``False``; no
    quantifier) as a function of the atom values.  A relation whose domain is
    not in ``allowed`` raises :class:`NotClosed`."""
    if isinstance(term, Const):
        value = term.value
        return lambda v: value
    if not isinstance(term, Op):
        raise NotClosed(f"not a proposition: {show(term)}")
    if term.op == "not":
        inner = compile_prop(term.args[0], types, atoms, allowed)
        return lambda v: not inner(v)
    if term.op in CONNECTIVES:
        p, q = (compile_prop(a, types, atoms, allowed) for a in term.args)
        return {"∧": lambda v: p(v) and q(v), "∨": lambda v: p(v) or q(v),
                "→": lambda v: (not p(v)) or q(v), "↔": lambda v: p(v) == q(v)}[term.op]
    if term.op not in RELATIONS:
        raise NotClosed(f"not a proposition: {show(term)}")
    dom = relation_domain(term, types)
    if dom not in allowed or (dom == "C" and term.op not in ("=", "≠")):
        raise NotClosed(f"a relation in {dom}")
    left, right = (compile_arith(a, dom, types, atoms) for a in term.args)
    compare = _COMPARE[term.op]
    return lambda v: compare(left(v), right(v))


def closed_truth(term: Term, types: dict[str, Optional[str]], allowed: str = "NZQRC") -> bool:
    """The truth of a proposition without variables; :class:`NotClosed` otherwise."""
    return compile_prop(term, types, {}, allowed)(())


def atoms_of(term: Term, interpreted: frozenset[str], types: dict[str, Optional[str]]) -> dict[str, Term]:
    """The atoms of ``term`` for a tactic that interprets the operators
    ``interpreted`` (plus numerals, casts and the functions the stand-in
    computes on closed arguments): variables, and every other maximal subterm,
    keyed by :func:`show`."""
    found: dict[str, Term] = {}

    def walk(t: Term) -> None:
        if isinstance(t, (Num, Const)):
            return
        if isinstance(t, Cast):
            return walk(t.expr)
        if isinstance(t, Name):
            found[show(t)] = t
            return
        if isinstance(t, Op) and t.op in interpreted:
            if t.op == "^" and not _is_small_natural(t.args[1]):
                found[show(t)] = t
                return
            for arg in t.args[:1] if t.op == "^" else t.args:
                walk(arg)
            return
        if isinstance(t, Call) and not names_in(t):
            return
        if isinstance(t, Quant):
            raise NotClosed("a quantifier")
        found[show(t)] = t

    walk(term)
    return found


def _is_small_natural(term: Term) -> bool:
    return isinstance(term, Num) and not term.decimal and term.value.denominator == 1 and 0 <= term.value <= 64
