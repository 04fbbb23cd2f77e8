"""Direct weight transfer: the learner sends new weights straight into running vLLM engines.

vLLM (0.32) has a weight-transfer API for RL trainers: each engine worker
joins a process group with the trainer (``init_weight_transfer_engine``),
and a weight update is ``start_weight_update`` / ``update_weights`` /
``finish_weight_update``, during which the trainer broadcasts every
parameter and the worker loads it in place (vLLM's layerwise reload).  No
file is read, no engine is rebuilt.  vLLM ships the transports for GPUs
("nccl", "ipc", ...); :mod:`sgs.machinery.engines.gloo_transfer` adds "gloo", the same
protocol between CPU processes, so the whole path runs and is tested on a
CPU machine.  On GPU engines the backend is vLLM's own "nccl"; everything
here is shared.

The pieces:

* :class:`EngineWeightClient`: vLLM's ``VLLMWeightSyncClient`` protocol over
  one role's engine actors.  vLLM's NCCL trainer hands every worker the same
  init info (``rank_offset`` 1, meant for one data-parallel engine); our
  engines are separate vLLM instances, so the client gives engine i the
  ranks after engine i - 1's.
* :class:`WeightTarget` and :func:`send_weights`: what the learner's rank 0
  gets from the driver (the actors, the policy version the weights will
  carry) and the call that sends a model to them.

The learner still writes its Hugging Face checkpoint: it is what a resumed
run and a restarted engine load.  If a transfer fails (an engine died, a
timeout), the driver rebuilds the role's engines on that checkpoint instead
(:mod:`sgs.loop`), so a failed transfer costs time, never weights.
"""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ray
import torch

if TYPE_CHECKING:
    from ray.actor import ActorHandle

log = logging.getLogger(__name__)

#: Transports: "gloo" between CPU processes (sgs.machinery.engines.gloo_transfer), "nccl" between GPUs
#: (vLLM's), "ipc" between processes on one GPU (vLLM's CUDA IPC: NCCL cannot join two ranks on one device).
BACKENDS = ("gloo", "nccl", "ipc")


def register_gloo_backend() -> None:
    """Make "gloo" a backend of vLLM's weight-transfer factories (see
    :mod:`sgs.machinery.engines.gloo_transfer`; imported here only when used, as vLLM
    is an optional dependency)."""
    from sgs.machinery.engines.gloo_transfer import register

    register()


class EngineWeightClient:
    """vLLM's ``VLLMWeightSyncClient`` protocol over one role's engine actors
    (:class:`~sgs.machinery.engines.actor.EngineActor` with a vLLM engine).

    Every call goes to every actor and waits for all.  Each engine has one
    worker (no tensor parallelism), so engine i is rank ``rank_offset + i``.
    ``finish_weight_update`` labels the new weights ``policy_version``.
    """

    def __init__(self, actors: list[ActorHandle], policy_version: int) -> None:
        self.actors = list(actors)
        self.policy_version = policy_version

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        ray.get([actor.init_weight_transfer.remote(info)
                 for actor, info in zip(self.actors, engine_init_infos(init_info, len(self.actors)))])

    def start_weight_update(self) -> None:
        ray.get([actor.start_weight_update.remote() for actor in self.actors])

    def update_weights(self, update_info: dict[str, Any] | list[dict[str, Any]]) -> None:
        ray.get([actor.update_weights.remote(update_info) for actor in self.actors])

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        ray.get([actor.finish_weight_update.remote(self.policy_version) for actor in self.actors])

    def shutdown_weight_transfer_engine(self) -> None:
        ray.get([actor.shutdown_weight_transfer.remote() for actor in self.actors])


def engine_init_infos(init_info: dict[str, Any], engines: int) -> list[dict[str, Any]]:
    """Each engine's copy of the trainer's init info: engine i joins a process group as the ranks after
    engine i - 1's (``rank_offset``); transports without a group (CUDA IPC) hand every engine the same."""
    if "rank_offset" not in init_info:
        return [dict(init_info) for _ in range(engines)]
    first = init_info["rank_offset"]
    return [dict(init_info, rank_offset=first + i) for i in range(engines)]


@dataclass(frozen=True)
class WeightTarget:
    """Where the learner sends the weights it trained (picklable: it travels
    to the learner's rank 0 in the train loop's config)."""

    backend: str
    """"gloo" (CPU engines), "nccl" (GPU engines on other GPUs than the sender's) or "ipc" (GPU engines on
    the sender's GPU)."""
    actors: list[Any]
    """The role's engine actors, by index."""
    policy_version: int
    """The version label the engines give the new weights."""
    timeout_s: float = 300.0
    """How long the rendezvous and each broadcast may wait for a peer (gloo;
    vLLM's NCCL transport has no such limit)."""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown weight transfer backend {self.backend!r}; available: {', '.join(BACKENDS)}")
        if not self.actors:
            raise ValueError("a weight target needs at least one engine actor")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s!r}")


def send_weights(model: torch.nn.Module, target: WeightTarget) -> float:
    """Send ``model``'s parameters to the target's engines; returns the seconds it took.

    Called on the learner's rank 0 once training is done (with ZeRO-2 or DDP
    every rank holds all parameters, so one sender suffices).  Raises when
    any engine does not take the weights; the caller then falls back to the
    checkpoint.
    """
    from vllm.distributed.weight_transfer.base import ModuleSource
    from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory

    start = time.perf_counter()
    init_info = trainer_init_info(target, ray.util.get_node_ip_address())
    client = EngineWeightClient(target.actors, target.policy_version)
    engine = WeightTransferTrainerFactory.trainer_init(init_info, client=client, source=ModuleSource(model))
    try:
        engine.send_weights()
    finally:
        engine.shutdown()
        try:
            client.shutdown_weight_transfer_engine()
        except Exception as error:  # the update itself succeeded or already raised
            log.warning("engines did not close their weight-transfer groups: %s", error)
    return time.perf_counter() - start


def trainer_init_info(target: WeightTarget, address: str) -> Any:
    """vLLM's trainer-side init info for ``target``: the learner (rank 0, at
    ``address``) and one worker per engine (CUDA IPC needs no address: the
    engines open the sender's tensors on their common GPU)."""
    world_size = 1 + len(target.actors)
    if target.backend == "gloo":
        from sgs.machinery.engines.gloo_transfer import GlooTrainerInitInfo

        register_gloo_backend()
        return GlooTrainerInitInfo(rank=0, master_address=address, world_size=world_size, timeout_s=target.timeout_s)
    if target.backend == "ipc":
        from vllm.distributed.weight_transfer.ipc_engine import IPCTrainerInitInfo

        return IPCTrainerInitInfo(rank=0)
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

    return NCCLTrainerInitInfo(rank=0, master_address=address, master_port=_free_port(), world_size=world_size)


def _free_port() -> int:
    """A TCP port free right now (vLLM's NCCL rendezvous needs one named in advance)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]
