"""Validation of an SGS config: every problem of a composed config at once.

:func:`validate` turns a composed ``DictConfig`` into a typed
:class:`~sgs.config.schema.SGSConfig`, or raises
:class:`~sgs.config.schema.ConfigError` listing every problem (value ranges,
unknown choices, fields that contradict each other), each message naming the
key.  :func:`config_problems` returns the list without raising.  The settings
derived from a valid config live in :mod:`sgs.config.derived`; what the
Solver objective asks of the rest of the config is checked by its entry's
registry (:func:`sgs.method.registry.config_problems`), above this layer.
"""

from __future__ import annotations

import math

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from sgs.config.benchmark_names import benchmark_problems
from sgs.config.checks import at_least, positive
from sgs.config.choices import config_choice_problems
from sgs.config.derived import active_engines, declared_gpus
from sgs.config.evaluation import evaluation_problems
from sgs.config.method import method_problems
from sgs.config.model import model_problems
from sgs.config.prover import prover_problems
from sgs.config.resources import resources_problems
from sgs.config.sampling import sampling_problems
from sgs.config.serve import serve_problems
from sgs.config.solver import solver_problems
from sgs.config.training import training_problems
from sgs.config.schema import (
    HUB_SCHEME,
    KNOWN_TARGET_LANGUAGES,
    ROLES,
    ConfigError,
    ModelConfig,
    ProverConfig,
    ResourcesConfig,
    SGSConfig,
    TargetsConfig,
    TrainingConfig,
    WarmstartConfig,
    resolve_source_path,
)


#: Extra advice for keys that are commonly left unset.
_KEY_HINTS = {
    "resources.ray_address": (
        "resources=cluster joins an existing Ray cluster: set RAY_ADDRESS or give "
        "resources.ray_address=auto or resources.ray_address=ray://HOST:10001"
    ),
}


def _key_problem(key: str, problem: str) -> str:
    hint = _KEY_HINTS.get(key)
    return f"{key} {problem}" + (f"; {hint}" if hint else "")


def to_schema(cfg: DictConfig) -> SGSConfig:
    """Resolve a composed config into an :class:`SGSConfig` instance.

    Raises :class:`ConfigError` naming the key of every mandatory value left
    unset (``???``), or every choice field's value that is none of its Enum's,
    or the first value that has the wrong type or cannot be resolved.  Hydra's
    own ``hydra`` node, if present, is ignored.
    """
    if "hydra" in cfg:
        cfg = OmegaConf.masked_copy(cfg, [key for key in cfg.keys() if key != "hydra"])
    try:
        missing = sorted(OmegaConf.missing_keys(cfg))
        if missing:
            raise ConfigError([_key_problem(key, "is required but was not given") for key in missing])
        bad_choices = config_choice_problems(cfg)  # all of them: the merge below stops at the first
        if bad_choices:
            raise ConfigError(bad_choices)
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(SGSConfig), cfg))
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None) or "config"
        reason = str(error).splitlines()[0]
        raise ConfigError([_key_problem(key, f"is invalid: {reason}")]) from error


def _batches_fill_the_workers(problems: list[str], node: str, batches: TrainingConfig | WarmstartConfig,
                              learner_workers: int) -> None:
    """A step's sequences are dealt to the learner workers in whole micro-batches."""
    per_step = batches.micro_batch_size * learner_workers
    if per_step >= 1 and batches.global_batch_size >= 1 and batches.global_batch_size % per_step:
        problems.append(
            f"{node}.global_batch_size={batches.global_batch_size} must be a multiple of "
            f"{node}.micro_batch_size * resources.learner_workers = {per_step}"
        )


def _check_model_fits(problems: list[str], model: ModelConfig, cfg: SGSConfig) -> None:
    """What the model's dtype and the tiny model's context allow the training and sampling nodes."""
    if model.dtype == "float16" and cfg.training.bf16:
        problems.append("training.bf16=true contradicts model.dtype='float16'; use model.dtype=bfloat16 or float32")
    tiny = model.tiny
    if model.path is not None or tiny is None:
        return
    if tiny.max_position_embeddings < cfg.training.max_seq_len:
        problems.append(
            f"model.tiny.max_position_embeddings={tiny.max_position_embeddings} is shorter than "
            f"training.max_seq_len={cfg.training.max_seq_len}"
        )
    for role in ("solver", "conjecturer", "guide"):
        max_tokens = getattr(cfg.sampling, role).max_tokens
        if tiny.max_position_embeddings <= max_tokens:
            problems.append(
                f"model.tiny.max_position_embeddings={tiny.max_position_embeddings} leaves no room for a "
                f"prompt before sampling.{role}.max_tokens={max_tokens} generated tokens"
            )


