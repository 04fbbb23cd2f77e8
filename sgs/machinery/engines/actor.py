"""One generation engine in its own Ray actor process.

``EngineActor`` hosts one :class:`~sgs.machinery.engines.base.GenerationEngine`,
built by :func:`build_engine` from the ``resources.engine_backend`` name.  The
engine's calls run one at a time, in the order the actor received them;
``heartbeat`` and ``process_id`` run in a second concurrency group
(:data:`CONTROL_GROUP`), so they answer while a long ``generate`` runs.  The
driver-side group that starts, watches and restarts these actors is
:mod:`sgs.machinery.engines.group`.
"""

from __future__ import annotations

import os
from typing import Any

import ray

from sgs.machinery.engines.base import GenerationEngine, Sample, SamplingSettings

BACKENDS = ("transformers", "vllm")

#: The actors' second concurrency group: liveness calls that must answer while ``generate`` runs.
CONTROL_GROUP = "control"


def build_engine(backend: str, model_path: str, **options: Any) -> GenerationEngine:
    """Construct the engine selected by the ``engine_backend`` config value.

    ``options`` are the backend's keyword arguments: those of
    :class:`~sgs.machinery.engines.hf.TransformersEngine` for "transformers", of
    :class:`~sgs.machinery.engines.vllm.VLLMEngine` for "vllm".
    """
    # Imported only when chosen: backends pull in heavy, optional packages (vLLM).
    if backend == "transformers":
        from sgs.machinery.engines.hf import TransformersEngine

        return TransformersEngine(model_path, **options)
    if backend == "vllm":
        from sgs.machinery.engines.vllm import VLLMEngine

        return VLLMEngine(model_path, **options)
    raise ValueError(f"unknown engine_backend {backend!r}; available: {', '.join(BACKENDS)}")


# Ray's own restarts (max_restarts) would rerun the constructor with its original
# arguments, i.e. the initial weights; the group restarts actors itself instead.
@ray.remote(max_restarts=0, max_task_retries=0, concurrency_groups={CONTROL_GROUP: 1})
class EngineActor:
    """One engine in its own process.  The engine's methods run one at a time
    in Ray's default concurrency group; ``heartbeat`` and ``process_id`` run in
    their own, so they answer while a long ``generate`` is running."""

    def __init__(
        self, backend: str, model_path: str, options: dict[str, Any], weights: tuple[str, int] | None = None,
        gpu_id: int | str | None = None,
    ) -> None:
        """Build the engine from ``model_path``; ``weights`` = (checkpoint dir,
        policy version) then loads a later checkpoint, as a restarted actor
        must (the same steps its predecessor went through).  ``gpu_id`` pins a
        colocated engine to one GPU that Ray did not assign it."""
        if gpu_id is not None:
            # Before anything initialises CUDA.  Ray sets the variable for actors
            # that reserve no GPU to "" (none), whatever the runtime env says.
            os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu_id)
        self._device = options.get("device")
        self._engine = build_engine(backend, model_path, **options)
        self._asleep = False
        if weights is not None:
            self._engine.load_weights(*weights)

    def generate(self, prompts: list[str], settings: SamplingSettings) -> list[list[Sample]]:
        self._check_awake("generate")
        return self._engine.generate(prompts, settings)

    def load_weights(self, checkpoint_dir: str, policy_version: int) -> None:
        self._check_awake("load_weights")
        self._engine.load_weights(checkpoint_dir, policy_version)

    def _check_awake(self, call: str) -> None:
        # A sleeping vLLM engine has no weights or KV cache on its GPU; the
        # loop must wake it first.  Enforced for every backend, so a run on
        # CPUs (simulated GPUs included) catches an ordering mistake too.
        if self._asleep:
            raise RuntimeError(f"{call} on a sleeping engine: call wake_up first")

    def policy_version(self) -> int:
        return self._engine.policy_version

    # Direct weight transfer (vLLM engines only; sgs.machinery.engines.weight_transfer drives these).
    def init_weight_transfer(self, init_info: dict[str, Any]) -> None:
        self._engine.init_weight_transfer(init_info)

    def start_weight_update(self) -> None:
        self._engine.start_weight_update()

    def update_weights(self, update_info: dict[str, Any] | list[dict[str, Any]]) -> None:
        self._engine.update_weights(update_info)

    def finish_weight_update(self, policy_version: int) -> None:
        self._engine.finish_weight_update(policy_version)

    def shutdown_weight_transfer(self) -> None:
        self._engine.shutdown_weight_transfer()

    def adopt_checkpoint(self, checkpoint_dir: str, policy_version: int) -> None:
        self._engine.adopt_checkpoint(checkpoint_dir, policy_version)

    def logprobs_of(self, prompt_ids: list[int], completion_ids: list[int], temperature: float = 1.0) -> list[float]:
        return self._engine.logprobs_of(prompt_ids, completion_ids, temperature)

    def served_logprobs(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        return self._engine.served_logprobs(prompt_ids, completion_ids)

    def sleep(self, level: int = 1) -> None:
        self._engine.sleep(level)
        self._asleep = True

    def wake_up(self) -> None:
        self._engine.wake_up()
        self._asleep = False

    @ray.method(concurrency_group=CONTROL_GROUP)
    def heartbeat(self) -> None:
        """Answers as long as the process is alive and scheduling Python threads."""

    @ray.method(concurrency_group=CONTROL_GROUP)
    def process_id(self) -> int:
        """The actor's operating-system process id (for fault-injection tests)."""
        return os.getpid()

    @ray.method(concurrency_group=CONTROL_GROUP)
    def placement(self) -> dict[str, Any]:
        """Where the engine runs and its state: node, process, the GPUs Ray
        assigned it, the GPUs it sees (CUDA_VISIBLE_DEVICES), the device it
        was told to compute on (None: its own choice), asleep or not, and
        the policy version it serves."""
        runtime = ray.get_runtime_context()
        return {"node_id": runtime.get_node_id(), "pid": os.getpid(),
                "ray_gpu_ids": [str(i) for i in runtime.get_accelerator_ids().get("GPU", [])],
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "device": self._device,
                "asleep": self._asleep, "policy_version": self._engine.policy_version}
