"""Generation engines as Ray actors, and the driver-side group for one role.

``EngineActor`` hosts one :class:`~sgs.engines.base.GenerationEngine`.  Actors
are named ``engine-<role>-<i>`` so the Ray dashboard shows who is doing what.

``EngineGroup`` owns the N actors of one role (Solver, Conjecturer or Guide),
reserved together in one placement group.  ``submit`` splits a prompt list
into chunks and returns one ObjectRef per chunk, so the caller can stream
(``ray.wait`` on the refs and hand each finished chunk to the verifier);
``generate`` is the blocking form.  ``load_weights`` broadcasts a new
checkpoint to every actor.

Ordering: an actor runs its calls one at a time in the order it received
them, so a ``load_weights`` issued after ``submit`` takes effect only after
the chunks already queued on that actor are done.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from sgs.engines.base import GenerationEngine, Sample, SamplingSettings

BACKENDS = ("transformers", "vllm")


def build_engine(backend: str, model_path: str, **options: Any) -> GenerationEngine:
    """Construct the engine selected by the ``engine_backend`` config value.

    ``options`` are the backend's keyword arguments: those of
    :class:`~sgs.engines.hf.TransformersEngine` for "transformers", of
    :class:`~sgs.engines.vllm.VLLMEngine` for "vllm".
    """
    # Imported only when chosen: backends pull in heavy, optional packages (vLLM).
    if backend == "transformers":
        from sgs.engines.hf import TransformersEngine

        return TransformersEngine(model_path, **options)
    if backend == "vllm":
        from sgs.engines.vllm import VLLMEngine

        return VLLMEngine(model_path, **options)
    raise ValueError(f"unknown engine_backend {backend!r}; available: {', '.join(BACKENDS)}")


@ray.remote
class EngineActor:
    """One engine in its own process.  Methods mirror :class:`GenerationEngine`."""

    def __init__(self, backend: str, model_path: str, options: dict[str, Any]) -> None:
        self._engine = build_engine(backend, model_path, **options)

    def generate(self, prompts: list[str], settings: SamplingSettings) -> list[list[Sample]]:
        return self._engine.generate(prompts, settings)

    def load_weights(self, checkpoint_dir: str, policy_version: int) -> None:
        self._engine.load_weights(checkpoint_dir, policy_version)

    def policy_version(self) -> int:
        return self._engine.policy_version

    def logprobs_of(self, prompt_ids: list[int], completion_ids: list[int], temperature: float = 1.0) -> list[float]:
        return self._engine.logprobs_of(prompt_ids, completion_ids, temperature)


class EngineGroup:
    """The engine actors of one role, driven from the driver."""

    def __init__(
        self,
        role: str,
        model_path: str,
        *,
        num_engines: int = 1,
        backend: str = "transformers",
        engine_options: dict[str, Any] | None = None,
        num_cpus: float = 1.0,
        num_gpus: float = 0.0,
        start_timeout_s: float = 300.0,
    ) -> None:
        """Start ``num_engines`` actors, all loading ``model_path``.

        Args:
            role: "solver", "conjecturer", "guide", ...; used in actor names.
            model_path: Hugging Face checkpoint directory or hub id.
            num_engines: actors in the group.
            backend: the ``engine_backend`` config value (see :func:`build_engine`).
            engine_options: keyword arguments for the backend's engine.
            num_cpus, num_gpus: Ray resources reserved per actor.
            start_timeout_s: how long to wait for the cluster to have room for the group.

        Blocks until every actor has loaded its model, so start-up errors
        surface here.
        """
        if num_engines < 1:
            raise ValueError(f"num_engines must be at least 1, got {num_engines!r}")
        if backend not in BACKENDS:
            raise ValueError(f"unknown engine_backend {backend!r}; available: {', '.join(BACKENDS)}")
        if num_cpus <= 0 and num_gpus <= 0:
            raise ValueError("each engine needs some resources: set num_cpus > 0 or num_gpus > 0")
        self.role = role
        self.actors: list[ray.actor.ActorHandle] = []
        bundle = {"CPU": num_cpus} if num_gpus <= 0 else {"CPU": num_cpus, "GPU": num_gpus}
        # One placement group reserves the whole role at once: either all engines fit or none start.
        self._placement_group: PlacementGroup | None = placement_group([bundle] * num_engines, strategy="PACK")
        if not self._placement_group.wait(timeout_seconds=start_timeout_s):
            self.shutdown()
            raise RuntimeError(
                f"could not reserve {num_engines} x {bundle} for the {role!r} engines within {start_timeout_s} s; "
                f"the cluster has {ray.cluster_resources()} in total, {ray.available_resources()} free"
            )
        try:
            self.actors = [
                EngineActor.options(
                    name=f"engine-{role}-{index}",
                    num_cpus=num_cpus,
                    num_gpus=num_gpus,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(
                        placement_group=self._placement_group, placement_group_bundle_index=index
                    ),
                ).remote(backend, model_path, dict(engine_options or {}))
                for index in range(num_engines)
            ]
            # The first call returns once the constructor ran, so loading errors surface here.
            ray.get([actor.policy_version.remote() for actor in self.actors])
        except Exception:
            self.shutdown()
            raise

    def submit(
        self, prompts: list[str], settings: SamplingSettings, chunk_size: int | None = None
    ) -> list[tuple[ray.ObjectRef, list[int]]]:
        """Queue the prompts on the actors in chunks; returns (ref, prompt indices) per chunk.

        ``ray.get(ref)`` gives ``list[list[Sample]]`` for the chunk's prompts,
        in the order of its indices.  Chunks go to the actors round-robin; the
        default chunk size gives each actor one chunk.  With a seed, chunk c
        starting at prompt index i samples with seed + i, so chunks draw
        independent streams and a repeated call (same chunk size) repeats the
        samples exactly.
        """
        if not prompts:
            return []
        if chunk_size is None:
            chunk_size = math.ceil(len(prompts) / len(self.actors))
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {chunk_size!r}")
        submitted = []
        for chunk, start in enumerate(range(0, len(prompts), chunk_size)):
            indices = list(range(start, min(start + chunk_size, len(prompts))))
            chunk_settings = settings if settings.seed is None else replace(settings, seed=settings.seed + start)
            actor = self.actors[chunk % len(self.actors)]
            ref = actor.generate.remote([prompts[i] for i in indices], chunk_settings)
            submitted.append((ref, indices))
        return submitted

    def generate(
        self, prompts: list[str], settings: SamplingSettings, chunk_size: int | None = None
    ) -> list[list[Sample]]:
        """Blocking form of :meth:`submit`: samples for every prompt, in prompt order."""
        results: list[list[Sample]] = [[] for _ in prompts]
        submitted = self.submit(prompts, settings, chunk_size)
        for (_, indices), chunk in zip(submitted, ray.get([ref for ref, _ in submitted])):
            for index, samples in zip(indices, chunk):
                results[index] = samples
        return results

    def load_weights(self, checkpoint_dir: str, policy_version: int) -> None:
        """Load a new checkpoint on every actor; returns when all have it."""
        ray.get([actor.load_weights.remote(checkpoint_dir, policy_version) for actor in self.actors])

    @property
    def policy_version(self) -> int:
        """The weights' version, checked to agree across the group's actors."""
        versions = set(ray.get([actor.policy_version.remote() for actor in self.actors]))
        if len(versions) != 1:
            raise RuntimeError(f"engines of role {self.role!r} disagree on policy_version: {sorted(versions)}")
        return versions.pop()

    def shutdown(self) -> None:
        """Kill the actors and release their placement group."""
        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
        if self._placement_group is not None:
            remove_placement_group(self._placement_group)
            self._placement_group = None
