"""The driver side of a training run: :func:`train` (one model) and
:func:`train_models` (several, one after another in one run) validate and
plan the examples, put one shard per worker in the Ray object store (no
shared file system needed; each worker fetches only its own), run the
TorchTrainer, then move each checkpoint Ray Train stored into its
``output_dir`` and save the tokenizer beside it, so
``TransformersEngine.load_weights`` can read the directory.  A run in which
Ray loses workers is started again from its base checkpoints
(``TrainSettings.learner_restarts``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

import ray
import ray.train
from ray.exceptions import RayActorError
from ray.train import ControllerError, RunConfig, ScalingConfig, WorkerGroupError
from ray.train.torch import TorchConfig, TorchTrainer
from ray.train.v2._internal.exceptions import WorkerHealthCheckFailedError, WorkerHealthCheckTimeoutError
from transformers import AutoConfig, AutoTokenizer

from sgs.machinery.engines.weight_transfer import WeightTarget
from sgs.machinery.learner.plan import plan_steps, truncate, validate_examples
from sgs.machinery.learner.settings import (
    PLACEMENT_FILE,
    PROBE_FILE,
    STAGING_DIR,
    TrainExample,
    TrainMetrics,
    TrainResult,
    TrainSettings,
)
from sgs.machinery.learner.strategy import find_deepspeed_resume_dir
from sgs.machinery.learner.worker import train_worker
from sgs.method.registry import objective as registered_objective

#: How often Ray Train's controller polls its workers, in seconds, unless the
#: user set ``RAY_TRAIN_HEALTH_CHECK_INTERVAL_S``.  Each change of the run's
#: state waits for the next poll, so Ray's default of 2 s makes a short run
#: seconds longer (``benchmarks/startup.py`` measures it); a poll is one small
#: call per worker.
CONTROLLER_POLL_INTERVAL_S = "0.5"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainJob:
    """One model a learner run trains (:func:`train_models`); the arguments of :func:`train`."""

    examples: Sequence[TrainExample]
    base_checkpoint: str
    #: the name of a registered objective (:mod:`sgs.method.registry`)
    objective: str
    output_dir: str
    #: replaces ``TrainSettings.seed`` for this model (the order of its examples, its initial state)
    seed: int
    probe: tuple[list[int], list[int]] | None = None
    weight_target: WeightTarget | None = None


class Learner(Protocol):
    """What trains the roles' weights, as the loop's training phase calls it:
    :func:`train_models` (one Ray Train run), or a test double that records
    the jobs it was given (``tests/doubles.py``)."""

    def __call__(self, jobs: Sequence[TrainJob], *, settings: TrainSettings, run_name: str) -> list[TrainResult]:
        """Train each job's model from its base checkpoint into its
        ``output_dir``; the results in the jobs' order."""


def train(
    examples: Sequence[TrainExample],
    *,
    base_checkpoint: str,
    objective: str,
    settings: TrainSettings,
    output_dir: str,
    run_name: str,
    probe: tuple[list[int], list[int]] | None = None,
    weight_target: WeightTarget | None = None,
) -> TrainResult:
    """Train ``base_checkpoint`` on ``examples`` with one Ray Train run; save to ``output_dir``.

    Args:
        examples: the sequences the objective selected (validated here).
        base_checkpoint: Hugging Face checkpoint (directory or hub id) to start from.
        objective: the name of a registered objective (:mod:`sgs.method.registry`):
            "reinforce", "reinforce_half", "ei" (weighted NLL), "conjecturer" (weighted NLL
            on normalised rewards in [-1, 1]), "cispo", or one registered since.
        settings: optimisation and scaling settings.
        output_dir: where the new checkpoint goes; owned by this call (files of the same
            name are replaced).  Must differ from base_checkpoint.
        run_name: the Ray Train run's name, shown in the dashboard; unique per run by
            convention.
        probe: (prompt ids, completion ids) whose log-probs under the trained weights
            come back in ``TrainResult.probe_logprobs``.  Ray's state for the run lives in
            ``output_dir/.ray_train`` and is removed first, so a retried run never
            reloads a stale one.
        weight_target: running engines that get the trained weights directly from
            rank 0 (:mod:`sgs.machinery.engines.weight_transfer`) once training is done;
            ``TrainResult.weights_sent`` says whether they did.

    With ``optimizer_state="persist"`` and DeepSpeed, a base checkpoint that
    holds ``deepspeed/`` must come from a run with the same number of workers
    (ValueError otherwise, before any worker starts).

    An empty ``examples`` list starts no run and returns ``base_checkpoint``
    unchanged with zero metrics: the loop then keeps the current weights.
    Requires Ray to be initialised (``ray.init``) when there is anything to
    train.  Workers load ``base_checkpoint`` themselves, so on a multi-node
    cluster it must be a hub id or on a file system every node sees.
    """
    job = TrainJob(examples, base_checkpoint, objective, output_dir, settings.seed, probe, weight_target)
    return train_models([job], settings=settings, run_name=run_name)[0]


