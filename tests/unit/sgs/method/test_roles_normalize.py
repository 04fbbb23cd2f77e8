"""Statement identity up to renaming, and the conclusion-based collapse signals."""

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgs.method.roles import Language, canonical_form, conclusion, conclusion_length, has_disjunctive_conclusion

# Real D3k targets that are the same up to renaming (theorem name, hypothesis
# names, ``↦`` for ``=>``, comments and layout).
D3K_TWINS = [
    ("""theorem sum_of_two (a b c  : ℝ) 
  (h1  : |a - b| ≥ |c|)
  (h2  : |b - c| ≥ |a|)
  (h3  : |c - a| ≥ |b|)  : 
  a = b + c ∨ b = a + c ∨ c = a + b := by""",
     """theorem lean_workbook_39850_2  (a b c  : ℝ)
  (h₀  : |a - b| ≥ |c|)
  (h₁  : |b - c| ≥ |a|)
  (h₂  : |c - a| ≥ |b|)  :
  a = b + c ∨ b = a + c ∨ c = a + b := by"""),
    ("""theorem function_composition_value_184  : 
  let f  : ℝ → ℝ  := fun x => if x > 0 then Real.log x / Real.log 3 else 2^x
  f (f (1/9)) = 1/4 := by""",
     """theorem piecewise_function_composition_56  : 
  let f  : ℝ → ℝ  := fun x ↦ if x > 0 then Real.log x / Real.log 3 else 2^x
  f (f (1/9)) = 1/4 := by"""),
    ("""theorem condition_property  : 
  -- Sufficiency : if a > 1 then a² > 1
  (∀ a  : ℝ, a > 1 → a^2 > 1) ∧ 
  -- Non-necessity : there exists an a where a² > 1 but a ≤ 1
  (∃ a  : ℝ, a^2 > 1 ∧ a ≤ 1) := by""",
     """theorem a_gt_1_sufficient_not_necessary  :
  -- First part : Sufficient (if a > 1 then a² > 1)
  (∀ a  : ℝ, a > 1 → a^2 > 1) ∧
  -- Second part : Not necessary (there exists an a where a² > 1 but a ≤ 1)
  (∃ a  : ℝ, a^2 > 1 ∧ a ≤ 1) := by"""),
]

SUM_RECIPROCAL = """theorem sum_reciprocal_bound_88 {x  : ℝ} {s  : Finset ℝ} 
  (hx_pos  : x > 0)
  (hs_card  : s.card = 1000)
  (hs_pos  : ∀ y ∈ s, y > 0)
  (h_sum  : ∑ y in s, y = 1002 - x)  :
  x + 1/x ≤ 4 := by"""
SUM_RECIPROCAL_RENAMED = """theorem my_lemma {t : ℝ} {S : Finset ℝ} (h₀ : t > 0) (h₁ : S.card = 1000)
  (h₂ : ∀ z ∈ S, z > 0) (h₃ : ∑ k in S, k = 1002 - t) : t + 1/t ≤ 4 := by sorry"""

PREIMAGE_POINT = """theorem preimage_point  : 
  let f  : ℝ × ℝ → ℝ × ℝ  := fun p => (p.1 + p.2, 2*p.1 - p.2)
  let target  : ℝ × ℝ  := (5, 1)
  let preimage  : ℝ × ℝ  := (2, 3)
  (f preimage = target) ∧ -- preimage maps to target
  (∀ p  : ℝ × ℝ, f p = target → p = preimage) -- uniqueness := by"""


@pytest.mark.parametrize("first, second", D3K_TWINS)
def test_d3k_twins_are_equal(first, second):
    assert canonical_form(first, "lean") == canonical_form(second, "lean")


def test_renamed_d3k_statement_is_equal():
    assert canonical_form(SUM_RECIPROCAL, "lean") == canonical_form(SUM_RECIPROCAL_RENAMED, "lean")


