"""Conjecture-to-target closeness (:mod:`sgs.analysis.closeness`): hand-computed cases."""

from __future__ import annotations

import pytest

from lean_env.verdict import Status, Verdict
from sgs.analysis.closeness import closeness_metrics, coverage, jaccard, own_and_other, proof_names, statement_symbols
from sgs.state.records import Attempt, Completion, Conjecture, ConjectureScore, prompt_digest

TARGET = "Theorem add_zero : forall n : nat, n + 0 = n."


def _completion(text: str) -> Completion:
    return Completion(prompt_sha256=prompt_digest("p"), text=text, token_ids=[1], logprobs=[-0.1],
                      policy_version=0, finish_reason="stop", entropy=0.0)


def _conjecture(cid: str, statement: str) -> Conjecture:
    return Conjecture(id=cid, iteration=0, target_id="t", completion=_completion(statement), statement=statement,
                      extraction_error=None)


def _score(cid: str, kept: bool) -> ConjectureScore:
    return ConjectureScore(conjecture_id=cid, solve_rate=0.5, kept=kept, relevance=None, redundancy=None,
                           complexity=None, guide_output=None, guide_parse_error=None, r_guide=None,
                           reward=0.0, weight=0.0)


def _proved(cid: str, proof: str) -> Attempt:
    return Attempt(id=f"{cid}/0", iteration=0, problem_id=cid, problem_kind="conjecture",
                   completion=_completion(proof), proof=proof, extraction_error=None,
                   verdict=Verdict(Status.VALID), reward=1.0)


def test_jaccard():
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(set(), set()) == 1.0


def test_statement_symbols_ignore_the_name_and_bound_names():
    assert statement_symbols(TARGET, "rocq") == statement_symbols(
        "Lemma other : forall m : nat, m + 0 = m.", "rocq")
    # ': forall $v0 : nat , $v0 + 0 = $v0' -> {:, forall, $v0, nat, ",", +, 0, =}: 8 symbols;
    # the conjecture swaps + for * and 0 for 1: 6 shared of 10
    assert jaccard(statement_symbols(TARGET, "rocq"),
                   statement_symbols("Theorem c : forall n : nat, n * 1 = n.", "rocq")) == pytest.approx(6 / 10)


def test_proof_names_are_tactics_lemmas_and_hypotheses_without_the_frame():
    assert proof_names("Proof. intros n. rewrite Nat.add_0_r. reflexivity. Qed.", "rocq") == {
        "intros", "n", "rewrite", "Nat.add_0_r", "reflexivity"}


def test_closeness_metrics_of_one_iteration():
    near = _conjecture("c_near", "Theorem c_near : forall m : nat, m + 0 = m.")
    far = _conjecture("c_far", "Theorem c_far : True.")
    metrics = closeness_metrics(
        [near, far], {"c_near": _score("c_near", True), "c_far": _score("c_far", False)},
        [_proved("c_near", "Proof. intros m. rewrite Nat.add_0_r. reflexivity. Qed."),
         _proved("c_far", "Proof. exact I. Qed.")],
        {"t": TARGET}, {"t": ["Proof. intros n. rewrite Nat.add_0_r. auto. Qed.", "Proof. lia. Qed."]}, "rocq")
    # far: {:, True} against 8 symbols of the target: {:} shared of 9
    assert metrics["conjecture_statement_overlap"] == pytest.approx((1.0 + 1 / 9) / 2)
    assert metrics["kept_conjecture_statement_overlap"] == pytest.approx(1.0)
    # the target's proofs use {intros, n, rewrite, Nat.add_0_r, auto, lia}; the kept
    # conjecture's proof shares intros, rewrite, Nat.add_0_r: 3 of 6 (far is not kept)
    assert metrics["conjecture_proof_overlap"] == pytest.approx(3 / 6)


def test_closeness_metrics_are_none_without_material():
    assert closeness_metrics([], {}, [], {}, {}, "rocq") == {
        "conjecture_statement_overlap": None, "kept_conjecture_statement_overlap": None,
        "conjecture_proof_overlap": None}


def test_coverage_is_the_share_of_what_is_needed():
    assert coverage({"intros", "lia", "plus_n_O"}, {"intros", "plus_n_O", "auto"}) == pytest.approx(2 / 3)
    assert coverage(set(), {"auto"}) == 1.0


def test_own_and_other_set_each_item_against_its_target_and_the_rest():
    references = {"a": {"x", "y"}, "b": {"y", "z"}, "c": {"w"}}
    # item 1 of target a: {x}; item 2 of target b: {y, z}; item 3 of target d (no reference): left out
    items = [("a", {"x"}), ("b", {"y", "z"}), ("d", {"x"})]
    found = own_and_other(items, references, coverage)
    assert found.items == 2
    assert found.own == pytest.approx((1 / 2 + 1) / 2)
    # item 1 against b (0) and c (0); item 2 against a (1/2) and c (0)
    assert found.other == pytest.approx((0 + 0 + 1 / 2 + 0) / 4)
    empty = own_and_other([("d", {"x"})], references, coverage)
    assert (empty.own, empty.other, empty.items) == (None, None, 0)