def _check_targets(problems: list[str], targets: TargetsConfig, prover: ProverConfig) -> None:
    if not targets.source:
        problems.append("targets.source must not be empty")
    else:
        try:
            resolve_source_path(targets.source)
        except ValueError as error:
            problems.append(f"targets.source: {error}")
        language = KNOWN_TARGET_LANGUAGES.get(targets.source)
        if language is not None and language != prover.language:
            problems.append(
                f"targets.source={targets.source!r} holds {language} statements but prover.language="
                f"{prover.language!r}; use prover={language}, or leave targets.source unset to use the "
                f"prover's own targets ({prover.default_targets})"
            )
    if targets.lean_repo_dir is not None:
        if not targets.lean_repo_dir.strip():
            problems.append("targets.lean_repo_dir must not be empty; use null when the targets are not a "
                            "LeanDojo file")
        elif prover.language != "lean":
            problems.append(f"targets.lean_repo_dir applies to Lean targets (LeanDojo files) only, but "
                            f"prover.language={prover.language!r}")
    at_least(problems, "targets.limit", targets.limit, 1)
    if not 0.0 <= targets.held_out_fraction < 1.0:
        problems.append(f"targets.held_out_fraction={targets.held_out_fraction!r} must lie in [0, 1)")


def _check_resources(problems: list[str], resources: ResourcesConfig, cfg: SGSConfig) -> None:
    """What the method, the model and the GPUs the config declares ask of the resources."""
    if cfg.method.conjectures_per_target > 0:
        at_least(problems, "resources.conjecturer_engines", resources.conjecturer_engines, 1)
    if cfg.method.use_guide:
        at_least(problems, "resources.guide_engines", resources.guide_engines, 1)
    if resources.simulated_gpus > 0:
        _check_simulated(problems, resources, cfg)
    on_cpu = [f"resources.{key}=0" for key in ("gpus_per_engine", "gpus_per_learner_worker")
              if getattr(resources, key) <= 0
              and not (key == "gpus_per_engine" and resources.colocate_engines_with_learner)]
    if cfg.model.needs_gpu and on_cpu:
        problems.append(
            f"model {cfg.model.name!r} needs a GPU but {' and '.join(on_cpu)} places it on CPU; "
            f"use resources=gpu_node or resources=cluster, or a CPU model (model=tiny)"
        )
    gpus = declared_gpus(resources)
    if gpus is not None:
        declared = (f"resources.simulated_gpus={resources.simulated_gpus}" if resources.simulated_gpus
                    else f"resources.num_gpus={resources.num_gpus}")
        engine_gpus = resources.gpus_per_engine * active_engines(resources, cfg.method)
        if engine_gpus > gpus:
            problems.append(
                f"the generation engines need {engine_gpus:g} GPUs (resources.gpus_per_engine times the "
                f"engines of the active roles) but {declared}"
            )
        learner_gpus = resources.gpus_per_learner_worker * resources.learner_workers
        if learner_gpus > gpus:
            problems.append(
                f"the learner needs {learner_gpus:g} GPUs (resources.gpus_per_learner_worker * "
                f"resources.learner_workers) but {declared}"
            )
        if resources.colocate_engines_with_learner and gpus < 1:
            problems.append(f"resources.colocate_engines_with_learner=true pins engines to the node's GPUs but "
                            f"{declared}")
        engines = active_engines(resources, cfg.method)
        sharing = math.ceil(engines / gpus) if gpus >= 1 else 0
        share = resources.engine_gpu_memory_fraction or 0.9  # vLLM's own default
        # Checked on the configured backend, so that a rehearsal (simulated GPUs) refuses it too.
        if resources.colocate_engines_with_learner and resources.engine_backend == "vllm" and sharing * share > 1:
            problems.append(f"{engines} colocated vLLM engines on {declared} put {sharing} on one GPU, each taking "
                            f"{share:g} of its memory; give at most {gpus} engines, or "
                            f"resources.engine_gpu_memory_fraction <= {1 / sharing:.2g}")


def _check_simulated(problems: list[str], resources: ResourcesConfig, cfg: SGSConfig) -> None:
    """What simulated GPUs cannot do: they compute on the CPU."""
    if cfg.model.needs_gpu:
        problems.append(f"resources.simulated_gpus={resources.simulated_gpus} computes on the CPU, but model "
                        f"{cfg.model.name!r} needs a real GPU (model.needs_gpu=true); use model=tiny")
    if resources.weight_transfer == "direct":
        problems.append("resources.simulated_gpus runs transformers engines, which load checkpoints; "
                        "use resources.weight_transfer=checkpoint")
    if resources.gpus_per_engine <= 0 and resources.gpus_per_learner_worker <= 0 \
            and not resources.colocate_engines_with_learner:
        problems.append(f"resources.simulated_gpus={resources.simulated_gpus} but no actor uses a GPU "
                        f"(resources.gpus_per_engine=0, resources.gpus_per_learner_worker=0, no colocated "
                        f"engines); use resources=gpu_node or resources=cluster")


