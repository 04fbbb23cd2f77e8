"""The math of a training run (pure torch, usable without Ray): the loss of
one micro-batch with its objective's loss (:mod:`sgs.method.registry`), gradient
accumulation over a planned step's micro-batches and one clipped Adam step
per planned step (:func:`run_steps`), and the probe log-probs of the trained
weights.

Gradient accumulation equals one big batch: each micro-batch loss is divided
by the *global* normaliser of its step, DDP (or ZeRO-2's reduce-scatter)
averages the workers' gradients, and each worker's loss is multiplied by the
world size to turn that average back into the sum over the whole step.
"""

from __future__ import annotations

import torch
from torch import Tensor

from sgs.machinery.engines.hf import completion_logprobs
from sgs.machinery.learner.plan import PlannedSequence, WorkerStep
from sgs.machinery.learner.settings import PAD_ID, TrainSettings
from sgs.machinery.learner.strategy import DeepSpeedUpdate, TorchUpdate
from sgs.method.registry import LossBatch, Objective


def _right_aligned(rows: list[list[float]], width: int) -> Tensor:
    """Rows padded on the left to ``width``, matching completion_logprobs' layout."""
    out = torch.zeros(len(rows), width)
    for index, row in enumerate(rows):
        out[index, width - len(row):] = torch.tensor(row)
    return out


def micro_batch_loss(
    model: torch.nn.Module, batch: list[PlannedSequence], step: WorkerStep, objective: Objective,
    settings: TrainSettings
) -> Tensor:
    """This micro-batch's part of its step's loss, normalised by the step's global counts."""
    logprobs, mask = completion_logprobs(
        model, [s.prompt_ids for s in batch], [s.completion_ids for s in batch], PAD_ID
    )
    device = logprobs.device
    old = None
    if objective.needs_old_logprobs:
        old = _right_aligned([s.old_logprobs for s in batch], logprobs.shape[1]).to(device)
    inputs = LossBatch(
        logprobs=logprobs,
        mask=mask,
        weights=torch.tensor([s.weight for s in batch], device=device),
        old_logprobs=old,
        group_ids=torch.tensor([s.group for s in batch], device=device),
        group_num_tokens=torch.tensor([s.group_num_tokens for s in batch], device=device),
        num_tokens=step.num_tokens,
        num_sequences=step.num_sequences,
        num_groups=step.num_groups,
    )
    return objective.loss(inputs, settings)


def run_steps(
    model: torch.nn.Module,
    update: TorchUpdate | DeepSpeedUpdate,
    steps: list[WorkerStep],
    objective: Objective,
    settings: TrainSettings,
) -> dict[str, float]:
    """Take one optimizer step per planned step; returns summed loss and grad norm, and tokens.

    ``model`` is what the forward pass calls: a plain module (one process), a
    DDP-wrapped one or a DeepSpeed engine (one call per rank, inside an
    initialised process group); ``update`` accumulates its gradients and steps.
    """
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    world_size = torch.distributed.get_world_size() if distributed else 1
    device = next(model.parameters()).device
    model.train()
    loss_total = grad_norm_total = 0.0
    tokens = 0
    for step in steps:
        step_loss = torch.zeros((), dtype=torch.float64, device=device)
        for index, batch in enumerate(step.micro_batches):
            with update.accumulate(last=index == len(step.micro_batches) - 1):
                with update.autocast():
                    loss = micro_batch_loss(model, batch, step, objective, settings)
                update.backward(loss * world_size)  # the ranks' gradients are averaged; the step loss is their sum
            step_loss += loss.detach().double()
        if distributed:
            torch.distributed.all_reduce(step_loss)
        grad_norm_total += update.step()
        loss_total += float(step_loss)
        tokens += step.num_tokens
    return {"loss_sum": loss_total, "grad_norm_sum": grad_norm_total, "num_tokens": tokens}


@torch.no_grad()
def probe_logprobs(model: torch.nn.Module, update: TorchUpdate | DeepSpeedUpdate, prompt_ids: list[int],
                   completion_ids: list[int]) -> list[float]:
    """Log-probs (temperature 1) of a fixed completion under the trained weights, computed
    the way the training forward pass computes them (same precision and autocast)."""
    model.eval()
    with update.autocast():
        logprobs, mask = completion_logprobs(model, [prompt_ids], [completion_ids], PAD_ID, 1.0)
    return logprobs[0][mask[0]].tolist()
