"""The per-rank function of the learner's Ray Train run (:func:`serve_jobs`):
take each batch of jobs the driver posts on the run's job board
(:mod:`sgs.machinery.learner.board`) and, per job, load the base checkpoint,
wrap it for the strategy (:mod:`sgs.machinery.learner.strategy`), run this
rank's share of the plan (:mod:`sgs.machinery.learner.steps`), and write the
checkpoint into the job's staging directory: rank 0 the Hugging Face weights,
every rank its optimizer shard under DeepSpeed.  Rank 0 may also send the
weights straight into running vLLM engines
(:mod:`sgs.machinery.engines.weight_transfer`), and marks the job finished
on the board once every rank has written its part.

With ``optimizer_state="persist"`` the optimizer's state is saved next to the
weights: ``optimizer.pt`` for DDP, and for DeepSpeed an engine checkpoint in
``deepspeed/`` holding one ZeRO-2 optimizer shard per rank.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import time
from typing import Any

import ray
import ray.train
import torch
from ray.train.torch import get_device, prepare_model
from transformers import AutoModelForCausalLM

from sgs.machinery.engines.weight_transfer import WeightTarget, send_weights
from sgs.machinery.learner.plan import WorkerStep
from sgs.machinery.learner.settings import (DEEPSPEED_DIR, DEEPSPEED_TAG, OPTIMIZER_FILE, PLACEMENT_FILE, PROBE_FILE,
                                            TrainSettings)
from sgs.machinery.learner.steps import probe_logprobs, run_steps
from sgs.machinery.learner.strategy import DeepSpeedUpdate, TorchUpdate, make_deepspeed_engine, make_optimizer

logger = logging.getLogger(__name__)


def _rank_placement(settings: TrainSettings, device: torch.device) -> dict[str, Any]:
    """Where this rank runs and what it computes on (``TrainResult.placement``)."""
    runtime = ray.get_runtime_context()
    return {"rank": ray.train.get_context().get_world_rank(), "node_id": runtime.get_node_id(),
            "ray_gpu_ids": [str(i) for i in runtime.get_accelerator_ids().get("GPU", [])],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "device": str(device),
            "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
            "strategy": settings.resolved_strategy}


#: How long an idle rank waits on the board before asking again, in seconds.
BOARD_WAIT_S = 5.0


def serve_jobs(config: dict[str, Any]) -> None:
    """The per-rank training function Ray Train runs: every batch of jobs the
    board (``config["board"]``) posts, each job in turn, until the board
    closes.  A board that is gone (its driver ended) raises here, which ends
    the run."""
    board = config["board"]
    rank = ray.train.get_context().get_world_rank()
    seen = 0
    while True:
        posted = ray.get(board.next_batch.remote(seen, BOARD_WAIT_S))
        if posted is None:
            continue
        seen, jobs = posted
        if jobs is None:
            return
        for job in jobs:
            metrics = _train_job(job)
            if rank == 0:
                ray.get(board.finish.remote(seen, job["job"], metrics))
            # The next model needs the memory this one held (its optimizer state above all),
            # and an idle learner should hold as little as it can beside the engines.
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


def _train_job(config: dict[str, Any]) -> dict[str, Any]:
    """Train one job's model, write its checkpoint into the job's staging
    directory; its metrics (rank 0's are the ones the driver reads)."""
    context = ray.train.get_context()
    rank = context.get_world_rank()
    settings = TrainSettings(**config["settings"])
    # A simulated GPU is reserved, not computed on.
    device = torch.device("cpu") if settings.simulated_gpus else get_device()
    placement = [_rank_placement(settings, device)] * context.get_world_size()
    if torch.distributed.is_initialized() and context.get_world_size() > 1:
        torch.distributed.all_gather_object(placement, placement[rank])
    torch.manual_seed(settings.seed)
    steps: list[WorkerStep] = ray.get(config["plans"][rank])

    model = AutoModelForCausalLM.from_pretrained(config["base_checkpoint"], dtype="auto")
    save_dtype = model.dtype
    if settings.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    persist = settings.optimizer_state == "persist"
    if settings.resolved_strategy == "deepspeed":
        # Move before casting, so that a large model is never held in fp32 in host memory.
        model.to(device).to(torch.bfloat16 if settings.bf16 else torch.float32)
        engine = make_deepspeed_engine(
            model, settings, max(len(step.micro_batches) for step in steps), config["deepspeed_resume_dir"]
        )
        trained: torch.nn.Module = engine
        update: TorchUpdate | DeepSpeedUpdate = DeepSpeedUpdate(engine)
    else:
        trained = prepare_model(model.float(), move_to_device=device)  # train in fp32; DDP when world size > 1
        optimizer = make_optimizer(trained, settings)
        optimizer_file = os.path.join(config["base_checkpoint"], OPTIMIZER_FILE)
        if persist and os.path.isfile(optimizer_file):
            optimizer.load_state_dict(torch.load(optimizer_file, map_location="cpu"))
        update = TorchUpdate(trained, optimizer, settings.grad_clip_norm, bf16_autocast=settings.bf16)

    start = time.perf_counter()
    totals = run_steps(trained, update, steps, config["objective"], settings)
    seconds = time.perf_counter() - start
    metrics: dict[str, Any] = {
        "job": config["job"],
        "loss": totals["loss_sum"] / max(len(steps), 1),
        "grad_norm": totals["grad_norm_sum"] / max(len(steps), 1),
        "num_tokens": totals["num_tokens"],
        "num_steps": len(steps),
        "train_seconds": seconds,
    }
    probe = probe_logprobs(model, update, *config["probe"]) if config["probe"] is not None and rank == 0 else None

    staging = config["staging_dir"]
    if settings.resolved_strategy == "deepspeed" and persist:
        # Collective: each rank writes its own optimizer shard, rank 0 the engine's metadata.
        engine.save_checkpoint(os.path.join(staging, DEEPSPEED_DIR), tag=DEEPSPEED_TAG)
    if rank == 0:
        # `model` is the module DDP or the engine wraps; after the step every rank holds all its weights.
        model.to(save_dtype).save_pretrained(staging)
        with open(os.path.join(staging, PLACEMENT_FILE), "w") as handle:
            json.dump(placement, handle)
        if probe is not None:
            with open(os.path.join(staging, PROBE_FILE), "w") as handle:
                json.dump(probe, handle)
        if settings.resolved_strategy == "ddp" and persist:
            torch.save(optimizer.state_dict(), os.path.join(staging, OPTIMIZER_FILE))
        if config["weight_target"] is not None:
            metrics.update(_send_to_engines(model, config["weight_target"]))
    if torch.distributed.is_initialized() and context.get_world_size() > 1:
        torch.distributed.barrier()  # every rank's part is written before rank 0 says the job is done
    if settings.resolved_strategy == "deepspeed":
        engine.destroy()
    return metrics


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
