"""Statements for the Lean REPL stand-in (``lean_standin.py``, a TEST DOUBLE):
when does a declaration "elaborate", and what are its hypotheses and goal.

A command ``theorem NAME BINDERS : TYPE := by BODY`` (or ``lemma``; or
``example BINDERS : TYPE := by BODY``; ``:= sorry`` also) is well formed, for
the stand-in, when all of these hold (the first that fails is the error Lean's
answer carries):

1. brackets ``( ) [ ] { } ⟨ ⟩ ⦃ ⦄`` are balanced and properly nested (comments
   and strings do not count);
2. ``theorem``/``lemma`` is followed by a name;
3. the binders are bracketed groups: ``(x y : T)``, ``{x : T}``, ``⦃x : T⦄``
   (``(x : T := default)`` too) and instance binders ``[C]``/``[h : C]``;
4. then ``:``, a non-empty type, and ``:= by`` (or ``:= sorry``); the type
   holds no further ``:`` outside brackets except after a binder keyword
   (``∀ x : ℕ,``, ``let y : ℝ := ...``);
5. every identifier of the binder types and the type is known: bound in the
   statement (a binder, or a name introduced by ``∀ ∃ ∃! fun λ let ∑ ∏ ⋃ ⋂``,
   ``{x | ...}``), a keyword, one letter with optional digits, subscripts or
   primes (Lean's auto-bound implicits: ``x``, ``a₁``, ``M'``), a name of
   :data:`VOCABULARY` (the Lean and Mathlib names statements commonly use),
   or a dotted name whose first component is one of those or a namespace of
   :data:`NAMESPACES` (``Real.sqrt``, ``Finset.range``, ``h.le``).  Scopes are
   not tracked: a name bound anywhere in the statement counts everywhere.

Nothing about types is checked: the stand-in is a judge of shape, not Lean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from lean_env.lean.checks import mask_comments_and_literals
from tests.lean.standin_terms import Const, Op, Quant, Term, Unparsed, domain_of_type, parse, token_spans, tokens

#: undotted names a statement may use without binding them
VOCABULARY = frozenset("""
Prop Type Sort Bool Nat Int Rat Real Complex NNReal ENNReal EReal Fin Finset Set List Multiset Matrix
Polynomial ZMod Option Prod Unit Function String Char Fintype Finite Infinite Subtype Quotient Ideal Module
Fact NeZero DecidableEq Field Ring CommRing Group AddGroup AddCommGroup Monoid LinearOrder NormedAddCommGroup InnerProductSpace
EuclideanSpace MeasureTheory Filter Topology Metric Complex
True False true false And Or Not Iff Exists id some none
Even Odd Prime Irrational Squarefree Coprime IsSquare Nat.Prime Continuous ContinuousOn ContinuousAt
Differentiable DifferentiableAt DifferentiableOn HasDerivAt HasDerivWithinAt ContDiff StrictMono StrictMonoOn
StrictAnti StrictAntiOn Monotone MonotoneOn Antitone AntitoneOn Injective Surjective Bijective IsLeast
IsGreatest IsLUB IsGLB IsLocalMin IsLocalMax IsMinOn IsMaxOn HasSum Summable Tendsto Irreducible
abs sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh exp log logb sqrt rpow cexp deriv fib
choose factorial gcd lcm min max floor ceil round fract dist norm inner det trace digits divisors
primeFactors totient card sum prod range filter map image preimage univ insert setOf Icc Ico Ioc Ioo Ici Iic
Ioi Iio eval degree natDegree coeff roots derivative succ pred mod div star pi π e I X C cos sin
ZMOD MOD PMOD atTop nhds volume integral 𝓝 φ σ ζ Γ ˢ
""".split())

#: namespaces whose dotted names are taken as known
NAMESPACES = frozenset("""
Nat Int Rat Real Complex NNReal ENNReal Fin Finset Set List Multiset Matrix Polynomial ZMod Function Filter
MeasureTheory Metric Topology Classical Decidable Prod Option String Bool EuclideanGeometry InnerProductGeometry
Cardinal Subgroup AddSubgroup Submodule Module LinearMap Equiv Fintype Finite Countable Irrational Even Odd
ProbabilityTheory Asymptotics Order Monotone StrictMono Continuous Differentiable HasDerivAt deriv
""".split())

#: words that are syntax, not names
KEYWORDS = frozenset("fun λ let in if then else match with have show from by at do Type Sort Prop _".split())

#: tokens after which names are bound, up to ``,`` ``=>`` ``↦`` or ``:=``
_BINDING = frozenset({"∀", "∃", "∃!", "fun", "λ", "∑", "∏", "⋃", "⋂", "⨆", "⨅", "let"})
#: tokens after which, inside a binder, a type or a domain follows
_TYPE_START = frozenset({":", "in", "∈", ">", "<", "≥", "≤", "≠", "∉", "⊆"})
_OPENERS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}
_DECLARATION = re.compile(r"\s*(theorem|lemma|example)\b")


class Malformed(ValueError):
    """The statement does not elaborate; ``start``/``end`` locate the problem."""

    def __init__(self, message: str, start: int, end: int) -> None:
        super().__init__(message)
        self.start, self.end = start, end


@dataclass(frozen=True)
class Binder:
    """One named binder of the statement's signature (or of an ``intro``)."""

    name: str
    #: the type (or proposition), whitespace collapsed
    type_text: str
    #: the number domain of a variable (``N``, ``R``...), None otherwise
    domain: Optional[str] = None
    #: the parsed proposition of a hypothesis, None for variables and opaque types
    prop: Optional[Term] = None


