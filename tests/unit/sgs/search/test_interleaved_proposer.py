"""Interleaved predictors (sgs.search.proposers.Interleaved): turns, duplicates, the width."""

from sgs.search.proposers import FixedTactics, Interleaved, RankedProposer


def test_predictors_take_turns_each_tactic_once_and_k_in_all():
    knn = FixedTactics(["auto.", "lia.", "intros n.", "simpl."])
    model = FixedTactics(["lia.", "induction n.", "auto .", "reflexivity."])
    both = Interleaved([knn, model])
    # auto. / lia. / (lia. again) / induction n. / intros n. / (auto . is auto.) / simpl.
    assert both.predict("goal", 5) == ["auto.", "lia.", "induction n.", "intros n.", "simpl."]
    assert both.predict("goal", 2) == ["auto.", "lia."]


def test_a_predictor_with_fewer_answers_leaves_the_turns_to_the_others():
    both = Interleaved([FixedTactics(["a."]), FixedTactics(["b.", "c.", "d."])])
    assert both.predict("goal", 8) == ["a.", "b.", "c.", "d."]
    # as a search's proposer: ranked in the merged order
    assert [p.tactic for p in RankedProposer(both).propose("goal", 3)] == ["a.", "b.", "c."]