@pytest.mark.parametrize("first, second", [
    # a changed constant, relation or free name
    (SUM_RECIPROCAL, SUM_RECIPROCAL.replace("1000", "999")),
    (SUM_RECIPROCAL, SUM_RECIPROCAL.replace("≤ 4", "< 4")),
    ("theorem t (x : ℝ) : Real.sqrt x ≥ 0 := by", "theorem t (x : ℝ) : Real.exp x ≥ 0 := by"),
    # bound variables used in swapped places
    ("theorem t : ∀ x y : ℕ, x < y := by", "theorem t : ∀ x y : ℕ, y < x := by"),
    ("theorem t (a b : ℕ) (h : a < b) : a ≤ b := by", "theorem t (a b : ℕ) (h : b < a) : a ≤ b := by"),
    # a bound variable against a free one: ∀ ends at its bracket
    ("theorem t : (∀ x : ℕ, x = x) ∧ x = 0 := by", "theorem t : (∀ y : ℕ, y = y) ∧ y = 0 := by"),
    # an implicit binder is not an explicit one
    ("theorem t {x : ℕ} : x = x := by", "theorem t (x : ℕ) : x = x := by"),
    # hypotheses in another order are a different statement here (documented limit)
    ("theorem t (a : ℕ) (h : a > 0) (g : a < 5) : a < 6 := by",
     "theorem t (a : ℕ) (g : a < 5) (h : a > 0) : a < 6 := by"),
    ("Theorem t : forall n m : nat, n <= m.", "Theorem t : forall n m : nat, m <= n."),
    ("Theorem t (n : nat) : n + 0 = n.", "Theorem t (n : nat) : 0 + n = n."),
])
def test_different_statements_differ(first, second):
    language = "rocq" if first.startswith("Theorem") else "lean"
    assert canonical_form(first, language) != canonical_form(second, language)


def test_proof_placeholder_name_keyword_and_spelling_are_ignored():
    a = canonical_form("theorem a (x : ℕ) : x ≥ 0 → True := by", "lean")
    b = canonical_form("lemma b (y : ℕ) : y >= 0 -> True := by\n  sorry", "lean")
    assert a == b
    c = canonical_form("Theorem a : ∀ n : nat, n = n.", "rocq")
    d = canonical_form("Lemma b : forall m : nat, m = m.\nProof. auto. Qed.", "rocq")
    assert c == d


def test_shadowing_is_resolved_by_scope():
    a = canonical_form("theorem t (x : ℕ) : (∀ x : ℕ, x = x) ∧ x = 0 := by", "lean")
    b = canonical_form("theorem t (y : ℕ) : (∀ z : ℕ, z = z) ∧ y = 0 := by", "lean")
    c = canonical_form("theorem t (y : ℕ) : (∀ z : ℕ, y = y) ∧ y = 0 := by", "lean")
    assert a == b != c


