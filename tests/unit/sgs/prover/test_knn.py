"""The k-NN tactic predictor: features of a proof state, the TF-IDF Jaccard
neighbour, distinct tactics, online learning, saving and loading."""

from __future__ import annotations

import gzip
import math

import pytest

from sgs.prover.knn import KnnTactics, state_features


def state(conclusion: str, *hypotheses: str) -> str:
    """A proof state as :func:`sgs.prover.steps.proof_state` gives it."""
    return "\n".join([*hypotheses, "============================", conclusion])


def test_features_are_goal_and_hypothesis_type_tokens_and_bigrams_without_hypothesis_names():
    features = state_features(state("Nat.le n (S m)", "n, m : nat", "H : n < m"))
    assert {"c:Nat.le", "c:n", "c:S", "c:m", "c:Nat.le n", "c:n S", "c:S m"} <= features
    assert {"h:nat", "h:n", "h:<", "h:m", "h:n <", "h:< m"} <= features
    # the names a hypothesis binds are local: not features of its type
    assert "h:H" not in features and "h:n," not in features
    # only the focused goal counts
    assert not any("True" in f for f in state_features(state("n = n") + "\ngoal 2 is:\nTrue"))


def test_the_nearest_state_is_the_one_sharing_the_rarest_symbols():
    # common=1: every shared feature finds candidates (the similarity is the same either way)
    model = KnnTactics(common=1.0)
    model.add(state("rare1 a = a"), "apply one.")
    model.add(state("rare2 a = a"), "apply two.")
    for _ in range(3):
        model.add(state("common a = a"), "apply three.")
    query = state("rare2 b = common b")
    # rare1's state shares only "=", which every state has
    assert model.predict(query, 3) == ["apply two.", "apply three.", "apply one."]
    similarity, nearest = model.neighbours(query, 1)[0]
    assert nearest == 1
    # the query: rare2 (in 1 of 5 states), common (3 of 5), = (5 of 5), and five features no
    # state has (b and four bigrams); state 1: rare2 and "rare2 a" (1 of 5), a, =, "a =", "= a"
    # (5 of 5); they share rare2 and =
    idf = lambda count: math.log(6 / (count + 1)) + 1   # noqa: E731
    query_weight = idf(1) + idf(3) + idf(5) + 5 * idf(0)
    stored_weight = 2 * idf(1) + 4 * idf(5)
    shared = idf(1) + idf(5)
    assert similarity == pytest.approx(shared / (query_weight + stored_weight - shared))
    # by default only features at most 5% of the states have (here: in one state) find candidates
    model.common = 0.05
    assert model.predict(query, 3) == ["apply two."]
    assert model.neighbours(query, 1)[0] == (similarity, 1)


def test_tactics_are_distinct_by_key_and_equal_neighbours_give_the_latest_first():
    model = KnnTactics()
    model.add(state("P x"), "intros  x .")
    model.add(state("P x"), "intros x.")
    model.add(state("P x"), "exact I.")
    assert model.predict(state("P x"), 10) == ["exact I.", "intros x."]
    assert model.predict(state("P x"), 1) == ["exact I."]
    assert model.predict(state("P x"), 0) == []


def test_an_empty_model_or_an_unknown_state_predicts_nothing():
    assert KnnTactics().predict(state("P"), 5) == []
    model = KnnTactics()
    model.add(state("P"), "exact p.")
    assert model.predict(state("Q"), 5) == []


def test_learning_online_changes_the_next_prediction():
    model = KnnTactics()
    model.add(state("In x l"), "apply in_cons.")
    assert model.predict(state("Forall P l"), 1) == ["apply in_cons."]    # shares only l
    model.add(state("Forall P l"), "constructor.")
    assert model.predict(state("Forall P l"), 1) == ["constructor."]
    assert len(model) == 2


@pytest.mark.parametrize("candidates, expected", [(1, ["auto."]), (2, ["auto.", "reflexivity."])])
def test_the_candidate_bound_keeps_the_most_sharing_states(candidates, expected):
    model = KnnTactics(candidates=candidates, common=1.0)
    model.add(state("f x = g x"), "reflexivity.")
    model.add(state("f y = h y"), "auto.")
    model.add(state("k z"), "trivial.")
    assert model.predict(state("f y = h y"), 3) == expected


def test_save_and_load_give_the_same_predictions(tmp_path):
    model = KnnTactics(candidates=7, common=0.5)
    model.add(state("a + 0 = a", "a : nat"), "lia.")
    model.add(state("l ++ [] = l", "l : list nat"), "apply app_nil_r.")
    path = tmp_path / "knn.json.gz"
    model.save(path)
    loaded = KnnTactics.load(path)
    assert (len(loaded), loaded.candidates, loaded.common) == (2, 7, 0.5)
    for query in (state("b + 0 = b"), state("m ++ [] = m")):
        assert loaded.predict(query, 2) == model.predict(query, 2)
    path.write_bytes(gzip.compress(b'{"format": 99, "pairs": []}'))
    with pytest.raises(ValueError, match="format"):
        KnnTactics.load(path)
    path.write_bytes(gzip.compress(b'{"format": 1, "candidates": 8, "common": 0.1, "pairs": [["only a state"]]}'))
    with pytest.raises(ValueError, match="malformed"):
        KnnTactics.load(path)
    path.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a saved"):
        KnnTactics.load(path)