def train_models(jobs: Sequence[TrainJob], *, settings: TrainSettings, run_name: str) -> list[TrainResult]:
    """Train several models one after another in **one** Ray Train run (the loop's Solver and
    Conjecturer each iteration): the workers start, join their process group and import
    the libraries once, which costs more than a small run's training (12-17 s of a one-worker
    run on 2 CPU cores; 30-40 s on an H100 machine).  Each job is what :func:`train`'s
    arguments say, with its own seed; the results come back in the jobs' order.  Every job
    is validated before anything starts; jobs without examples start nothing."""
    results: list[TrainResult | None] = [None] * len(jobs)
    configs = []
    for index, job in enumerate(jobs):
        objective = registered_objective(job.objective)
        vocab_size = AutoConfig.from_pretrained(job.base_checkpoint).vocab_size
        validate_examples(job.examples, objective, vocab_size)
        if not job.examples:
            results[index] = TrainResult(checkpoint_dir=job.base_checkpoint, metrics=_zero_metrics())
            continue
        output_dir = os.path.abspath(job.output_dir)
        if os.path.realpath(job.base_checkpoint) == os.path.realpath(output_dir):
            raise ValueError(f"output_dir {output_dir} is the base checkpoint; write the new weights elsewhere")
        job_settings = replace(settings, seed=job.seed)
        truncated = [truncate(example, settings.max_seq_len, i) for i, example in enumerate(job.examples)]
        configs.append({
            "job": index,
            "output_dir": output_dir,
            "num_truncated": sum(a is not b for a, b in zip(job.examples, truncated)),
            # Each worker fetches only its own share; the refs stay alive here for the whole run.
            "plans": [ray.put(worker_plan) for worker_plan in plan_steps(truncated, objective, job_settings)],
            "settings": asdict(job_settings),
            # The entry itself, not its name: an objective registered in this process only
            # (a test's) trains too.
            "objective": objective,
            "base_checkpoint": job.base_checkpoint,
            "deepspeed_resume_dir": find_deepspeed_resume_dir(job.base_checkpoint, job_settings),
            "probe": job.probe,
            "weight_target": job.weight_target,
        })
    if len({config["output_dir"] for config in configs}) < len(configs):
        raise ValueError(f"two jobs of run {run_name!r} write to the same output_dir")
    if not configs:
        return results

    staging = os.path.join(configs[0]["output_dir"], STAGING_DIR)
    for config in configs:
        os.makedirs(config["output_dir"], exist_ok=True)
    # Read when the run starts: the controller gets it from this process's environment.
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", CONTROLLER_POLL_INTERVAL_S)
    for attempt in range(settings.learner_restarts + 1):
        # A fresh start each time: Ray's state of a lost attempt is never reloaded.
        shutil.rmtree(staging, ignore_errors=True)
        try:
            result = fit_interruptibly(_trainer(configs, settings, run_name, staging))
            break
        except (ControllerError, WorkerGroupError) as error:
            if attempt == settings.learner_restarts or not lost_workers(error):
                raise
            log.warning("Ray Train run %r lost its workers (%s); starting it again from the base checkpoint "
                        "(restart %d of at most %d)", run_name, error, attempt + 1, settings.learner_restarts)
    # One checkpoint per job, each reported with its job's index.
    reported = {metrics["job"]: (checkpoint, metrics) for checkpoint, metrics in result.best_checkpoints or []}
    for config in configs:
        if config["job"] not in reported:
            raise RuntimeError(f"Ray Train run {run_name!r} finished without a checkpoint for job {config['job']}")
        checkpoint, metrics = reported[config["job"]]
        results[config["job"]] = _collect(checkpoint, metrics, config, jobs[config["job"]], restarts=attempt)
    shutil.rmtree(staging, ignore_errors=True)
    return results