# Statements with placeholders for every bound name; {T} is the theorem name.
LEAN_TEMPLATES = [
    "theorem {T} ({a} {b} : ℕ) ({h} : {a} < {b}) : ∀ {c} : ℕ, {c} + {a} < {c} + {b} := by",
    "theorem {T} ({f} : ℕ → ℝ) ({h} : ∀ {n}, {f} ({n} + 1) = 2 * {f} {n}) :\n"
    "    ∃ {k} : ℝ, ∀ {m} ≥ 1, {f} {m} = {k} * 2 ^ {m} := by",
    "theorem {T} {{{s} : Finset ℕ}} ({h} : ∀ {x} ∈ {s}, {x} > 0) : ∑ {i} in {s}, {i} ≥ {s}.card := by",
    "theorem {T} :\n  let {f} : ℝ → ℝ := fun {x} => {x} ^ 2\n  {f} 2 = 4 := by",
    "theorem {T} ({p} : ℝ × ℝ) ({hp} : {p}.1 = 1) : {{{q} : ℝ × ℝ | {q}.1 = {p}.1}} = {{{r} | {r}.1 = 1}} := by",
    "theorem {T} ({a} : ℤ) : (∃ {b} : ℤ, {a} = 2 * {b}) ∨ ∃ {c} : ℤ, {a} = 2 * {c} + 1 := by",
    "theorem {T} ({g} : ({n} : ℕ) → Fin ({n} + 1)) : ∀ {m}, ({g} {m}).val ≤ {m} := by",
    "theorem {T} : (fun ⟨{a}, {b}⟩ => {a} + {b} : ℕ × ℕ → ℕ) (1, 2) = 3 := by",
    "theorem {T} [{inst} : Fact (1 < 2)] ⦃{x} : ℕ⦄ : {x} ∈ {{{y} : ℕ | ∃ {z}, {y} = {z}}} := by",
]
ROCQ_TEMPLATES = [
    "Theorem {T} : forall {n} {m} : nat, {n} + {m} = {m} + {n}.",
    "Lemma {T} ({l} : list nat) ({H} : {l} <> nil) : exists {x} {r}, {l} = {x} :: {r}.",
    "Theorem {T} {n} : (fun {x} : nat => {x} * 2) {n} = {n} + {n}.",
    "Theorem {T} ({f} : nat -> nat) : (forall {x}, {f} {x} = {x}) -> {f} 0 = 0.",
    "Theorem {T} : let {y} := 3 in {y} + 1 = 4.",
    "Theorem {T} ({P} : nat -> Prop) : {{ {x} : nat | {P} {x} }} -> exists {z}, {P} {z}.",
]
# Pairs of templates that differ only in where bound variables are used.
LEAN_DIFFERENT = [
    ("theorem {T} : ∀ {x} {y} : ℕ, {x} < {y} := by", "theorem {T} : ∀ {x} {y} : ℕ, {y} < {x} := by"),
    ("theorem {T} ({a} {b} : ℕ) ({h} : {a} < {b}) : {a} ≤ {b} := by",
     "theorem {T} ({a} {b} : ℕ) ({h} : {b} < {a}) : {a} ≤ {b} := by"),
    ("theorem {T} ({x} : ℕ) : ∀ {y} : ℕ, {y} = {x} := by", "theorem {T} ({x} : ℕ) : ∀ {y} : ℕ, {y} = {y} := by"),
    ("theorem {T} ({p} : ℕ) : {{{q} : ℕ | {q} > {p}}} = ∅ := by",
     "theorem {T} ({p} : ℕ) : {{{q} : ℕ | {p} > {q}}} = ∅ := by"),
    ("theorem {T} : (fun {a} {b} : ℕ => {a} - {b}) 3 2 = 1 := by",
     "theorem {T} : (fun {a} {b} : ℕ => {b} - {a}) 3 2 = 1 := by"),
]
ROCQ_DIFFERENT = [
    ("Theorem {T} : forall {n} {m} : nat, {n} <= {m}.", "Theorem {T} : forall {n} {m} : nat, {m} <= {n}."),
    ("Theorem {T} : exists {x}, forall {y}, {x} <= {y}.", "Theorem {T} : exists {x}, forall {y}, {y} <= {x}."),
    ("Theorem {T} : (fun {a} {b} => {a} - {b}) 3 2 = 1.", "Theorem {T} : (fun {a} {b} => {b} - {a}) 3 2 = 1."),
]

# Names that are syntax, or free names in the templates.
RESERVED = (Language.LEAN.command_keywords | Language.ROCQ.command_keywords | {
    "at", "by", "do", "fun", "have", "if", "in", "let", "match", "show", "then", "else", "from",
    "with", "end", "as", "return", "forall", "exists", "exists2", "lemma", "sorry", "Lemma",
    "card", "val", "nat", "list", "nil", "Fact", "Fin", "Finset", "Prop", "Type", "Set", "Sort",
})

lean_names = st.from_regex(r"[a-zA-Zα-κμ-ω][a-zA-Z0-9_'α-κμ-ω]{0,5}[₀-₉]?", fullmatch=True)
rocq_names = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_']{0,6}", fullmatch=True)


def placeholders(template: str) -> list[str]:
    return sorted({field for _, field, _, _ in string.Formatter().parse(template) if field})


def random_names(data, names, template: str) -> dict[str, str]:
    """An injective assignment of fresh names to the template's placeholders."""
    keys = placeholders(template)
    drawn = data.draw(st.lists(names.filter(lambda n: n not in RESERVED),
                               min_size=len(keys), max_size=len(keys), unique=True))
    return dict(zip(keys, drawn))


