"""The driver side of a training run before any worker starts: reject
malformed examples, naming the bad one (:func:`validate_examples`); cut
over-long completions (:func:`truncate`); and decide every optimizer step up
front (:func:`plan_steps`): shuffled order, whole groups for the objectives
that keep them (``Objective.whole_groups``: CISPO), the global
token / sequence / group counts that normalise the loss, each step's examples
dealt to the workers.  The plan is deterministic given the examples and
``TrainSettings.seed``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sgs.machinery.learner.settings import TrainExample, TrainSettings
from sgs.method.objectives import Sample as ObjectiveSample
from sgs.method.objectives import whole_group_batches
from sgs.method.registry import Objective


@dataclass(frozen=True)
class PlannedSequence:
    """One example as a worker trains on it."""

    prompt_ids: list[int]
    """Prompt tokens (context only, no loss)."""
    completion_ids: list[int]
    """Completion tokens, already truncated to max_seq_len."""
    weight: float
    """Loss weight or advantage; 0 for the filler that keeps an idle worker in the step's all-reduce."""
    old_logprobs: list[float] | None
    """Sampler log-probs of the completion tokens (π_old, for the objectives that need them)."""
    group: int
    """Index of the sequence's group, unique within its step."""
    group_num_tokens: int
    """Completion tokens of the sequence's whole group in its step (a per-group normaliser)."""


@dataclass(frozen=True)
class WorkerStep:
    """One worker's share of one optimizer step, with the step's global normalisers."""

    micro_batches: list[list[PlannedSequence]]
    """This worker's sequences of the step, in forward/backward passes of micro_batch_size."""
    num_tokens: int
    """Completion tokens in the whole step, over all workers."""
    num_sequences: int
    """Sequences in the whole step, over all workers (filler excluded)."""
    num_groups: int
    """Groups in the whole step, over all workers."""


def validate_examples(examples: Sequence[TrainExample], objective: Objective, vocab_size: int) -> None:
    """Raise ValueError naming the first malformed example (or an objective that never trains)."""
    if not objective.trains:
        raise ValueError(f"objective {objective.name!r} has no loss: it never trains")
    for index, example in enumerate(examples):
        where = f"example {index}"
        for name in ("prompt_ids", "completion_ids"):
            ids = getattr(example, name)
            if not ids:
                raise ValueError(f"{where}: {name} is empty")
            bad = [t for t in ids if not isinstance(t, int) or not 0 <= t < vocab_size]
            if bad:
                raise ValueError(f"{where}: {name} holds {bad[0]!r}, not a token id in [0, {vocab_size})")
        if not math.isfinite(example.weight):
            raise ValueError(f"{where}: weight {example.weight!r} is not finite")
        if example.old_logprobs is not None:
            if len(example.old_logprobs) != len(example.completion_ids):
                raise ValueError(
                    f"{where}: old_logprobs has {len(example.old_logprobs)} entries but completion_ids "
                    f"has {len(example.completion_ids)} tokens"
                )
            if not all(math.isfinite(lp) and lp <= 0.0 for lp in example.old_logprobs):
                raise ValueError(f"{where}: old_logprobs must be finite log-probabilities (<= 0)")
        if objective.needs_old_logprobs and example.old_logprobs is None:
            raise ValueError(f"{where}: objective {objective.name!r} needs old_logprobs (the sampler's log-probs)")
        if objective.whole_groups and example.group_id is None:
            raise ValueError(f"{where}: objective {objective.name!r} trains on whole groups and needs a group_id "
                             "(the problem of the rollout)")


def truncate(example: TrainExample, max_seq_len: int, index: int = 0) -> TrainExample:
    """Cut the completion's end so that prompt + completion fits max_seq_len."""
    room = max_seq_len - len(example.prompt_ids)
    if room < 1:
        raise ValueError(
            f"example {index}: its prompt has {len(example.prompt_ids)} tokens, leaving no room "
            f"for a completion under max_seq_len={max_seq_len}"
        )
    if len(example.completion_ids) <= room:
        return example
    old = None if example.old_logprobs is None else example.old_logprobs[:room]
    return replace(example, completion_ids=example.completion_ids[:room], old_logprobs=old)


def _step_order(examples: Sequence[TrainExample], objective: Objective, batch_size: int,
                rng: random.Random) -> list[list[int]]:
    """Example indices of each optimizer step for one epoch, in a shuffled order."""
    if not objective.whole_groups:
        order = list(range(len(examples)))
        rng.shuffle(order)
        return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
    # Shuffle whole groups, then let sgs.method.objectives pack them without splitting any.
    groups: dict[Any, int] = {}
    members = [groups.setdefault(example.group_id, len(groups)) for example in examples]
    group_order = list(range(len(groups)))
    rng.shuffle(group_order)
    position = {group: rank for rank, group in enumerate(group_order)}
    ordered = sorted(range(len(examples)), key=lambda i: (position[members[i]], i))
    samples = [ObjectiveSample(index=i, weight=examples[i].weight, group=members[i]) for i in ordered]
    return [[sample.index for sample in batch] for batch in whole_group_batches(samples, batch_size)]


def plan_steps(
    examples: Sequence[TrainExample], objective: Objective, settings: TrainSettings
) -> list[list[WorkerStep]]:
    """The whole run as ``plan[worker][step]``; examples must be validated and truncated.

    A step's sequences are dealt to the workers round-robin.  A worker with
    fewer than the first worker is topped up with zero-weight copies of the
    step's first sequence: they contribute nothing, but every worker runs the
    same number of micro-batches, because every rank must join each gradient
    collective (DDP's all-reduce after the last micro-batch, ZeRO-2's
    reduce-scatter after every micro-batch).
    """
    rng = random.Random(settings.seed)
    workers = settings.learner_workers
    plan: list[list[WorkerStep]] = [[] for _ in range(workers)]
    for _ in range(settings.epochs):
        for indices in _step_order(examples, objective, settings.global_batch_size, rng):
            step_examples = [examples[i] for i in indices]
            group_of: dict[Any, int] = {}
            groups = [group_of.setdefault(e.group_id, len(group_of)) for e in step_examples]
            group_tokens = [0] * len(group_of)
            for group, example in zip(groups, step_examples):
                group_tokens[group] += len(example.completion_ids)
            sequences = [
                PlannedSequence(e.prompt_ids, e.completion_ids, e.weight, e.old_logprobs, g, group_tokens[g])
                for e, g in zip(step_examples, groups)
            ]
            filler = replace(sequences[0], weight=0.0)
            width = len(sequences[0::workers])  # round-robin: the first worker's share is the largest
            for worker in range(workers):
                share = sequences[worker::workers]
                share = share + [filler] * (width - len(share))
                micro = settings.micro_batch_size
                plan[worker].append(
                    WorkerStep(
                        micro_batches=[share[start:start + micro] for start in range(0, len(share), micro)],
                        num_tokens=sum(group_tokens),
                        num_sequences=len(sequences),
                        num_groups=len(group_tokens),
                    )
                )
    return plan
