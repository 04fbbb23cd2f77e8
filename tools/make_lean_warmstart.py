#!/usr/bin/env python3
"""Build and check the Lean warm-start corpus, ``sgs/data/warmstart_lean.jsonl``.

The tiny model starts from random weights; with ``prover=lean`` it is first
fine-tuned on this corpus so that it writes Lean-shaped proofs, conjectures
and reviews (the Rocq corpus comes from ``tools/make_warmstart.py``).  Lines
have the format of :mod:`sgs.state.warmstart`; prompts are rendered by
:class:`sgs.method.roles.PromptSet` (``lean`` templates) as the loop renders
them.  Everything is generated from the tables below and seeded random
choices (:data:`SEED`), so the file is reproducible.

Statements are in D3k's format (``id``, ``header`` = :data:`HEADER`, D3k's
own header, and ``theorem`` ending in ``:= by``; the record is in each
line's ``meta``), synthetic, and none is a D3k target.

Solver pairs (statement -> ``theorem ... := by`` and one tactic)
    :data:`FAMILIES`: closed arithmetic in ℕ, ℤ and ℝ (``norm_num``,
    ``decide``, ``rfl``), word problems whose hypotheses fix the variables
    (``norm_num [h₀, h₁]``), linear equations and inequalities over ℝ
    (``linarith``), ℕ/ℤ facts (``omega``), polynomial identities (``ring``),
    positivity goals (``positivity``) and ``∀`` goals (``intro``, then a
    tactic): the proof habits a Lean prover starts from.

Conjecturer pairs (harder target -> a lemma, ``:= by sorry``)
    Targets that no single tactic proves: a conjunction of two facts (the
    lemma: one of them), a statement about a variable (the lemma: a closed
    instance of it), a sum of squares bound (the lemma: the ``ring`` identity
    that makes it a square).

Guide triples (target + conjecture -> three scores)
    Every other conjecture above (``positive``), each with one constructed
    negative, chosen at random among: a
    lemma from another target (``unrelated``), the target itself renamed
    (``renamed``), a hedged conclusion ``P ∨ Q`` with an unrelated ``Q``
    (``hedged``) and an unused hypothesis (``redundant``).  Scores follow from
    the texts: relevance 0 for the renamed target, else 1 to 4 from the
    Jaccard overlap of the two statements' names and numerals (< 0.2, < 0.4,
    < 0.6, else 4); redundancy 1 when a variable occurs nowhere after its
    binder or a hypothesis names no variable of the conclusion; complexity 0
    for one claim, 1 for two or three conjuncts, 2 for two or three
    alternatives, 4 for more.

Every Solver pair must be judged valid, and every conjecture must
elaborate, by the Lean REPL stand-in (``tests/lean/lean_standin.py``: no Lean
can be installed where this project is built, so that is the judge here),
run through the real Lean backend.

Usage::

    python tools/make_lean_warmstart.py            # build, check with the stand-in, write
    python tools/make_lean_warmstart.py --verify   # check the shipped file is what this builds
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from sgs.method.roles import Language, PromptSet, conjecture_name, rename_theorem  # noqa: E402

OUTPUT = REPO_ROOT / "sgs" / "data" / "warmstart_lean.jsonl"
STANDIN = REPO_ROOT / "tests" / "lean" / "lean_standin.py"
#: D3k's header (3,249 of its 3,323 targets use exactly this one)
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"
SEED = 13
#: Solver pairs per family
PER_FAMILY = 14
FIELDS = ("role", "prompt", "completion", "source", "meta")
LEAN = Language.LEAN


@dataclass(frozen=True)
class Lemma:
    """One generated statement in D3k's format, with its proof body when known."""

    name: str
    binders: str
    claim: str
    tactic: str | None
    family: str

    @property
    def statement(self) -> str:
        binders = f" {self.binders}" if self.binders else ""
        return f"theorem {self.name}{binders} :\n    {self.claim} := by"

    def record(self) -> dict:
        """The D3k record (``id``, ``header``, ``theorem``)."""
        return {"id": self.name, "header": HEADER, "theorem": self.statement}