BOTH_LANGUAGES = pytest.mark.parametrize("language, names", [("lean", lean_names), ("rocq", rocq_names)])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
@BOTH_LANGUAGES
def test_alpha_equivalent_statements_are_equal(language, names, data):
    template = data.draw(st.sampled_from(LEAN_TEMPLATES if language == "lean" else ROCQ_TEMPLATES))
    layout = data.draw(st.sampled_from([" ", "  ", "\n  ", "\t"]))
    a = template.format(**random_names(data, names, template))
    b = template.format(**random_names(data, names, template)).replace(" ", layout)
    assert canonical_form(a, language) == canonical_form(b, language)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
@BOTH_LANGUAGES
def test_statements_differing_in_variable_use_differ(language, names, data):
    first, second = data.draw(st.sampled_from(LEAN_DIFFERENT if language == "lean" else ROCQ_DIFFERENT))
    a = first.format(**random_names(data, names, first))
    b = second.format(**random_names(data, names, second))
    assert canonical_form(a, language) != canonical_form(b, language)


@pytest.mark.parametrize("statement, expected", [
    ("theorem t (x : ℝ) (h : 0 < x) : x ^ 2 > 0 := by", "x ^ 2 > 0"),
    ("theorem t : ∀ x : ℝ, x > 0 → x ^ 2 > 0 := by", "x ^ 2 > 0"),
    ("theorem t : (n : ℕ) → n > 0 → n ≥ 1 := by", "n ≥ 1"),
    ("theorem t : (∀ x : ℕ, x ≥ 0) → 1 = 1 := by", "1 = 1"),
    ("theorem t : ∃ x : ℕ, x > 0 → x = 1 := by", "∃ x : ℕ, x > 0 → x = 1"),
    ("theorem t (P Q R : Prop) : P ∧ Q → R ↔ R := by", "P ∧ Q → R ↔ R"),
    ("theorem t : a = 1 ∧ -- first\n  b = 2 := by", "a = 1 ∧ b = 2"),
    (PREIMAGE_POINT, "(f preimage = target) ∧ (∀ p : ℝ × ℝ, f p = target → p = preimage)"),
    ("x > 0 → x ≠ 0", "x ≠ 0"),
])
def test_lean_conclusion(statement, expected):
    assert conclusion(statement, "lean") == expected


@pytest.mark.parametrize("statement, expected", [
    ("Theorem t : forall n m : nat, n <= m -> m <= n -> n = m.", "n = m"),
    ("Theorem t (P Q : Prop) : P <-> Q -> P.", "P"),
    ("Theorem t : let y := 3 in y + 1 = 4.", "y + 1 = 4"),
    ("Lemma t n : exists m, m > n -> m = n.", "exists m, m > n -> m = n"),
    ("Theorem t : ∀ n : nat, n = n → n = n.\nProof. auto. Qed.", "n = n"),
])
def test_rocq_conclusion(statement, expected):
    assert conclusion(statement, "rocq") == expected


def test_disjunctive_conclusion():
    assert has_disjunctive_conclusion("theorem t (a : ℤ) : a % 2 = 0 ∨ a % 2 = 1 := by", "lean")
    assert has_disjunctive_conclusion("theorem t : ∃ x, x = 1 ∨ x = 2 := by", "lean")
    # a disjunction among the premises is not in the conclusion
    assert not has_disjunctive_conclusion("theorem t (h : a = 0 ∨ a = 1) : a ≤ 1 := by", "lean")
    assert not has_disjunctive_conclusion("theorem t : a = 0 ∨ a = 1 → a ≤ 1 := by", "lean")
    assert has_disjunctive_conclusion("Theorem t (n : nat) : n = 0 \\/ n > 0.", "rocq")
    assert has_disjunctive_conclusion("Theorem t (n : nat) : n = 0 ∨ n > 0.", "rocq")
    assert has_disjunctive_conclusion("Theorem t (n : nat) : or (n = 0) (n > 0).", "rocq")
    assert not has_disjunctive_conclusion("Theorem t (n : nat) : n = 0 \\/ n > 0 -> True.", "rocq")


def test_conclusion_length_counts_tokens_not_characters():
    assert conclusion_length("theorem t (x : ℝ) : x ^ 2 > 0 := by", "lean") == 5
    assert conclusion_length("theorem t (x : ℝ) : x^2>0 := by", "lean") == 5
    assert conclusion_length("theorem t : := by", "lean") == 0
