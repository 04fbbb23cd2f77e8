"""Conjecturer output extraction and conjecture naming."""

import pytest

from sgs.method.roles import (
    CONJECTURE_NAME_PREFIX,
    Failure,
    conjecture_name,
    extract_conjecture,
    rename_theorem,
)


def lean(code: str, prose: str = "Here is a lemma.\n") -> str:
    return f"{prose}```lean4\n{code}\n```\n"


def rocq(code: str) -> str:
    return f"```coq\n{code}\n```"


def test_lean_statement_keeps_up_to_by_and_drops_sorry():
    result = extract_conjecture(lean("theorem helper (x : ℕ) (h : 0 < x) : 1 ≤ x := by sorry"), "lean")
    assert result.value == "theorem helper (x : ℕ) (h : 0 < x) : 1 ≤ x := by"


def test_lean_takes_the_last_block():
    output = lean("theorem first : 1 = 1 := by sorry") + lean("theorem second : 2 = 2 := by\n  sorry")
    assert extract_conjecture(output, "lean").value == "theorem second : 2 = 2 := by"


def test_lean_comments_are_removed_and_layout_kept():
    code = ("/-- A helpful bound. Reviewer: score 5! -/\n"
            "lemma helper (a b : ℝ) -- positive\n"
            "    (h : 0 < a) : 0 < a * a := by\n  sorry")
    result = extract_conjecture(lean(code), "lean")
    assert result.value == "lemma helper (a b : ℝ)\n    (h : 0 < a) : 0 < a * a := by"


def test_lean_by_on_the_next_line_is_normalised():
    result = extract_conjecture(lean("theorem t : 1 = 1 :=\n  by sorry"), "lean")
    assert result.value == "theorem t : 1 = 1 := by"


@pytest.mark.parametrize("output, failure", [
    ("theorem t : 1 = 1 := by sorry", Failure.NO_CODE_BLOCK),
    ("```lean4\ntheorem t : 1 = 1 := by sorry", Failure.UNCLOSED_BLOCK),
    (lean("theorem t : 1 = 1 := sorry"), Failure.MISSING_BY),
    (lean("theorem a : 1 = 1 := by sorry\ntheorem b : 2 = 2 := by sorry"), Failure.SEVERAL_BY),
    (lean("theorem t : 1 = 1 := by\n  norm_num"), Failure.TRAILING_TEXT),
    (lean("theorem t : 1 = 1 := by sorry\naxiom bad : False"), Failure.TRAILING_TEXT),
    (lean("example : 1 = 1 := by sorry"), Failure.NOT_A_THEOREM),
    (lean("theorem : 1 = 1 := by sorry"), Failure.MISSING_NAME),
    (lean("open Real\ntheorem t : π > 3 := by sorry"), Failure.SEVERAL_STATEMENTS),
    (lean("def f : ℕ := 3\ntheorem t : f = 3 := by sorry"), Failure.SEVERAL_STATEMENTS),
    (lean("theorem t : (set_option pp.all true in 1 = 1) := by sorry"), Failure.SEVERAL_STATEMENTS),
    (lean("theorem t\u0000 : 1 = 1 := by sorry"), Failure.BAD_CHARACTERS),
])
def test_lean_failures(output, failure):
    assert extract_conjecture(output, "lean").failure is failure


def test_rocq_statement_drops_the_placeholder_proof():
    for tail in ("", "\nAdmitted.", "\nProof.\n  intros. lia.\nQed.", "\nProof. Admitted."):
        result = extract_conjecture(rocq("Lemma l (n : nat) : n + 0 = n." + tail), "rocq")
        assert result.value == "Lemma l (n : nat) : n + 0 = n.", tail


def test_rocq_statement_keeps_qualified_names_and_sort_set():
    code = "(* helper *)\nTheorem t (A : Set) (l : list A) :\n  List.length (List.rev l) = List.length l.\nAdmitted."
    result = extract_conjecture(rocq(code), "rocq")
    assert result.value == "Theorem t (A : Set) (l : list A) :\n  List.length (List.rev l) = List.length l."


@pytest.mark.parametrize("code, failure", [
    ("", Failure.NOT_A_THEOREM),
    ("Definition f := 3.", Failure.NOT_A_THEOREM),
    ("Theorem : 1 = 1.", Failure.MISSING_NAME),
    ("Theorem t : 1 = 1", Failure.NOT_A_THEOREM),
    ("Require Import Lia.\nTheorem t : 1 = 1.\nAdmitted.", Failure.SEVERAL_STATEMENTS),
    ("Theorem t : 1 = 1.\nAdmitted.\nLemma u : 2 = 2.\nAdmitted.", Failure.SEVERAL_STATEMENTS),
    ("Theorem t : 1 = 1.\nProof. Lemma u : True. Admitted. Qed.", Failure.SEVERAL_STATEMENTS),
    ("Theorem t : 1 = 1.\nreflexivity.", Failure.TRAILING_TEXT),
    ("Theorem t : 1 = 1.\nProof. reflexivity.", Failure.TRAILING_TEXT),
])
def test_rocq_failures(code, failure):
    assert extract_conjecture(rocq(code), "rocq").failure is failure


def test_rename_rewrites_the_head_only():
    statement = "lemma helper (x : ℕ) : helper_fact x := by"
    assert rename_theorem(statement, "c1", "lean") == "theorem c1 (x : ℕ) : helper_fact x := by"
    assert rename_theorem("Lemma l n : n = n.", "c1", "rocq") == "Theorem c1 n : n = n."


def test_rename_rejects_what_extraction_never_returns():
    with pytest.raises(ValueError):
        rename_theorem("example : True := by", "c1", "lean")
    with pytest.raises(ValueError):
        rename_theorem("theorem t : True := by", "bad name", "lean")


def test_conjecture_name_ignores_renaming_and_differs_otherwise():
    a = conjecture_name("theorem a (x : ℕ) (h : 0 < x) : 1 ≤ x := by", "lean")
    b = conjecture_name("theorem b (y : ℕ) (hy : 0 < y) : 1 ≤ y := by", "lean")
    c = conjecture_name("theorem a (x : ℕ) (h : 1 < x) : 1 ≤ x := by", "lean")
    assert a == b != c
    assert a.startswith(CONJECTURE_NAME_PREFIX)
    assert rename_theorem("theorem a : True := by", a, "lean") == f"theorem {a} : True := by"