def fit_interruptibly(trainer: Any) -> Any:
    """``trainer.fit()`` in a thread of its own, the driver's main thread
    waiting for it.  Called on the main thread, Ray Train installs a SIGINT
    handler that aborts its run and never puts the driver's own back: a
    Ctrl-C during a training phase was absorbed and the loop went on, and so
    did every later one.  Here a Ctrl-C raises KeyboardInterrupt as anywhere
    else in the loop; the run's Ray Train workers end with the driver, and a
    resumed run redoes the unfinished phase.  ``fit``'s own error is raised
    here as it is."""
    outcome: dict[str, Any] = {}

    def fit() -> None:
        try:
            outcome["result"] = trainer.fit()
        except BaseException as error:
            outcome["error"] = error

    # A daemon: a driver that stops on Ctrl-C must not wait for the run at exit.
    thread = threading.Thread(target=fit, name="ray-train-fit", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.5)   # a timed wait, so that SIGINT is handled between waits
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _trainer(configs: list[dict[str, Any]], settings: TrainSettings, run_name: str, staging: str) -> TorchTrainer:
    """The Ray Train run of ``configs`` (one per job), its state kept under ``staging``."""
    return TorchTrainer(
        train_worker,
        train_loop_config={"jobs": configs},
        scaling_config=ScalingConfig(
            num_workers=settings.learner_workers,
            use_gpu=settings.use_gpu,
            resources_per_worker={"CPU": settings.cpus_per_learner_worker, **({"GPU": 1} if settings.use_gpu else {})},
            placement_strategy=settings.learner_placement,
        ),
        torch_config=TorchConfig(backend="nccl" if settings.use_gpu and not settings.simulated_gpus else "gloo"),
        run_config=RunConfig(name=run_name, storage_path=staging),
    )


def lost_workers(error: ControllerError | WorkerGroupError) -> bool:
    """Whether a failed Ray Train run failed because Ray lost its workers (a
    worker process or its node died, its placement group was removed), which
    starting the run again can mend, rather than because the training code
    raised, which it cannot.

    Ray Train retries some of these itself, but not a worker lost while the
    training function is being launched on it: that one comes back as a
    ControllerError around a RayActorError (Ray 2.60)."""
    if isinstance(error, ControllerError):
        return isinstance(error.controller_failure, RayActorError)
    lost = (RayActorError, WorkerHealthCheckFailedError, WorkerHealthCheckTimeoutError)
    return bool(error.worker_failures) and all(isinstance(failure, lost) for failure in error.worker_failures.values())


def _collect(checkpoint: ray.train.Checkpoint, reported: dict[str, Any], config: dict[str, Any],
             job: TrainJob, restarts: int) -> TrainResult:
    """Move one job's checkpoint from Ray's storage into its output_dir (with the tokenizer
    beside it, so engines can load the directory) and read its numbers."""
    output_dir = config["output_dir"]
    with checkpoint.as_directory() as checkpoint_dir:
        for entry in os.listdir(checkpoint_dir):
            target = os.path.join(output_dir, entry)
            if os.path.isdir(target):
                shutil.rmtree(target)
            shutil.move(os.path.join(checkpoint_dir, entry), target)
    AutoTokenizer.from_pretrained(job.base_checkpoint).save_pretrained(output_dir)
    return TrainResult(
        checkpoint_dir=output_dir,
        metrics=TrainMetrics(
            loss=reported["loss"],
            grad_norm=reported["grad_norm"],
            num_examples=len(job.examples),
            num_tokens=reported["num_tokens"],
            num_steps=reported["num_steps"],
            num_truncated=config["num_truncated"],
            train_seconds=reported["train_seconds"],
            tokens_per_second=reported["num_tokens"] / max(reported["train_seconds"], 1e-9),
        ),
        probe_logprobs=_read_and_remove(output_dir, PROBE_FILE) if job.probe is not None else None,
        placement=_read_and_remove(output_dir, PLACEMENT_FILE),
        weights_sent=reported.get("weights_sent", False),
        weight_transfer_seconds=reported.get("weight_transfer_seconds", 0.0),
        weight_transfer_error=reported.get("weight_transfer_error"),
        restarts=restarts,
    )


def _read_and_remove(checkpoint_dir: str, name: str) -> Any:
    """A JSON file rank 0 saved beside the weights (then removed: the
    checkpoint stays a plain Hugging Face directory)."""
    path = os.path.join(checkpoint_dir, name)
    with open(path) as handle:
        values = json.load(handle)
    os.remove(path)
    return values


def _zero_metrics() -> TrainMetrics:
    return TrainMetrics(
        loss=0.0,
        grad_norm=0.0,
        num_examples=0,
        num_tokens=0,
        num_steps=0,
        num_truncated=0,
        train_seconds=0.0,
        tokens_per_second=0.0,
    )