# -- the Solver's families ------------------------------------------------------------

Family = Callable[[random.Random, int], Lemma]


def nat_eval(rng: random.Random, k: int) -> Lemma:
    a, b, c = rng.randint(2, 60), rng.randint(2, 30), rng.randint(1, 99)
    return Lemma(f"nat_eval_{k}", "", f"{a} * {b} + {c} = {a * b + c}", "norm_num", "nat_eval")


def real_fraction(rng: random.Random, k: int) -> Lemma:
    a, b, c, d = rng.randint(1, 9), rng.randint(2, 9), rng.randint(1, 9), rng.randint(2, 9)
    total = Fraction(a, b) + Fraction(c, d)
    return Lemma(f"real_fraction_sum_{k}", "", f"({a} : ℝ) / {b} + {c} / {d} = {total.numerator} / {total.denominator}",
                 "norm_num", "real_fraction")


def decimal_product(rng: random.Random, k: int) -> Lemma:
    price, count = Fraction(rng.randint(5, 95), 10), rng.randint(2, 12)
    total = price * count
    return Lemma(f"decimal_cost_{k}", "", f"({float(price)} : ℝ) * {count} = {_decimal(total)}", "norm_num",
                 "decimal_product")


def closed_comparison(rng: random.Random, k: int) -> Lemma:
    a, b = rng.randint(10, 99), rng.randint(2, 9)
    bound = (a - 1) // b
    return Lemma(f"quotient_bound_{k}", "", f"({a} : ℝ) / {b} > {bound}", "norm_num", "closed_comparison")


def remainder(rng: random.Random, k: int) -> Lemma:
    a, b = rng.randint(20, 200), rng.randint(3, 12)
    return Lemma(f"remainder_eval_{k}", "", f"{a} % {b} = {a % b}", rng.choice(["decide", "rfl", "norm_num"]),
                 "remainder")


def word_problem(rng: random.Random, k: int) -> Lemma:
    price, count, extra = rng.randint(2, 20), rng.randint(2, 15), rng.randint(1, 30)
    binders = f"(price count : ℕ) (h₀ : price = {price}) (h₁ : count = {count})"
    return Lemma(f"total_cost_{k}", binders, f"price * count + {extra} = {price * count + extra}",
                 "norm_num [h₀, h₁]", "word_problem")


def linear_equation(rng: random.Random, k: int) -> Lemma:
    a, x, b = rng.randint(2, 9), rng.randint(-9, 12), rng.randint(1, 20)
    binders = f"(x : ℝ) (h₀ : {a} * x + {b} = {a * x + b})"
    return Lemma(f"linear_solve_{k}", binders, f"x = {x}", "linarith", "linear_equation")


def linear_system(rng: random.Random, k: int) -> Lemma:
    x, y = rng.randint(1, 20), rng.randint(1, 20)
    binders = f"(x y : ℝ) (h₀ : x + y = {x + y}) (h₁ : x - y = {x - y})"
    return Lemma(f"system_solve_{k}", binders, f"x = {x}", "linarith", "linear_system")


def linear_bound(rng: random.Random, k: int) -> Lemma:
    a, b, c = rng.randint(2, 9), rng.randint(1, 20), rng.randint(1, 9)
    binders = f"(x : ℝ) (h₀ : {a} * x + {b} < {a * c + b})"
    return Lemma(f"linear_bound_{k}", binders, f"x < {c}", "linarith", "linear_bound")


def nat_unknown(rng: random.Random, k: int) -> Lemma:
    n, a = rng.randint(0, 40), rng.randint(1, 30)
    return Lemma(f"nat_unknown_{k}", f"(n : ℕ) (h₀ : n + {a} = {n + a})", f"n = {n}", "omega", "nat_unknown")


def parity(rng: random.Random, k: int) -> Lemma:
    m, r = rng.choice([2, 3, 4, 5]), rng.randint(0, 1)
    r = r % m
    step = rng.randint(1, 4)
    return Lemma(f"remainder_shift_{k}", f"(n : ℕ) (h₀ : n % {m} = {r})", f"(n + {step * m}) % {m} = {r}",
                 "omega", "parity")


