"""Solver and Conjecturer objectives: which sequences to train on, and the losses.

Two halves, both pure (:mod:`sgs.method.registry` names which pieces make
up each objective):

* data selection over rollouts whose rewards are already known
  (:func:`sgs.method.rewards.solver_reward`): REINFORCE, REINFORCE½, CISPO and
  expert iteration (SPEC §1.3), none at all (parallel sampling), plus the
  packing of whole groups (CISPO's) into batches;
* losses over per-token log-probs of the generated tokens.  Every loss takes
  ``logprobs`` [B, T] (the policy's log-prob of each sampled token, with
  grad) and ``mask`` [B, T] (1 on generated tokens, 0 on prompt and padding).

All objectives are reward-weighted log-likelihood: no KL term, no entropy
bonus.  Losses accept the size of the *global* batch (tokens, sequences or
groups), so that summing the gradients of micro-batches gives exactly the
gradient of the whole batch in one piece (gradient accumulation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from lean_env.verdict import Status
from sgs.method.rewards import solve_rate

Normalisation = Literal["token_mean", "sequence_mean"]

REINFORCE_HALF_MAX_SOLVE_RATE = 0.5
CISPO_STD_EPS = 1e-6
EI_MAX_STORED_PROOFS = 16
EI_WINDOW = 3


# --------------------------------------------------------------------------
# Data selection
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Rollout:
    """One Solver attempt as the objectives see it."""

    problem_id: str
    status: str  # verdict status, a lean_env.verdict.Status value
    reward: float | None  # sgs.method.rewards.solver_reward; None for a system error


@dataclass(frozen=True)
class Sample:
    """One sequence chosen for training.

    ``index`` points into the list the selection was made from; ``weight`` is
    the loss weight (REINFORCE, EI) or the advantage (CISPO); ``group`` numbers
    the problems in order of first appearance, and CISPO batches keep each
    group whole.
    """

    index: int
    weight: float
    group: int


def _group_by_problem(rollouts: Sequence[Rollout]) -> dict[str, list[int]]:
    """Rollout indices per problem, problems in order of first appearance.

    System errors are dropped here: they carry no reward and no verdict.
    """
    groups: dict[str, list[int]] = {}
    for index, rollout in enumerate(rollouts):
        if rollout.status == Status.SYSTEM_ERROR:
            continue
        if rollout.reward is None or not math.isfinite(rollout.reward):
            raise ValueError(
                f"rollout {index} of problem {rollout.problem_id!r} has status "
                f"{rollout.status!r} but reward {rollout.reward!r}; only system errors "
                "may lack a finite reward"
            )
        groups.setdefault(rollout.problem_id, []).append(index)
    return groups


def _select_correct(
    rollouts: Sequence[Rollout], keep_problem: Callable[[float], bool]
) -> list[Sample]:
    """Valid rollouts of the problems whose solve rate passes ``keep_problem``.

    Weight = the rollout's reward: 1, or the negative overlong penalty.  Proofs
    whose reward the `try` rule set to 0 are left out (as the reference does):
    they give no gradient and would only inflate the token count that
    normalises the loss.  Failed proofs are never selected, so the overlong
    penalty reaches only correct proofs here, as in the reference code.
    """
    samples = []
    for group, indices in enumerate(_group_by_problem(rollouts).values()):
        if not keep_problem(solve_rate([rollouts[i].status for i in indices])):
            continue
        for i in indices:
            if rollouts[i].status == Status.VALID and rollouts[i].reward != 0.0:
                samples.append(Sample(index=i, weight=rollouts[i].reward, group=group))
    return samples


def select_reinforce(rollouts: Sequence[Rollout]) -> list[Sample]:
    """REINFORCE: the correct proofs of every problem, weight 1."""
    return _select_correct(rollouts, lambda rate: True)


def select_reinforce_half(
    rollouts: Sequence[Rollout], max_solve_rate: float = REINFORCE_HALF_MAX_SOLVE_RATE
) -> list[Sample]:
    """REINFORCE½: the correct proofs of problems with 0 < s <= 0.5, weight 1."""
    return _select_correct(rollouts, lambda rate: 0.0 < rate <= max_solve_rate)


def select_nothing(rollouts: Sequence[Rollout]) -> list[Sample]:
    """Parallel sampling (objective ``none``): the Solver is never trained, so
    every iteration samples the starting weights again; nothing is selected."""
    return []


def group_advantages(rewards: Sequence[float]) -> list[float]:
    """Â_i = (r_i - mean) / (std + 1e-6) within one group.

    std is the population standard deviation (divide by n), as in the
    reference code (`torch.std(unbiased=False)`).
    """
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
    return [(r - mean) / (std + CISPO_STD_EPS) for r in rewards]


def select_cispo(rollouts: Sequence[Rollout]) -> list[Sample]:
    """CISPO: every rollout of problems with 0 < s < 1, weight = group advantage.

    s comes from the verdicts; the advantages come from the rewards (after the
    `try` rule and the overlong penalty), as in the reference.  A group whose
    rewards are all equal has zero advantages and is left out: it would add
    nothing to the gradient but would still count in the mean over groups.
    System errors are not part of any group, so a group may hold fewer than k.
    """
    samples = []
    for group, indices in enumerate(_group_by_problem(rollouts).values()):
        rate = solve_rate([rollouts[i].status for i in indices])
        if not 0.0 < rate < 1.0:
            continue
        rewards = [rollouts[i].reward for i in indices]
        if min(rewards) == max(rewards):
            continue
        for i, advantage in zip(indices, group_advantages(rewards)):
            samples.append(Sample(index=i, weight=advantage, group=group))
    return samples


def whole_group_batches(samples: Sequence[Sample], batch_size: int) -> list[list[Sample]]:
    """Pack whole groups into batches of at most ``batch_size`` sequences.

    Groups keep their order of first appearance and are never split; a new
    batch starts when the next group would not fit.  With groups of k that
    divide ``batch_size`` (8 and 64 in the reference) every batch but the last
    holds exactly batch_size / k groups.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
    groups: dict[int, list[Sample]] = {}
    for sample in samples:
        groups.setdefault(sample.group, []).append(sample)
    batches: list[list[Sample]] = []
    current: list[Sample] = []
    for group_id, members in groups.items():
        if len(members) > batch_size:
            raise ValueError(
                f"group {group_id} has {len(members)} sequences, more than batch_size {batch_size}"
            )
        if len(current) + len(members) > batch_size:
            batches.append(current)
            current = []
        current.extend(members)
    if current:
        batches.append(current)
    return batches


