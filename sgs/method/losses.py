"""Solver and Conjecturer objectives, their second half: the losses, over
per-token log-probs of the generated tokens (the first half, which sequences
to train on, is :mod:`sgs.method.objectives`).

Every loss takes ``logprobs`` [B, T] (the policy's log-prob of each sampled
token, with grad) and ``mask`` [B, T] (1 on generated tokens, 0 on prompt and
padding).  All objectives are reward-weighted log-likelihood: no KL term, no
entropy bonus.  Losses accept the size of the *global* batch (tokens,
sequences or groups), so that summing the gradients of micro-batches gives
exactly the gradient of the whole batch in one piece (gradient accumulation).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

Normalisation = Literal["token_mean", "sequence_mean"]


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
