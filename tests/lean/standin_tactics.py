"""Tactics of the Lean REPL stand-in (``lean_standin.py``, a TEST DOUBLE): the
deterministic rule that decides whether a proof body proves a statement.

A body is read line by line (comments and blank lines skipped).  It may
start with ``intro x y ...`` / ``intros`` lines, which move the goal's
leading ``∀`` variables and ``→`` premises into the context, and must then
end with ONE closing tactic that succeeds on the goal by the rules below
(its ``[...]`` arguments are read only where said).  A closing tactic that
fails, any other tactic, or lines after the goal is closed make the proof
fail with an error message at that line, as Lean would report it; a body
that only introduces leaves ``unsolved goals``; ``sorry`` leaves a sorry.

========================  ===========================================================  ==========
tactic                    succeeds when                                                axioms
========================  ===========================================================  ==========
``rfl``                   the goal is ``a = b`` (or ``↔``) with identical sides, or a   none
                          true closed equation in ℕ or ℤ
``decide``                the goal is a true closed proposition in ℕ or ℤ               none
``norm_num [h, ...]``     the goal is a true closed proposition (any number type),      all three
                          after replacing each variable ``x`` by ``e`` for the listed
                          hypotheses ``h : x = e`` with ``e`` closed
``simp [h, ...]``         as ``norm_num``, in ℕ and ℤ only; or identical sides          all three
``omega``                 the goal is linear arithmetic over ℕ/ℤ (``∧ ∨ ¬ → ↔``        propext
                          allowed) and no counterexample is found
                          (:mod:`tests.lean.standin_linear`) given the hypotheses
``linarith``,             the goal is a comparison (or ``False``) that follows from     all three
``nlinarith``             the hypotheses' comparisons by linear arithmetic over ℚ
``positivity``            the goal is ``0 < e``, ``0 ≤ e`` or ``e ≠ 0`` and ``e`` is   all three
                          built to be so: positive literals, even powers, ``|x|``,
                          ``√x``, ``exp``, ℕ variables, variables with a hypothesis
                          ``0 < x``/``0 ≤ x``, sums, products and quotients of those
``ring``, ``ring_nf``     the goal is an equation whose sides agree as polynomials      all three
                          in the atoms, ``d⁻¹`` an atom for a non-constant ``d``
                          (checked at seeded random points; no ``-`` or ``/`` in ℕ,
                          no ``/`` in ℤ)
``exact h``,              a hypothesis (``h``) states the goal                          none
``assumption``
``trivial``               the goal is ``True``, or as ``rfl`` or ``assumption``          none
========================  ===========================================================  ==========

"closed" means no variables: literals, ``+ - * / % ^``, ``|x|``, ``n !``,
``min``, ``max``, ``gcd``, ``lcm``, ``choose``, ``factorial`` and exact
square roots (:mod:`tests.lean.standin_eval`).  "all three" axioms are
``propext``, ``Classical.choice`` and ``Quot.sound``, what ``#print axioms``
shows for proofs by these tactics in Mathlib.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Callable, Optional

from lean_env.lean.checks import mask_comments_and_literals
from tests.lean.standin_linear import NotLinear, linarith_refutes, omega_counterexample
from tests.lean.standin_statement import Binder, Declaration, pretty
from tests.lean.standin_eval import atoms_of, closed_truth, compile_arith
from tests.lean.standin_terms import (
    Call, Cast, Const, Name, NotClosed, Num, Op, Quant, Term, Unparsed, lean_text, names_in, parse, relation_domain,
    show)

NO_AXIOMS: tuple[str, ...] = ()
CLASSICAL = ("propext", "Classical.choice", "Quot.sound")

#: tactic names Lean knows that the stand-in does not model: using one fails
#: like a tactic that could not close the goal
OTHER_TACTICS = frozenset("""
rw rwa rewrite simp_all simp_arith field_simp constructor use exists refine apply exact? apply? rintro obtain
rcases cases induction have show calc unfold norm_cast push_cast exact_mod_cast linear_combination polyrith
aesop tauto bound gcongr subst split_ifs by_contra by_cases contradiction exfalso left right ext funext congr
specialize interval_cases fin_cases set let suffices change symm simpa exact_mod_cast norm_num1 zify qify
""".split())


@dataclass(frozen=True)
class Goal:
    """A proof goal: the context (variables and hypotheses, in order) and the target."""

    binders: tuple[Binder, ...]
    text: str

    @classmethod
    def of(cls, declaration: Declaration) -> "Goal":
        return cls(tuple(declaration.binders), declaration.goal_text)

    def term(self) -> Optional[Term]:
        try:
            return parse(self.text)
        except Unparsed:
            return None

    def types(self) -> dict[str, Optional[str]]:
        return {b.name: b.domain for b in self.binders if b.prop is None}

    def hypotheses(self) -> list[Term]:
        return [b.prop for b in self.binders if b.prop is not None]

    def pretty(self) -> str:
        return pretty(list(self.binders), self.text)


@dataclass(frozen=True)
class Outcome:
    """What a tactic, or a whole body, did to a goal."""

    #: ``closed``, ``open`` (goals remain), ``sorry`` or ``error``
    status: str
    #: the goal left (``open``/``sorry``), else the goal worked on
    goal: Goal
    #: the error text (``error``)
    message: str = ""
    #: where in the body the error or sorry is (offsets), None for the whole block
    span: Optional[tuple[int, int]] = None
    #: what ``#print axioms`` shows for a proof closed this way
    axioms: tuple[str, ...] = NO_AXIOMS


def run_body(body: str, goal: Goal, seed: str) -> Outcome:
    """Run a whole tactic body on ``goal`` (module docstring)."""
    code = mask_comments_and_literals(body).code
    state, offset = goal, 0
    closed: Optional[Outcome] = None
    for line in code.split("\n"):
        start = offset + len(line) - len(line.lstrip())
        offset += len(line) + 1
        text = body[start:start + len(line.strip())]
        if not text:
            continue
        span = (start, start + len(text))
        if closed is not None:
            return Outcome("error", state, "no goals to be proved", span)
        outcome = run_tactic(text, state, seed)
        if outcome.status in ("error", "sorry"):
            return replace(outcome, span=span)
        if outcome.status == "closed":
            closed = outcome
        state = outcome.goal
    if closed is None:
        return Outcome("error", state, f"unsolved goals\n{state.pretty()}")
    return closed


def run_tactic(tactic: str, goal: Goal, seed: str) -> Outcome:
    """Run one tactic; ``error`` outcomes whose message starts with
    ``unknown tactic`` are parse errors (the REPL answers those in tactic mode
    with a REPL-level message)."""
    name, _, argument = tactic.strip().partition(" ")
    argument = argument.strip()
    if name in ("intro", "intros"):
        return _intro(goal, argument.split() if name == "intro" else None)
    if name == "sorry" and not argument:
        return Outcome("sorry", goal)
    if name in CLOSERS:
        check, axioms = CLOSERS[name]
        failure = check(goal, _hypothesis_names(argument), seed)
        if failure is None:
            return Outcome("closed", goal, axioms=axioms)
        return Outcome("error", goal, failure)
    if name in OTHER_TACTICS:
        return Outcome("error", goal, f"`{name}` did not close the goal (the stand-in models no "
                                      f"`{name}`)\n{goal.pretty()}")
    return Outcome("error", goal, "unknown tactic")


def _hypothesis_names(argument: str) -> list[str]:
    """The names inside a ``[...]`` argument list."""
    m = re.fullmatch(r"\[(.*)\]", argument)
    if m is None:
        return argument.split()
    return [a.strip() for a in m.group(1).split(",") if a.strip()]


def _intro(goal: Goal, names: Optional[list[str]]) -> Outcome:
    term = goal.term()
    binders = list(goal.binders)
    count = len(names) if names is not None else None
    introduced = 0
    while term is not None and (count is None or introduced < count):
        if isinstance(term, Quant) and term.kind == "∀":
            name = names[introduced] if names else term.names[0]
            binders.append(Binder(name, _domain_text(term.domain), domain=term.domain))
            rest = term.names[1:]
            body = _rename(term.body, term.names[0], name)
            term = Quant("∀", rest, term.domain, body) if rest else body
        elif isinstance(term, Op) and term.op in ("→", "not"):
            premise = term.args[0]
            name = names[introduced] if names else f"a✝{len(binders)}"
            binders.append(Binder(name, lean_text(premise), prop=premise))
            term = term.args[1] if term.op == "→" else Const(False)
        else:
            break
        introduced += 1
    if count is not None and introduced < count:
        return Outcome("error", goal, f"no additional binders or premises to introduce\n{goal.pretty()}")
    if term is None:
        return Outcome("error", goal, "the stand-in cannot introduce from a goal it does not parse")
    return Outcome("open", Goal(tuple(binders), lean_text(term)))


def _domain_text(dom: Optional[str]) -> str:
    return {"N": "ℕ", "Z": "ℤ", "Q": "ℚ", "R": "ℝ", "C": "ℂ"}.get(dom or "", "?")


def _rename(term: Term, old: str, new: str) -> Term:
    return _substitute(term, {old: Name(new)}) if old != new else term


def _substitute(term: Term, mapping: dict[str, Term]) -> Term:
    if isinstance(term, Name):
        return mapping.get(term.ident, term)
    if isinstance(term, Cast):
        return Cast(_substitute(term.expr, mapping), term.domain)
    if isinstance(term, Op):
        return Op(term.op, tuple(_substitute(a, mapping) for a in term.args))
    if isinstance(term, Call):
        return Call(term.fn, tuple(_substitute(a, mapping) for a in term.args))
    if isinstance(term, Quant):
        inner = {k: v for k, v in mapping.items() if k not in term.names}
        return Quant(term.kind, term.names, term.domain, _substitute(term.body, inner))
    return term


# -- the closing tactics -----------------------------------------------------------

Check = Callable[[Goal, list[str], str], Optional[str]]


def _reflexive(term: Optional[Term]) -> bool:
    return isinstance(term, Op) and term.op in ("=", "↔") and show(term.args[0]) == show(term.args[1])


def _closed(goal: Goal, allowed: str, term: Optional[Term] = None) -> Optional[bool]:
    """The truth of the (closed) goal in the ``allowed`` domains, None when it is not closed there."""
    term = goal.term() if term is None else term
    if term is None:
        return None
    try:
        return closed_truth(term, goal.types(), allowed)
    except NotClosed:
        return None


def _verdict(truth: Optional[bool], tactic: str, goal: Goal) -> Optional[str]:
    if truth:
        return None
    if truth is None:
        return f"{tactic} failed to prove the goal\n{goal.pretty()}"
    return f"unsolved goals\n{pretty(list(goal.binders), 'False')}"


def check_rfl(goal: Goal, args: list[str], seed: str) -> Optional[str]:
    term = goal.term()
    if _reflexive(term) or (isinstance(term, Op) and term.op == "=" and _closed(goal, "NZ")):
        return None
    return f"The rfl tactic failed: the two sides are not definitionally equal\n{goal.pretty()}"


def check_decide(goal: Goal, args: list[str], seed: str) -> Optional[str]:
    truth = _closed(goal, "NZ")
    if truth is None:
        return f"failed to synthesize Decidable: the goal is not a closed proposition in ℕ or ℤ\n{goal.pretty()}"
    return None if truth else f"decide failed: the proposition\n  {goal.text}\nis false"


def _with_equations(goal: Goal, names: list[str]) -> Optional[Term]:
    """The goal with ``x`` replaced by ``e`` for each named hypothesis ``x = e`` (``e`` closed)."""
    term = goal.term()
    if term is None:
        return None
    by_name = {b.name: b for b in goal.binders}
    mapping: dict[str, Term] = {}
    for name in names:
        prop = by_name[name].prop if name in by_name else None
        if isinstance(prop, Op) and prop.op == "=":
            for var, value in (prop.args, prop.args[::-1]):
                if isinstance(var, Name) and not names_in(value):
                    dom = goal.types().get(var.ident)
                    mapping[var.ident] = Cast(value, dom) if dom else value
                    break
    return _substitute(term, mapping)


def check_norm_num(goal: Goal, args: list[str], seed: str) -> Optional[str]:
    return _verdict(_closed(goal, "NZQRC", _with_equations(goal, args)), "norm_num", goal)


def check_simp(goal: Goal, args: list[str], seed: str) -> Optional[str]:
    if _reflexive(goal.term()):
        return None
    return _verdict(_closed(goal, "NZ", _with_equations(goal, args)), "simp", goal)


def check_omega(goal: Goal, args: list[str], seed: str) -> Optional[str]:
    term = goal.term()
    if term is None:
        return f"omega could not understand the goal\n{goal.pretty()}"
    try:
        found = omega_counterexample(goal.hypotheses(), term, goal.types(), seed)
    except NotLinear as error:
        return f"omega could not prove the goal: {error}\n{goal.pretty()}"
    if found is None:
        return None
    values = "\n".join(f"  {atom} := {value}" for atom, value in found.items())
    return f"omega could not prove the goal:\na possible counterexample may satisfy the constraints\n{values}"


def check_linarith(goal: Goal, args: list[str], seed: str) -> Optional[str]:
    term = goal.term()
    failure = f"linarith failed to find a contradiction\n{goal.pretty()}\n⊢ False failed"
    if term is None:
        return failure
    try:
        return None if linarith_refutes(goal.hypotheses(), term, goal.types()) else failure
    except (NotLinear, NotClosed):
        return failure


def check_positivity(goal: Goal, args: list[str], seed: str) -> Optional[str]:
    term = goal.term()
    failure = f"failed to prove positivity\n{goal.pretty()}"
    if not isinstance(term, Op) or term.op not in ("<", "≤", ">", "≥", "≠"):
        return f"not a positivity goal\n{goal.pretty()}" if term is not None else failure
    left, right = term.args
    if term.op in ("<", "≤") and _is_zero(left):
        expression, need = right, "pos" if term.op == "<" else "nonneg"
    elif term.op in (">", "≥") and _is_zero(right):
        expression, need = left, "pos" if term.op == ">" else "nonneg"
    elif term.op == "≠" and _is_zero(right):
        expression, need = left, "pos"
    else:
        return f"not a positivity goal\n{goal.pretty()}"
    strength = _sign(expression, goal)
    return None if strength == "pos" or (strength == "nonneg" and need == "nonneg") else failure


def _is_zero(term: Term) -> bool:
    return isinstance(term, Num) and term.value == 0 or (isinstance(term, Cast) and _is_zero(term.expr))


def _sign(term: Term, goal: Goal) -> Optional[str]:
    """``pos``, ``nonneg`` or None: what positivity can show about ``term``."""
    if isinstance(term, Num):
        return "pos" if term.value > 0 else "nonneg" if term.value == 0 else None
    if isinstance(term, Cast):
        return _sign(term.expr, goal)
    if isinstance(term, Name):
        known = {"N": "nonneg"}.get(goal.types().get(term.ident) or "")
        for fact in goal.hypotheses():
            if isinstance(fact, Op) and fact.op in ("<", "≤", ">", "≥"):
                small, big = fact.args if fact.op in ("<", "≤") else fact.args[::-1]
                if _is_zero(small) and isinstance(big, Name) and big.ident == term.ident:
                    found = "pos" if fact.op in ("<", ">") else "nonneg"
                    known = "pos" if "pos" in (known, found) else found
        return known
    if isinstance(term, Call):
        fn = term.fn.rsplit(".", 1)[-1]
        inner = _sign(term.args[0], goal) if term.args else None
        if fn == "exp":
            return "pos"
        if fn == "sqrt":
            return "pos" if inner == "pos" else "nonneg"
        if fn == "abs":
            return "pos" if inner == "pos" else "nonneg"
        return None
    if not isinstance(term, Op):
        return None
    if term.op == "abs":
        return "pos" if _sign(term.args[0], goal) == "pos" else "nonneg"
    if term.op == "fact":
        return "pos"
    if term.op == "^":
        base, exponent = term.args
        sign = _sign(base, goal)
        even = isinstance(exponent, Num) and exponent.value.denominator == 1 and exponent.value % 2 == 0
        return sign if sign else ("nonneg" if even else None)
    if term.op in ("+", "*", "/"):
        a, b = (_sign(x, goal) for x in term.args)
        if a is None or b is None:
            return None
        if term.op == "+":
            return "pos" if "pos" in (a, b) else "nonneg"
        return "pos" if a == b == "pos" else "nonneg"
    return None


def check_ring(goal: Goal, args: list[str], seed: str) -> Optional[str]:
    term = goal.term()
    failure = f"ring failed, ring_nf subsidiary goal\n{goal.pretty()}"
    if not isinstance(term, Op) or term.op != "=":
        return failure
    types = goal.types()
    dom = relation_domain(term, types)
    forbidden = {"N": {"-", "/", "%"}, "Z": {"/", "%"}}.get(dom, {"%"})
    if _uses(term, forbidden):
        return failure
    # ring works in a field by taking x⁻¹ as an atom: it proves nothing that
    # needs a denominator to be nonzero
    term = _inverses_as_atoms(term)
    try:
        atoms = {**atoms_of(term.args[0], frozenset("+-*/^") | {"neg"}, types),
                 **atoms_of(term.args[1], frozenset("+-*/^") | {"neg"}, types)}
        index = {key: i for i, key in enumerate(sorted(atoms))}
        left, right = (compile_arith(side, dom, types, index) for side in term.args)
    except NotClosed:
        return failure
    rng = random.Random(seed)
    for _ in range(4):
        point = [Fraction(rng.randint(2, 97), rng.choice((1, 1, 2, 3, 7))) if dom in "QRC"
                 else Fraction(rng.randint(2, 97)) for _ in index]
        try:
            if left(point) != right(point):
                return failure
        except NotClosed:
            return failure
    return None


def _inverses_as_atoms(term: Term) -> Term:
    """``e / d`` with variables in ``d`` rewritten to ``e * d⁻¹``, ``d⁻¹`` an atom."""
    if isinstance(term, Op):
        args = tuple(_inverses_as_atoms(a) for a in term.args)
        if term.op == "/" and names_in(args[1]):
            return Op("*", (args[0], Call("⁻¹", (args[1],))))
        return Op(term.op, args)
    if isinstance(term, Cast):
        return Cast(_inverses_as_atoms(term.expr), term.domain)
    return term


def _uses(term: Term, ops: set[str]) -> bool:
    if isinstance(term, Op):
        return term.op in ops or any(_uses(a, ops) for a in term.args)
    if isinstance(term, (Call,)):
        return any(_uses(a, ops) for a in term.args)
    if isinstance(term, Cast):
        return _uses(term.expr, ops)
    return False


def check_exact(goal: Goal, args: list[str], seed: str) -> Optional[str]:
    wanted = [b for b in goal.binders if b.name in args[:1]]
    if not wanted:
        return f"Unknown identifier `{args[0] if args else ''}`"
    if _same_statement(wanted[0].type_text, goal.text):
        return None
    return f"type mismatch\n  {wanted[0].name}\nhas type\n  {wanted[0].type_text} : Prop\nbut is expected to have type\n  {goal.text} : Prop"


def check_assumption(goal: Goal, args: list[str], seed: str) -> Optional[str]:
    if any(_same_statement(b.type_text, goal.text) for b in goal.binders):
        return None
    return f"assumption failed\n{goal.pretty()}"


def check_trivial(goal: Goal, args: list[str], seed: str) -> Optional[str]:
    term = goal.term()
    if (isinstance(term, Const) and term.value) or check_rfl(goal, args, seed) is None \
            or check_assumption(goal, args, seed) is None:
        return None
    return f"trivial failed\n{goal.pretty()}"


def _same_statement(a: str, b: str) -> bool:
    if " ".join(a.split()) == " ".join(b.split()):
        return True
    try:
        return show(parse(a)) == show(parse(b))
    except Unparsed:
        return False


#: closing tactic -> (its rule, the axioms of a proof it closes)
CLOSERS: dict[str, tuple[Check, tuple[str, ...]]] = {
    "rfl": (check_rfl, NO_AXIOMS),
    "decide": (check_decide, NO_AXIOMS),
    "norm_num": (check_norm_num, CLASSICAL),
    "simp": (check_simp, CLASSICAL),
    "omega": (check_omega, ("propext",)),
    "linarith": (check_linarith, CLASSICAL),
    "nlinarith": (check_linarith, CLASSICAL),
    "positivity": (check_positivity, CLASSICAL),
    "ring": (check_ring, CLASSICAL),
    "ring_nf": (check_ring, CLASSICAL),
    "exact": (check_exact, NO_AXIOMS),
    "assumption": (check_assumption, NO_AXIOMS),
    "trivial": (check_trivial, NO_AXIOMS),
}