@dataclass(frozen=True)
class StoredProof:
    """A verified proof in the solved registry, as expert iteration replays it."""

    problem_id: str
    proof: str
    iteration: int  # the iteration that produced it
    reward: float = 1.0  # sgs.method.rewards.solver_reward when stored (try rule, overlong penalty)


def expert_iteration_targets(
    target_ids: Sequence[str],
    stored_proof_counts: Mapping[str, int],
    max_stored: int = EI_MAX_STORED_PROOFS,
) -> list[str]:
    """The targets expert iteration samples: fewer than 16 stored proofs."""
    return [t for t in target_ids if stored_proof_counts.get(t, 0) < max_stored]


def select_expert_iteration(
    records: Sequence[StoredProof], iteration: int, window: int = EI_WINDOW
) -> list[Sample]:
    """Expert iteration: stored proofs created in the last ``window`` iterations.

    With window 3 at iteration i that is iterations i-2, i-1 and i.  Weight =
    the stored reward (1 unless a rule changed it); zero-weight proofs are left
    out as in REINFORCE.  A record from a later iteration than ``iteration``
    means the caller passed the wrong iteration, and raises.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window!r}")
    problems: dict[str, int] = {}
    samples = []
    for index, record in enumerate(records):
        if record.iteration > iteration:
            raise ValueError(
                f"stored proof {index} of {record.problem_id!r} comes from iteration "
                f"{record.iteration}, after the current iteration {iteration}"
            )
        group = problems.setdefault(record.problem_id, len(problems))
        if record.iteration > iteration - window and record.reward != 0.0:
            samples.append(Sample(index=index, weight=record.reward, group=group))
    return samples


# --------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------


def _check_inputs(logprobs: Tensor, mask: Tensor, per_sequence: dict[str, Tensor]) -> None:
    if logprobs.dim() != 2:
        raise ValueError(f"logprobs must be [B, T], got shape {tuple(logprobs.shape)}")
    if mask.shape != logprobs.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} differs from logprobs {tuple(logprobs.shape)}")
    for name, tensor in per_sequence.items():
        if tensor.shape != logprobs.shape[:1]:
            raise ValueError(
                f"{name} must be [B] = [{logprobs.shape[0]}], got shape {tuple(tensor.shape)}"
            )
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise ValueError(f"{name} must be finite")


def _masked(values: Tensor, mask: Tensor) -> Tensor:
    # where, not multiply: padding may hold -inf, and -inf * 0 is NaN.
    return torch.where(mask.bool(), values, torch.zeros_like(values))


def _global_count(local: int, given: int | None, name: str) -> int:
    """The global normaliser: ``given`` if set (never below the local count), at least 1."""
    if given is None:
        return max(local, 1)
    if given < local:
        raise ValueError(f"{name}={given} is smaller than this batch's own count {local}")
    return max(given, 1)


def weighted_nll_loss(
    logprobs: Tensor,
    mask: Tensor,
    weights: Tensor,
    *,
    normalisation: Normalisation = "token_mean",
    num_tokens_global: int | None = None,
    num_sequences_global: int | None = None,
) -> Tensor:
    """Reward-weighted negative log-likelihood: the REINFORCE loss.

    REINFORCE, REINFORCE½ and expert iteration all use it with their selected
    samples' weights.  With N the number of generated tokens and S the number
    of sequences in the global batch:

    * ``"token_mean"`` (reference code, default): -Σ_i w_i Σ_t log π(y_it) / N
    * ``"sequence_mean"`` (paper eq. 4): -Σ_i w_i (1/|y_i|) Σ_t log π(y_it) / S

    For gradient accumulation pass N (``num_tokens_global``) or S
    (``num_sequences_global``) of the whole batch; by default they are
    counted in this batch.  An empty batch gives a zero loss that still has a
    grad_fn.
    """
    _check_inputs(logprobs, mask, {"weights": weights})
    sequence_logprob = _masked(logprobs, mask).sum(dim=-1)
    weights = weights.detach().to(logprobs)
    if normalisation == "token_mean":
        num_tokens = _global_count(int(mask.sum()), num_tokens_global, "num_tokens_global")
        return -(weights * sequence_logprob).sum() / num_tokens
    if normalisation == "sequence_mean":
        lengths = mask.sum(dim=-1).clamp(min=1).to(logprobs)
        num_sequences = _global_count(logprobs.shape[0], num_sequences_global, "num_sequences_global")
        return -(weights * sequence_logprob / lengths).sum() / num_sequences
    raise ValueError(
        f"unknown normalisation {normalisation!r}; expected 'token_mean' or 'sequence_mean'"
    )


def conjecturer_loss(
    logprobs: Tensor,
    mask: Tensor,
    weights: Tensor,
    *,
    normalisation: Normalisation = "token_mean",
    num_tokens_global: int | None = None,
    num_sequences_global: int | None = None,
) -> Tensor:
    """The Conjecturer's loss: weighted NLL with the normalised rewards as weights.

    ``weights`` come from :func:`sgs.method.rewards.conjecturer_weights`: min-max
    normalised rewards in [0, 1], or an overlong penalty in [-1, 0).
    """
    if weights.numel() and not ((weights >= -1.0) & (weights <= 1.0)).all():
        raise ValueError("Conjecturer weights must lie in [-1, 1]; normalise the rewards first")
    return weighted_nll_loss(
        logprobs,
        mask,
        weights,
        normalisation=normalisation,
        num_tokens_global=num_tokens_global,
        num_sequences_global=num_sequences_global,
    )


def clipped_importance_weights(
    logprobs: Tensor,
    old_logprobs: Tensor,
    mask: Tensor,
    eps_low: float = 1.0,
    eps_high: float = 3.0,
) -> Tensor:
    """ŵ = clip(π_θ / π_old, 1 - ε_low, 1 + ε_high), detached, 0 off the mask.

    π_old is the sampling engine's log-prob of the sampled token.  The
    defaults clip to [0, 4] as in the paper and the reference, where only the
    upper bound ever bites.  Returned for the loss and for clip statistics.
    """
    if not 0.0 <= eps_low <= 1.0:
        raise ValueError(f"eps_low must lie in [0, 1] so that 1 - eps_low >= 0, got {eps_low!r}")
    if eps_high < 0.0:
        raise ValueError(f"eps_high must be non-negative, got {eps_high!r}")
    if old_logprobs.shape != logprobs.shape:
        raise ValueError(
            f"old_logprobs shape {tuple(old_logprobs.shape)} "
            f"differs from logprobs {tuple(logprobs.shape)}"
        )
    log_ratio = _masked(logprobs.detach() - old_logprobs.detach(), mask)
    ratio = torch.exp(log_ratio).clamp(1.0 - eps_low, 1.0 + eps_high)
    return _masked(ratio, mask)


def group_token_counts(mask: Tensor, group_ids: Tensor) -> Tensor:
    """For each sequence, the number of generated tokens in its whole group, [B]."""
    lengths = mask.sum(dim=-1).long()
    groups, position = torch.unique(group_ids, return_inverse=True)
    totals = torch.zeros(groups.numel(), dtype=torch.long, device=mask.device)
    return totals.index_add_(0, position, lengths)[position]


def cispo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    mask: Tensor,
    advantages: Tensor,
    group_ids: Tensor,
    *,
    eps_low: float = 1.0,
    eps_high: float = 3.0,
    group_num_tokens: Tensor | None = None,
    num_groups_global: int | None = None,
) -> Tensor:
    """CISPO (paper eq. 5), averaged over the groups of the global batch.

    Per group g: -Σ_{i∈g} Σ_t sg(ŵ_it) Â_i log π(y_it) / Σ_{i∈g} |y_i|.
    The loss is the mean of that over groups.

    ``group_ids`` [B] names each sequence's group.  For gradient accumulation,
    where a micro-batch may hold only part of a group, pass
    ``group_num_tokens`` [B] (each sequence's whole-group token count, from
    :func:`group_token_counts` over the global batch) and
    ``num_groups_global``; by default both are counted in this batch.
    """
    _check_inputs(logprobs, mask, {"advantages": advantages, "group_ids": group_ids})
    weights = clipped_importance_weights(logprobs, old_logprobs, mask, eps_low, eps_high)
    if group_num_tokens is None:
        group_num_tokens = group_token_counts(mask, group_ids)
    elif group_num_tokens.shape != advantages.shape:
        raise ValueError(
            f"group_num_tokens must be [B] = [{logprobs.shape[0]}], "
            f"got shape {tuple(group_num_tokens.shape)}"
        )
    local_groups = int(torch.unique(group_ids).numel())
    num_groups = _global_count(local_groups, num_groups_global, "num_groups_global")
    weighted_sum = (weights * _masked(logprobs, mask)).sum(dim=-1)
    denominators = group_num_tokens.to(logprobs).clamp(min=1)
    per_sequence = advantages.detach().to(logprobs) * weighted_sum / denominators
    return -per_sequence.sum() / num_groups
