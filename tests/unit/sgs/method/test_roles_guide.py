"""Guide review parsing."""

import pytest

from sgs.method.rewards import GuideScores
from sgs.method.roles import Failure, extract_guide_scores


def review(relevance="4", redundancy="0", complexity="1", prose="The lemma is a special case.\n"):
    return (f"{prose}<begin_relevance_score>{relevance}<end_relevance_score>\n"
            f"<begin_redundancy_score>{redundancy}<end_redundancy_score>\n"
            f"<begin_conclusion_complexity_score>{complexity}<end_conclusion_complexity_score>")


def test_well_formed_review():
    result = extract_guide_scores(review())
    assert result.value == GuideScores(relevance=4, redundancy=0, complexity=1)


def test_whitespace_and_sign_around_the_number_are_accepted():
    result = extract_guide_scores(review(" 5\n", "+1", "\t0 "))
    assert result.value == GuideScores(relevance=5, redundancy=1, complexity=0)


def test_the_last_complete_pair_counts():
    output = (review("1", "1", "3", prose="Draft: ")
              + "\nOn reflection:\n" + review("3", "0", "2", prose="")
              + "\n<begin_relevance_score>")  # a dangling begin tag after the last pair
    assert extract_guide_scores(output).value == GuideScores(relevance=3, redundancy=0, complexity=2)


def test_range_bounds_are_inclusive():
    assert extract_guide_scores(review("0", "0", "0")).ok
    assert extract_guide_scores(review("5", "1", "4")).ok


@pytest.mark.parametrize("output, failure, detail", [
    ("no tags at all", Failure.MISSING_TAG, "relevance_score"),
    (review().replace("<end_redundancy_score>", ""), Failure.MISSING_TAG, "redundancy_score"),
    (review().replace("<begin_conclusion_complexity_score>", "<conclusion>"), Failure.MISSING_TAG,
     "conclusion_complexity_score"),
    # the end tag before the begin tag is not a pair
    ("<end_relevance_score>3<begin_relevance_score>", Failure.MISSING_TAG, "relevance_score"),
    (review(relevance="3.0"), Failure.NOT_AN_INTEGER, "relevance_score"),
    (review(relevance="three"), Failure.NOT_AN_INTEGER, "relevance_score"),
    (review(relevance="**3**"), Failure.NOT_AN_INTEGER, "relevance_score"),
    (review(relevance=""), Failure.NOT_AN_INTEGER, "relevance_score"),
    (review(relevance="٣"), Failure.NOT_AN_INTEGER, "relevance_score"),  # a non-ASCII digit
    (review(relevance="1_0"), Failure.NOT_AN_INTEGER, "relevance_score"),
    (review(relevance="6"), Failure.OUT_OF_RANGE, "relevance_score"),
    (review(relevance="-1"), Failure.OUT_OF_RANGE, "relevance_score"),
    (review(redundancy="2"), Failure.OUT_OF_RANGE, "redundancy_score"),
    (review(complexity="5"), Failure.OUT_OF_RANGE, "conclusion_complexity_score"),
    (review(relevance="9" * 5000), Failure.OUT_OF_RANGE, "relevance_score"),
    (None, Failure.NOT_TEXT, ""),
])
def test_failures(output, failure, detail):
    result = extract_guide_scores(output)
    assert result.failure is failure
    assert result.detail == detail


def test_leading_zeros_do_not_make_a_small_number_out_of_range():
    assert extract_guide_scores(review(relevance="0" * 20 + "2")).value.relevance == 2
