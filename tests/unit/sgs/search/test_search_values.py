"""The search's scores: the k-NN value estimate (hand-computed), its training
data from closed proofs, the registry, and a best-first search it reorders."""

from __future__ import annotations

import math

import pytest

from lean_env.verdict import ProofTask
from sgs.corpus.records import Step, TheoremRecord
from sgs.search.settings import SearchSettings
from sgs.search.strategies import Node, search
from sgs.search.values import SCORES, KnnValue, ValueScore, build_score, learn_from, steps_left
from tests.unit.sgs.search.graph_prover import QED, GraphProver, TableProposer


def _goal(conclusion: str) -> str:
    return f"1 goal (ID 3)\n  \n  ============================\n  {conclusion}"


def _theorem(name: str, tactics: list[tuple[str, str]], ending: str = "Qed") -> TheoremRecord:
    steps = [Step(tactic=t, kind="tactic", goals=_goal(g), num_goals=1, line=i + 1) for i, (t, g) in enumerate(tactics)]
    steps.insert(1, Step(tactic="-", kind="bullet", goals=_goal(tactics[0][1]), num_goals=1, line=1))
    return TheoremRecord(library="lib", file="A.v", name=name, line=1, statement=f"Lemma {name} : True.",
                         proof="Proof. ... Qed.", ending=ending, split="train", steps=steps)


def test_each_tactic_step_of_a_closed_proof_counts_the_tactics_left_and_bullets_do_not():
    closed = _theorem("a", [("intros.", "forall n, n = n"), ("simpl.", "n = n"), ("reflexivity.", "n = n")])
    admitted = _theorem("b", [("intros.", "forall n, n + 0 = n"), ("admit.", "n + 0 = n")], ending="Admitted")
    assert [left for _, left in steps_left([closed, admitted])] == [3, 2, 1]


def test_the_estimate_is_the_similarity_weighted_mean_of_discounted_tactics_left():
    value = KnnValue(neighbours=4, discount=0.5)
    value.add("x = x", 1)          # worth 0.5
    value.add("y + z = z + y", 3)  # worth 0.125
    # a stored state itself: its own value dominates, the other shares no feature
    assert value.estimate("x = x") == pytest.approx(0.5)
    # shares features with neither: the prior, the mean of the stored values
    assert value.estimate("Q") == pytest.approx((0.5 + 0.125) / 2)
    # "a = b" shares only "=" with both.  By hand (IDF log(3/(count+1)) + 1 over 2 states): "="
    # weighs 1, a feature one state has 1.405, an unknown one 2.099; the query weighs
    # 1 + 4 * 2.099 = 9.394, the states 1 + 3 * 1.405 = 5.216 and 1 + 9 * 1.405 = 13.649, so the
    # Jaccard similarities are 1/13.61 = 0.0735 and 1/22.04 = 0.0454, and V is their weighted mean
    s1 = 1 / (9.3944 + 5.2164 - 1)
    s2 = 1 / (9.3944 + 13.6492 - 1)
    assert value.estimate("a = b") == pytest.approx((s1 * 0.5 + s2 * 0.125) / (s1 + s2), rel=1e-3)
    assert KnnValue().estimate("anything") == pytest.approx(0.9)   # nothing stored: γ


def test_a_discount_outside_the_unit_interval_or_a_stored_state_with_nothing_left_is_refused():
    with pytest.raises(ValueError, match="discount"):
        KnnValue(discount=1.0)
    with pytest.raises(ValueError, match="at least its own tactic"):
        KnnValue().add("x = x", 0)


def test_the_registry_builds_by_name_and_names_the_known_scores():
    node = Node(handle=None, goals="G", tactics=("t",), logprob=-1.5, key=b"")
    assert build_score("logprob")(node) == -1.5
    with pytest.raises(ValueError, match="logprob, value, logprob\\+value"):
        build_score("valu")
    with pytest.raises(ValueError, match="corpus directory"):
        build_score("value", None)
    assert set(SCORES) == {"logprob", "value", "logprob+value"}


def test_best_first_by_value_expands_the_state_that_looks_closer_to_done():
    # root -a(-0.1)-> A -a2-> A2 -q-> QED (likely, long); root -b(-2.0)-> B -q-> QED (unlikely, short)
    graph = {"root": {"a": "A", "b": "B"}, "A": {"a2": "A2"}, "A2": {"q": QED}, "B": {"q": QED}}
    table = {"root": [("a", -0.1), ("b", -2.0)], "A": [("a2", -0.1)], "A2": [("q", -0.1)], "B": [("q", -0.1)]}
    value = KnnValue(discount=0.5)
    value.add("A", 3)
    value.add("B", 1)
    by_value = lambda node: math.log(value.estimate(node.goals))  # noqa: E731
    task = ProofTask(id="p", header="", statement="Theorem p : True.", proof="")
    settings = SearchSettings(finishers=())
    likely = search(task, GraphProver(graph), TableProposer(table), settings)
    assert likely.tactics == ("a", "a2", "q")
    prover = GraphProver(graph)
    valued = search(task, prover, TableProposer(table), settings, score=by_value)
    assert valued.tactics == ("b", "q") and prover.expanded_states() == ["root", "B"]


def test_the_value_learns_the_states_of_the_proofs_the_search_finds():
    score = ValueScore(KnnValue(discount=0.5), with_logprob=True)
    # a proof of two tactics: its root state is 2 tactics from done, the next 1
    found = {"proved": True, "states": [_goal("x = x"), _goal("y + z = z + y")]}
    learn_from(score, {**found, "proved": False})          # found but refused by the re-check: nothing
    assert len(score.value) == 0
    learn_from(score, found)
    assert len(score.value) == 2
    assert score.value.estimate("x = x") == pytest.approx(0.25)            # stored as its display
    node = Node(handle=None, goals=_goal("y + z = z + y"), tactics=("t",), logprob=-1.0, key=b"")
    assert score(node) == pytest.approx(-1.0 + math.log(0.5))
    learn_from(build_score("logprob"), found)              # a score that does not learn: ignored
