"""Property tests: every parser survives random and hostile text.

Extractors must return a value or a known Failure for ANY string, and the
normalisation helpers must return for any string.  Inputs are unrestricted
Unicode (lone surrogates, NUL and control characters included), soups of the
syntax the parsers care about, and near-valid answers of each role with
random pieces, which reach far deeper into the code than random characters.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgs.method.rewards import GuideScores
from sgs.method.roles import (
    Extraction,
    Failure,
    canonical_form,
    conclusion,
    conclusion_length,
    conjecture_name,
    extract_conjecture,
    extract_guide_scores,
    extract_proof,
    has_disjunctive_conclusion,
    rename_theorem,
)
from sgs.method.roles.result import has_bad_characters

ANY_CHARACTER = st.characters(exclude_categories=())  # surrogates included
NOISE = st.text(ANY_CHARACTER, max_size=3)
# Pieces of statements and proofs, hostile ones included.
STATEMENT_PIECES = [
    " ", "\n", "\n  ", "\t", "(", ")", "{", "}", "[", "]", "⟨", "⟩", "⦃", "⦄", ":", ",", ".", ". ", "|",
    " x", " y", " h₀", " n", " f", " x'", " «a b»", " ℕ", " nat", " x.1", " hx.le", " Finset.range",
    "∀", "∃", "∃!", "∑", " in ", "fun", "λ", "=>", "↦", "let", ":=", "forall", "exists", "→", "->",
    "↔", "<->", "∧", "∨", "\\/", "Or", "=", "<", "+", "0", "1", "2.5", "sorry", "by", "Set",
    "-- note := by\n", "/- c -/", "/-", "-/", "(* c *)", "(*", "*)", '"s := by"', '"', "'a'", "#eval",
    "open", "def", "axiom", "theorem", "Theorem", "Lemma", "Definition", "Proof.", "Qed.",
    "\x00", "\ud800", "\x1b", "```", "``",
]
STATEMENT_SOUP = st.lists(st.sampled_from(STATEMENT_PIECES) | NOISE, max_size=30).map("".join)
PROSE = st.sampled_from(["", "Here it is:\n", "```lean4\ntheorem draft : 0 = 0 := by sorry\n```\n",
                         "```coq\nLemma draft : 0 = 0.\nAdmitted.\n```\n", "Use a ```lean4 block.\n"]) | NOISE
CLOSING = st.sampled_from(["\n```", "```", "\n```\nDone.", "\n````", ""])


def near_valid(fences, heads, by, tails):
    """Outputs shaped like real answers: prose, a fenced declaration, prose."""
    return st.builds(
        lambda pre, fence, head, name, body, by, tail, close, post:
            f"{pre}{fence}\n{head}{name}{body}{by}{tail}{close}{post}",
        PROSE, st.sampled_from(fences), st.sampled_from(heads),
        st.sampled_from([" t", " my_lemma", " h.x", "", " (x"]), STATEMENT_SOUP,
        st.sampled_from(by), st.sampled_from(tails), CLOSING, PROSE)


LEAN_OUTPUTS = near_valid(
    ["```lean4", "```lean", "```Lean4", "```", "```coq"], ["theorem", "lemma", "example", "def", "  theorem", ""],
    [" : P x := by", " := by", ":=by", " :=\n  by", " :=", ""],
    ["", " sorry", "\n  sorry", "\n  simp [h]\n  linarith", "\n", " sorry\n-- end", " sorry sorry"])
ROCQ_OUTPUTS = near_valid(
    ["```coq", "```rocq", "```", "```lean4"], ["Theorem", "Lemma", "Definition", "Require Import Lia.\nLemma", ""],
    [" : P x.", ".", "", " : P x"],
    ["", "\nAdmitted.", "\nProof.\n  intros. lia.\nQed.", "\nProof. (* Qed. *) auto.", "\nQed.",
     "\nProof. Qed.", "\nProof.\nAdmitted.\nLemma u : True.\nAdmitted."])


def tagged(tag: str):
    content = st.sampled_from(["1", "0", " 1 ", "+1", "-1", "2.0", "x", "", "9" * 40, "\x00"]) | NOISE
    well_formed = "{b}{c}{e}"
    shape = st.sampled_from([well_formed] * 5 + ["{b}{c}", "{c}{e}", "{e}{c}{b}", "{b}{b}{c}{e}", ""])
    return st.builds(lambda s, c: s.format(b=f"<begin_{tag}>", c=c, e=f"<end_{tag}>"), shape, content)


GUIDE_OUTPUTS = st.builds(lambda *parts: "\n".join(parts), PROSE, tagged("relevance_score"),
                          tagged("redundancy_score"), tagged("conclusion_complexity_score"), PROSE)
HOSTILE = st.one_of(st.text(ANY_CHARACTER, max_size=300), STATEMENT_SOUP, LEAN_OUTPUTS, ROCQ_OUTPUTS,
                    GUIDE_OUTPUTS)
LANGUAGES = pytest.mark.parametrize("language", ["lean", "rocq"])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_well_formed(result: Extraction, value_type: type) -> None:
    assert isinstance(result, Extraction)
    if result.ok:
        assert isinstance(result.value, value_type)
    else:
        assert result.value is None and isinstance(result.failure, Failure)


@FUZZ
@given(output=HOSTILE)
@LANGUAGES
def test_extract_proof_never_raises(language, output):
    result = extract_proof(output, language)
    assert_well_formed(result, str)
    if result.ok:
        assert result.value.strip() and not has_bad_characters(result.value)


@FUZZ
@given(output=HOSTILE)
@LANGUAGES
def test_extract_conjecture_never_raises_and_is_stable(language, output):
    result = extract_conjecture(output, language)
    assert_well_formed(result, str)
    if not result.ok:
        return
    statement = result.value
    assert not has_bad_characters(statement)
    # Extracting the extracted statement again gives it back, and so does
    # extracting it after the loop renamed it.
    placeholder = " sorry" if language == "lean" else "\nAdmitted."
    fence = "```lean4" if language == "lean" else "```coq"
    again = extract_conjecture(f"{fence}\n{statement}{placeholder}\n```", language)
    assert again.value == statement
    renamed = rename_theorem(statement, conjecture_name(statement, language), language)
    assert extract_conjecture(f"{fence}\n{renamed}{placeholder}\n```", language).value == renamed
    assert canonical_form(renamed, language) == canonical_form(statement, language)


@FUZZ
@given(output=HOSTILE)
def test_extract_guide_scores_never_raises(output):
    result = extract_guide_scores(output)
    assert_well_formed(result, GuideScores)
    if result.ok:
        assert 0 <= result.value.relevance <= 5
        assert result.value.redundancy in (0, 1)
        assert 0 <= result.value.complexity <= 4


@FUZZ
@given(statement=HOSTILE)
@LANGUAGES
def test_normalisation_never_raises(language, statement):
    assert isinstance(canonical_form(statement, language), str)
    assert isinstance(conclusion(statement, language), str)
    assert conclusion_length(statement, language) >= 0
    assert has_disjunctive_conclusion(statement, language) in (True, False)
    assert isinstance(conjecture_name(statement, language), str)


@pytest.mark.parametrize("hostile", [
    "∀ " * 40_000 + "x",  # binders with no separator in sight
    "(" * 40_000 + "x" + ")" * 40_000,  # nesting far past the recursion limit
    "x → " * 20_000 + "y",  # a very long chain of premises
    "```lean4\n" * 20_000,  # thousands of unclosed fences
    "{x | " * 10_000,  # unclosed set-builder braces
    "/-" * 30_000 + "(*" * 20_000,  # unterminated nested comments
])
@LANGUAGES
def test_huge_hostile_inputs_terminate(language, hostile):
    assert_well_formed(extract_proof(hostile, language), str)
    assert_well_formed(extract_conjecture(hostile, language), str)
    assert_well_formed(extract_guide_scores(hostile), GuideScores)
    assert isinstance(canonical_form(hostile, language), str)
    assert conclusion_length(hostile, language) >= 0
