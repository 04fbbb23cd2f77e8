"""Hardware: the Ray cluster and how actors are placed on it (a part of the
schema in :mod:`sgs.config.schema`, kept in its own module so that each reads
in one sitting), and its checks (:func:`resources_problems`; what the method,
the model and the declared GPUs ask of it is checked with them, in
:mod:`sgs.config.validation`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sgs.config.checks import Choice, at_least, choice, positive


class EngineBackend(Choice):
    """``resources.engine_backend``: the generation engine implementation."""

    transformers = "transformers"
    vllm = "vllm"


class WeightTransfer(Choice):
    """``resources.weight_transfer``."""

    checkpoint = "checkpoint"
    direct = "direct"


class PlacementStrategy(Choice):
    """``resources.*_placement``: Ray's placement group strategies."""

    PACK = "PACK"
    SPREAD = "SPREAD"
    STRICT_PACK = "STRICT_PACK"
    STRICT_SPREAD = "STRICT_SPREAD"


#: Seconds between heartbeats of an engine actor with work in flight.
ENGINE_HEARTBEAT_INTERVAL_S = 5.0


@dataclass
class ResourcesConfig:
    """Hardware: the Ray cluster and how actors are placed on it (SPEC §2.2)."""

    #: Ray cluster to join (``auto``, ``ray://host:10001``); null starts a
    #: local cluster in the driver.
    ray_address: str | None = None
    #: CPUs the local cluster may use; null uses all of them.
    num_cpus: int | None = None
    #: GPUs the local cluster may use; null uses all of them.
    num_gpus: int | None = None
    #: Start the Ray dashboard with a local cluster (its address is printed
    #: when the run starts).  false leaves out its web modules, about 3
    #: CPU-seconds at every start: the test suite's runs turn it off.  A
    #: cluster joined through ``ray_address`` has its own.
    include_dashboard: bool = True
    #: Rehearse a GPU placement on CPUs: the local cluster declares this many
    #: logical GPUs (in place of ``num_gpus``; cluster nodes declare theirs with
    #: ``ray start --num-gpus``) and every actor reserves and is pinned to them
    #: as on a real node, but computes on the CPU: engines with transformers
    #: (whatever ``engine_backend`` says), the learner over gloo.  0: real GPUs.
    simulated_gpus: int = 0
    #: Generation engine implementation: ``transformers`` or ``vllm``.
    engine_backend: EngineBackend = EngineBackend.transformers
    #: Generation engine actors serving the Solver.
    solver_engines: int = 1
    #: Generation engine actors serving the Conjecturer.
    conjecturer_engines: int = 1
    #: Generation engine actors serving the Guide.
    guide_engines: int = 1
    #: CPUs reserved per generation engine.
    cpus_per_engine: float = 1.0
    #: GPUs reserved per generation engine (fractions share a GPU); 0 runs
    #: the engines on CPU.
    gpus_per_engine: float = 0.0
    #: Share of its GPU's memory each vLLM engine may take (weights, activations,
    #: KV cache: vLLM's ``gpu_memory_utilization``); null: vLLM's 0.9, for one
    #: engine per GPU.  Engines that share a GPU (``gpus_per_engine`` < 1, or
    #: more colocated engines than GPUs) need shares that leave room for each
    #: other and for the learner; they start one after another, since each
    #: sizes its KV cache from the memory free while it starts.
    engine_gpu_memory_fraction: float | None = None
    #: Verifier actors in the pool, each driving one prover process.
    verifier_workers: int = 2
    #: CPUs reserved per verifier actor.
    cpus_per_verifier: float = 1.0
    #: Ray Train workers (data-parallel ranks) per training run.
    learner_workers: int = 1
    #: CPUs reserved per learner worker.
    cpus_per_learner_worker: float = 1.0
    #: GPUs per learner worker; 0 trains on CPU (DDP with gloo).
    gpus_per_learner_worker: float = 0.0
    #: A training run in which Ray loses workers (a worker process or its
    #: node dies) is started again from its base checkpoint at most this many
    #: times; an error the training code raises ends the run at once.
    learner_restarts: int = 2
    #: A training call whose Ray Train workers have not started within this
    #: many seconds (Ray cannot place them) ends the run with an error naming
    #: the resources asked for and those free; Ray Train alone retries for
    #: ever. Long enough for an autoscaler to add a node.
    learner_start_timeout_s: float = 1800.0
    #: Engines release accelerator memory during the training phase and take
    #: the new weights when they wake (vLLM sleep mode); null: when they share
    #: the learner's GPUs (``colocate_engines_with_learner``).
    sleep_engines_during_training: bool | None = None
    #: vLLM sleep level: 1 keeps the weights in host memory, 2 drops them
    #: (they are reloaded from the new checkpoint on waking; less host memory).
    engine_sleep_level: int = 1
    #: An engine actor with work in flight that leaves its heartbeat (a
    #: thread of its own, answered during generation) unanswered this long is
    #: declared hung, killed and restarted, and its chunks are redone.
    engine_heartbeat_timeout_s: float = 60.0
    #: The same limit for a restarted engine's first answer, which comes once
    #: it has loaded its model (a 7B model from disk takes minutes).
    engine_restart_timeout_s: float = 900.0
    #: One GPU node shared by engines and learner: the engines then reserve
    #: no Ray GPU (the learner's ranks hold them all while training) and are
    #: pinned round-robin to the node's GPUs through CUDA_VISIBLE_DEVICES;
    #: they sleep during training so the learner has the memory.
    #: ``gpus_per_engine`` must then be 0.
    colocate_engines_with_learner: bool = False
    #: How trained weights reach the running engines: ``checkpoint`` (each
    #: engine reloads the learner's checkpoint in place) or ``direct`` (the
    #: learner's rank 0 broadcasts them into the engines over a process group,
    #: vLLM engines only: gloo for CPU engines, NCCL for GPU engines; not with
    #: colocated or sleeping engines).  The checkpoint is written either way;
    #: when a direct transfer fails, the role's engines are restarted on it.
    #: Direct pays off where reading the checkpoint is slow (a network file
    #: system, 7B weights over NVLink); on one machine the page cache makes
    #: the reload faster (``benchmarks/weight_transfer.py``).
    weight_transfer: WeightTransfer = WeightTransfer.checkpoint
    #: How long a direct transfer waits for a peer (the rendezvous, each broadcast).
    weight_transfer_timeout_s: float = 300.0
    #: Strategy of each role's engine placement group: ``PACK`` (few nodes),
    #: ``SPREAD`` (over the GPU nodes of a cluster), ``STRICT_PACK`` (one
    #: node) or ``STRICT_SPREAD`` (one engine per node).
    engine_placement: PlacementStrategy = PlacementStrategy.PACK
    #: Strategy of the verifier pool's placement group (same choices).
    verifier_placement: PlacementStrategy = PlacementStrategy.PACK
    #: A custom Ray resource that marks the nodes verifier workers may use
    #: (each worker asks for 0.001 of it); start CPU nodes with
    #: ``ray start --resources='{"<name>": 1}'``.  Null: any node.
    verifier_node_resource: str | None = None
    #: Strategy of the learner's placement group (Ray Train's): ``STRICT_PACK``
    #: keeps every data-parallel rank on one node (fast all-reduce).
    learner_placement: PlacementStrategy = PlacementStrategy.PACK


