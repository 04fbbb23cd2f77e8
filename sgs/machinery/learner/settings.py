"""What a training run is given and gives back: the examples
(:class:`TrainExample`), the settings (:class:`TrainSettings`, one field per
knob, each documented), the metrics and result, and the names of the files a
run leaves inside a checkpoint directory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from sgs.config import LearnerStrategy, OptimizerState, PlacementStrategy
from sgs.method.losses import Normalisation

PROBE_FILE = "sgs_probe_logprobs.json"  # rank 0's probe log-probs, inside the new checkpoint until read
PLACEMENT_FILE = "sgs_placement.json"  # every rank's placement, inside the new checkpoint until read
OPTIMIZER_FILE = "optimizer.pt"  # DDP's persisted Adam state, inside a checkpoint dir
DEEPSPEED_DIR = "deepspeed"  # DeepSpeed's engine checkpoint (the ZeRO-2 optimizer shards), inside a checkpoint dir
DEEPSPEED_TAG = "state"  # the one tag saved under DEEPSPEED_DIR
STAGING_DIR = ".staging"  # the checkpoint as the workers write it, inside output_dir, until the driver moves it
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
    """Sampler log-probs of the completion tokens (``Sample.logprobs``); required by the objectives
    that need them (``Objective.needs_old_logprobs``: CISPO)."""
    group_id: int | str | None = None
    """The problem this rollout belongs to; required by the objectives whose optimizer steps keep
    each group whole (``Objective.whole_groups``: CISPO)."""


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation settings of one run (paper App. C defaults, SPEC §1.3)."""

    learning_rate: float = 3e-6
    """Constant learning rate (3e-6 for REINFORCE½ / EI / SGS, 1e-6 for CISPO)."""
    global_batch_size: int = 32
    """Sequences per optimizer step over all workers, reached by gradient accumulation."""
    micro_batch_size: int = 1
    """Sequences per forward/backward pass on one worker."""
    adam_beta1: float = 0.9
    """Adam β1."""
    adam_beta2: float = 0.95
    """Adam β2."""
    adam_epsilon: float = 1e-8
    """Adam ε."""
    weight_decay: float = 0.0
    """Decoupled weight decay (AdamW); 0 is plain Adam, as in the paper."""
    grad_clip_norm: float = 1.0
    """Clip the global gradient norm to this value before each step."""
    epochs: int = 1
    """Passes over the examples; the order is reshuffled every epoch."""
    max_seq_len: int = 8192
    """Prompt + completion limit; longer completions are cut at the end (counted in the metrics)."""
    # The losses read the next three (sgs.method.registry.LossSettings).
    loss_normalisation: Normalisation = "token_mean"
    """Weighted-NLL normaliser: "token_mean" (reference code) or "sequence_mean" (paper eq. 4)."""
    cispo_ratio_min: float = 0.0
    """CISPO clip: importance weights below this (1 - eps_low) are raised to it."""
    cispo_ratio_max: float = 4.0
    """CISPO clip: importance weights above this (1 + eps_high) are lowered to it."""
    bf16: bool = False
    """Train in bf16 (the paper does).  DDP: the forward pass runs under bf16 autocast, weights and Adam
    state stay fp32.  DeepSpeed: bf16 weights and activations, with fp32 master weights, fp32 gradient
    accumulation and fp32 Adam state inside the ZeRO optimizer."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory."""
    optimizer_state: OptimizerState = OptimizerState.reset
    """"reset": a fresh Adam for every job (the reference); "persist": restore the Adam state saved
    with the base checkpoint, if any, and save it with the new one."""
    strategy: LearnerStrategy = LearnerStrategy.auto
    """Data-parallel training: "deepspeed" (DeepSpeed ZeRO stage 2: gradients and Adam state are
    partitioned over the ranks, which a 7B model on 80 GB GPUs needs), "ddp" (torch
    DistributedDataParallel: every rank holds all of them) or "auto": deepspeed with GPUs
    (``use_gpu``), ddp on CPU, where ZeRO-2 saves no memory that matters and costs time (a few
    seconds of start-up per run and about half the training throughput on the tiny model).
    Both give the same plan, losses and weights."""
    # The placement fields carry the names of their resources.* settings.
    learner_workers: int = 1
    """Ray Train workers (data-parallel ranks)."""
    cpus_per_learner_worker: float = 1.0
    """CPUs Ray reserves for each worker."""
    use_gpu: bool = False
    """One GPU per worker and NCCL; otherwise CPU and gloo."""
    simulated_gpus: bool = False
    """With ``use_gpu``: the GPUs are logical ones (``resources.simulated_gpus``).  Ray reserves and
    assigns one per worker as for real GPUs, but the workers compute on the CPU over gloo."""
    learner_placement: PlacementStrategy = PlacementStrategy.PACK
    """Ray placement group strategy of the workers ("STRICT_PACK": all on one node)."""
    learner_restarts: int = 2
    """Times a run that Ray lost its workers in (a worker process or node died, the placement group
    was removed) is started again from its base checkpoint; errors the training code raises end the
    run at once."""
    learner_start_timeout_s: float = 1800.0
    """A call whose run's workers have not started within this many seconds (Ray could not place them:
    the resources are held or do not exist) stops with an error naming what was asked and what Ray has
    free; Ray Train itself would retry the placement for ever."""
    seed: int = 0
    """Seeds the example order and torch on the workers."""

    def __post_init__(self) -> None:
        for name in ("global_batch_size", "micro_batch_size", "epochs", "max_seq_len", "learner_workers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"TrainSettings.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.learner_restarts, int) or self.learner_restarts < 0:
            raise ValueError(f"TrainSettings.learner_restarts must be a non-negative integer, "
                             f"got {self.learner_restarts!r}")
        for name in ("learning_rate", "grad_clip_norm", "cpus_per_learner_worker", "learner_start_timeout_s"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"TrainSettings.{name} must be positive and finite, got {value!r}")
        if self.loss_normalisation not in ("token_mean", "sequence_mean"):
            raise ValueError(
                f"TrainSettings.loss_normalisation must be 'token_mean' or 'sequence_mean', "
                f"got {self.loss_normalisation!r}"
            )
        # The config's Enums, which also take their plain strings (TrainSettings(strategy="ddp")).
        for name, allowed in (("optimizer_state", OptimizerState), ("strategy", LearnerStrategy)):
            value = getattr(self, name)
            if value not in tuple(allowed):
                raise ValueError(f"TrainSettings.{name} must be one of {', '.join(allowed)}, got {value!r}")

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
    placement: list[dict[str, Any]] | None = None
    """Per rank: its node, the GPUs Ray assigned it, CUDA_VISIBLE_DEVICES, the device it
    computed on, the process group's backend and the strategy (None when nothing was trained)."""
    restarts: int = 0
    """Times the run was started again after Ray lost its workers (``TrainSettings.learner_restarts``);
    the same for every job of one run."""