def ratio(rng: random.Random, k: int) -> Lemma:
    b, times = rng.randint(2, 15), rng.randint(2, 4)
    binders = f"(a b : ℕ) (h₀ : a = {times} * b) (h₁ : a + b = {(times + 1) * b})"
    return Lemma(f"ratio_parts_{k}", binders, f"b = {b}", "omega", "ratio")


def square_expansion(rng: random.Random, k: int) -> Lemma:
    c = rng.randint(1, 9)
    sign = rng.choice(["+", "-"])
    claim = f"(x {sign} {c}) ^ 2 = x ^ 2 {sign} {2 * c} * x + {c * c}"
    return Lemma(f"square_expand_{k}", "(x : ℝ)", claim, "ring", "square_expansion")


def product_identity(rng: random.Random, k: int) -> Lemma:
    c = rng.randint(1, 12)
    return Lemma(f"difference_of_squares_{k}", "(a : ℝ)", f"(a - {c}) * (a + {c}) = a ^ 2 - {c * c}", "ring",
                 "product_identity")


def positive_sum(rng: random.Random, k: int) -> Lemma:
    c, p = rng.randint(1, 9), rng.choice([2, 4])
    return Lemma(f"positive_square_sum_{k}", "(x y : ℝ)", f"0 < x ^ {p} + y ^ 2 + {c}", "positivity",
                 "positive_sum")


def positive_with_hypothesis(rng: random.Random, k: int) -> Lemma:
    c = rng.randint(1, 9)
    return Lemma(f"positive_of_pos_{k}", "(x : ℝ) (hx : 0 < x)", f"0 < x ^ 3 + {c} * x", "positivity",
                 "positive_with_hypothesis")


def forall_nat(rng: random.Random, k: int) -> Lemma:
    c = rng.randint(1, 20)
    return Lemma(f"forall_shift_{k}", "", f"∀ n : ℕ, n + {c} > n", "intro n\n  omega", "forall_nat")


FAMILIES: tuple[Family, ...] = (
    nat_eval, real_fraction, decimal_product, closed_comparison, remainder, word_problem, linear_equation,
    linear_system, linear_bound, nat_unknown, parity, ratio, square_expansion, product_identity, positive_sum,
    positive_with_hypothesis, forall_nat,
)


def _decimal(value: Fraction) -> str:
    return str(int(value)) if value.denominator == 1 else str(float(value))


# -- the Conjecturer's pairs ------------------------------------------------------------

def conjunction_target(rng: random.Random, k: int) -> tuple[Lemma, Lemma]:
    x, y = rng.randint(1, 20), rng.randint(1, 20)
    binders = f"(x y : ℝ) (h₀ : x + y = {x + y}) (h₁ : x - y = {x - y})"
    target = Lemma(f"system_both_{k}", binders, f"x = {x} ∧ y = {y}", None, "conjunction")
    return target, Lemma(f"system_first_{k}", binders, f"x = {x}", "linarith", "conjunction")


def instance_target(rng: random.Random, k: int) -> tuple[Lemma, Lemma]:
    m, e = rng.choice([3, 4, 5]), rng.choice([2, 3])
    r = rng.randint(1, m - 1)
    value = r + m * rng.randint(1, 4)
    target = Lemma(f"power_remainder_{k}", f"(n : ℕ) (h₀ : n % {m} = {r})", f"n ^ {e} % {m} = {r ** e % m}", None,
                   "instance")
    return target, Lemma(f"power_remainder_at_{value}_{k}", "", f"{value} ^ {e} % {m} = {value ** e % m}", "decide",
                         "instance")


