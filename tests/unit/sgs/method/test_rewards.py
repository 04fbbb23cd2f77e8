"""Hand-computed cases and a few properties for sgs.method.rewards."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lean_env.verdict import Status
from sgs.method.rewards import (
    GuideScores,
    apply_overlong_penalty,
    conjecturer_reward,
    conjecturer_weights,
    guide_batch_rewards,
    guide_reward,
    keep_conjectures,
    keep_threshold,
    min_max_normalise,
    normalise_conjecturer_rewards,
    overlong_penalty,
    solve_rate,
    solver_reward,
    strip_comments_and_strings,
    uses_try_tactic,
)

# --------------------------------------------------------------------------
# Solve rates and selection
# --------------------------------------------------------------------------


def test_solve_rate_is_correct_over_k():
    assert solve_rate(["valid"] * 3 + ["invalid"] * 4 + ["timeout"]) == 3 / 8


def test_solve_rate_leaves_system_errors_out():
    statuses = ["valid", "invalid", "system_error", "system_error"]
    assert solve_rate(statuses) == 0.5


def test_solve_rate_accepts_status_enum():
    assert solve_rate([Status.VALID, Status.TIMEOUT]) == 0.5


def test_solve_rate_is_none_without_a_real_verdict():
    assert solve_rate(["system_error"] * 8) is None
    assert solve_rate([]) is None


def test_solve_rate_rejects_unknown_status():
    with pytest.raises(ValueError, match="unknown verdict status 'crashed'"):
        solve_rate(["valid", "crashed"])


def test_keep_threshold_is_p70_of_rates_inside_zero_one():
    rates = [0.0, 1.0, 0.125, 0.25, 0.25, 0.5, 0.75, 0.875, None]
    # inside (0, 1): [.125, .25, .25, .5, .75, .875]; floor(0.7 * 6) = 4
    assert keep_threshold(rates) == 0.75
    assert keep_conjectures(rates) == [False, False, True, True, True, True, True, False, False]


def test_ties_at_p70_are_kept():
    rates = [0.5, 0.25, 0.5, 0.5, 0.5, 0.5]
    assert keep_threshold(rates) == 0.5
    assert keep_conjectures(rates) == [True] * 6


def test_nothing_kept_without_rates_inside_zero_one():
    assert keep_threshold([0.0, 1.0, None]) == 0.0
    assert keep_conjectures([0.0, 1.0, None]) == [False, False, False]
    assert keep_conjectures([]) == []


def test_keep_rejects_rates_outside_zero_one():
    with pytest.raises(ValueError, match="solve rate must lie in"):
        keep_conjectures([0.5, 1.5])
    with pytest.raises(ValueError, match="solve rate must lie in"):
        keep_conjectures([math.nan])


@given(st.lists(st.one_of(st.none(), st.integers(0, 8).map(lambda c: c / 8))))
def test_keep_never_raises_and_keeps_the_easiest_hard_one(rates):
    kept = keep_conjectures(rates)
    threshold = keep_threshold(rates)
    assert len(kept) == len(rates)
    for rate, keep in zip(rates, kept):
        assert keep == (rate is not None and 0 < rate <= threshold)
    if any(r is not None and 0 < r < 1 for r in rates):
        assert any(kept)


# --------------------------------------------------------------------------
# Guide reward
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relevance", "redundancy", "complexity", "expected"),
    [
        (5, 0, 0, 8.0),
        (3, 1, 2, 3.0),
        (4, 0, 1, 6.0),
        (0, 1, 2, 0.0),
        (5, 0, 3, 0.0),
        (5, 0, 4, 0.0),
        (3.0, 0.0, 1.0, 5.0),
    ],
)
def test_guide_reward_by_hand(relevance, redundancy, complexity, expected):
    assert guide_reward(GuideScores(relevance, redundancy, complexity)) == expected


@pytest.mark.parametrize(
    "scores",
    [
        GuideScores(6, 0, 0),
        GuideScores(-1, 0, 0),
        GuideScores(2.5, 0, 0),
        GuideScores(3, 2, 0),
        GuideScores(3, 0, 5),
        GuideScores(math.nan, 0, 0),
        GuideScores(True, 0, 0),
        GuideScores("3", 0, 0),
    ],
)
def test_out_of_range_sub_scores_are_parse_failures(scores):
    assert guide_reward(scores) is None


def test_failed_reviews_take_the_batch_mean():
    batch = guide_batch_rewards(
        [GuideScores(5, 0, 0), None, GuideScores(7, 0, 0), GuideScores(3, 1, 2)]
    )
    assert batch.rewards == [8.0, 5.5, 5.5, 3.0]
    assert batch.num_failures == 2


def test_failed_reviews_are_zero_when_none_parsed():
    batch = guide_batch_rewards([None, GuideScores(9, 0, 0)])
    assert batch.rewards == [0.0, 0.0]
    assert batch.num_failures == 2
    assert guide_batch_rewards([]).rewards == []


# --------------------------------------------------------------------------
# Conjecturer reward and normalisation
# --------------------------------------------------------------------------


def test_conjecturer_reward_by_hand():
    assert conjecturer_reward(0.25, 6.0) == 4.5
    assert conjecturer_reward(0.25) == 0.75  # no-guide setting: R = 1 - s


def test_conjecturer_reward_rejects_bad_inputs():
    with pytest.raises(ValueError, match="0 < s < 1"):
        conjecturer_reward(0.0, 5.0)
    with pytest.raises(ValueError, match="R_guide must lie"):
        conjecturer_reward(0.5, 9.0)


def test_min_max_normalise():
    assert min_max_normalise([1.0, 3.0, 2.0]) == [0.0, 1.0, 0.5]
    assert min_max_normalise([2.0, 2.0]) == [1.0, 1.0]
    assert min_max_normalise([0.0, 0.0, 0.0]) == [1.0, 1.0, 1.0]
    assert min_max_normalise([]) == []
    with pytest.raises(ValueError, match="finite"):
        min_max_normalise([1.0, math.inf])


def test_reference_rule_normalises_over_the_kept_set():
    rewards = [None, 2.0, 4.0, None, 3.0]
    assert normalise_conjecturer_rewards(rewards, "reference") == [None, 0.0, 1.0, None, 0.5]
    assert normalise_conjecturer_rewards([None, 3.0, 3.0], "reference") == [None, 1.0, 1.0]
    assert normalise_conjecturer_rewards([0.0, 0.0], "reference") == [1.0, 1.0]


def test_paper_rule_puts_unkept_conjectures_in_the_batch_at_zero():
    rewards = [None, 2.0, 4.0, None, 3.0]
    assert normalise_conjecturer_rewards(rewards, "paper") == [0.0, 0.5, 1.0, 0.0, 0.75]
    # all kept, all equal: the reference's every-weight-1 rule
    assert normalise_conjecturer_rewards([3.0, 3.0], "paper") == [1.0, 1.0]
    # nothing earned a reward: nothing is reinforced
    assert normalise_conjecturer_rewards([None, None], "paper") == [0.0, 0.0]
    assert normalise_conjecturer_rewards([0.0, None], "paper") == [0.0, 0.0]
    assert normalise_conjecturer_rewards([], "paper") == []


def test_unknown_normalisation_rule_raises():
    with pytest.raises(ValueError, match="unknown normalisation rule 'batch'"):
        normalise_conjecturer_rewards([1.0], "batch")


@given(
    st.lists(st.one_of(st.none(), st.floats(0.0, 8.0))),
    st.sampled_from(["reference", "paper"]),
)
def test_normalised_weights_lie_in_zero_one(rewards, rule):
    weights = normalise_conjecturer_rewards(rewards, rule)
    assert len(weights) == len(rewards)
    for reward, weight in zip(rewards, weights):
        if rule == "reference":
            assert (weight is None) == (reward is None)
        if weight is not None:
            assert 0.0 <= weight <= 1.0
        if rule == "paper" and reward is None:
            assert weight == 0.0


def test_conjecturer_weights_apply_the_overlong_penalty_after_normalising():
    weights = conjecturer_weights([2.0, 4.0, None], [10, 95, 95], max_tokens=100)
    assert weights == [0.0, pytest.approx(-0.75), None]
    paper = conjecturer_weights([2.0, 4.0, None], [10, 95, 95], max_tokens=100, rule="paper")
    assert paper == [0.5, pytest.approx(-0.75), pytest.approx(-0.75)]
    with pytest.raises(ValueError, match="2 rewards but 1 token counts"):
        conjecturer_weights([1.0, 2.0], [3], max_tokens=100)


# --------------------------------------------------------------------------
# Overlong penalty
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("num_tokens", "expected"),
    [(0, 0.0), (80, 0.0), (81, -0.05), (90, -0.5), (100, -1.0), (130, -1.0)],
)
def test_overlong_penalty_by_hand(num_tokens, expected):
    assert overlong_penalty(num_tokens, 100) == pytest.approx(expected)


def test_overlong_penalty_at_paper_scale():
    assert overlong_penalty(6553, 8192) == 0.0
    assert overlong_penalty(7372, 8192) == pytest.approx(-(7372 - 6553.6) / 1638.4)


def test_overlong_penalty_rejects_bad_inputs():
    with pytest.raises(ValueError, match="max_tokens must be positive"):
        overlong_penalty(10, 0)
    with pytest.raises(ValueError, match="num_tokens must be non-negative"):
        overlong_penalty(-1, 100)
    with pytest.raises(ValueError, match="threshold"):
        overlong_penalty(10, 100, threshold=1.0)


def test_apply_overlong_penalty_replaces_only_when_negative():
    assert apply_overlong_penalty(1.0, 50, 100) == 1.0
    assert apply_overlong_penalty(1.0, 90, 100) == pytest.approx(-0.5)
    assert apply_overlong_penalty(0.0, 100, 100) == -1.0


# --------------------------------------------------------------------------
# The `try` rule
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "proof",
    [
        "try simp",
        "  nlinarith [sq_nonneg x]\n  <;> try norm_num",
        "constructor <;> (try simp)",
        "first | try simp | rfl",
        "try\n  simp",
        "simp/-x-/try rfl",  # a comment still separates tokens
        '  exact "--"\n  try simp',  # `--` inside a string is no comment
        "/- a /- b -/ c -/ try simp",  # the try is after the nested comment closes
        "·try simp",
    ],
)
def test_try_tactic_is_found_in_lean(proof):
    assert uses_try_tactic(proof, "lean")


@pytest.mark.parametrize(
    "proof",
    [
        "symmetry",
        "exact entry_le h",
        "apply retry",
        "exact try_foo",
        "exact h.try",
        "exact Foo.try",
        "exact try'",
        "try?",  # Lean's suggestion tactic, a different token
        "Try simp",
        "-- try simp\n  simp",
        "/- try -/ simp",
        "/-- doc comment with try -/ simp",
        "/- outer /- inner -/ try -/ simp",
        'simp [show "try" = "try" from rfl]',
        'exact "a\\"try"',  # escaped quote stays inside the string
        "exact «try»",
        "/- never closed try",
    ],
)
def test_not_the_try_tactic_in_lean(proof):
    assert not uses_try_tactic(proof, "lean")


@pytest.mark.parametrize(
    "proof",
    [
        "Proof. try lia. Qed.",
        "Proof. repeat (try lia). Qed.",
        "Proof. split; try lia. Qed.",
        "Proof. (* a (* b *) c *) try lia. Qed.",
    ],
)
def test_try_tactic_is_found_in_rocq(proof):
    assert uses_try_tactic(proof, "rocq")


@pytest.mark.parametrize(
    "proof",
    [
        "Proof. symmetry. apply entry. Qed.",
        "Proof. apply retry_lemma. Qed.",
        "Proof. (* try lia *) lia. Qed.",
        "Proof. (* a (* b *) try *) lia. Qed.",
        'Proof. idtac "try". lia. Qed.',
        'Proof. idtac "a""try". lia. Qed.',  # "" is an escaped quote in Rocq
        "Proof. apply Foo.try. Qed.",
    ],
)
def test_not_the_try_tactic_in_rocq(proof):
    assert not uses_try_tactic(proof, "rocq")


def test_lean_line_comment_is_code_in_rocq():
    assert uses_try_tactic("-- try lia", "rocq")


def test_strip_keeps_code_and_separates_tokens():
    assert strip_comments_and_strings('a/-x-/b "s" c -- d\ne', "lean") == "a b   c  \ne"
    assert strip_comments_and_strings("a(*x*)b", "rocq") == "a b"


def test_unknown_language_raises():
    with pytest.raises(ValueError, match="unknown language 'isabelle'"):
        uses_try_tactic("try", "isabelle")


@given(st.text(alphabet=st.characters(blacklist_characters="\n")))
def test_anything_in_a_line_comment_is_not_the_tactic(text):
    assert not uses_try_tactic("-- " + text, "lean")


# --------------------------------------------------------------------------
# Solver reward
# --------------------------------------------------------------------------


def test_solver_reward_from_the_verdict():
    assert solver_reward("valid", "simp", 10, 100, "lean") == 1.0
    assert solver_reward("invalid", "simp", 10, 100, "lean") == 0.0
    assert solver_reward("timeout", "simp", 10, 100, "lean") == 0.0
    assert solver_reward(Status.SYSTEM_ERROR, "simp", 10, 100, "lean") is None


def test_solver_reward_applies_try_then_overlong():
    assert solver_reward("valid", "try simp", 10, 100, "lean") == 0.0
    assert solver_reward("valid", "try simp", 10, 100, "lean", penalize_try=False) == 1.0
    # the overlong penalty replaces whatever came before it
    assert solver_reward("valid", "simp", 90, 100, "lean") == pytest.approx(-0.5)
    assert solver_reward("valid", "try simp", 90, 100, "lean") == pytest.approx(-0.5)
    assert solver_reward("invalid", "simp", 100, 100, "lean") == -1.0
    assert solver_reward("system_error", "simp", 100, 100, "lean") is None


def test_solver_reward_rejects_unknown_status():
    with pytest.raises(ValueError, match="unknown verdict status 'ok'"):
        solver_reward("ok", "simp", 10, 100, "lean")