def resources_problems(resources: ResourcesConfig) -> list[str]:
    """Every problem within the ``resources`` node, one message per problem, each naming its key."""
    problems: list[str] = []
    if resources.ray_address is not None and not resources.ray_address.strip():
        problems.append("resources.ray_address must not be empty; use null to start a local cluster")
    at_least(problems, "resources.num_cpus", resources.num_cpus, 1)
    at_least(problems, "resources.num_gpus", resources.num_gpus, 0)
    at_least(problems, "resources.simulated_gpus", resources.simulated_gpus, 0)
    at_least(problems, "resources.solver_engines", resources.solver_engines, 1)
    at_least(problems, "resources.verifier_workers", resources.verifier_workers, 1)
    at_least(problems, "resources.learner_workers", resources.learner_workers, 1)
    at_least(problems, "resources.learner_restarts", resources.learner_restarts, 0)
    for key in ("cpus_per_engine", "gpus_per_engine", "cpus_per_verifier",
                "cpus_per_learner_worker", "gpus_per_learner_worker"):
        at_least(problems, f"resources.{key}", getattr(resources, key), 0.0)

    choice(problems, "resources.engine_sleep_level", resources.engine_sleep_level, (1, 2))
    fraction = resources.engine_gpu_memory_fraction
    if fraction is not None and not 0 < fraction <= 1:
        problems.append(f"resources.engine_gpu_memory_fraction={fraction!r} must be in (0, 1], or null for vLLM's 0.9")
    for key in ("engine_heartbeat_timeout_s", "engine_restart_timeout_s"):
        value = getattr(resources, key)
        if not (value > ENGINE_HEARTBEAT_INTERVAL_S and math.isfinite(value)):
            problems.append(f"resources.{key}={value!r} must exceed the heartbeat interval "
                            f"({ENGINE_HEARTBEAT_INTERVAL_S:g} s) and be finite")
    if resources.colocate_engines_with_learner and resources.gpus_per_engine > 0:
        problems.append("resources.colocate_engines_with_learner=true pins engines to GPUs outside Ray's "
                        "accounting (the learner holds the GPUs); set resources.gpus_per_engine=0")
    if resources.weight_transfer == "direct":
        if resources.engine_backend != "vllm":
            problems.append("resources.weight_transfer=direct needs vLLM engines (resources.engine_backend=vllm); "
                            "the transformers engines load checkpoints")
        if resources.colocate_engines_with_learner:
            problems.append("resources.weight_transfer=direct cannot reach engines colocated with the learner "
                            "(NCCL needs a GPU per rank and the learner's rank 0 shares GPU 0); use checkpoint")
        if resources.sleep_engines_during_training:
            problems.append("resources.weight_transfer=direct sends weights while the engines would sleep; set "
                            "resources.sleep_engines_during_training=false or weight_transfer=checkpoint")
    for key in ("learner_start_timeout_s", "weight_transfer_timeout_s"):
        positive(problems, f"resources.{key}", getattr(resources, key))

    # Ray Train gives each rank one whole GPU (NCCL and DeepSpeed need a GPU of their own per rank).
    if resources.gpus_per_learner_worker not in (0, 1):
        problems.append(f"resources.gpus_per_learner_worker={resources.gpus_per_learner_worker!r} must be 0 (CPU) or "
                        f"1 (one GPU per data-parallel rank)")
    return problems
