"""Solver output extraction on concrete outputs, one per outcome."""

import pytest

from sgs.method.roles import MAX_OUTPUT_CHARS, Failure, extract_proof

LEAN_PROOF = """I will use `simp`.

```lean4
import Mathlib
theorem foo (x : ℕ) : x + 0 = x := by
  simp
```
"""


def test_lean_body_is_text_after_first_by():
    result = extract_proof(LEAN_PROOF, "lean")
    assert result.ok
    assert result.value == "\n  simp"


def test_lean_body_keeps_inner_by_and_comments():
    output = "```lean4\ntheorem t : P := by\n  -- first step\n  have h : Q := by simp\n  exact h\n```"
    result = extract_proof(output, "lean")
    assert result.value == "\n  -- first step\n  have h : Q := by simp\n  exact h"


def test_lean_by_inside_a_comment_does_not_count():
    output = "```lean4\n-- the proof goes := by magic\ntheorem t : P := by\n  trivial\n```"
    assert extract_proof(output, "lean").value == "\n  trivial"


def test_lean_tag_lean_counts_as_lean4():
    output = "```lean\ntheorem t : 1 = 1 := by rfl\n```"
    assert extract_proof(output, "lean").value == " rfl"


def test_other_languages_blocks_are_ignored():
    output = "```python\nprint(1)\n```\n```lean4\ntheorem t : 1 = 1 := by rfl\n```"
    assert extract_proof(output, "lean").value == " rfl"


@pytest.mark.parametrize("output, failure", [
    ("No code at all.", Failure.NO_CODE_BLOCK),
    ("```\ntheorem t : 1 = 1 := by rfl\n```", Failure.NO_CODE_BLOCK),
    ("```lean4\ntheorem t : 1 = 1 := by rfl\n```\n```lean\ntheorem t : 1 = 1 := by simp\n```",
     Failure.SEVERAL_BLOCKS),
    ("```lean4\ntheorem t : 1 = 1 := by\n  simp", Failure.UNCLOSED_BLOCK),
    ("```lean4\ntheorem t : 1 = 1 := rfl\n```", Failure.MISSING_BY),
    ("```lean4\ntheorem t : 1 = 1 := by\n```", Failure.EMPTY_BODY),
    ("```lean4\ntheorem t : 1 = 1 := by -- TODO\n```", Failure.EMPTY_BODY),
    ("```lean4\ntheorem t : 1 = 1 := by\n  exact \x00\n```", Failure.BAD_CHARACTERS),
    ("```lean4\ntheorem t : 1 = 1 := by\n  exact \ud800\n```", Failure.BAD_CHARACTERS),
    ("x" * (MAX_OUTPUT_CHARS + 1), Failure.TOO_LONG),
    (None, Failure.NOT_TEXT),
])
def test_lean_failures(output, failure):
    result = extract_proof(output, "lean")
    assert not result.ok and result.value is None
    assert result.failure is failure


ROCQ_PROOF = """```coq
Theorem add_0_r : forall n : nat, n + 0 = n.
Proof.
  intros n. induction n; simpl; auto.
Qed.
```"""


def test_rocq_body_runs_from_proof_to_qed():
    result = extract_proof(ROCQ_PROOF, "rocq")
    assert result.value == "Proof.\n  intros n. induction n; simpl; auto.\nQed."


def test_rocq_body_ends_at_the_last_qed():
    output = "```coq\nTheorem t : True.\nProof.\n  assert (H : True). { trivial. }\n  exact H.\nQed.\n```"
    assert extract_proof(output, "rocq").value.endswith("exact H.\nQed.")


def test_rocq_keywords_inside_comments_or_names_do_not_count():
    output = "```coq\n(* Proof. is below *)\nTheorem t : True.\nProof. exact MyQed.I. (* Qed. *)\nQed.\n```"
    assert extract_proof(output, "rocq").value == "Proof. exact MyQed.I. (* Qed. *)\nQed."


@pytest.mark.parametrize("output, failure", [
    ("```lean4\ntheorem t : True := by trivial\n```", Failure.NO_CODE_BLOCK),
    ("```coq\nProof. auto. Qed.\n```\n```rocq\nProof. auto. Qed.\n```", Failure.SEVERAL_BLOCKS),
    ("```coq\nTheorem t : True.\nProof. trivial.", Failure.UNCLOSED_BLOCK),
    ("```coq\nTheorem t : True.\ntrivial. Qed.\n```", Failure.MISSING_PROOF),
    ("```coq\nTheorem t : True.\nProof. trivial.\nAdmitted.\n```", Failure.MISSING_QED),
    ("```coq\nTheorem t : True.\nProof. (* nothing *) Qed.\n```", Failure.EMPTY_BODY),
])
def test_rocq_failures(output, failure):
    assert extract_proof(output, "rocq").failure is failure