@dataclass
class Declaration:
    """A well-formed declaration, split into its parts."""

    #: ``theorem``, ``lemma`` or ``example``
    keyword: str
    #: the declared name (``None`` for ``example``)
    name: Optional[str]
    #: offsets of the name (or the keyword) in the command
    name_span: tuple[int, int]
    binders: list[Binder]
    #: the type after the top-level ``:``, whitespace collapsed
    goal_text: str
    #: the tactic body after ``:= by`` (``"sorry"`` for a term-mode ``:= sorry``)
    body: str
    #: offset of the body in the command
    body_start: int
    #: every name bound in the statement
    bound: set[str] = field(default_factory=set)

    def goal(self) -> Optional[Term]:
        """The parsed goal, None outside the stand-in's fragment."""
        try:
            return parse(self.goal_text)
        except Unparsed:
            return None

    def pretty_goal(self) -> str:
        """The goal as the REPL prints it: hypotheses, then ``⊢ goal``."""
        return pretty(self.binders, self.goal_text)


def pretty(binders: list[Binder], goal_text: str) -> str:
    """A goal as Lean prints it: neighbouring hypotheses of one type share a line."""
    lines: list[tuple[list[str], str]] = []
    for b in binders:
        if lines and lines[-1][1] == b.type_text:
            lines[-1][0].append(b.name)
        else:
            lines.append(([b.name], b.type_text))
    return "\n".join([*(f"{' '.join(names)} : {type_text}" for names, type_text in lines), f"⊢ {goal_text}"])


def parse_declaration(command: str) -> Declaration:
    """Split a declaration command and check it (module docstring); raises
    :class:`Malformed`."""
    code = mask_comments_and_literals(command).code
    head = _DECLARATION.match(code)
    if head is None:
        raise Malformed("unexpected command; expected 'theorem', 'lemma' or 'example'", 0, min(len(code), 1))
    keyword = head.group(1)
    assign = _top_level_assign(code, head.end())
    _check_brackets(code, head.end(), assign)
    pos = head.end()
    name, name_span = None, head.span(1)
    if keyword != "example":
        m = re.compile(r"\s+([^\s(\[{⦃:]+)").match(code, pos)
        if m is None or not _name_like(m.group(1)):
            raise Malformed("unexpected token; expected identifier", pos, pos + 1)
        name, name_span, pos = m.group(1), m.span(1), m.end()
    binders, pos = _binders(code, pos, assign)
    colon = _skip_space(code, pos)
    if colon >= assign or code[colon] != ":":
        raise Malformed("unexpected token; expected ':'", colon, colon + 1)
    goal_text = " ".join(code[colon + 1:assign].split())
    if not goal_text:
        raise Malformed("unexpected token ':='; expected term", assign, assign + 2)
    stray = _stray_colon(code, colon + 1, assign)
    if stray is not None:
        raise Malformed("unexpected token ':'; expected ':=' (a type ascription needs parentheses)", stray,
                        stray + 1)
    after = code[assign + 2:]
    by = re.match(r"\s*by\b", after)
    if by is not None:
        body_start = assign + 2 + by.end()
    elif after.strip() == "sorry":
        body_start = assign + 2 + after.index("sorry")
    else:
        raise Malformed("the stand-in takes tactic proofs only (`:= by`)", assign, assign + 2)
    declaration = Declaration(keyword, name, name_span, binders, goal_text, command[body_start:], body_start)
    declaration.bound = _bound_names(code[head.end():assign]) | {b.name for b in binders}
    _check_identifiers(code, name_span[1] if name else head.end(), assign, declaration.bound)
    return declaration


