"""How the workers' model is wrapped and stepped: a plain module or DDP
(:class:`TorchUpdate`, with a client AdamW from :func:`make_optimizer`) or a
DeepSpeed ZeRO-2 engine (:class:`DeepSpeedUpdate`, :func:`make_deepspeed_engine`),
chosen by ``TrainSettings.strategy``.

Both run the same code on CPU (gloo, fp32) and GPU (NCCL, bf16 if
``TrainSettings.bf16``).  On CPU, DeepSpeed's engine would JIT-compile a
shared-memory all-reduce kernel (about a minute on a fresh machine) that only
its inference all-reduce uses; it is marked unavailable, so no extension is
ever built.  The optimizer is a client torch AdamW, never a DeepSpeed-built
one (whose fused kernel is also JIT-compiled).  DeepSpeed's own division of
the loss by the accumulation steps is switched off (``scale_wrt_gas=False``):
the plan's global normaliser already covers it.
"""

from __future__ import annotations

import glob
import os
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from torch import Tensor

from sgs.machinery.learner.settings import DEEPSPEED_DIR, DEEPSPEED_TAG, TrainSettings


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


def make_optimizer(model: torch.nn.Module, settings: TrainSettings) -> torch.optim.Optimizer:
    """AdamW with the run's betas, weight decay and a constant learning rate (no schedule)."""
    return torch.optim.AdamW(
        model.parameters(),
        lr=settings.learning_rate,
        betas=(settings.adam_beta1, settings.adam_beta2),
        eps=settings.adam_epsilon,
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
        "gradient_clipping": settings.grad_clip_norm,
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
    os.environ["DS_ACCELERATOR"] = "cuda" if settings.use_gpu and not settings.simulated_gpus else "cpu"
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


def find_deepspeed_resume_dir(base_checkpoint: str, settings: TrainSettings) -> str | None:
    """The base checkpoint's DeepSpeed state to restore, if persisting and there is one (checked on the driver)."""
    directory = os.path.join(base_checkpoint, DEEPSPEED_DIR)
    persisting = settings.resolved_strategy == "deepspeed" and settings.optimizer_state == "persist"
    if not persisting or not os.path.isdir(directory):
        return None
    shards = glob.glob(os.path.join(directory, DEEPSPEED_TAG, "*_optim_states.pt"))
    if len(shards) != settings.learner_workers:
        raise ValueError(
            f"{directory} holds {len(shards)} ZeRO-2 optimizer shards but the run has {settings.learner_workers} "
            f"workers; persisted optimizer state needs the same number of workers"
        )
    return os.path.abspath(directory)
