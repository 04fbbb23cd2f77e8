"""Terms for the Lean REPL stand-in (``lean_standin.py``, a TEST DOUBLE): a
tokenizer and parser for the arithmetic fragment of Lean 4 statements, the
number domain each part is elaborated in, and printers
(:mod:`tests.lean.standin_eval` computes the terms).

Only what the stand-in's tactic rules (:mod:`tests.lean.standin_tactics`) need
is understood: numerals (``3``, ``0.25``), names, ``+ - * / % ^``, unary
``-``, ``|x|``, ``n !``, application of a name to arguments, type
ascriptions ``(e : ℝ)``, the relations ``= ≠ < ≤ > ≥ ∣``, the connectives
``∧ ∨ ¬ → ↔``, ``True``/``False`` and ``∀``/``∃`` over named variables.
Anything else (sets, sums, lambdas, ``let``...) makes :func:`parse` raise
:class:`Unparsed`, and a goal that does not parse is closed by no tactic.

Numbers are :class:`fractions.Fraction`.  The number domain of a relation is
the widest of the types of its variables and ascriptions (ℕ < ℤ < ℚ < ℝ; ℂ
is not ordered and is evaluated by no rule), ℝ for a decimal literal, ℕ when
nothing says (Lean's default for numerals).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Union

#: type names and the number domain they denote
DOMAINS = {"ℕ": "N", "Nat": "N", "ℤ": "Z", "Int": "Z", "ℚ": "Q", "Rat": "Q", "ℝ": "R", "Real": "R",
           "ℂ": "C", "Complex": "C"}
_ORDER = "NZQRC"
RELATIONS = ("=", "≠", "<", "≤", ">", "≥", "∣")
CONNECTIVES = ("∧", "∨", "→", "↔")
ARITHMETIC = ("+", "-", "*", "/", "%", "^")
#: ASCII spellings Lean also accepts
_ALIASES = {"<=": "≤", ">=": "≥", "!=": "≠", "->": "→", "<->": "↔", "/\\": "∧", "\\/": "∨", "=>": "↦"}
_SYMBOLS = sorted(["<->", ":=", "<=", ">=", "!=", "->", "/\\", "\\/", "=>", "∃!", "⁻¹", *_ALIASES.values()],
                  key=len, reverse=True)
_TOKEN = re.compile(
    r"(?P<num>\d+(?:\.\d+)?)"
    r"|(?P<name>(?:«[^»]*»|[^\W\d∀∃λΠΣ∑∏][\w'!?₀-₉ₐ-ₜ]*)(?:\.(?:«[^»]*»|[^\W\d][\w'!?₀-₉ₐ-ₜ]*))*)"
    r"|(?P<sym>" + "|".join(map(re.escape, _SYMBOLS)) + r"|\S)")


class Unparsed(ValueError):
    """The text is outside the fragment the stand-in understands."""


class NotClosed(ValueError):
    """The term has variables, or a function the stand-in does not compute."""


# -- syntax ------------------------------------------------------------------

@dataclass(frozen=True)
class Num:
    value: Fraction
    #: written with a decimal point (an ℝ literal for the stand-in)
    decimal: bool = False


@dataclass(frozen=True)
class Name:
    ident: str


@dataclass(frozen=True)
class Op:
    """An operator: arithmetic, ``neg``, ``abs``, ``fact`` (``n !``), a relation,
    a connective or ``not``."""

    op: str
    args: tuple


@dataclass(frozen=True)
class Call:
    """A name applied to arguments (``Real.sqrt 2``, ``f x``)."""

    fn: str
    args: tuple


@dataclass(frozen=True)
class Cast:
    """``(e : T)``: ``e`` elaborated in the domain of ``T``."""

    expr: object
    domain: str


@dataclass(frozen=True)
class Const:
    """``True`` / ``False``."""

    value: bool


@dataclass(frozen=True)
class Quant:
    """``∀ x y : T, body`` (``kind`` "∀") or ``∃ ...``; ``domain`` None when the type is not a number type."""

    kind: str
    names: tuple
    domain: Optional[str]
    body: object


Term = Union[Num, Name, Op, Call, Cast, Const, Quant]


def tokens(text: str) -> list[str]:
    """The tokens of ``text`` (comments must already be blanked), ASCII spellings normalised."""
    return [tok for tok, _, _ in token_spans(text)]


def token_spans(text: str) -> list[tuple[str, int, int]]:
    """``(token, start, end)`` for every token of ``text``; a name's token is
    the whole dotted name (``Real.sqrt``)."""
    return [(_ALIASES.get(m.group(), m.group()), m.start(), m.end()) for m in _TOKEN.finditer(text)]



def domain_of_type(type_tokens: list[str]) -> Optional[str]:
    """The number domain a type denotes (``ℝ``, ``Nat``), None for any other type."""
    return DOMAINS.get(type_tokens[0]) if len(type_tokens) == 1 else None


class _Parser:
    """Precedence climbing over Lean 4's precedences: ``↔`` 20, ``→`` 25 (right),
    ``∨`` 30 (right), ``∧`` 35 (right), ``¬`` 40, relations 50, ``+ -`` 65,
    ``* / %`` 70, unary ``-`` 75, ``^`` 75 (right), application, ``!``."""

    _BINARY = {"↔": (20, 21), "→": (25, 25), "∨": (30, 30), "∧": (35, 35), "+": (65, 66), "-": (65, 66),
               "*": (70, 71), "/": (70, 71), "%": (70, 71), "^": (76, 75),
               **{r: (50, 51) for r in RELATIONS}}

    def __init__(self, toks: list[str]) -> None:
        self.toks, self.i = toks, 0

    def peek(self, k: int = 0) -> Optional[str]:
        return self.toks[self.i + k] if self.i + k < len(self.toks) else None

    def take(self, expected: Optional[str] = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise Unparsed(f"expected {expected or 'a term'}, found {tok or 'the end'}")
        self.i += 1
        return tok

    def expr(self, min_prec: int = 0) -> Term:
        left = self.prefix()
        while (tok := self.peek()) in self._BINARY:
            prec, right_prec = self._BINARY[tok]
            if prec < min_prec:
                break
            self.take()
            right = self.expr(right_prec)
            if tok in RELATIONS and isinstance(left, Op) and left.op in RELATIONS:
                raise Unparsed("chained relations")
            left = Op(tok, (left, right))
        return left

    def prefix(self) -> Term:
        tok = self.peek()
        if tok == "¬":
            self.take()
            return Op("not", (self.expr(40),))
        if tok == "-":
            self.take()
            return Op("neg", (self.expr(75),))
        if tok in ("∀", "∃"):
            return self.quantifier()
        return self.application()

    def quantifier(self) -> Term:
        kind = self.take()
        names, domain = [], None
        if self.peek() == "(":
            self.take()
            names, domain = self.binder_names(")")
            self.take(")")
        else:
            names, domain = self.binder_names(",")
        self.take(",")
        return Quant(kind, tuple(names), domain, self.expr(0))

    def binder_names(self, closer: str) -> tuple[list[str], Optional[str]]:
        names = []
        while (tok := self.peek()) not in (":", closer, None):
            if not _is_name(tok):
                raise Unparsed(f"binder {tok!r}")
            names.append(self.take())
        domain = None
        if self.peek() == ":":
            self.take()
            start = self.i
            while self.peek() not in (closer, None):
                self.take()
            domain = domain_of_type(self.toks[start:self.i])
        if not names:
            raise Unparsed("a binder without names")
        return names, domain

    def application(self) -> Term:
        head = self.atom()
        args = []
        while (tok := self.peek()) is not None and (tok in ("(", "|") or _is_name(tok) or tok[0].isdigit()):
            if tok == "|" and not isinstance(head, Name):
                break
            args.append(self.atom())
        if args:
            if not isinstance(head, Name):
                raise Unparsed("application of a non-name")
            head = Call(head.ident, tuple(args))
        while self.peek() == "!":
            self.take()
            head = Op("fact", (head,))
        return head

    def atom(self) -> Term:
        tok = self.take()
        if tok[0].isdigit():
            return Num(Fraction(tok), "." in tok)
        if tok in ("True", "False"):
            return Const(tok == "True")
        if tok == "π" or tok == "√":
            raise Unparsed(tok)
        if _is_name(tok):
            return Name(tok)
        if tok == "(":
            inner = self.expr(0)
            if self.peek() == ":":
                self.take()
                start = self.i
                while self.peek() not in (")", None):
                    self.take()
                domain = domain_of_type(self.toks[start:self.i])
                if domain is None:
                    raise Unparsed("ascription to a type that is not a number type")
                inner = Cast(inner, domain)
            self.take(")")
            return inner
        if tok == "|":
            inner = self.expr(0)
            self.take("|")
            return Op("abs", (inner,))
        raise Unparsed(f"token {tok!r}")


def _is_name(tok: str) -> bool:
    return bool(tok) and (tok[0].isalpha() or tok[0] in "_«") and tok not in DOMAINS and tok not in _KEYWORDS


_KEYWORDS = frozenset({"fun", "let", "in", "if", "then", "else", "match", "with", "have", "show", "from", "by",
                       "at", "do", "Set", "Finset", "True", "False"})


def parse(text: str) -> Term:
    """The term ``text`` denotes; :class:`Unparsed` outside the fragment."""
    parser = _Parser(tokens(text))
    term = parser.expr(0)
    if parser.peek() is not None:
        raise Unparsed(f"unexpected {parser.peek()!r}")
    return term


def show(term: Term) -> str:
    """A canonical text of ``term`` (atoms are compared by it)."""
    if isinstance(term, Num):
        return str(term.value) if not term.decimal else str(float(term.value))
    if isinstance(term, Name):
        return term.ident
    if isinstance(term, Const):
        return str(term.value)
    if isinstance(term, Cast):
        return f"({show(term.expr)} : {term.domain})"
    if isinstance(term, Call):
        return "(" + " ".join([term.fn, *map(show, term.args)]) + ")"
    if isinstance(term, Quant):
        return f"({term.kind} {' '.join(term.names)} : {term.domain}, {show(term.body)})"
    if term.op in ("neg", "not", "abs", "fact"):
        return f"({term.op} {show(term.args[0])})"
    return f"({show(term.args[0])} {term.op} {show(term.args[1])})"


# -- domains -----------------------------------------------------------------

def join(a: Optional[str], b: Optional[str]) -> Optional[str]:
    """The wider of two domains (None is no information)."""
    if a is None or b is None:
        return a or b
    return a if _ORDER.index(a) >= _ORDER.index(b) else b


def domain(term: Term, types: dict[str, Optional[str]]) -> Optional[str]:
    """The domain ``term`` is elaborated in, from its variables' ``types``,
    ascriptions and literals; None when nothing says."""
    if isinstance(term, Num):
        return "R" if term.decimal else None
    if isinstance(term, Name):
        return types.get(term.ident)
    if isinstance(term, Cast):
        return term.domain
    if isinstance(term, Call):
        base = function_name(term.fn)
        if term.fn.startswith("Real.") or base == "sqrt":
            return "R"
        if term.fn.startswith("Nat.") or base in ("factorial", "choose"):
            return "N"
        if base in ("abs", "min", "max", "gcd", "lcm"):
            found = None
            for arg in term.args:
                found = join(found, domain(arg, types))
            return found
        return None
    if isinstance(term, Op) and (term.op in ARITHMETIC or term.op in ("neg", "abs")):
        found = None
        for arg in term.args[:1] if term.op == "^" else term.args:
            found = join(found, domain(arg, types))
        return found
    if isinstance(term, Op) and term.op == "fact":
        return "N"
    return None


def relation_domain(term: Op, types: dict[str, Optional[str]]) -> str:
    """The domain a relation compares in: the join of both sides, ℕ by default."""
    return join(domain(term.args[0], types), domain(term.args[1], types)) or "N"


def function_name(fn: str) -> str:
    """The last component of a dotted name (``Real.sqrt`` -> ``sqrt``)."""
    return fn.rsplit(".", 1)[-1]


def names_in(term: Term) -> set[str]:
    """The free names of ``term`` (quantified names excluded, function heads excluded)."""
    if isinstance(term, Name):
        return {term.ident}
    if isinstance(term, Quant):
        return names_in(term.body) - set(term.names)
    if isinstance(term, Cast):
        return names_in(term.expr)
    if isinstance(term, (Op, Call)):
        return set().union(*(names_in(a) for a in term.args))
    return set()


def literals_in(term: Term) -> set[Fraction]:
    """Every numeral of ``term``."""
    if isinstance(term, Num):
        return {term.value}
    if isinstance(term, Cast):
        return literals_in(term.expr)
    if isinstance(term, (Op, Call)):
        return set().union(*(literals_in(a) for a in term.args))
    if isinstance(term, Quant):
        return literals_in(term.body)
    return set()


_PRECEDENCE = {"↔": 20, "→": 25, "∨": 30, "∧": 35, "not": 40, **{r: 50 for r in RELATIONS}, "+": 65, "-": 65,
               "*": 70, "/": 70, "%": 70, "neg": 75, "^": 75}


def lean_text(term: Term, context: int = 0) -> str:
    """``term`` printed in Lean syntax, with the parentheses its precedences need."""
    if isinstance(term, Num):
        return show(term)
    if isinstance(term, Name):
        return term.ident
    if isinstance(term, Const):
        return "True" if term.value else "False"
    if isinstance(term, Cast):
        names = {"N": "ℕ", "Z": "ℤ", "Q": "ℚ", "R": "ℝ", "C": "ℂ"}
        return f"({lean_text(term.expr)} : {names[term.domain]})"
    if isinstance(term, Call):
        return _paren(" ".join([term.fn, *(lean_text(a, 1024) for a in term.args)]), 1000, context)
    if isinstance(term, Quant):
        typed = f" : {dict(N='ℕ', Z='ℤ', Q='ℚ', R='ℝ', C='ℂ')[term.domain]}" if term.domain else ""
        return _paren(f"{term.kind} {' '.join(term.names)}{typed}, {lean_text(term.body)}", 0, context)
    if term.op == "abs":
        return f"|{lean_text(term.args[0])}|"
    if term.op == "fact":
        return f"{lean_text(term.args[0], 1024)} !"
    prec = _PRECEDENCE[term.op]
    if term.op in ("neg", "not"):
        return _paren(("-" if term.op == "neg" else "¬") + lean_text(term.args[0], prec), prec, context)
    right_assoc = term.op in ("→", "∨", "∧", "^")
    left = lean_text(term.args[0], prec + (1 if right_assoc or term.op in RELATIONS else 0))
    right = lean_text(term.args[1], prec + (0 if right_assoc else 1))
    return _paren(f"{left} {term.op} {right}", prec, context)


def _paren(text: str, prec: int, context: int) -> str:
    return f"({text})" if prec < context else text
