"""Grammars for constrained decoding: what a role's sample may look like.

A grammar (EBNF in the dialect of xgrammar, which vLLM also uses) restricts
each sampled token to those that keep the output a prefix of a sentence of
the grammar.  It changes what the model can write, never what is checked:
every statement still goes through extraction and the prover's elaboration.

The built-in ``statement`` grammar for Rocq is for small models at laptop
scale, whose free-form statements mostly fail to elaborate (syntax errors,
unbound names and type errors; docs/ablations.md has the counts).  It
describes a Conjecturer output of the warm-start corpus's shape,

    ```coq
    Theorem <name> : <statement>.
    Admitted.
    ```

whose statement is a typed first-order fragment of Gallina over ``nat``,
``list nat``, ``bool`` and ``Prop``: arithmetic (``+ - * ^``, ``S``,
``pred``, ``fact``, ``Nat.max/min/gcd``), lists (literals, ``::``, ``++``,
``rev``, ``map``, ``firstn``, ``skipn``, ``repeat``, ``seq``, ``length``,
``list_sum``, ``list_max``), booleans (``&&``, ``||``, ``negb``, ``=?``,
``<=?``, ``Nat.even``) and propositions (comparisons, ``~``, ``/\\``,
``\\/``, ``->``, ``In``, ``Nat.Even``, ``Nat.divide``).  Every grammar
sentence is well typed, so type errors cannot occur either.

Binding: a context-free grammar cannot say "only names bound earlier", but
a finite union of grammars can.  The statement is either closed or opens
with one of :data:`ROCQ_BINDERS` (``forall n m : nat, ...``); each binder
list gets its own copy of the expression rules in which exactly its names
are variables, so no statement of the grammar has a free variable.  The
binder lists are those the warm-start corpus's conjectures use most.

The grammar cannot express everything the targets do (``exists``,
polymorphism, ``fun``, options): a Conjecturer constrained by it states
lemmas in the fragment only.  That is the price of a small model stating
well-formed lemmas at all; models that write Rocq well need no grammar
(``sampling.conjecturer_grammar=null``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sgs.method.roles.language import Language


@dataclass(frozen=True)
class Binders:
    """One ``forall`` prefix and the variables it binds, by sort."""

    groups: tuple[tuple[str, str], ...]
    """(names, type) per group, e.g. (("n m", "nat"), ("l", "list nat"))."""

    def text(self) -> str:
        """The prefix as Rocq: ``forall n m : nat, `` or ``forall (f : nat -> nat) (l : list nat), ``."""
        if len(self.groups) == 1:
            names, sort = self.groups[0]
            return f"forall {names} : {sort}, "
        return "forall " + " ".join(f"({names} : {sort})" for names, sort in self.groups) + ", "

    def names(self, sort: str) -> list[str]:
        """The names bound with type ``sort``."""
        return [name for names, kind in self.groups if kind == sort for name in names.split()]


def _nat(*names: str) -> Binders:
    return Binders(((" ".join(names), "nat"),))


_NAT_NAMES = ("a", "b", "c", "k", "m", "n", "x", "y")

#: The binder lists a statement may open with (besides none).  Nat binders:
#: one or two of the common names in any order, and the usual triples; then
#: lists, booleans, functions on nat and propositions as the corpus uses them.
ROCQ_BINDERS: tuple[Binders, ...] = (
    *(_nat(name) for name in _NAT_NAMES),
    *(_nat(first, second) for first in _NAT_NAMES for second in _NAT_NAMES if first != second),
    _nat("a", "b", "c"), _nat("b", "c", "d"), _nat("n", "m", "p"), _nat("x", "y", "z"),
    *(Binders(((names, "list nat"),)) for names in ("l", "m", "l1", "l2", "l m", "l1 l2")),
    *(Binders(((x, "nat"), (l, "list nat"))) for x in ("x", "n", "a") for l in ("l", "m")),
    *(Binders(((l, "list nat"), (x, "nat"))) for x in ("x", "n", "a") for l in ("l", "m")),
    *(Binders(((names, "bool"),)) for names in ("b", "a b", "b c", "a b c")),
    *(Binders((("f", "nat -> nat"), (other, sort)))
      for other, sort in (("n", "nat"), ("x", "nat"), ("b", "nat"), ("l", "list nat"), ("m", "list nat"))),
    Binders((("f", "nat -> nat"),)), Binders((("f g", "nat -> nat"),)),
    *(Binders(((names, "Prop"),)) for names in ("P", "P Q", "P Q R")),
)

# Relations between two nat expressions.
_NAT_RELATIONS = (" = ", " <> ", " <= ", " < ", " >= ", " > ")


def _alternatives(*options: str) -> str:
    return " | ".join(options)


def _literal(text: str) -> str:
    """``text`` as an EBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# The connectives as EBNF literals (their backslashes escaped).
_OR, _AND = _literal(" \\/ "), _literal(" /\\ ")


