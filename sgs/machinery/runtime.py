"""Wiring: from a validated config to the running pieces the loop drives.

Everything here is plumbing (Ray, actors, settings objects); the algorithm
itself lives in :mod:`sgs.loop`.  The pieces:

* :func:`start_ray`: a fresh local cluster, or the one ``resources.ray_address`` names,
  whose worker processes each know that cluster's address (:func:`own_cluster_runtime_env`);
* :func:`model_paths`: where the base model, its tokenizer and the Guide come from;
* :func:`start_checked_pool`: the run's verifier pool, its prover checked
  before anything else starts;
* :func:`build_runtime`: one engine group per active role beside that pool
  (:func:`start_engines`, :func:`start_verifier_pool`, which every entry point
  uses; prompts are :mod:`sgs.machinery.prompts`);
* :func:`train_settings` / :func:`sampling_settings`: config values as the
  learner's and the engines' settings objects.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ray

from lean_env.backends import BackendSpec
from lean_env.cache import VerdictCache
from lean_env.pool import VerifierPool, VerifierPoolSettings
from lean_env.verdict import ProofTask, Status
from sgs.config import (
    ENGINE_HEARTBEAT_INTERVAL_S,
    STATEMENT_GRAMMAR,
    ProverConfig,
    RoleSampling,
    SGSConfig,
    engine_backend,
    declared_gpus,
    warmstart_enabled,
    weight_transfer_backend,
)
from sgs.machinery.engines import EngineGroup, EngineGroupSettings, SamplingSettings, shares_gpu
from sgs.machinery.learner import Learner, RayTrainLearner, TrainSettings
from sgs.machinery.models import ModelPaths, resolve_model_paths
from sgs.machinery.placement import PlacementRecord
from sgs.machinery.prompts import Prompter
from sgs.method.roles import template_dir
from sgs.method.registry import trained_roles
from sgs.method.roles.grammar import statement_grammar
from sgs.state.records import Target
from sgs.state.targets import corpus_texts, load_targets
from sgs.state.warmstart import load_corpus

log = logging.getLogger(__name__)

#: How to get past the Ray 2.60 dashboard's login.
DASHBOARD_TOKEN_HINT = ("Ray 2.60 asks for the token in ~/.ray/auth_token; RAY_AUTH_MODE=disabled turns that "
                        "off on a private machine")
#: Verdicts of every check the run made, so a resumed run re-verifies nothing.
VERDICT_CACHE_FILE = "verdicts.jsonl"
#: The run directory's log of proofs the first check accepted and the audit rejected.
AUDIT_LOG_FILE = "audit_disagreements.jsonl"
#: What each verifier worker asks of ``resources.verifier_node_resource``: a
#: node declaring 1 of it takes up to 1,000 workers (its CPUs are the real limit).
VERIFIER_NODE_SHARE = 0.001
#: The run directory's folder for Ray Train's state of the run's learner (emptied when the run ends).
LEARNER_STATE_DIR = "learner"


@dataclass(frozen=True)
class Checkpoint:
    """Weights an engine serves: a Hugging Face directory (or hub id) and its policy version."""

    path: str
    version: int


def active_roles(cfg: SGSConfig) -> list[str]:
    """The roles this method uses: the Solver always; the Conjecturer when it
    writes conjectures; the Guide when it scores them."""
    roles = ["solver"]
    if cfg.method.conjectures_per_target > 0:
        roles.append("conjecturer")
    if cfg.method.use_guide:
        roles.append("guide")
    return roles


# --------------------------------------------------------------------------
# Ray
# --------------------------------------------------------------------------


def reserved_cpus(cfg: SGSConfig) -> float:
    """CPUs the run's actors reserve: engines, verifier workers, learner workers."""
    res = cfg.resources
    engines = sum(getattr(res, f"{role}_engines") for role in active_roles(cfg))
    return (engines * res.cpus_per_engine + res.verifier_workers * res.cpus_per_verifier
            + res.learner_workers * res.cpus_per_learner_worker)