def config_problems(cfg: DictConfig | SGSConfig) -> list[str]:
    """Every problem with a config's values, one message per problem.

    Each message names the offending key(s).  An empty list means the config
    is consistent (it does not mean this machine can run it: see
    :func:`requirements_problems`).
    """
    if isinstance(cfg, DictConfig):
        try:
            cfg = to_schema(cfg)
        except ConfigError as error:
            return error.problems
    else:
        # An SGSConfig built in Python: nothing has checked its choices, and the checks below read them.
        bad_choices = config_choice_problems(cfg)
        if bad_choices:
            return bad_choices
    problems: list[str] = []
    if not cfg.run_dir:
        problems.append("run_dir must not be empty")
    at_least(problems, "iterations", cfg.iterations, 1)
    at_least(problems, "stop.flat_iterations", cfg.stop.flat_iterations, 1)
    at_least(problems, "stop.min_iterations", cfg.stop.min_iterations, 0)
    if not cfg.experiment:
        problems.append("experiment must not be empty")
    _check_targets(problems, cfg.targets, cfg.prover)
    # The nodes that check themselves beside their fields (method, sampling, training, model,
    # prover, resources, evaluation, serve), the nodes still checked here, and what ties
    # nodes together.
    problems.extend(method_problems(cfg.method))
    problems.extend(solver_problems(cfg.solver))
    problems.extend(sampling_problems(cfg.sampling))
    problems.extend(training_problems(cfg.training))
    _batches_fill_the_workers(problems, "training", cfg.training, cfg.resources.learner_workers)
    problems.extend(model_problems(cfg.model))
    _check_model_fits(problems, cfg.model, cfg)
    problems.extend(prover_problems(cfg.prover))
    problems.extend(resources_problems(cfg.resources))
    _check_resources(problems, cfg.resources, cfg)
    _check_warmstart(problems, cfg.warmstart, cfg)
    problems.extend(evaluation_problems(cfg.evaluation))
    evaluation = cfg.evaluation
    problems.extend(benchmark_problems(evaluation.benchmark, evaluation.benchmark_file, cfg.prover.language))
    problems.extend(serve_problems(cfg.serve))
    return problems


def _check_warmstart(problems: list[str], ws: WarmstartConfig, cfg: SGSConfig) -> None:
    if ws.mode == "always" and ws.corpus is None:
        problems.append(
            f"warmstart.mode='always' needs a corpus, but warmstart.corpus is null (the {cfg.prover.language} "
            f"default is {cfg.prover.default_warmstart_corpus}); give warmstart.corpus=/path/to/corpus.jsonl "
            "or set warmstart.mode=never"
        )
    if ws.corpus is not None:
        if not ws.corpus.strip():
            problems.append("warmstart.corpus must not be empty; use null for no corpus")
        elif ws.corpus.startswith(HUB_SCHEME):
            problems.append(f"warmstart.corpus={ws.corpus!r}: the corpus must be a local file or a pkg:// path")
        else:
            try:
                resolve_source_path(ws.corpus)
            except ValueError as error:
                problems.append(f"warmstart.corpus: {error}")
    unknown = [role for role in ws.roles if role not in ROLES]
    if unknown:
        problems.append(f"warmstart.roles holds {', '.join(map(repr, unknown))}; roles are {', '.join(ROLES)}")
    if not ws.roles or len(set(ws.roles)) != len(ws.roles):
        problems.append(f"warmstart.roles={list(ws.roles)!r} must name at least one role, each once")
    at_least(problems, "warmstart.epochs", ws.epochs, 1)
    at_least(problems, "warmstart.max_examples", ws.max_examples, 1)
    positive(problems, "warmstart.learning_rate", ws.learning_rate)
    at_least(problems, "warmstart.global_batch_size", ws.global_batch_size, 1)
    at_least(problems, "warmstart.micro_batch_size", ws.micro_batch_size, 1)
    _batches_fill_the_workers(problems, "warmstart", ws, cfg.resources.learner_workers)
    at_least(problems, "warmstart.report_targets", ws.report_targets, 1)


def _hydra_job_dir() -> str | None:
    """Output directory of the current Hydra multirun job, if there is one."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN or OmegaConf.is_missing(hydra_cfg.runtime, "output_dir"):
        return None
    return hydra_cfg.runtime.output_dir


def validate(cfg: DictConfig | SGSConfig) -> SGSConfig:
    """Check a composed config and return it as a typed :class:`SGSConfig`.

    Raises :class:`ConfigError` listing every problem found by
    :func:`config_problems`.  Inside a Hydra multirun job the returned
    ``run_dir`` is that job's own directory (``<run_dir>/<job number>``,
    Hydra's ``runtime.output_dir``), so the jobs of a sweep never share state.
    """
    problems = config_problems(cfg)
    if problems:
        raise ConfigError(problems)
    typed = to_schema(cfg) if isinstance(cfg, DictConfig) else cfg
    job_dir = _hydra_job_dir()
    if job_dir is not None:
        typed.run_dir = job_dir
    return typed