def _expression_rules(suffix: str, binders: Binders | None) -> list[str]:
    """The typed expression rules with the variables ``binders`` bind; every
    rule name ends in ``suffix`` so that each binder list has its own copy."""
    q = _literal

    def names(sort: str) -> list[str]:
        return binders.names(sort) if binders else []

    def var(sort: str) -> list[str]:
        return [q(name) for name in names(sort)]

    def r(name: str) -> str:
        return f"{name}{suffix}"

    nat_atom, list_atom, bool_atom = r("nat_atom"), r("list_atom"), r("bool_atom")
    functions = [q(f"{name} ") for name in names("nat -> nat")]
    nat_applications = [
        nat_atom,
        *(f"{q(f + ' ')} {nat_atom}" for f in ("S", "pred", "fact")),
        *(f'{q(f + " ")} {nat_atom} " " {nat_atom}' for f in ("Nat.max", "Nat.min", "Nat.gcd")),
        *(f"{q(f + ' ')} {list_atom}" for f in ("length", "list_sum", "list_max")),
        *(f"{f} {nat_atom}" for f in functions),
    ]
    mapped = [q(name) for name in ("S", "pred", "fact", *names("nat -> nat"))]
    list_applications = [
        list_atom,
        f'"rev " {list_atom}',
        f'"map " ({_alternatives(*mapped)}) " " {list_atom}',
        *(f"{q(f + ' ')} {nat_atom} \" \" {list_atom}" for f in ("firstn", "skipn")),
        *(f'{q(f + " ")} {nat_atom} " " {nat_atom}' for f in ("repeat", "seq")),
    ]
    prop_atoms = [
        f"{r('nat')} ({_alternatives(*map(_literal, _NAT_RELATIONS))}) {r('nat')}",
        f'{r("list")} " = " {r("list")}',
        f'{r("bool")} " = " {r("bool")}',
        f'"In " {nat_atom} " " {list_atom}',
        *(f"{q(p + ' ')} {nat_atom}" for p in ("Nat.Even", "Nat.Odd")),
        f'"Nat.divide " {nat_atom} " " {nat_atom}',
        f'"(" {r("prop")} ")"',
        *var("Prop"),
    ]
    nat_atoms = ["numeral", *var("nat"), f'"(" {r("nat")} ")"']
    list_atoms = [
        *var("list nat"),
        # `[]` alone leaves its element type to inference, which fails in `rev [] = []`.
        q("(@nil nat)"),
        f'"[" {r("nat")} ("; " {r("nat")})* "]"',
        f'"(" {r("list")} ")"',
    ]
    bool_atoms = [
        q("true"), q("false"), *var("bool"),
        f'"(" {r("bool")} ")"',
        f'"(" {r("nat")} (" =? " | " <=? ") {r("nat")} ")"',
    ]
    # A function's argument is an atom: `negb negb b` would apply negb to a function.
    bool_applications = [
        bool_atom,
        f'"negb " {bool_atom}',
        *(f"{q(f + ' ')} {nat_atom}" for f in ("Nat.even", "Nat.odd")),
    ]
    return [
        f'{r("prop")} ::= {r("disjunction")} (" -> " {r("disjunction")})*',
        f'{r("disjunction")} ::= {r("conjunction")} ({_OR} {r("conjunction")})*',
        f'{r("conjunction")} ::= {r("negation")} ({_AND} {r("negation")})*',
        f'{r("negation")} ::= "~ " {r("prop_atom")} | {r("prop_atom")}',
        f'{r("prop_atom")} ::= {_alternatives(*prop_atoms)}',
        f'{r("nat")} ::= {r("product")} ((" + " | " - ") {r("product")})*',
        f'{r("product")} ::= {r("power")} (" * " {r("power")})*',
        f'{r("power")} ::= {r("nat_application")} (" ^ " {nat_atom})?',
        f'{r("nat_application")} ::= {_alternatives(*nat_applications)}',
        f'{nat_atom} ::= {_alternatives(*nat_atoms)}',
        f'{r("list")} ::= {r("list_application")} (" ++ " {r("list_application")})* | {nat_atom} " :: " {r("list")}',
        f'{r("list_application")} ::= {_alternatives(*list_applications)}',
        f'{list_atom} ::= {_alternatives(*list_atoms)}',
        f'{r("bool")} ::= {r("bool_application")} ((" && " | " || ") {r("bool_application")})*',
        f'{r("bool_application")} ::= {_alternatives(*bool_applications)}',
        f'{bool_atom} ::= {_alternatives(*bool_atoms)}',
    ]


@functools.cache
def rocq_statement_grammar() -> str:
    """The built-in Rocq Conjecturer grammar (module docstring) as EBNF."""
    statements = ["prop_closed"] + [f"{_literal(b.text())} prop_{i}" for i, b in enumerate(ROCQ_BINDERS)]
    lines = [
        'root ::= "```coq\\nTheorem " name " : " statement ".\\nAdmitted.\\n```"',
        "name ::= [a-z] [a-zA-Z0-9_]*",
        f"statement ::= {_alternatives(*statements)}",
        'numeral ::= [0-9] | [1-9] [0-9]',
        *_expression_rules("_closed", None),
    ]
    for index, binders in enumerate(ROCQ_BINDERS):
        lines.extend(_expression_rules(f"_{index}", binders))
    return "\n".join(lines) + "\n"


def statement_grammar(language: Language | str) -> str | None:
    """The built-in Conjecturer grammar of a prover language, or None where
    it has none (Lean, for now)."""
    return rocq_statement_grammar() if Language(language) is Language.ROCQ else None
