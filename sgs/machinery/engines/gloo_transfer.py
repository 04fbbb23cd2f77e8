"""The "gloo" weight-transfer backend: vLLM's weight-transfer protocol between CPU processes.

vLLM ships transports for GPUs only ("nccl", "ipc", ...).  This module
implements both sides of its interfaces over a gloo process group, so that
a learner can send weights into vLLM engines running on CPUs:

* :class:`GlooWeightTransferEngine` runs inside the engine's worker (vLLM
  builds it from ``WeightTransferConfig(backend="gloo")``): it joins the
  group, receives each parameter and loads it in place with vLLM's layerwise
  reload, as vLLM's NCCL engine does.
* :class:`GlooTrainerWeightTransferEngine` runs in the learner's rank 0: it
  opens the group (the learner is rank 0, engine i's worker rank 1 + i) and
  broadcasts every parameter, one broadcast each.

Every wait (the rendezvous, each broadcast) ends after ``timeout_s``, so a
peer that died makes the transfer fail instead of hang.  :func:`register`
adds the backend to vLLM's factories; :mod:`sgs.machinery.engines.weight_transfer`
calls it where needed.  Importing this module imports vLLM.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any, ClassVar

import torch
from torch.distributed import BroadcastOptions, PrefixStore, ProcessGroupGloo, TCPStore
from vllm.distributed.weight_transfer.base import (
    TrainerInitInfo,
    TrainerWeightTransferEngine,
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)
from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory, WeightTransferTrainerFactory

from sgs.machinery.engines.base import first_line

BACKEND = "gloo"


def register() -> None:
    """Make "gloo" a backend of vLLM's weight-transfer factories (idempotent).

    Needed in the process that builds the engine's worker (the engine actor:
    on a CPU, vLLM runs its worker in that process) and in the learner.
    """
    if BACKEND not in WeightTransferEngineFactory._registry:
        WeightTransferEngineFactory.register_engine(BACKEND, GlooWeightTransferEngine)
    if BACKEND not in WeightTransferTrainerFactory._registry:
        WeightTransferTrainerFactory.register_engine(BACKEND, GlooTrainerWeightTransferEngine)


def _gloo_group(store: Any, rank: int, world_size: int, timeout_s: float) -> Any:
    """A gloo process group over ``store`` that leaves torch.distributed's
    global state alone (the learner's own group lives there)."""
    # Every collective, the rendezvous included, gives up after timeout_s: a peer
    # that died makes the transfer fail, not hang.
    return ProcessGroupGloo(PrefixStore("sgs-weights", store), rank, world_size, timedelta(seconds=timeout_s))


def _broadcast_from_trainer(group: Any, tensor: torch.Tensor) -> None:
    options = BroadcastOptions()
    options.rootRank = 0
    group.broadcast([tensor], options).wait()


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
                                   f"{init_info.timeout_s:g} s: {first_line(cause or error)}") from error
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