def square_target(rng: random.Random, k: int) -> tuple[Lemma, Lemma]:
    c = rng.randint(1, 9)
    target = Lemma(f"shifted_square_nonneg_{k}", "(x : ℝ)", f"x ^ 2 - {2 * c} * x + {c * c} ≥ 0", None, "square")
    return target, Lemma(f"shifted_square_eq_{k}", "(x : ℝ)", f"x ^ 2 - {2 * c} * x + {c * c} = (x - {c}) ^ 2", "ring",
                         "square")


CONJECTURES = (conjunction_target, instance_target, square_target)
CONJECTURES_PER_KIND = 20
#: Guide triples per Conjecturer pair: every other pair gets its positive and one negative
GUIDE_EVERY = 2


def conjecture_completion(lemma: Lemma) -> str:
    return f"```lean4\n{lemma.statement} sorry\n```"


# -- the Guide's scores ---------------------------------------------------------------

_TOKEN = re.compile(r"[^\W\d][\w'₀-₉]*|\d+")


def guide_scores(target: Lemma, conjecture: Lemma) -> dict[str, int]:
    """The scores of the module docstring's rules."""
    if (target.binders, target.claim) == (conjecture.binders, conjecture.claim):
        relevance = 0
    else:
        a, b = _symbols(target), _symbols(conjecture)
        overlap = len(a & b) / len(a | b) if a | b else 0.0
        relevance = 1 if overlap < 0.2 else 2 if overlap < 0.4 else 3 if overlap < 0.6 else 4
    redundancy = int(_has_redundant_binder(conjecture))
    alternatives, conjuncts = conjecture.claim.count("∨") + 1, conjecture.claim.count("∧") + 1
    complexity = (4 if alternatives > 3 else 2) if alternatives > 1 else (0 if conjuncts == 1 else 1)
    return {"relevance": relevance, "redundancy": redundancy, "complexity": complexity}


def _has_redundant_binder(lemma: Lemma) -> bool:
    """A variable used nowhere after its binder, or a hypothesis about no
    variable of the conclusion."""
    groups = re.findall(r"\(([^():]*) : ([^()]*)\)", lemma.binders)
    claim_words = set(_TOKEN.findall(lemma.claim))
    for index, (names, type_text) in enumerate(groups):
        later = " ".join(t for _, t in groups[index + 1:]) + " " + lemma.claim
        if re.search(r"[=<>≤≥≠∣]", type_text):
            if not set(_TOKEN.findall(type_text)) & claim_words - {n for n in _TOKEN.findall(type_text) if n.isdigit()}:
                return True
        elif any(name not in set(_TOKEN.findall(later)) for name in names.split()):
            return True
    return False


def _symbols(lemma: Lemma) -> set[str]:
    return set(_TOKEN.findall(f"{lemma.binders} {lemma.claim}")) - {"x", "y", "n", "a", "b", "h₀", "h₁", "hx", "ℝ", "ℕ"}


def guide_completion(scores: dict[str, int]) -> str:
    return (f"<begin_relevance_score>{scores['relevance']}<end_relevance_score>\n"
            f"<begin_redundancy_score>{scores['redundancy']}<end_redundancy_score>\n"
            f"<begin_conclusion_complexity_score>{scores['complexity']}<end_conclusion_complexity_score>")


def negatives(target: Lemma, positive: Lemma, other: Lemma) -> list[tuple[str, Lemma]]:
    """The constructed bad conjectures for ``target``."""
    return [
        ("unrelated", other),
        ("renamed", Lemma(target.name + "_again", target.binders, target.claim, None, target.family)),
        ("hedged", Lemma(positive.name + "_or", positive.binders, f"{positive.claim} ∨ {other.claim}", None,
                         positive.family)),
        ("redundant", Lemma(positive.name + "_extra", f"{positive.binders} (z : ℕ) (hz : z = 1)".strip(),
                            positive.claim, None, positive.family)),
    ]


# -- the corpus -----------------------------------------------------------------------

def line(role: str, prompt: str, completion: str, source: str, meta: dict) -> dict:
    return dict(zip(FIELDS, (role, prompt, completion, source, meta)))


def renamed(lemma: Lemma) -> str:
    """The statement under the name the loop gives a kept conjecture."""
    return rename_theorem(lemma.statement, conjecture_name(lemma.statement, LEAN), LEAN)


