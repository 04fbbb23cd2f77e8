"""Training one role's weights through Ray Train: one run per role per iteration.

The driver calls :func:`train` with the examples the objective selected.  The
pieces, in the order they appear in this file:

1. ``validate_examples`` / ``truncate``: reject malformed input on the driver,
   naming the bad example, before any worker starts; cut over-long completions.
2. ``plan_steps``: decide every optimizer step up front (shuffled order,
   whole CISPO groups, the global token / sequence / group counts that
   normalise the loss) and deal each step's examples to the workers.  The
   plan is deterministic given the examples and ``TrainSettings.seed``.
3. ``micro_batch_loss`` / ``run_steps`` (the math): gradient accumulation over
   micro-batches with the losses of :mod:`sgs.method.objectives`, then one clipped
   Adam step per planned step.  The accumulation and the step go through an
   update object: :class:`TorchUpdate` (a plain module, or DDP) or
   :class:`DeepSpeedUpdate` (a DeepSpeed ZeRO-2 engine).  Usable without Ray.
4. ``_train_worker`` (Ray plumbing): on each rank, load the base checkpoint,
   wrap it in DDP or a DeepSpeed engine (``TrainSettings.strategy``), run its
   share of the plan, report metrics and, from rank 0, a Hugging Face
   checkpoint; rank 0 may also send the weights straight into running vLLM
   engines (``weight_target``, :mod:`sgs.machinery.engines.weight_transfer`).
5. ``train``: runs the TorchTrainer, then moves the checkpoint Ray Train
   stored into ``output_dir`` and saves the tokenizer beside it, so
   ``TransformersEngine.load_weights`` can read the directory.

The optimizer is recreated every run (the reference behaviour); with
``optimizer_state="persist"`` its state is saved next to the weights and
restored from the base checkpoint by the next run: ``optimizer.pt`` for DDP,
and for DeepSpeed an engine checkpoint in ``deepspeed/`` holding one ZeRO-2
optimizer shard per rank (the next run must have as many workers).

Both strategies run the same code on CPU (gloo, fp32) and GPU (NCCL, bf16 if
``TrainSettings.bf16``).  On CPU, DeepSpeed's engine would JIT-compile a
shared-memory all-reduce kernel (about a minute on a fresh machine) that only
its inference all-reduce uses; the worker marks that op unavailable, so no
extension is ever built.  The optimizer is a client torch AdamW, never a
DeepSpeed-built one (whose fused kernel is also JIT-compiled).

Examples reach the workers through the Ray object store, one object per
worker: no shared file system is needed for them, and each worker fetches only
its own shard.

Gradient accumulation equals one big batch: each micro-batch loss is divided
by the *global* normaliser of its step, DDP (or ZeRO-2's reduce-scatter)
averages the workers' gradients, and each worker's loss is multiplied by the
world size to turn that average back into the sum over the whole step.
DeepSpeed's own division of the loss by the accumulation steps is switched
off (``scale_wrt_gas=False``): the global normaliser already covers it.
"""

from __future__ import annotations

import glob
import json
import logging
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import ray
import ray.train
import torch
from ray.train import Checkpoint, RunConfig, ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer, get_device, prepare_model
from torch import Tensor
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from sgs.machinery.engines.hf import completion_logprobs
from sgs.machinery.engines.weight_transfer import WeightTarget, send_weights
from sgs.method.objectives import Normalisation, Sample as ObjectiveSample
from sgs.method.objectives import cispo_batches, cispo_loss, conjecturer_loss, weighted_nll_loss

Objective = Literal["reinforce", "reinforce_half", "ei", "cispo", "conjecturer"]
OBJECTIVES: tuple[str, ...] = ("reinforce", "reinforce_half", "ei", "cispo", "conjecturer")
Strategy = Literal["auto", "ddp", "deepspeed"]
STRATEGIES: tuple[str, ...] = ("auto", "ddp", "deepspeed")

logger = logging.getLogger(__name__)

PROBE_FILE = "sgs_probe_logprobs.json"  # rank 0's probe log-probs, inside the new checkpoint until read
OPTIMIZER_FILE = "optimizer.pt"  # DDP's persisted Adam state, inside a checkpoint dir
DEEPSPEED_DIR = "deepspeed"  # DeepSpeed's engine checkpoint (the ZeRO-2 optimizer shards), inside a checkpoint dir
DEEPSPEED_TAG = "state"  # the one tag saved under DEEPSPEED_DIR
STAGING_DIR = ".ray_train"  # Ray Train's storage for the run, inside output_dir, removed on success
PAD_ID = 0  # any id works: padded positions are masked out of the forward pass and the loss


