"""Direct weight transfer: the learner sends new weights straight into running vLLM engines.

vLLM (0.32) has a weight-transfer API for RL trainers: each engine worker
joins a process group with the trainer (``init_weight_transfer_engine``),
and a weight update is ``start_weight_update`` / ``update_weights`` /
``finish_weight_update``, during which the trainer broadcasts every
parameter and the worker loads it in place (vLLM's layerwise reload).  No
file is read, no engine is rebuilt.  vLLM ships the transports for GPUs
("nccl", "ipc", ...); this module adds "gloo", the same protocol over a
gloo process group between CPU processes, registered into vLLM's factories
(:func:`register_gloo_backend`), so the whole path runs and is tested on a
CPU machine.  On GPU engines the backend is vLLM's own "nccl"; everything
else here is shared.

The pieces:

* :class:`GlooWeightTransferEngine` (inside the engine, vLLM calls it) and
  :class:`GlooTrainerWeightTransferEngine` (inside the learner): the gloo
  transport.  One broadcast per parameter, from the trainer (rank 0).
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

import ray
import torch
from torch.distributed import BroadcastOptions, PrefixStore, TCPStore

if TYPE_CHECKING:
    from ray.actor import ActorHandle

log = logging.getLogger(__name__)

#: Transports: "gloo" between CPU processes (this module), "nccl" between GPUs (vLLM's).
BACKENDS = ("gloo", "nccl")

# vLLM's base classes are imported lazily (vLLM is an optional dependency);
# the gloo classes below are built the first time they are needed.
_GLOO_CLASSES: dict[str, type] = {}


def register_gloo_backend() -> None:
    """Make "gloo" a backend of vLLM's weight-transfer factories (idempotent).

    Call it in the process that builds the vLLM engine's workers (the engine
    actor: on a CPU, vLLM runs its worker in that process) and in the trainer.
    """
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory, WeightTransferTrainerFactory

    engine_cls, trainer_cls = _gloo_classes()
    if "gloo" not in WeightTransferEngineFactory._registry:
        WeightTransferEngineFactory.register_engine("gloo", engine_cls)
    if "gloo" not in WeightTransferTrainerFactory._registry:
        WeightTransferTrainerFactory.register_engine("gloo", trainer_cls)


def _gloo_group(store: Any, rank: int, world_size: int, timeout_s: float) -> Any:
    """A gloo process group over ``store`` that leaves torch.distributed's
    global state alone (the learner's own group lives there)."""
    from torch.distributed import ProcessGroupGloo

    # Every collective, the rendezvous included, gives up after timeout_s: a peer
    # that died makes the transfer fail, not hang.
    return ProcessGroupGloo(PrefixStore("sgs-weights", store), rank, world_size, timedelta(seconds=timeout_s))


def _broadcast_from_trainer(group: Any, tensor: torch.Tensor) -> None:
    options = BroadcastOptions()
    options.rootRank = 0
    group.broadcast([tensor], options).wait()


def _gloo_classes() -> tuple[type, type]:
    if _GLOO_CLASSES:
        return _GLOO_CLASSES["engine"], _GLOO_CLASSES["trainer"]
    from vllm.distributed.weight_transfer.base import (
        TrainerInitInfo,
        TrainerWeightTransferEngine,
        WeightTransferEngine,
        WeightTransferInitInfo,
        WeightTransferUpdateInfo,
    )

    @dataclass(kw_only=True)
    class GlooInitInfo(WeightTransferInitInfo):
        """Where an engine worker joins the trainer's group, and as which rank."""

        master_address: str
        master_port: int
        rank_offset: int
        """This engine's first rank (the trainer is rank 0)."""
        world_size: int
        timeout_s: float

    @dataclass
    class GlooUpdateInfo(WeightTransferUpdateInfo):
        """The parameters of one update, in the order they are broadcast."""

        names: list[str]
        dtype_names: list[str]
        shapes: list[list[int]]

        def __post_init__(self) -> None:
            if not len(self.names) == len(self.dtype_names) == len(self.shapes):
                raise ValueError(f"update info lists differ in length: {len(self.names)} names, "
                                 f"{len(self.dtype_names)} dtypes, {len(self.shapes)} shapes")
            for dtype_name in self.dtype_names:
                if not isinstance(getattr(torch, dtype_name, None), torch.dtype):
                    raise ValueError(f"update info names an unknown dtype {dtype_name!r}")

    class GlooWeightTransferEngine(WeightTransferEngine[GlooInitInfo, GlooUpdateInfo]):
        """The engine worker's side: receive each parameter and load it in place."""

        init_info_cls = GlooInitInfo
        update_info_cls = GlooUpdateInfo
        supports_draft_weight_update = False

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._group: Any = None

        def init_transfer_engine(self, init_info: GlooInitInfo) -> None:
            rank = init_info.rank_offset + self.parallel_config.rank
            store = TCPStore(init_info.master_address, init_info.master_port, init_info.world_size,
                             is_master=False, timeout=timedelta(seconds=init_info.timeout_s))
            self._group = _gloo_group(store, rank, init_info.world_size, init_info.timeout_s)

        def start_weight_update(self) -> None:
            from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

            initialize_layerwise_reload(self.model)

        def finish_weight_update(self) -> None:
            from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

            finalize_layerwise_reload(self.model, self.model_config)

        def update_weights(self, update_info: dict[str, Any]) -> None:
            # The base class ends with a device synchronize; gloo's broadcasts are
            # synchronous and the weights live in host memory.
            self.receive_weights(self.parse_update_info(update_info))

        def receive_weights(self, update_info: GlooUpdateInfo) -> None:
            if self._group is None:
                raise RuntimeError("gloo weight transfer is not initialised: call init_weight_transfer_engine first")
            for name, dtype_name, shape in zip(update_info.names, update_info.dtype_names, update_info.shapes):
                tensor = torch.empty(shape, dtype=getattr(torch, dtype_name))
                _broadcast_from_trainer(self._group, tensor)
                self.model.load_weights([(name, tensor)])

        def shutdown(self) -> None:
            self._group = None

    @dataclass
    class GlooTrainerInitInfo(TrainerInitInfo):
        """The trainer's side of the rendezvous: its address; the group holds
        the trainer (rank 0) and every engine worker."""

        backend: ClassVar[str] = "gloo"
        master_address: str
        world_size: int
        timeout_s: float = 300.0

    class GlooTrainerWeightTransferEngine(TrainerWeightTransferEngine[GlooTrainerInitInfo]):
        """The trainer's side: open the group, then broadcast every parameter per update."""

        init_info_cls = GlooTrainerInitInfo

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._group: Any = None

        @classmethod
        def trainer_init(cls, init_info: GlooTrainerInitInfo, *, client: Any, source: Any = None) -> Any:
            if source is None:
                raise ValueError("gloo weight transfer needs a WeightSource")
            engine = cls(client=client, source=source, is_sender=init_info.is_sender)
            if not engine.is_sender:
                return engine
            # Port 0: the operating system picks a free one, which the workers are then told.
            store = TCPStore(init_info.master_address, 0, init_info.world_size, is_master=True,
                             timeout=timedelta(seconds=init_info.timeout_s), wait_for_workers=False)
            worker_info = {"master_address": init_info.master_address, "master_port": store.port,
                           "rank_offset": 1, "world_size": init_info.world_size, "timeout_s": init_info.timeout_s}
            # The workers block in the rendezvous until the trainer joins it too.
            pool = ThreadPoolExecutor(max_workers=1)
            try:
                joined = pool.submit(client.init_weight_transfer_engine, worker_info)
                try:
                    engine._group = _gloo_group(store, 0, init_info.world_size, init_info.timeout_s)
                except Exception as error:
                    # The store's own error only names a missing key; say which engine failed, if one did.
                    cause = joined.exception() if joined.done() else None
                    raise RuntimeError(f"the engines did not join the weight-transfer group within "
                                       f"{init_info.timeout_s:g} s: {_first_line(cause or error)}") from error
                joined.result()
            finally:
                pool.shutdown(wait=False)
            return engine

        def send_weights(self) -> None:
            metadata = self.source.metadata()
            if not self.is_sender:
                return
            update = GlooUpdateInfo(names=[m.name for m in metadata],
                                    dtype_names=[str(m.dtype).removeprefix("torch.") for m in metadata],
                                    shapes=[list(m.shape) for m in metadata])
            self.client.start_weight_update()
            # The workers' update_weights receives while this thread broadcasts.
            pool = ThreadPoolExecutor(max_workers=1)
            try:
                received = pool.submit(self.client.update_weights, asdict(update))
                for (name, tensor), expected in zip(self.source, metadata, strict=True):
                    if name != expected.name or tuple(tensor.shape) != tuple(expected.shape):
                        raise ValueError(f"the weight source yielded {name!r} {tuple(tensor.shape)} where its "
                                         f"metadata declared {expected.name!r} {tuple(expected.shape)}")
                    _broadcast_from_trainer(self._group, tensor.detach().contiguous())
                received.result()
            finally:
                # A broadcast that failed leaves the workers' call waiting for its own
                # timeout; waiting for it here would only add that wait.
                pool.shutdown(wait=False)
            self.client.finish_weight_update()

        def shutdown(self) -> None:
            self._group = None

    _GLOO_CLASSES.update(engine=GlooWeightTransferEngine, trainer=GlooTrainerWeightTransferEngine,
                         trainer_info=GlooTrainerInitInfo)
    return GlooWeightTransferEngine, GlooTrainerWeightTransferEngine


class EngineWeightClient:
    """vLLM's ``VLLMWeightSyncClient`` protocol over one role's engine actors
    (:class:`~sgs.engines.actor.EngineActor` with a vLLM engine).

    Every call goes to every actor and waits for all.  Engine i's workers get
    the ranks ``rank_offset + i * workers_per_engine`` onwards.
    ``finish_weight_update`` labels the new weights ``policy_version``.
    """

    def __init__(self, actors: list[ActorHandle], policy_version: int, workers_per_engine: int = 1) -> None:
        self.actors = list(actors)
        self.policy_version = policy_version
        self.workers_per_engine = workers_per_engine

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        first = init_info["rank_offset"]
        ray.get([actor.init_weight_transfer.remote(dict(init_info, rank_offset=first + i * self.workers_per_engine))
                 for i, actor in enumerate(self.actors)])

    def start_weight_update(self) -> None:
        ray.get([actor.start_weight_update.remote() for actor in self.actors])

    def update_weights(self, update_info: dict[str, Any] | list[dict[str, Any]]) -> None:
        ray.get([actor.update_weights.remote(update_info) for actor in self.actors])

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        ray.get([actor.finish_weight_update.remote(self.policy_version) for actor in self.actors])

    def shutdown_weight_transfer_engine(self) -> None:
        ray.get([actor.shutdown_weight_transfer.remote() for actor in self.actors])


@dataclass(frozen=True)
class WeightTarget:
    """Where the learner sends the weights it trained (picklable: it travels
    to the learner's rank 0 in the train loop's config)."""

    backend: str
    """"gloo" (CPU engines) or "nccl" (GPU engines)."""
    actors: list[Any]
    """The role's engine actors, by index."""
    policy_version: int
    """The version label the engines give the new weights."""
    timeout_s: float = 300.0
    """How long the rendezvous and each broadcast may wait for a peer."""
    workers_per_engine: int = 1
    """vLLM workers per engine (its tensor-parallel size)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Backend-specific trainer init fields (e.g. NCCL's packed buffer sizes)."""

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
    address = ray.util.get_node_ip_address()
    world_size = 1 + len(target.actors) * target.workers_per_engine
    if target.backend == "gloo":
        register_gloo_backend()
        init_info = _GLOO_CLASSES["trainer_info"](rank=0, master_address=address, world_size=world_size,
                                                  timeout_s=target.timeout_s, **target.extra)
    else:
        from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

        init_info = NCCLTrainerInitInfo(rank=0, master_address=address, master_port=_free_port(),
                                        world_size=world_size, **target.extra)
    client = EngineWeightClient(target.actors, target.policy_version, target.workers_per_engine)
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


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def _free_port() -> int:
    """A TCP port free right now (vLLM's NCCL rendezvous needs one named in advance)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]