def build() -> tuple[list[dict], list[Lemma], list[Lemma]]:
    """The corpus lines, the lemmas that need a valid proof, and the conjectures that must elaborate."""
    rng = random.Random(SEED)
    prompts = PromptSet("lean")
    lines, proved, conjectured = [], [], []
    for family in FAMILIES:
        seen = set()
        for k in range(PER_FAMILY * 3):
            lemma = family(rng, len(seen))
            if lemma.claim in seen:
                continue
            seen.add(lemma.claim)
            proved.append(lemma)
            lines.append(line("solver", prompts.solver(HEADER, lemma.statement),
                              f"```lean4\n{lemma.statement}\n  {lemma.tactic}\n```", lemma.name,
                              {"family": lemma.family, "tactic": lemma.tactic, **lemma.record()}))
            if len(seen) == PER_FAMILY:
                break
    pairs = [kind(rng, k) for kind in CONJECTURES for k in range(CONJECTURES_PER_KIND)]
    for target, lemma in pairs:
        conjectured.append(lemma)
        proved.append(lemma)
        lines.append(line("conjecturer", prompts.conjecturer(target.statement), conjecture_completion(lemma),
                          target.name, {"kind": lemma.family, "lemma": lemma.name, "proof": lemma.tactic,
                                        "target": target.record()}))
    for index, (target, lemma) in enumerate(pairs[::GUIDE_EVERY]):
        other = pairs[(GUIDE_EVERY * index + CONJECTURES_PER_KIND) % len(pairs)][1]
        for kind, conjecture in [("positive", lemma), rng.choice(negatives(target, lemma, other))]:
            conjectured.append(conjecture)
            scores = guide_scores(target, conjecture)
            lines.append(line("guide", prompts.guide(target.statement, renamed(conjecture)),
                              guide_completion(scores), target.name, {"kind": kind, "scores": scores}))
    return lines, proved, conjectured


def to_jsonl(lines: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n" for row in lines)


def check_with_standin(proved: list[Lemma], conjectured: list[Lemma]) -> list[str]:
    """Problems the stand-in finds: a proof it rejects, a conjecture that does not elaborate."""
    from lean_env.lean import LeanBackend, LeanConfig
    from lean_env.verdict import ProofTask

    command = f"{sys.executable} {STANDIN}"
    backend = LeanBackend(LeanConfig(repl_command=command, axiom_check="repl", spare=False, timeout=60,
                                     header_timeout=60))
    problems = []
    try:
        for lemma in proved:
            verdict = backend.check_proof(ProofTask(lemma.name, HEADER, lemma.statement, lemma.tactic), 60)
            if not verdict.valid:
                problems.append(f"{lemma.name}: the proof `{lemma.tactic}` is {verdict.reason}: {verdict.messages}")
        for lemma in conjectured:
            verdict = backend.check_statement(HEADER, renamed(lemma), 60)
            if not verdict.valid:
                problems.append(f"{lemma.name}: the statement does not elaborate: {verdict.messages}")
    finally:
        backend.close()
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the JSONL")
    parser.add_argument("--verify", action="store_true",
                        help="check that the output file is what the generator builds, instead of writing it")
    args = parser.parse_args(argv)
    lines, proved, conjectured = build()
    text = to_jsonl(lines)
    problems = check_with_standin(proved, conjectured)
    if args.verify and (not args.output.is_file() or args.output.read_text(encoding="utf-8") != text):
        problems.append(f"{args.output} is not what the generator builds: run python tools/make_lean_warmstart.py")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    if not args.verify:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output} ({len(text.encode()):,} bytes)")
    counts = Counter(row["role"] for row in lines)
    print(f"{len(lines)} lines ({', '.join(f'{n} {role}' for role, n in sorted(counts.items()))}); "
          f"{len(proved)} proofs and {len(conjectured)} statements checked by the Lean REPL stand-in")
    return 0


if __name__ == "__main__":
    sys.exit(main())