def _stray_colon(code: str, start: int, end: int) -> Optional[int]:
    """Offset of a ``:`` outside brackets in the type that no binder
    (``∀ x : T,``, ``let x : T :=``...) explains, or None."""
    depth, binding = 0, False
    for tok, s, _ in token_spans(code[start:end]):
        if tok in _OPENERS:
            depth += 1
        elif tok in _CLOSERS:
            depth -= 1
        elif depth == 0 and tok in _BINDING:
            binding = True
        elif depth == 0 and tok in (",", ":=", "=>", "↦"):
            binding = False
        elif depth == 0 and tok == ":" and not binding:
            return start + s
    return None


def _name_like(text: str) -> bool:
    return bool(re.fullmatch(r"(?:«[^»]*»|[^\W\d][\w'!?₀-₉]*)(?:\.(?:«[^»]*»|[^\W\d][\w'!?₀-₉]*))*", text))


def _skip_space(code: str, pos: int) -> int:
    while pos < len(code) and code[pos].isspace():
        pos += 1
    return pos


def _top_level_assign(code: str, start: int) -> int:
    """Offset of the first ``:=`` outside brackets that is followed by ``by``
    or ``sorry`` (a ``:=`` inside a binder is a default value)."""
    depth = 0
    for k in range(start, len(code)):
        c = code[k]
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth -= 1
        elif depth == 0 and code.startswith(":=", k) and re.match(r"\s*(by\b|sorry\s*$)", code[k + 2:]):
            return k
    raise Malformed("unexpected end of input; expected ':= by'", len(code.rstrip()), len(code.rstrip()))


def _check_brackets(code: str, start: int, end: int) -> None:
    stack: list[tuple[str, int]] = []
    for k in range(start, end):
        c = code[k]
        if c in _OPENERS:
            stack.append((c, k))
        elif c in _CLOSERS:
            if not stack or stack[-1][0] != _CLOSERS[c]:
                raise Malformed(f"unexpected token '{c}'; expected term", k, k + 1)
            stack.pop()
    if stack:
        opener, k = stack[-1]
        raise Malformed(f"unexpected token ':='; expected '{_OPENERS[opener]}'", k, k + 1)


def _matching(code: str, start: int) -> int:
    """Offset of the bracket closing the one at ``start`` (brackets are balanced)."""
    depth = 0
    for k in range(start, len(code)):
        if code[k] in _OPENERS:
            depth += 1
        elif code[k] in _CLOSERS:
            depth -= 1
            if depth == 0:
                return k
    raise Malformed("unbalanced brackets", start, start + 1)


def _binders(code: str, pos: int, limit: int) -> tuple[list[Binder], int]:
    binders: list[Binder] = []
    while True:
        pos = _skip_space(code, pos)
        if pos >= limit or code[pos] not in "([{⦃":
            return binders, pos
        close = _matching(code, pos)
        inside = code[pos + 1:close]
        colon = _top_level_colon(inside)
        if code[pos] == "[":
            names = inside[:colon].split() if colon >= 0 else []
            type_text = inside[colon + 1:] if colon >= 0 else inside
        else:
            if colon < 0 and ":=" not in inside:
                raise Malformed("unexpected token; expected ':'", close, close + 1)
            # (x := default) is an optional parameter whose type is the default's
            names, type_text = (inside[:colon].split(), inside[colon + 1:]) if colon >= 0 else (
                inside.split(":=")[0].split(), "")
            if not names:
                raise Malformed("unexpected token ':'; expected identifier", pos + 1, close)
        for name in names:
            if name != "_" and not _name_like(name):
                raise Malformed(f"unexpected token '{name}'; expected identifier", pos + 1, close)
        type_text = " ".join(type_text.split(":=")[0].split())
        binders += [_binder(name, type_text) for name in names]
        pos = close + 1