def _pin_own_cluster_hook() -> Any:
    """A function each of the job's Ray worker processes runs as it starts (Ray's
    ``worker_process_setup_hook``): it sets ``RAY_ADDRESS`` in that process to the
    address of the cluster the process belongs to.

    Ray code that looks a cluster up by itself finds the wrong one, or none, when
    several Ray clusters run on one machine.  Ray Train's ``PlacementGroupCleaner``
    (every training run starts one) and its state actor ask the state API whether
    the Train controller still lives (``ray.util.state.get_actor`` with no address),
    which takes ``RAY_ADDRESS``, else the cluster ``ray start`` last recorded in
    ``/tmp/ray/ray_current_cluster``, else the only GCS process running here, and
    raises "Found multiple active Ray instances" when there are several
    (``ray/dashboard/utils.py`` ``get_address_for_submission_client``,
    ``ray/_private/services.py`` ``canonicalize_bootstrap_address_or_die``, Ray
    2.60): the cleaner's thread dies with that traceback on the console.  Where
    ``ray start`` recorded another cluster, the cleaner asks that one, which knows
    no such controller; it takes the controller for dead and may remove the run's
    placement group.  A worker's environment is its raylet's, fixed when the
    cluster started, before its address was known; so each worker sets the
    variable itself.

    The function is nested so that cloudpickle ships it by value: a worker runs it
    without importing this module (and torch, transformers... with it), and before
    the driver's ``sys.path`` reaches the worker.  It never raises, since a hook
    that fails ends the worker."""

    def pin_ray_address() -> None:
        import os

        import ray

        try:
            if ray.is_initialized():  # always, in a worker; asking the context otherwise would start a cluster
                os.environ["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address
        except Exception:  # a worker without it still runs; only lookups by address are affected
            pass

    return pin_ray_address


def own_cluster_runtime_env(address: str | None = None) -> dict[str, Any] | None:
    """The job-level ``runtime_env`` for ``ray.init(address=address)`` that makes
    every worker process of the job, and of the actors and tasks it starts (Ray
    Train's controller and its detached helpers inherit it), find its own cluster
    (:func:`_pin_own_cluster_hook`).  None where Ray would not run the hook or where
    it would clash: a Ray Client address (``ray://``), or a driver started by
    ``ray job submit`` whose job already sets a setup hook."""
    if address is not None and "://" in address:
        return None
    injected = os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR")
    if injected:
        try:
            job_env = json.loads(injected).get("runtime_env") or {}
        except (ValueError, AttributeError):
            job_env = {}
        if "worker_process_setup_hook" in job_env or any(
                "SETUP_HOOK" in key for key in (job_env.get("env_vars") or {})):
            return None
    return {"worker_process_setup_hook": _pin_own_cluster_hook()}


def start_ray(cfg: SGSConfig, reserved: float | None = None) -> Any:
    """Join ``resources.ray_address``, or start a fresh local cluster.

    A local cluster is always a new one (``address="local"``): a plain
    ``ray.init()`` would silently join any cluster another user started with
    ``ray start`` on the same machine.  Unless ``resources.num_cpus`` says
    otherwise, it declares enough logical CPUs to place every actor at once
    (they then share the machine's cores), since engines, verifiers and the
    learner all stay alive for the whole run.  ``reserved`` is what the
    caller's actors reserve when they are not a run's (:func:`reserved_cpus`).
    It declares ``resources.simulated_gpus`` logical GPUs when that is set,
    else ``resources.num_gpus``, and starts the dashboard unless
    ``resources.include_dashboard`` is false.  Either way each worker process of the run
    knows its own cluster's address (:func:`own_cluster_runtime_env`), so that
    another Ray cluster on the machine neither confuses Ray Train nor fills the
    console with its tracebacks.
    """
    res = cfg.resources
    if res.ray_address is not None:
        context = ray.init(address=res.ray_address, runtime_env=own_cluster_runtime_env(res.ray_address))
        declared = ray.cluster_resources().get("GPU", 0)
        if res.simulated_gpus and declared != res.simulated_gpus:
            log.warning("resources.simulated_gpus=%d but the cluster at %s declares %g GPUs",
                        res.simulated_gpus, res.ray_address, declared)
        return context
    num_cpus = res.num_cpus
    if num_cpus is None:
        # +1: Ray Train's controller needs a CPU slot beside its workers.
        needed = reserved_cpus(cfg) if reserved is None else reserved
        num_cpus = max(os.cpu_count() or 1, math.ceil(needed) + 1)
    # None, not True, when it is on: Ray's default, which starts the dashboard where its
    # dependencies are installed and only warns where they are not.
    return ray.init(address="local", num_cpus=num_cpus, num_gpus=declared_gpus(res),
                    include_dashboard=None if res.include_dashboard else False,
                    runtime_env=own_cluster_runtime_env())


# --------------------------------------------------------------------------
# The base model
# --------------------------------------------------------------------------


def model_paths(cfg: SGSConfig) -> ModelPaths:
    """The base model, tokenizer and Guide locations (built here for the tiny model).

    The tiny model's tokenizer is trained on the text it will read and write:
    every target of the source (``targets.limit`` is ignored, so a shorter run
    shares the model and its cached warm start), the prompt templates and,
    when the run warm-starts, the corpus completions.
    """
    texts: list[str] = []
    if cfg.model.path is None:
        every_target = load_targets(replace(cfg.targets, limit=None), cfg.prover.language)
        texts = corpus_texts(every_target)
        texts += [p.read_text() for p in sorted(template_dir(cfg.prover.language).glob("*.j2"))]
        if warmstart_enabled(cfg):
            texts += [example.completion for example in load_corpus(cfg.warmstart.corpus, cfg.prover.language)]
    return resolve_model_paths(cfg.model, seed=cfg.seed, corpus=texts)


# --------------------------------------------------------------------------
# Settings objects
# --------------------------------------------------------------------------


def sampling_settings(role: RoleSampling, *, n: int, seed: int, max_seq_len: int | None = None) -> SamplingSettings:
    """One role's sampling config as engine settings for ``n`` samples per prompt
    (``max_seq_len``: see :class:`SamplingSettings`)."""
    return SamplingSettings(n=n, max_tokens=role.max_tokens, temperature=role.temperature,
                            top_p=role.top_p, seed=seed, max_seq_len=max_seq_len)


def sample_max_seq_len(cfg: SGSConfig, role: str) -> int | None:
    """The cap on prompt + completion of ``role``'s loop samples: ``training.max_seq_len``
    for a role the learner trains (:func:`trained_roles`), so that nothing is generated
    that training would cut, and for the Solver in every experiment, so that a method
    that never trains it (parallel sampling) samples exactly as the others do and
    shares their iteration-0 samples (``sampling.share_start_samples``: the cap is
    part of a sample's key); None (no cap) for the others."""
    return cfg.training.max_seq_len if role == "solver" or role in trained_roles(cfg.method) else None


def solver_settings(cfg: SGSConfig, *, seed: int) -> SamplingSettings:
    """The prove phase's Solver settings (one sample per request), capped by :func:`sample_max_seq_len`."""
    return sampling_settings(cfg.sampling.solver, n=1, seed=seed, max_seq_len=sample_max_seq_len(cfg, "solver"))


def conjecturer_settings(cfg: SGSConfig, *, seed: int) -> SamplingSettings:
    """The Conjecturer's engine settings (one sample per prompt), with its grammar if it has one,
    capped by :func:`sample_max_seq_len`."""
    grammar = grammar_text(cfg.sampling.conjecturer_grammar, cfg.prover.language)
    settings = sampling_settings(cfg.sampling.conjecturer, n=1, seed=seed,
                                 max_seq_len=sample_max_seq_len(cfg, "conjecturer"))
    return replace(settings, grammar=grammar)


def grammar_text(spec: str | None, language: str) -> str | None:
    """The EBNF text a grammar setting names: None for none, the language's
    built-in grammar for ``statement`` (None where the language has none), or
    the contents of a grammar file.  Raises ``ValueError`` for a file that
    cannot be read or is empty."""
    if spec is None:
        return None
    if spec == STATEMENT_GRAMMAR:
        return statement_grammar(language)
    try:
        text = Path(spec).expanduser().read_text()
    except OSError as error:
        raise ValueError(f"grammar file {spec!r} cannot be read: {error.strerror or error}") from None
    if not text.strip():
        raise ValueError(f"grammar file {spec!r} is empty")
    return text


def train_settings(cfg: SGSConfig) -> TrainSettings:
    """The learner's settings for both trained roles (the seed is set per run by the loop)."""
    training, method, res = cfg.training, cfg.method, cfg.resources
    bf16 = training.bf16 if training.bf16 is not None else cfg.model.dtype == "bfloat16"
    return TrainSettings(
        learning_rate=training.learning_rate * cfg.model.learning_rate_scale,
        global_batch_size=training.global_batch_size,
        micro_batch_size=training.micro_batch_size,
        adam_beta1=training.adam_beta1,
        adam_beta2=training.adam_beta2,
        adam_epsilon=training.adam_epsilon,
        weight_decay=training.weight_decay,
        grad_clip_norm=training.grad_clip_norm,
        epochs=training.epochs_per_iteration,
        max_seq_len=training.max_seq_len,
        loss_normalisation=method.loss_normalisation,
        cispo_ratio_min=method.cispo_ratio_min,
        cispo_ratio_max=method.cispo_ratio_max,
        bf16=bf16,
        gradient_checkpointing=training.gradient_checkpointing,
        optimizer_state=training.optimizer_state,
        strategy=training.strategy,
        learner_workers=res.learner_workers,
        cpus_per_learner_worker=res.cpus_per_learner_worker,
        use_gpu=res.gpus_per_learner_worker > 0,
        simulated_gpus=res.simulated_gpus > 0,
        learner_placement=res.learner_placement,
        learner_restarts=res.learner_restarts,
        learner_start_timeout_s=res.learner_start_timeout_s,
        seed=cfg.seed,
    )


def backend_spec(prover: ProverConfig) -> BackendSpec:
    """The verifier workers' backend recipe from the ``prover`` config node."""
    options: dict[str, Any] = {"timeout": prover.timeout, "allowed_axioms": list(prover.allowed_axioms)}
    if prover.backend == "rocq":
        options["coqtop"] = prover.rocq.coqtop
        options["allow_bug_prone_features"] = list(prover.rocq.allow_bug_prone_features)
        if prover.rocq.tactic_libraries:
            options["tactic_libraries"] = list(prover.rocq.tactic_libraries)
    else:
        options["repl_command"] = prover.lean.repl_command
        options["project_dir"] = prover.lean.project_dir
        options["axiom_check"] = prover.lean.axiom_check
        options["lake_command"] = prover.lean.lake_command
        options["writable_paths"] = tuple(prover.lean.writable_paths)
    # The plain name: lean_env knows nothing of sgs, and its verifier workers unpickle the spec.
    return BackendSpec(str(prover.backend), options)


# --------------------------------------------------------------------------
# The running pieces
# --------------------------------------------------------------------------


@dataclass
class Runtime:
    """The actors one run drives: an engine group per active role, the
    verifier pool, and the learner that trains the roles (one Ray Train run
    for the whole run, :class:`~sgs.machinery.learner.RayTrainLearner`); and
    the run directory's record of where they run."""

    engines: dict[str, EngineGroup]
    pool: VerifierPool
    prompter: Prompter
    placement: PlacementRecord
    learner: Learner
    """What the training phase calls with its jobs."""

    def shutdown(self) -> None:
        self.learner.close()
        for group in self.engines.values():
            group.shutdown()
        self.pool.shutdown()


def pinned_gpus(cfg: SGSConfig) -> dict[str, list[str]]:
    """:func:`colocated_gpu_ids` for the GPUs of the running local cluster,
    as the GPU ids Ray gives the learner's ranks: those the driver's
    ``CUDA_VISIBLE_DEVICES`` lists when it lists enough (a scheduler's
    share of a node, "4,5,6,7"; the local raylet inherits the variable),
    else 0 to N-1."""
    if not cfg.resources.colocate_engines_with_learner:
        return {}
    count = int(ray.cluster_resources().get("GPU", 0))
    visible = [gpu for gpu in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if gpu.strip()]
    ids = visible[:count] if len(visible) >= count else [str(index) for index in range(count)]
    return {role: [ids[index] for index in indices] for role, indices in colocated_gpu_ids(cfg, count).items()}


def colocated_gpu_ids(cfg: SGSConfig, node_gpus: int) -> dict[str, list[int]]:
    """With ``resources.colocate_engines_with_learner``: the GPU each engine
    is pinned to, round-robin over the node's GPUs in role order (Solver
    engines first); empty otherwise."""
    if not cfg.resources.colocate_engines_with_learner:
        return {}
    if node_gpus < 1:
        raise RuntimeError("resources.colocate_engines_with_learner=true needs a node with GPUs; Ray sees none")
    pinned, next_gpu = {}, 0
    for role in active_roles(cfg):
        count = getattr(cfg.resources, f"{role}_engines")
        pinned[role] = [(next_gpu + i) % node_gpus for i in range(count)]
        next_gpu += count
    return pinned


def engine_options(cfg: SGSConfig, policy_version: int, *, weight_transfer: bool = True) -> dict[str, Any]:
    """The engine constructor's keyword arguments (``weight_transfer``: the
    engines may take weights the learner sends, when configured)."""
    options: dict[str, Any] = {"policy_version": policy_version, "dtype": cfg.model.dtype}
    backend = weight_transfer_backend(cfg.resources)
    if backend is not None and weight_transfer:
        options["weight_transfer_backend"] = backend
    if engine_backend(cfg.resources) == "vllm" and cfg.resources.engine_gpu_memory_fraction is not None:
        options["gpu_memory_utilization"] = cfg.resources.engine_gpu_memory_fraction
    if cfg.resources.simulated_gpus > 0:
        # The engine's GPU is a logical one: compute on the CPU even where CUDA is present.
        options["device"] = "cpu"
    return options


def start_engines(cfg: SGSConfig, name: str, checkpoint: Checkpoint, *, num_engines: int,
                  gpu_ids: list[str] | None = None, weight_transfer: bool = True, wait: bool = True) -> EngineGroup:
    """One group of ``num_engines`` engines on ``checkpoint``, placed as
    ``resources`` says (``gpu_ids``: colocated engines' GPUs, see
    :func:`colocated_gpu_ids`; ``wait``: see :class:`EngineGroup`); the
    loop's, the warm-up report's and the evaluation's engines are all started
    here, so they are placed alike."""
    res = cfg.resources
    settings = EngineGroupSettings(
        num_engines=num_engines,
        backend=engine_backend(res),
        engine_options=engine_options(cfg, checkpoint.version, weight_transfer=weight_transfer),
        num_cpus=res.cpus_per_engine,
        num_gpus=res.gpus_per_engine,
        placement_strategy=res.engine_placement,
        gpu_ids=gpu_ids,
        heartbeat_interval_s=ENGINE_HEARTBEAT_INTERVAL_S,
        heartbeat_timeout_s=res.engine_heartbeat_timeout_s,
        load_timeout_s=res.engine_restart_timeout_s,
    )
    return EngineGroup(name, checkpoint.path, settings, wait=wait)


def start_verifier_pool(cfg: SGSConfig, *, name: str = "verifier", run_dir: Path | None = None) -> VerifierPool:
    """The verifier pool, placed as ``resources`` says (on the nodes that
    carry ``resources.verifier_node_resource``, if set).  With ``run_dir``
    its verdict cache and audit log live there, so a resumed run answers the
    checks it already made without asking the prover again."""
    res = cfg.resources
    settings = VerifierPoolSettings(
        num_workers=res.verifier_workers,
        timeout=cfg.prover.timeout,
        audit_fraction=cfg.prover.audit_fraction,
        audit_log=run_dir / AUDIT_LOG_FILE if run_dir is not None else None,
        audit_seed=cfg.seed,
        cpus_per_worker=res.cpus_per_verifier,
        name=name,
        placement_strategy=res.verifier_placement,
        bundle_resources={res.verifier_node_resource: VERIFIER_NODE_SHARE} if res.verifier_node_resource else None,
    )
    cache = VerdictCache(run_dir / VERDICT_CACHE_FILE) if run_dir is not None else None
    return VerifierPool(backend_spec(cfg.prover), settings, cache)


class ProverUnavailable(RuntimeError):
    """The verifier pool's prover could not answer a check of a trusted statement."""


#: The task id of :func:`check_prover`'s statement check.
PROVER_CHECK_ID = "prover-check"


def check_prover(pool: VerifierPool, target: Target) -> None:
    """Elaborate ``target``'s statement (trusted) through ``pool`` before anything is
    sampled; raise :class:`ProverUnavailable` naming the cause when the prover could not
    answer (a system error: a prover that cannot start, a missing library, a broken
    sandbox).  Otherwise such a run shows it only when the first iteration is recorded,
    hours into a paper-sized run.  A statement the prover refuses is the target's
    problem, not the prover's: the run goes on."""
    pool.submit_statement(ProofTask(id=PROVER_CHECK_ID, header=target.header, statement=target.statement, proof="",
                                    load_path=target.load_path))
    verdicts = {task.id: verdict for task, verdict in pool.results()}
    verdict = verdicts[PROVER_CHECK_ID]
    if verdict.status == Status.SYSTEM_ERROR:
        said = " ".join(" ".join(verdict.messages).split())[:600]
        raise ProverUnavailable(f"the prover could not check the statement of target {target.id!r} "
                                f"({verdict.reason}): {said or 'no message'}")


def start_checked_pool(cfg: SGSConfig, run_dir: Path, check_target: Target) -> VerifierPool:
    """The run's verifier pool (verdict cache and audit log in ``run_dir``),
    whose prover has elaborated ``check_target``'s statement
    (:func:`check_prover`; the pool is shut down again when it could not)."""
    pool = start_verifier_pool(cfg, run_dir=run_dir)
    try:
        check_prover(pool, check_target)
    except BaseException:
        pool.shutdown()
        raise
    return pool


def build_runtime(cfg: SGSConfig, run_dir: Path, weights: dict[str, Checkpoint], tokenizer: Any,
                  pool: VerifierPool) -> Runtime:
    """Start the engines (each active role on ``weights[role]``) beside the
    run's verifier ``pool`` (:func:`start_checked_pool`), and record where
    they run (``<run_dir>/placement.json``).  The runtime owns the pool from
    here; when an engine cannot start, the engines are shut down and the
    pool is left to the caller."""
    engines = {}
    pinned = pinned_gpus(cfg)
    # Every role's engines load at once, then all are waited for; unless engines share a GPU,
    # where each must load alone to size its memory right (see shares_gpu).
    one_at_a_time = shares_gpu([gpu for ids in pinned.values() for gpu in ids], cfg.resources.gpus_per_engine)
    try:
        for role in active_roles(cfg):
            engines[role] = start_engines(cfg, role, weights[role], gpu_ids=pinned.get(role), wait=one_at_a_time,
                                          num_engines=getattr(cfg.resources, f"{role}_engines"))
        for group in engines.values():
            group.wait_until_loaded()
        placement = PlacementRecord(run_dir, cfg.resources.simulated_gpus)
        placement.actors(engines, pool)
    except BaseException:
        for group in engines.values():
            group.shutdown()
        raise
    # Ray Train's state for the run's learner; the workers start at the first training phase.
    learner = RayTrainLearner(str(run_dir / LEARNER_STATE_DIR), name=f"{cfg.experiment}-{run_dir.name}-learner")
    return Runtime(engines=engines, pool=pool, prompter=Prompter(cfg.prover.language, tokenizer), placement=placement,
                   learner=learner)
