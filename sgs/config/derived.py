"""What a config implies beyond its own fields: the GPUs it declares, the
engine implementation and weight transport it ends up with, whether engines
sleep, whether a warm start runs.  (Which roles train depends on the Solver
objective's entry: :func:`sgs.method.registry.trained_roles`.)  Pure functions of the
schema's dataclasses, used by the validation and by the run."""

from __future__ import annotations

from sgs.config.method import MethodConfig
from sgs.config.schema import ResourcesConfig, SGSConfig


def declared_gpus(resources: ResourcesConfig) -> int | None:
    """The GPUs the config says the cluster has: ``simulated_gpus`` when set
    (a local cluster declares that many), else ``num_gpus`` (None: as many
    as Ray detects, or a cluster's nodes declare)."""
    return resources.simulated_gpus or resources.num_gpus


def engine_backend(resources: ResourcesConfig) -> str:
    """The engine implementation the run uses: ``engine_backend``, except
    with simulated GPUs, whose engines compute on the CPU with transformers
    (vLLM's CUDA build cannot run there; its CPU build costs ~1.7 GB and
    ~30 s per engine on a small machine and has no sleep mode to rehearse)."""
    return "transformers" if resources.simulated_gpus > 0 else resources.engine_backend


def active_engines(resources: ResourcesConfig, method: MethodConfig) -> int:
    """Engine actors of the roles this method uses."""
    engines = resources.solver_engines
    if method.conjectures_per_target > 0:
        engines += resources.conjecturer_engines
    if method.use_guide:
        engines += resources.guide_engines
    return engines


def weight_transfer_backend(resources: ResourcesConfig) -> str | None:
    """The transport trained weights take into the engines ("gloo" between
    CPU processes, "nccl" between GPUs), or None: the engines load checkpoints."""
    if resources.weight_transfer != "direct":
        return None
    on_gpu = resources.gpus_per_engine > 0 or resources.colocate_engines_with_learner
    return "nccl" if on_gpu else "gloo"


def engines_sleep_during_training(resources: ResourcesConfig) -> bool:
    """``resources.sleep_engines_during_training``, its default resolved:
    engines sleep when the learner needs their GPUs' memory, i.e. when they
    share the learner's GPUs.  (Engines on GPUs of their own, as on a
    cluster, would only pay the wake-up for memory nobody else wants.)"""
    if resources.sleep_engines_during_training is not None:
        return resources.sleep_engines_during_training
    return resources.colocate_engines_with_learner


def warmstart_enabled(cfg: SGSConfig) -> bool:
    """Whether the run fine-tunes its base model on the warm-start corpus
    first (``warmstart.mode``: ``always``, or ``auto`` for the tiny model
    when there is a corpus)."""
    ws = cfg.warmstart
    if ws.mode == "always":
        return True
    return ws.mode == "auto" and cfg.model.path is None and ws.corpus is not None