@dataclass(frozen=True)
class TrainExample:
    """One sequence to train on."""

    prompt_ids: list[int]
    """The prompt tokens exactly as the engine tokenised them (``Sample.prompt_token_ids``)."""
    completion_ids: list[int]
    """The sampled completion tokens (``Sample.token_ids``); the loss covers only these."""
    weight: float
    """Loss weight for the weighted-NLL objectives, or the advantage Â for CISPO."""
    old_logprobs: list[float] | None = None
    """Sampler log-probs of the completion tokens (``Sample.logprobs``); required by CISPO."""
    group_id: int | str | None = None
    """The problem this rollout belongs to; CISPO batches keep each group whole.  Required by CISPO."""


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation settings of one run (paper App. C defaults, SPEC §1.3)."""

    lr: float = 3e-6
    """Constant learning rate (3e-6 for REINFORCE½ / EI / SGS, 1e-6 for CISPO)."""
    global_batch_size: int = 32
    """Sequences per optimizer step over all workers, reached by gradient accumulation."""
    micro_batch_size: int = 1
    """Sequences per forward/backward pass on one worker."""
    adam_betas: tuple[float, float] = (0.9, 0.95)
    """Adam β1, β2."""
    adam_eps: float = 1e-8
    """Adam ε."""
    weight_decay: float = 0.0
    """Decoupled weight decay (AdamW); 0 is plain Adam, as in the paper."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this value before each step."""
    epochs: int = 1
    """Passes over the examples; the order is reshuffled every epoch."""
    max_seq_len: int = 8192
    """Prompt + completion limit; longer completions are cut at the end (counted in the metrics)."""
    loss_normalisation: Normalisation = "token_mean"
    """Weighted-NLL normaliser: "token_mean" (reference code) or "sequence_mean" (paper eq. 4)."""
    cispo_eps_low: float = 1.0
    """CISPO clip: importance weights below 1 - eps_low are raised to it."""
    cispo_eps_high: float = 3.0
    """CISPO clip: importance weights above 1 + eps_high are lowered to it ([0, 4] by default)."""
    bf16: bool = False
    """Train in bf16 (the paper does).  DDP: the forward pass runs under bf16 autocast, weights and Adam
    state stay fp32.  DeepSpeed: bf16 weights and activations, with fp32 master weights, fp32 gradient
    accumulation and fp32 Adam state inside the ZeRO optimizer."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory."""
    optimizer_state: Literal["reset", "persist"] = "reset"
    """"reset": a fresh Adam every run (the reference); "persist": restore the Adam state saved
    with the base checkpoint, if any, and save it with the new one."""
    strategy: Strategy = "auto"
    """Data-parallel training: "deepspeed" (DeepSpeed ZeRO stage 2: gradients and Adam state are
    partitioned over the ranks, which a 7B model on 80 GB GPUs needs), "ddp" (torch
    DistributedDataParallel: every rank holds all of them) or "auto": deepspeed with GPUs
    (``use_gpu``), ddp on CPU, where ZeRO-2 saves no memory that matters and costs time (a few
    seconds of start-up per run and about half the training throughput on the tiny model).
    Both give the same plan, losses and weights."""
    num_workers: int = 1
    """Ray Train workers (data-parallel ranks)."""
    cpus_per_worker: float = 1.0
    """CPUs Ray reserves for each worker."""
    use_gpu: bool = False
    """One GPU per worker and NCCL; otherwise CPU and gloo."""
    placement_strategy: str = "PACK"
    """Ray placement group strategy of the workers ("STRICT_PACK": all on one node)."""
    seed: int = 0
    """Seeds the example order and torch on the workers."""

    def __post_init__(self) -> None:
        for name in ("global_batch_size", "micro_batch_size", "epochs", "max_seq_len", "num_workers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"TrainSettings.{name} must be a positive integer, got {value!r}")
        for name in ("lr", "grad_clip", "cpus_per_worker"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"TrainSettings.{name} must be positive and finite, got {value!r}")
        if self.loss_normalisation not in ("token_mean", "sequence_mean"):
            raise ValueError(
                f"TrainSettings.loss_normalisation must be 'token_mean' or 'sequence_mean', "
                f"got {self.loss_normalisation!r}"
            )
        if self.optimizer_state not in ("reset", "persist"):
            raise ValueError(f"TrainSettings.optimizer_state must be 'reset' or 'persist', got {self.optimizer_state!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"TrainSettings.strategy must be 'auto', 'ddp' or 'deepspeed', got {self.strategy!r}")

    @property
    def resolved_strategy(self) -> Literal["ddp", "deepspeed"]:
        """The strategy the run uses: ``strategy``, with "auto" decided by ``use_gpu``."""
        if self.strategy == "auto":
            return "deepspeed" if self.use_gpu else "ddp"
        return self.strategy


@dataclass(frozen=True)
class TrainMetrics:
    """What one training run did."""

    loss: float
    """Mean over optimizer steps of the step's whole-batch loss."""
    grad_norm: float
    """Mean over optimizer steps of the global gradient norm before clipping."""
    num_examples: int
    """Examples trained on (per epoch)."""
    num_tokens: int
    """Completion tokens trained on, over all epochs."""
    num_steps: int
    """Optimizer steps taken."""
    num_truncated: int
    """Examples whose completion was cut to fit max_seq_len."""
    train_seconds: float
    """Wall time of the training steps on rank 0 (model loading and Ray start-up excluded)."""
    tokens_per_second: float
    """num_tokens / train_seconds."""


@dataclass(frozen=True)
class TrainResult:
    """The outcome of :func:`train`."""

    checkpoint_dir: str
    """Hugging Face checkpoint to load next: output_dir, or the base checkpoint when nothing was trained."""
    metrics: TrainMetrics
    """Numbers of the run (all zero when nothing was trained)."""
    probe_logprobs: list[float] | None = None
    """The trained model's log-probs (temperature 1, in the learner's precision) of the probe
    completion given to :func:`train`, to compare with what the engines compute after loading."""
    weights_sent: bool = False
    """Whether the engines of ``weight_target`` received the trained weights directly."""
    weight_transfer_seconds: float = 0.0
    """Wall time of that transfer on rank 0 (0 when nothing was sent)."""
    weight_transfer_error: str | None = None
    """Why the transfer failed, when it was attempted and did (the engines then lack the weights)."""


# --------------------------------------------------------------------------
# Driver side: validation and the step plan
# --------------------------------------------------------------------------


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
    """Sampler log-probs of the completion tokens (CISPO's π_old)."""
    group: int
    """Index of the sequence's group, unique within its step."""
    group_num_tokens: int
    """Completion tokens of the sequence's whole group in its step (CISPO's per-group normaliser)."""


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


def validate_examples(examples: Sequence[TrainExample], objective: str, vocab_size: int) -> None:
    """Raise ValueError naming the first malformed example."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; expected one of {', '.join(OBJECTIVES)}")
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
        if objective == "cispo":
            if example.old_logprobs is None:
                raise ValueError(f"{where}: CISPO needs old_logprobs (the sampler's log-probs)")
            if example.group_id is None:
                raise ValueError(f"{where}: CISPO needs a group_id (the problem of the rollout)")


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


def _step_order(examples: Sequence[TrainExample], objective: str, batch_size: int, rng: random.Random) -> list[list[int]]:
    """Example indices of each optimizer step for one epoch, in a shuffled order."""
    if objective != "cispo":
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
    return [[sample.index for sample in batch] for batch in cispo_batches(samples, batch_size)]


def plan_steps(
    examples: Sequence[TrainExample], objective: str, settings: TrainSettings
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
    workers = settings.num_workers
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


# --------------------------------------------------------------------------
# The math: losses and optimizer steps (pure torch)
# --------------------------------------------------------------------------


def _right_aligned(rows: list[list[float]], width: int) -> Tensor:
    """Rows padded on the left to ``width``, matching completion_logprobs' layout."""
    out = torch.zeros(len(rows), width)
    for index, row in enumerate(rows):
        out[index, width - len(row):] = torch.tensor(row)
    return out


def micro_batch_loss(
    model: torch.nn.Module, batch: list[PlannedSequence], step: WorkerStep, objective: str, settings: TrainSettings
) -> Tensor:
    """This micro-batch's part of its step's loss, normalised by the step's global counts."""
    logprobs, mask = completion_logprobs(
        model, [s.prompt_ids for s in batch], [s.completion_ids for s in batch], PAD_ID
    )
    weights = torch.tensor([s.weight for s in batch], device=logprobs.device)
    if objective == "cispo":
        old = _right_aligned([s.old_logprobs for s in batch], logprobs.shape[1]).to(logprobs.device)
        return cispo_loss(
            logprobs,
            old,
            mask,
            weights,
            torch.tensor([s.group for s in batch], device=logprobs.device),
            eps_low=settings.cispo_eps_low,
            eps_high=settings.cispo_eps_high,
            group_num_tokens=torch.tensor([s.group_num_tokens for s in batch], device=logprobs.device),
            num_groups_global=step.num_groups,
        )
    loss_fn = conjecturer_loss if objective == "conjecturer" else weighted_nll_loss
    return loss_fn(
        logprobs,
        mask,
        weights,
        normalisation=settings.loss_normalisation,
        num_tokens_global=step.num_tokens,
        num_sequences_global=step.num_sequences,
    )


class TorchUpdate:
    """Gradient accumulation and the clipped step for a plain module or a DDP-wrapped one."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, grad_clip: float,
                 bf16_autocast: bool = False) -> None:
        self.model = model
        self.optimizer = optimizer
        self.grad_clip = grad_clip
        self.bf16_autocast = bf16_autocast
        optimizer.zero_grad(set_to_none=True)

    def accumulate(self, last: bool) -> AbstractContextManager[Any]:
        """Context of one micro-batch's forward and backward: DDP all-reduces only after the last."""
        if isinstance(self.model, torch.nn.parallel.DistributedDataParallel) and not last:
            return self.model.no_sync()
        return nullcontext()

    def autocast(self) -> AbstractContextManager[Any]:
        """Context of the forward pass: bf16 autocast if asked for."""
        device_type = next(self.model.parameters()).device.type
        return torch.autocast(device_type, dtype=torch.bfloat16, enabled=self.bf16_autocast)

    def backward(self, loss: Tensor) -> None:
        """Add this micro-batch's gradient to the accumulated one."""
        loss.backward()

    def step(self) -> float:
        """Clip, take the optimizer step, clear the gradients; returns the norm before clipping."""
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(grad_norm)


class DeepSpeedUpdate:
    """Gradient accumulation and the clipped step for a DeepSpeed engine.

    The engine clips (``gradient_clipping`` in its config) and clears the
    gradients itself.  Its accumulation boundary is set explicitly on every
    micro-batch, so steps may hold different numbers of micro-batches (the
    last step of an epoch is usually short).
    """

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def accumulate(self, last: bool) -> AbstractContextManager[Any]:
        """Mark whether this micro-batch closes the step (ZeRO-2 finalises the reduction then)."""
        self.engine.set_gradient_accumulation_boundary(last)
        return nullcontext()

    def autocast(self) -> AbstractContextManager[Any]:
        """No autocast: with bf16 on, the engine's weights are bf16 already."""
        return nullcontext()

    def backward(self, loss: Tensor) -> None:
        """Backward without DeepSpeed's division by the accumulation steps (the loss is globally normalised)."""
        self.engine.backward(loss, scale_wrt_gas=False)

    def step(self) -> float:
        """Take the engine's step; returns the global gradient norm before clipping."""
        self.engine.step()
        return float(self.engine.get_global_grad_norm())


def run_steps(
    model: torch.nn.Module,
    update: TorchUpdate | DeepSpeedUpdate,
    steps: list[WorkerStep],
    objective: str,
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


def make_optimizer(model: torch.nn.Module, settings: TrainSettings) -> torch.optim.Optimizer:
    """AdamW with the run's betas, weight decay and a constant learning rate (no schedule)."""
    return torch.optim.AdamW(
        model.parameters(),
        lr=settings.lr,
        betas=settings.adam_betas,
        eps=settings.adam_eps,
        weight_decay=settings.weight_decay,
    )


def deepspeed_config(settings: TrainSettings, micro_batches_per_step: int) -> dict[str, Any]:
    """The DeepSpeed config of a run: ZeRO stage 2, clipping, bf16 if asked; the optimizer is the client's.

    ``gradient_accumulation_steps`` is nominal (DeepSpeed checks it against the
    batch sizes): :class:`DeepSpeedUpdate` sets every accumulation boundary
    and turns off the division of the loss by it.
    """
    return {
        "train_micro_batch_size_per_gpu": settings.micro_batch_size,
        "gradient_accumulation_steps": micro_batches_per_step,
        "gradient_clipping": settings.grad_clip,
        "zero_optimization": {"stage": 2},
        "bf16": {"enabled": settings.bf16},
        # With bf16 weights, accumulate the micro-batch gradients in fp32 (no effect in fp32).
        "data_types": {"grad_accum_dtype": "fp32"},
    }


def make_deepspeed_engine(
    model: torch.nn.Module, settings: TrainSettings, micro_batches_per_step: int, resume_dir: str | None
) -> Any:
    """Wrap ``model`` in a ZeRO-2 engine with a client AdamW; restore ``resume_dir``'s state if given.

    Call inside an initialised process group (Ray Train's); DeepSpeed reuses
    it.  Restoring loads the engine checkpoint saved by a previous run with
    ``DEEPSPEED_TAG``: this rank's Adam shard and fp32 master weights, so with
    bf16 the run goes on from the fp32 weights that the Hugging Face
    checkpoint beside it holds rounded to bf16.  (The engine checkpoint also
    holds a copy of the module's weights, which DeepSpeed's loader requires.)
    """
    os.environ["DS_ACCELERATOR"] = "cuda" if settings.use_gpu else "cpu"
    import deepspeed
    from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder

    # DeepSpeed's comm backend JIT-builds this CPU kernel (about a minute on a fresh machine)
    # and uses it only for inference all-reduce; marked unavailable, training uses the
    # process group's own collectives and nothing is compiled.
    deepspeed.ops.__compatible_ops__[ShareMemCommBuilder.NAME] = False
    engine, *_ = deepspeed.initialize(
        model=model,
        optimizer=make_optimizer(model, settings),
        config=deepspeed_config(settings, micro_batches_per_step),
    )
    if resume_dir is not None:
        path, _ = engine.load_checkpoint(resume_dir, tag=DEEPSPEED_TAG, load_lr_scheduler_states=False)
        if path is None:
            raise RuntimeError(f"DeepSpeed could not load its checkpoint from {resume_dir}")
    return engine


def _deepspeed_resume_dir(base_checkpoint: str, settings: TrainSettings) -> str | None:
    """The base checkpoint's DeepSpeed state to restore, if persisting and there is one (checked on the driver)."""
    directory = os.path.join(base_checkpoint, DEEPSPEED_DIR)
    persisting = settings.resolved_strategy == "deepspeed" and settings.optimizer_state == "persist"
    if not persisting or not os.path.isdir(directory):
        return None
    shards = glob.glob(os.path.join(directory, DEEPSPEED_TAG, "*_optim_states.pt"))
    if len(shards) != settings.num_workers:
        raise ValueError(
            f"{directory} holds {len(shards)} ZeRO-2 optimizer shards but the run has {settings.num_workers} "
            f"workers; persisted optimizer state needs the same number of workers"
        )
    return os.path.abspath(directory)


# --------------------------------------------------------------------------
# Ray plumbing
# --------------------------------------------------------------------------


def _train_worker(config: dict[str, Any]) -> None:
    """The per-rank training function Ray Train runs."""
    context = ray.train.get_context()
    rank = context.get_world_rank()
    settings = TrainSettings(**config["settings"])
    torch.manual_seed(settings.seed)
    steps: list[WorkerStep] = ray.get(config["plans"][rank])

    model = AutoModelForCausalLM.from_pretrained(config["base_checkpoint"], dtype="auto")
    save_dtype = model.dtype
    if settings.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    persist = settings.optimizer_state == "persist"
    if settings.resolved_strategy == "deepspeed":
        # Move before casting, so that a large model is never held in fp32 in host memory.
        model.to(get_device()).to(torch.bfloat16 if settings.bf16 else torch.float32)
        engine = make_deepspeed_engine(
            model, settings, max(len(step.micro_batches) for step in steps), config["deepspeed_resume_dir"]
        )
        trained: torch.nn.Module = engine
        update: TorchUpdate | DeepSpeedUpdate = DeepSpeedUpdate(engine)
    else:
        trained = prepare_model(model.float())  # train in fp32; DDP when world size > 1
        optimizer = make_optimizer(trained, settings)
        optimizer_file = os.path.join(config["base_checkpoint"], OPTIMIZER_FILE)
        if persist and os.path.isfile(optimizer_file):
            optimizer.load_state_dict(torch.load(optimizer_file, map_location="cpu"))
        update = TorchUpdate(trained, optimizer, settings.grad_clip, bf16_autocast=settings.bf16)

    start = time.perf_counter()
    totals = run_steps(trained, update, steps, config["objective"], settings)
    seconds = time.perf_counter() - start
    metrics: dict[str, Any] = {
        "loss": totals["loss_sum"] / max(len(steps), 1),
        "grad_norm": totals["grad_norm_sum"] / max(len(steps), 1),
        "num_tokens": totals["num_tokens"],
        "num_steps": len(steps),
        "train_seconds": seconds,
    }
    probe = probe_logprobs(model, update, *config["probe"]) if config["probe"] is not None and rank == 0 else None

    with tempfile.TemporaryDirectory() as directory:
        wrote = False
        if settings.resolved_strategy == "deepspeed" and persist:
            # Collective: each rank writes its own optimizer shard, rank 0 the engine's metadata.
            engine.save_checkpoint(os.path.join(directory, DEEPSPEED_DIR), tag=DEEPSPEED_TAG)
            wrote = True
        if rank == 0:
            # `model` is the module DDP or the engine wraps; after the step every rank holds all its weights.
            model.to(save_dtype).save_pretrained(directory)
            if probe is not None:
                # A file, not a metric: Ray Train prints every reported metric.
                with open(os.path.join(directory, PROBE_FILE), "w") as handle:
                    json.dump(probe, handle)
            if settings.resolved_strategy == "ddp" and persist:
                torch.save(optimizer.state_dict(), os.path.join(directory, OPTIMIZER_FILE))
            wrote = True
            if config["weight_target"] is not None:
                metrics.update(_send_to_engines(model, config["weight_target"]))
        # Every rank reports (it is a barrier); Ray merges the ranks' files into one
        # checkpoint directory and keeps rank 0's metrics.
        checkpoint = Checkpoint.from_directory(directory) if wrote else None
        ray.train.report(metrics, checkpoint=checkpoint, checkpoint_dir_name="model")


def _send_to_engines(model: torch.nn.Module, target: WeightTarget) -> dict[str, Any]:
    """Send the trained weights (in the checkpoint's dtype, so the engines get
    exactly what was saved) to the engines; a failure is reported, not raised:
    the checkpoint is written either way and the driver falls back to it."""
    try:
        seconds = send_weights(model, target)
    except Exception as error:
        logger.warning("sending the trained weights to the engines failed (%s); they will load the checkpoint",
                       error)
        return {"weights_sent": False, "weight_transfer_error": f"{type(error).__name__}: {error}"[:1000]}
    return {"weights_sent": True, "weight_transfer_seconds": seconds}


def train(
    examples: Sequence[TrainExample],
    *,
    base_checkpoint: str,
    objective: Objective,
    settings: TrainSettings,
    output_dir: str,
    run_name: str,
    probe: tuple[list[int], list[int]] | None = None,
    weight_target: WeightTarget | None = None,
) -> TrainResult:
    """Train ``base_checkpoint`` on ``examples`` with one Ray Train run; save to ``output_dir``.

    Args:
        examples: the sequences the objective selected (validated here).
        base_checkpoint: Hugging Face checkpoint (directory or hub id) to start from.
        objective: "reinforce", "reinforce_half", "ei" (weighted NLL), "conjecturer"
            (weighted NLL on normalised rewards in [-1, 1]) or "cispo".
        settings: optimisation and scaling settings.
        output_dir: where the new checkpoint goes; owned by this call (files of the same
            name are replaced).  Must differ from base_checkpoint.
        run_name: the Ray Train run's name, shown in the dashboard; unique per role and
            iteration by convention.
        probe: (prompt ids, completion ids) whose log-probs under the trained weights
            come back in ``TrainResult.probe_logprobs``.  Ray's state for the run lives in
            ``output_dir/.ray_train`` and is removed first, so a retried run never
            reloads a stale one.
        weight_target: running engines that get the trained weights directly from
            rank 0 (:mod:`sgs.machinery.engines.weight_transfer`) once training is done;
            ``TrainResult.weights_sent`` says whether they did.

    With ``optimizer_state="persist"`` and DeepSpeed, a base checkpoint that
    holds ``deepspeed/`` must come from a run with the same number of workers
    (ValueError otherwise, before any worker starts).

    An empty ``examples`` list starts no run and returns ``base_checkpoint``
    unchanged with zero metrics: the loop then keeps the current weights.
    Requires Ray to be initialised (``ray.init``) when there is anything to
    train.  Workers load ``base_checkpoint`` themselves, so on a multi-node
    cluster it must be a hub id or on a file system every node sees.
    """
    vocab_size = AutoConfig.from_pretrained(base_checkpoint).vocab_size
    validate_examples(examples, objective, vocab_size)
    if not examples:
        return TrainResult(checkpoint_dir=base_checkpoint, metrics=_zero_metrics())
    output_dir = os.path.abspath(output_dir)
    if os.path.realpath(base_checkpoint) == os.path.realpath(output_dir):
        raise ValueError(f"output_dir {output_dir} is the base checkpoint; write the new weights elsewhere")
    deepspeed_resume_dir = _deepspeed_resume_dir(base_checkpoint, settings)
    truncated = [truncate(example, settings.max_seq_len, index) for index, example in enumerate(examples)]
    num_truncated = sum(a is not b for a, b in zip(examples, truncated))
    plan = plan_steps(truncated, objective, settings)

    staging = os.path.join(output_dir, STAGING_DIR)
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(output_dir, exist_ok=True)
    # Keep the refs alive on the driver for the whole run; each worker fetches its own.
    plan_refs = [ray.put(worker_plan) for worker_plan in plan]
    trainer = TorchTrainer(
        _train_worker,
        train_loop_config={
            "plans": plan_refs,
            "settings": asdict(settings),
            "objective": objective,
            "base_checkpoint": base_checkpoint,
            "deepspeed_resume_dir": deepspeed_resume_dir,
            "probe": probe,
            "weight_target": weight_target,
        },
        scaling_config=ScalingConfig(
            num_workers=settings.num_workers,
            use_gpu=settings.use_gpu,
            resources_per_worker={"CPU": settings.cpus_per_worker, **({"GPU": 1} if settings.use_gpu else {})},
            placement_strategy=settings.placement_strategy,
        ),
        torch_config=TorchConfig(backend="nccl" if settings.use_gpu else "gloo"),
        run_config=RunConfig(name=run_name, storage_path=staging),
    )
    result = trainer.fit()
    if result.checkpoint is None:
        raise RuntimeError(f"Ray Train run {run_name!r} finished without a checkpoint")
    with result.checkpoint.as_directory() as checkpoint_dir:
        for entry in os.listdir(checkpoint_dir):
            target = os.path.join(output_dir, entry)
            if os.path.isdir(target):
                shutil.rmtree(target)
            shutil.move(os.path.join(checkpoint_dir, entry), target)
    shutil.rmtree(staging, ignore_errors=True)
    AutoTokenizer.from_pretrained(base_checkpoint).save_pretrained(output_dir)

    reported = result.metrics
    return TrainResult(
        checkpoint_dir=output_dir,
        metrics=TrainMetrics(
            loss=reported["loss"],
            grad_norm=reported["grad_norm"],
            num_examples=len(examples),
            num_tokens=reported["num_tokens"],
            num_steps=reported["num_steps"],
            num_truncated=num_truncated,
            train_seconds=reported["train_seconds"],
            tokens_per_second=reported["num_tokens"] / max(reported["train_seconds"], 1e-9),
        ),
        probe_logprobs=_read_probe(output_dir) if probe is not None else None,
        weights_sent=reported.get("weights_sent", False),
        weight_transfer_seconds=reported.get("weight_transfer_seconds", 0.0),
        weight_transfer_error=reported.get("weight_transfer_error"),
    )


def _read_probe(checkpoint_dir: str) -> list[float]:
    """The probe log-probs rank 0 saved beside the weights (the file is then removed:
    the checkpoint stays a plain Hugging Face directory)."""
    path = os.path.join(checkpoint_dir, PROBE_FILE)
    with open(path) as handle:
        values = json.load(handle)
    os.remove(path)
    return values


def _zero_metrics() -> TrainMetrics:
    return TrainMetrics(
        loss=0.0,
        grad_norm=0.0,
        num_examples=0,
        num_tokens=0,
        num_steps=0,
        num_truncated=0,
        train_seconds=0.0,
        tokens_per_second=0.0,
    )
