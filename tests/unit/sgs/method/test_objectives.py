"""Hand-computed cases, gradients and a few properties for sgs.method.objectives and sgs.method.losses."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sgs.method.losses import (
    cispo_loss,
    clipped_importance_weights,
    conjecturer_loss,
    group_token_counts,
    weighted_nll_loss,
)
from sgs.method.objectives import (
    Rollout,
    Sample,
    StoredProof,
    expert_iteration_targets,
    group_advantages,
    select_cispo,
    select_expert_iteration,
    select_reinforce,
    select_reinforce_half,
    whole_group_batches,
)

# --------------------------------------------------------------------------
# Data selection
# --------------------------------------------------------------------------


def _problem(problem_id, num_valid, num_other=None, *, k=8, other="invalid", rewards=None):
    """k rollouts of one problem: num_valid valid ones first, the rest `other`."""
    num_other = k - num_valid if num_other is None else num_other
    statuses = ["valid"] * num_valid + [other] * num_other
    if rewards is None:
        rewards = [1.0 if s == "valid" else (None if s == "system_error" else 0.0) for s in statuses]
    return [Rollout(problem_id, s, r) for s, r in zip(statuses, rewards)]


def _batch():
    return (
        _problem("a", 2)  # s = 1/4          indices 0..7
        + _problem("b", 4)  # s = 1/2        indices 8..15
        + _problem("c", 6)  # s = 3/4        indices 16..23
        + _problem("d", 0)  # s = 0          indices 24..31
        + _problem("e", 8)  # s = 1          indices 32..39
        + _problem("f", 1, 6)  # s = 1/7     indices 40..46
        + _problem("f", 0, 1, other="system_error")  # index 47
    )


def test_reinforce_takes_correct_proofs_of_every_problem():
    samples = select_reinforce(_batch())
    assert [s.index for s in samples] == [0, 1, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, *range(32, 40), 40]
    assert all(s.weight == 1.0 for s in samples)
    assert [s.group for s in samples[:3]] == [0, 0, 1]
    assert samples[-1].group == 5


def test_reinforce_half_takes_problems_with_rate_at_most_half():
    samples = select_reinforce_half(_batch())
    assert [s.index for s in samples] == [0, 1, 8, 9, 10, 11, 40]
    assert {s.group for s in samples} == {0, 1, 5}


def test_reinforce_weights_follow_try_rule_and_overlong_penalty():
    # valid proofs: one plain, one with `try` (reward 0), one overlong (-0.5)
    rollouts = _problem("a", 3, 5, rewards=[1.0, 0.0, -0.5] + [0.0] * 5)
    samples = select_reinforce_half(rollouts)
    assert [(s.index, s.weight) for s in samples] == [(0, 1.0), (2, -0.5)]


def test_group_advantages_use_population_std():
    std = math.sqrt(0.25 * 0.75)
    advantages = group_advantages([1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert advantages[0] == pytest.approx(0.75 / (std + 1e-6))
    assert advantages[2] == pytest.approx(-0.25 / (std + 1e-6))
    assert group_advantages([1.0, 0.0]) == pytest.approx([0.5 / 0.500001, -0.5 / 0.500001])
    assert group_advantages([1.0, 1.0]) == [0.0, 0.0]
    assert group_advantages([]) == []


def test_cispo_takes_every_rollout_of_problems_strictly_between():
    rollouts = _batch()
    samples = select_cispo(rollouts)
    # a, b, c and f (without its system error); d (s=0) and e (all correct) are out
    assert [s.index for s in samples] == [*range(0, 24), *range(40, 47)]
    by_index = {s.index: s for s in samples}
    std_a = math.sqrt(0.25 * 0.75)
    assert by_index[0].weight == pytest.approx(0.75 / (std_a + 1e-6))
    assert by_index[2].weight == pytest.approx(-0.25 / (std_a + 1e-6))
    assert by_index[8].weight == pytest.approx(1.0, abs=1e-5)  # b: mean .5, std .5
    assert by_index[40].weight == pytest.approx(group_advantages([1.0] + [0.0] * 6)[0])
    assert sum(s.weight for s in samples if s.group == 2) == pytest.approx(0.0, abs=1e-9)


def test_cispo_drops_groups_whose_rewards_are_all_equal():
    # s = 1/2 by verdict, but every valid proof used `try`: no signal left
    rollouts = _problem("g", 4, rewards=[0.0] * 8)
    assert select_cispo(rollouts) == []


def test_selection_of_nothing_is_empty():
    assert select_reinforce([]) == []
    assert select_reinforce_half([]) == []
    assert select_cispo([]) == []


def test_selection_rejects_a_judged_rollout_without_reward():
    with pytest.raises(ValueError, match="rollout 0 of problem 'a' has status 'valid' but reward None"):
        select_reinforce([Rollout("a", "valid", None)])
    with pytest.raises(ValueError, match="unknown verdict status"):
        select_cispo([Rollout("a", "passed", 1.0)])


_STATUSES = ["valid", "invalid", "timeout", "system_error"]


@st.composite
def _rollouts(draw):
    rollouts = []
    for problem in range(draw(st.integers(0, 5))):
        for status in draw(st.lists(st.sampled_from(_STATUSES), max_size=9)):
            reward = None if status == "system_error" else draw(st.sampled_from([1.0, 0.0, -0.5, -1.0]))
            rollouts.append(Rollout(f"p{problem}", status, reward))
    return draw(st.permutations(rollouts))


@given(_rollouts())
def test_selection_never_raises_on_well_formed_rollouts(rollouts):
    for select in (select_reinforce, select_reinforce_half, select_cispo):
        samples = select(rollouts)
        indices = [s.index for s in samples]
        assert len(indices) == len(set(indices))
        for sample in samples:
            rollout = rollouts[sample.index]
            assert rollout.status != "system_error"
            assert math.isfinite(sample.weight)
            if select is not select_cispo:
                assert rollout.status == "valid"
                assert sample.weight == rollout.reward != 0.0


def test_whole_group_batches_keep_groups_whole():
    samples = [Sample(i, 1.0, g) for g, size in enumerate([8, 8, 8]) for i in range(size)]
    batches = whole_group_batches(samples, batch_size=16)
    assert [[s.group for s in batch] for batch in batches] == [[0] * 8 + [1] * 8, [2] * 8]
    sizes = [7, 8, 3]
    samples = [Sample(i, 1.0, g) for g, size in enumerate(sizes) for i in range(size)]
    assert [len(b) for b in whole_group_batches(samples, batch_size=10)] == [7, 8, 3]
    assert [len(b) for b in whole_group_batches(samples, batch_size=16)] == [15, 3]
    assert whole_group_batches([], batch_size=8) == []


def test_whole_group_batches_gather_a_scattered_group():
    samples = [Sample(0, 1.0, 0), Sample(1, 1.0, 1), Sample(2, 1.0, 0)]
    assert whole_group_batches(samples, batch_size=2) == [[samples[0], samples[2]], [samples[1]]]


def test_whole_group_batches_reject_bad_sizes():
    with pytest.raises(ValueError, match="group 0 has 3 sequences, more than batch_size 2"):
        whole_group_batches([Sample(i, 1.0, 0) for i in range(3)], batch_size=2)
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        whole_group_batches([], batch_size=0)


@given(st.lists(st.integers(1, 8), max_size=12), st.integers(8, 40))
def test_whole_group_batches_never_split_or_lose_a_group(group_sizes, batch_size):
    groups = [g for g, n in enumerate(group_sizes) for _ in range(n)]
    samples = [Sample(index, 0.0, group) for index, group in enumerate(groups)]
    batches = whole_group_batches(samples, batch_size)
    assert sorted(s.index for b in batches for s in b) == sorted(s.index for s in samples)
    seen = set()
    for batch in batches:
        assert 0 < len(batch) <= batch_size
        groups = {s.group for s in batch}
        assert not groups & seen
        seen |= groups
        for group in groups:
            assert sum(s.group == group for s in batch) == group_sizes[group]


def test_expert_iteration_samples_targets_with_few_stored_proofs():
    counts = {"a": 16, "b": 15, "c": 0}
    assert expert_iteration_targets(["a", "b", "c", "d"], counts) == ["b", "c", "d"]


def test_expert_iteration_trains_on_the_last_three_iterations():
    records = [
        StoredProof("a", "simp", 2),
        StoredProof("a", "ring", 3),
        StoredProof("b", "omega", 4),
        StoredProof("b", "try simp", 5, reward=0.0),
        StoredProof("c", "linarith", 5),
    ]
    samples = select_expert_iteration(records, iteration=5)
    assert [(s.index, s.weight, s.group) for s in samples] == [(1, 1.0, 0), (2, 1.0, 1), (4, 1.0, 2)]
    assert select_expert_iteration(records, iteration=5, window=1) == [Sample(4, 1.0, 2)]
    assert select_expert_iteration([], iteration=0) == []


def test_expert_iteration_rejects_bad_inputs():
    with pytest.raises(ValueError, match="from iteration 6, after the current iteration 5"):
        select_expert_iteration([StoredProof("a", "simp", 6)], iteration=5)
    with pytest.raises(ValueError, match="window must be at least 1"):
        select_expert_iteration([], iteration=5, window=0)


# --------------------------------------------------------------------------
# Weighted NLL (REINFORCE, REINFORCE½, EI, Conjecturer)
# --------------------------------------------------------------------------

PAD = -math.inf  # padding may hold anything; -inf must not turn into NaN


def _tiny():
    logprobs = torch.tensor([[-1.0, -2.0, PAD], [-0.5, PAD, PAD]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    weights = torch.tensor([1.0, 2.0])
    return logprobs, mask, weights


def test_token_mean_by_hand():
    logprobs, mask, weights = _tiny()
    loss = weighted_nll_loss(logprobs, mask, weights)
    assert loss.item() == pytest.approx((1 * 3 + 2 * 0.5) / 3)
    (grad,) = torch.autograd.grad(loss, logprobs)
    # d/d logprob_it = -w_i m_it / N
    expected = torch.tensor([[-1 / 3, -1 / 3, 0.0], [-2 / 3, 0.0, 0.0]])
    torch.testing.assert_close(grad, expected)


def test_sequence_mean_by_hand():
    logprobs, mask, weights = _tiny()
    loss = weighted_nll_loss(logprobs, mask, weights, normalisation="sequence_mean")
    assert loss.item() == pytest.approx((1 * 3 / 2 + 2 * 0.5 / 1) / 2)
    (grad,) = torch.autograd.grad(loss, logprobs)
    # d/d logprob_it = -w_i m_it / (|y_i| S)
    expected = torch.tensor([[-1 / 4, -1 / 4, 0.0], [-2 / 2, 0.0, 0.0]])
    torch.testing.assert_close(grad, expected)


def test_token_and_sequence_mean_agree_only_for_equal_lengths():
    logprobs = torch.tensor([[-1.0, -3.0], [-2.0, -2.0]])
    mask = torch.ones(2, 2)
    weights = torch.tensor([1.0, 0.5])
    token = weighted_nll_loss(logprobs, mask, weights)
    sequence = weighted_nll_loss(logprobs, mask, weights, normalisation="sequence_mean")
    assert token.item() == pytest.approx(sequence.item()) == pytest.approx((4 + 2) / 4)


def test_empty_batch_gives_a_zero_loss_with_grad():
    logprobs = torch.zeros(0, 5, requires_grad=True)
    for normalisation in ("token_mean", "sequence_mean"):
        loss = weighted_nll_loss(logprobs, torch.zeros(0, 5), torch.zeros(0), normalisation=normalisation)
        assert loss.item() == 0.0 and loss.requires_grad
        loss.backward()
    assert not torch.isnan(logprobs.grad).any()


def test_all_zero_weights_give_zero_loss_and_gradient():
    logprobs, mask, _ = _tiny()
    loss = weighted_nll_loss(logprobs, mask, torch.zeros(2))
    (grad,) = torch.autograd.grad(loss, logprobs)
    assert loss.item() == 0.0
    assert not grad.any()


def _random_batch(seed, batch=6, length=7):
    generator = torch.Generator().manual_seed(seed)
    logprobs = -torch.rand(batch, length, generator=generator) * 3
    lengths = torch.randint(1, length + 1, (batch,), generator=generator)
    mask = torch.arange(length)[None, :] < lengths[:, None]
    return logprobs, mask, generator


@pytest.mark.parametrize("normalisation", ["token_mean", "sequence_mean"])
def test_gradient_accumulation_matches_one_big_batch(normalisation):
    logprobs, mask, generator = _random_batch(0)
    weights = torch.randn(6, generator=generator)
    full = logprobs.clone().requires_grad_()
    weighted_nll_loss(full, mask, weights, normalisation=normalisation).backward()

    split = logprobs.clone().requires_grad_()
    for rows in (slice(0, 2), slice(2, 5), slice(5, 6)):
        weighted_nll_loss(
            split[rows],
            mask[rows],
            weights[rows],
            normalisation=normalisation,
            num_tokens_global=int(mask.sum()),
            num_sequences_global=6,
        ).backward()
    torch.testing.assert_close(split.grad, full.grad)


def test_weighted_nll_rejects_bad_inputs():
    logprobs, mask, weights = _tiny()
    with pytest.raises(ValueError, match="num_tokens_global=2 is smaller than this batch's own count 3"):
        weighted_nll_loss(logprobs, mask, weights, num_tokens_global=2)
    with pytest.raises(ValueError, match=r"weights must be \[B\] = \[2\]"):
        weighted_nll_loss(logprobs, mask, torch.ones(3))
    with pytest.raises(ValueError, match="mask shape"):
        weighted_nll_loss(logprobs, mask[:, :2], weights)
    with pytest.raises(ValueError, match=r"logprobs must be \[B, T\]"):
        weighted_nll_loss(logprobs[0], mask[0], weights)
    with pytest.raises(ValueError, match="weights must be finite"):
        weighted_nll_loss(logprobs, mask, torch.tensor([1.0, math.nan]))
    with pytest.raises(ValueError, match="unknown normalisation 'mean'"):
        weighted_nll_loss(logprobs, mask, weights, normalisation="mean")


def test_conjecturer_loss_is_weighted_nll_with_normalised_weights():
    logprobs, mask, _ = _tiny()
    weights = torch.tensor([0.25, -0.5])  # a normalised reward and an overlong penalty
    torch.testing.assert_close(
        conjecturer_loss(logprobs, mask, weights), weighted_nll_loss(logprobs, mask, weights)
    )
    with pytest.raises(ValueError, match=r"Conjecturer weights must lie in \[-1, 1\]"):
        conjecturer_loss(logprobs, mask, torch.tensor([0.5, 4.5]))


# --------------------------------------------------------------------------
# CISPO
# --------------------------------------------------------------------------


def test_importance_weights_are_clipped_and_detached():
    logprobs = torch.tensor([[-1.0, -1.0, -1.0, PAD]], requires_grad=True)
    old = torch.tensor([[-1.0 - math.log(5), -1.0 + math.log(2), -1.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    weights = clipped_importance_weights(logprobs, old, mask)
    torch.testing.assert_close(weights, torch.tensor([[4.0, 0.5, 1.0, 0.0]]))
    assert not weights.requires_grad
    narrow = clipped_importance_weights(logprobs, old, mask, eps_low=0.2, eps_high=0.2)
    torch.testing.assert_close(narrow, torch.tensor([[1.2, 0.8, 1.0, 0.0]]))


def test_importance_weights_reject_bad_bounds():
    x = torch.zeros(1, 1)
    with pytest.raises(ValueError, match="eps_low must lie in"):
        clipped_importance_weights(x, x, x, eps_low=1.5)
    with pytest.raises(ValueError, match="eps_high must be non-negative"):
        clipped_importance_weights(x, x, x, eps_high=-1.0)
    with pytest.raises(ValueError, match="old_logprobs shape"):
        clipped_importance_weights(x, torch.zeros(1, 2), x)


def test_group_token_counts():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 0]])
    assert group_token_counts(mask, torch.tensor([7, 7, 3])).tolist() == [3, 3, 2]


def _cispo_case():
    """Two groups: sequences 0 and 1 form group 0, sequence 2 is group 1."""
    logprobs = torch.tensor(
        [[-1.0, -2.0], [-0.5, PAD], [-0.25, -0.75]], requires_grad=True
    )
    # ratios: seq 0 [1, e^2 -> clipped to 4]; seq 1 [1]; seq 2 [0.5, 1]
    old = torch.tensor([[-1.0, -4.0], [-0.5, 0.0], [-0.25 + math.log(2), -0.75]])
    mask = torch.tensor([[1, 1], [1, 0], [1, 1]])
    advantages = torch.tensor([1.0, -1.0, 2.0])
    group_ids = torch.tensor([0, 0, 1])
    return logprobs, old, mask, advantages, group_ids


def test_cispo_loss_by_hand():
    logprobs, old, mask, advantages, group_ids = _cispo_case()
    loss = cispo_loss(logprobs, old, mask, advantages, group_ids)
    group0 = -(1.0 * (1 * -1.0 + 4 * -2.0) + -1.0 * (1 * -0.5)) / 3
    group1 = -(2.0 * (0.5 * -0.25 + 1 * -0.75)) / 2
    assert loss.item() == pytest.approx((group0 + group1) / 2)

    # stop-gradient on ŵ: d/d logprob_it = -Â_i ŵ_it m_it / (|group_i| · num_groups)
    (grad,) = torch.autograd.grad(loss, logprobs)
    expected = torch.tensor(
        [
            [-1.0 * 1 / (3 * 2), -1.0 * 4 / (3 * 2)],
            [1.0 * 1 / (3 * 2), 0.0],
            [-2.0 * 0.5 / (2 * 2), -2.0 * 1 / (2 * 2)],
        ]
    )
    torch.testing.assert_close(grad, expected)


def test_cispo_zero_advantage_group_adds_nothing_but_counts():
    logprobs, old, mask, advantages, group_ids = _cispo_case()
    both = cispo_loss(logprobs, old, mask, torch.tensor([1.0, -1.0, 0.0]), group_ids)
    alone = cispo_loss(logprobs[:2], old[:2], mask[:2], advantages[:2], group_ids[:2])
    assert both.item() == pytest.approx(alone.item() / 2)


def test_cispo_empty_batch_gives_a_zero_loss_with_grad():
    logprobs = torch.zeros(0, 4, requires_grad=True)
    empty = torch.zeros(0, 4)
    loss = cispo_loss(logprobs, empty, empty, torch.zeros(0), torch.zeros(0, dtype=torch.long))
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert not torch.isnan(logprobs.grad).any()


def test_cispo_gradient_accumulation_matches_one_big_batch():
    logprobs, mask, generator = _random_batch(1, batch=6)
    old = logprobs + 0.5 * torch.randn(logprobs.shape, generator=generator)
    advantages = torch.randn(6, generator=generator)
    group_ids = torch.tensor([0, 0, 0, 1, 1, 2])
    full = logprobs.clone().requires_grad_()
    cispo_loss(full, old, mask, advantages, group_ids).backward()

    counts = group_token_counts(mask, group_ids)
    split = logprobs.clone().requires_grad_()
    # micro-batches of two: group 0 and group 1 are each cut in two
    for rows in (slice(0, 2), slice(2, 4), slice(4, 6)):
        cispo_loss(
            split[rows],
            old[rows],
            mask[rows],
            advantages[rows],
            group_ids[rows],
            group_num_tokens=counts[rows],
            num_groups_global=3,
        ).backward()
    torch.testing.assert_close(split.grad, full.grad)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_cispo_gradient_matches_analytic_formula(seed):
    logprobs, mask, generator = _random_batch(seed, batch=5, length=4)
    old = logprobs + torch.randn(logprobs.shape, generator=generator)
    advantages = torch.randn(5, generator=generator)
    group_ids = torch.randint(0, 3, (5,), generator=generator)
    logprobs.requires_grad_()
    (grad,) = torch.autograd.grad(cispo_loss(logprobs, old, mask, advantages, group_ids), logprobs)

    ratio = torch.exp(logprobs.detach() - old).clamp(0.0, 4.0)
    lengths = mask.sum(-1).float()
    group_tokens = torch.tensor([lengths[group_ids == g].sum() for g in group_ids])
    num_groups = len(set(group_ids.tolist()))
    expected = -advantages[:, None] * ratio * mask / (group_tokens[:, None] * num_groups)
    torch.testing.assert_close(grad, expected)


def test_cispo_rejects_bad_inputs():
    logprobs, old, mask, advantages, group_ids = _cispo_case()
    with pytest.raises(ValueError, match=r"group_ids must be \[B\] = \[3\]"):
        cispo_loss(logprobs, old, mask, advantages, group_ids[:2])
    with pytest.raises(ValueError, match=r"group_num_tokens must be \[B\]"):
        cispo_loss(logprobs, old, mask, advantages, group_ids, group_num_tokens=torch.ones(2))
    with pytest.raises(ValueError, match="num_groups_global=1 is smaller than this batch's own count 2"):
        cispo_loss(logprobs, old, mask, advantages, group_ids, num_groups_global=1)