def _top_level_colon(text: str) -> int:
    depth = 0
    for k, c in enumerate(text):
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth -= 1
        elif c == ":" and depth == 0 and not text.startswith(":=", k):
            return k
    return -1


def _binder(name: str, type_text: str) -> Binder:
    dom = domain_of_type(tokens(type_text))
    if dom is not None:
        return Binder(name, type_text, domain=dom)
    try:
        term = parse(type_text)
    except Unparsed:
        return Binder(name, type_text)
    is_prop = isinstance(term, (Const, Quant)) or (isinstance(term, Op) and term.op not in (
        "+", "-", "*", "/", "%", "^", "neg", "abs", "fact"))
    return Binder(name, type_text, prop=term if is_prop else None)


def _bound_names(code: str) -> set[str]:
    """Every name the signature binds: binder group names and the names after
    binding keywords and in set-builder braces (scopes are not tracked)."""
    spans = token_spans(code)
    toks = [t for t, _, _ in spans]
    bound: set[str] = set()
    for k, tok in enumerate(toks):
        if tok in _BINDING:
            bound |= _names_until_body(toks, k + 1)
        elif tok == "{":
            j = k + 1
            names = []
            while j < len(toks) and (_is_identifier(toks[j]) or toks[j] in "(),"):
                if _is_identifier(toks[j]):
                    names.append(toks[j])
                j += 1
            if j < len(toks) and toks[j] in ("|", ":"):
                bound |= set(names)
        elif tok in ("(", "{", "⦃", "[") and k + 2 < len(toks):
            j = k + 1
            names = []
            while j < len(toks) and _is_identifier(toks[j]):
                names.append(toks[j])
                j += 1
            if j < len(toks) and toks[j] == ":" and names:
                bound |= set(names)
    return bound


def _names_until_body(toks: list[str], start: int) -> set[str]:
    """Binder names after a binding keyword: names outside types, up to the
    ``,`` / ``=>`` / ``↦`` / ``:=`` that starts the body."""
    names: set[str] = set()
    depth, in_type = 0, False
    for tok in toks[start:]:
        if depth == 0 and tok in (",", "↦", ":=", "=>"):
            break
        if tok in _OPENERS:
            depth += 1
            continue
        if tok in _CLOSERS:
            depth -= 1
            in_type = False
            if depth < 0:
                break
            continue
        if tok in _TYPE_START:
            in_type = True
        elif not in_type and _is_identifier(tok):
            names.add(tok)
    return names


def _is_identifier(tok: str) -> bool:
    return (tok[0].isalpha() or tok[0] in "_«") and tok not in KEYWORDS and tok not in ("ℕ", "ℤ", "ℚ", "ℝ", "ℂ")


def _check_identifiers(code: str, start: int, end: int, bound: set[str]) -> None:
    """Rule 5: an unknown name is auto-bound (Lean's relaxed auto-bound
    implicits) unless it is applied to an argument, which an auto-bound
    variable cannot be."""
    spans = token_spans(code[start:end])
    for k, (tok, s, e) in enumerate(spans):
        if not _is_identifier(tok):
            continue
        if k > 0 and spans[k - 1][0] == "." and spans[k - 1][2] == s:
            continue  # field notation: (x + y).natAbs
        head = tok.rstrip("ᶜ").split(".")[0]
        if head in bound or head in VOCABULARY or head in NAMESPACES:
            continue
        following = spans[k + 1][0] if k + 1 < len(spans) else ""
        previous = spans[k - 1][0] if k > 0 else ""
        is_argument = previous and (previous[0].isdigit() or previous in ")⟩]}" or _is_identifier(previous))
        starts_argument = following and (following in "(⟨" or following[0].isdigit() or _is_identifier(following))
        if starts_argument and not is_argument:
            raise Malformed(f"function expected: `{tok}` is not defined (an auto-bound implicit cannot be "
                            "applied)", start + s, start + e)


def position(text: str, offset: int) -> dict[str, int]:
    """The REPL's position of ``offset`` in ``text``: 1-based line, 0-based column."""
    before = text[:offset]
    return {"line": before.count("\n") + 1, "column": offset - (before.rfind("\n") + 1)}
