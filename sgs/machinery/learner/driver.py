"""The driver side of training: :class:`RayTrainLearner` keeps one Ray
Train run for as long as it is used (the loop's, for the whole run), and
:func:`train` (one model) and :func:`train_models` (several) use one for a
single call.  Per call it validates and plans the examples, puts one shard
per worker in the Ray object store (each worker fetches only its own),
posts the jobs on the run's job board and waits; then it moves each
checkpoint the workers wrote into ``output_dir/.staging`` into
``output_dir`` and saves the tokenizer beside it, so
``TransformersEngine.load_weights`` can read the directory.  The workers
write where the driver reads, so on several nodes ``output_dir`` must be on
a file system they share (as Ray Train's own checkpoints need).  A run in
which Ray loses workers is started again and the call's jobs trained again
from their base checkpoints (``TrainSettings.learner_restarts``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

import ray
from ray.exceptions import RayActorError
from ray.train import ControllerError, RunConfig, ScalingConfig, WorkerGroupError
from ray.train.torch import TorchConfig, TorchTrainer
from ray.train.v2._internal.exceptions import WorkerHealthCheckFailedError, WorkerHealthCheckTimeoutError
from transformers import AutoConfig, AutoTokenizer

from sgs.machinery.engines.weight_transfer import WeightTarget
from sgs.machinery.learner.board import JobBoard
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
from sgs.machinery.learner.worker import serve_jobs
from sgs.method.registry import objective as registered_objective

#: How often Ray Train's controller polls its workers, in seconds, unless the
#: user set ``RAY_TRAIN_HEALTH_CHECK_INTERVAL_S``.  Each change of the run's
#: state waits for the next poll, so Ray's default of 2 s makes a short run
#: seconds longer (``benchmarks/startup.py`` measures it); a poll is one small
#: call per worker.
CONTROLLER_POLL_INTERVAL_S = "0.5"
#: How long the driver waits on the job board before it looks at the run again, in seconds.
BOARD_POLL_S = 0.5
#: How long closing an idle learner waits for its run to end, in seconds (its
#: workers notice within worker.BOARD_WAIT_S; the run is a daemon thread's, so
#: a driver never waits for it at exit).
STOP_WAIT_S = 60.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainJob:
    """One model a learner call trains; the arguments of :func:`train`."""

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
    a :class:`RayTrainLearner`, or a test double that records the jobs it was
    given (``tests/doubles.py``)."""

    def __call__(self, jobs: Sequence[TrainJob], *, settings: TrainSettings, run_name: str) -> list[TrainResult]:
        """Train each job's model from its base checkpoint into its
        ``output_dir``; the results in the jobs' order."""

    def close(self) -> None:
        """Let go of whatever the learner holds between calls (its workers)."""


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
    """Train ``base_checkpoint`` on ``examples`` in a Ray Train run of its own; save to ``output_dir``.

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
            come back in ``TrainResult.probe_logprobs``.
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
    """Train several models one after another in **one** Ray Train run that
    ends with them (the warm start's and a test's call; the loop keeps its
    :class:`RayTrainLearner` for the whole run).  Each job is what
    :func:`train`'s arguments say, with its own seed; the results come back
    in the jobs' order.  Every job is validated before anything starts; jobs
    without examples start nothing."""
    with tempfile.TemporaryDirectory(prefix="sgs-learner-") as storage_dir:
        learner = RayTrainLearner(storage_dir, name=run_name)
        try:
            return learner(jobs, settings=settings, run_name=run_name)
        finally:
            learner.close()


class RayTrainLearner:
    """One Ray Train run that outlives a call: its workers start, join their
    process group and import the libraries once (12-19 s of a one-worker run
    on 2 CPU cores, about 29 s on an H200 machine, against a second or two of
    training in a small run), then train each batch of jobs the driver posts
    on a job board (:mod:`sgs.machinery.learner.board`) from the jobs' own
    base checkpoints, as a run of their own would: every job loads its
    weights, seeds itself and builds its optimizer afresh.  Between batches
    the workers hold no model.

    A run whose workers Ray lost is started again and the batch posted again
    (``TrainSettings.learner_restarts`` per call); a run whose training code
    raised is not, and the error is raised here.  Settings that place the
    workers differently (their number, CPUs, GPUs) start a new run.  Call
    :meth:`close` at the end; Ray's state for the run lives in
    ``storage_dir``, which it empties."""

    def __init__(self, storage_dir: str, *, name: str) -> None:
        # Ray Train takes a relative storage path for a URI without a scheme (the default
        # run directory, runs/<time>, is relative).
        self.storage_dir = os.path.abspath(storage_dir)
        self.name = name
        self._board: Any = None
        self._fit: FitThread | None = None
        self._placement: tuple | None = None
        self._in_flight = False
        self.starts = 0
        """Ray Train runs started so far (the first, restarts, re-placements)."""

    def __call__(self, jobs: Sequence[TrainJob], *, settings: TrainSettings, run_name: str) -> list[TrainResult]:
        """Train each job's model from its base checkpoint into its
        ``output_dir``; the results in the jobs' order (``run_name`` names
        the batch in the log)."""
        results, configs = _prepare(jobs, settings, run_name)
        if not configs:
            return results
        for attempt in range(settings.learner_restarts + 1):
            for config in configs:
                # A fresh start each time: nothing a lost attempt wrote is kept.
                shutil.rmtree(config["staging_dir"], ignore_errors=True)
                os.makedirs(config["staging_dir"])
            try:
                reported = self._train_batch(configs, settings)
                break
            except (ControllerError, WorkerGroupError) as error:
                self._stop()
                if attempt == settings.learner_restarts or not lost_workers(error):
                    raise
                log.warning("Ray Train run %r lost its workers during %r (%s); starting it again and training "
                            "the jobs again from their base checkpoints (restart %d of at most %d)",
                            self.name, run_name, error, attempt + 1, settings.learner_restarts)
        for config in configs:
            results[config["job"]] = _collect(reported[config["job"]], config, jobs[config["job"]], restarts=attempt)
        return results

    def close(self) -> None:
        """End the run and empty ``storage_dir``.  An idle run is waited for
        (at most :data:`STOP_WAIT_S`); one left busy by an interrupted call
        (Ctrl-C) is not: it ends with Ray or the driver."""
        self._stop()
        shutil.rmtree(self.storage_dir, ignore_errors=True)

    def _train_batch(self, configs: list[dict[str, Any]], settings: TrainSettings) -> dict[int, dict[str, Any]]:
        """Post ``configs`` and wait for every job's metrics, starting the run first if need be."""
        placement = _placement_key(settings)
        if self._fit is not None and (self._placement != placement or not self._fit.alive()):
            self._stop()
        if self._fit is None:
            self._start(settings, placement)
        self._in_flight = True
        number = ray.get(self._board.post.remote(configs))
        posted, started = time.monotonic(), False
        while True:
            # A timed wait, so that a run that died is noticed and SIGINT is handled between waits.
            finished = ray.get(self._board.finished.remote(number, len(configs), BOARD_POLL_S))
            if len(finished) == len(configs):
                self._in_flight = False
                return finished
            if not self._fit.alive():
                self._fit.raise_error()
                raise RuntimeError(f"Ray Train run {self.name!r} ended before it trained every job")
            if not started:
                started = ray.get(self._board.taken.remote(number))
                waited = time.monotonic() - posted
                if not started and waited > settings.learner_start_timeout_s:
                    # Ray Train retries an unplaceable worker group for ever; its controller ends
                    # with this driver, and workers started later find the board gone and end.
                    self._stop()
                    raise LearnerNotPlaced(unplaced_message(settings, waited))

    def _start(self, settings: TrainSettings, placement: tuple) -> None:
        self.starts += 1
        run_name = f"{self.name}-{self.starts}"
        # A fresh run: never Ray's state of one a killed driver left under the same name.
        shutil.rmtree(os.path.join(self.storage_dir, run_name), ignore_errors=True)
        # Read when the run starts: the controller gets it from this process's environment.
        os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", CONTROLLER_POLL_INTERVAL_S)
        self._board = JobBoard.remote()
        self._fit = FitThread(_trainer(self._board, settings, run_name, self.storage_dir))
        self._placement = placement

    def _stop(self) -> None:
        if self._fit is None:
            return
        try:
            ray.get(self._board.close.remote(), timeout=BOARD_POLL_S * 10)
        except Exception as error:  # a board that is gone has nothing to close
            log.debug("closing the job board of %r: %s", self.name, error)
        self._fit.join(0.0 if self._in_flight else STOP_WAIT_S)
        ray.kill(self._board)
        self._fit = self._board = None
        self._in_flight = False


class FitThread:
    """``trainer.fit()`` in a thread of its own, watched by the driver between
    its timed waits on the board.  Called on the main thread, Ray Train
    installs a SIGINT handler that aborts its run and never puts the driver's
    own back: a Ctrl-C during a training phase was absorbed and the loop went
    on, and so did every later one.  Here a Ctrl-C raises KeyboardInterrupt
    in the driver as anywhere else in the loop; the run's workers end with
    the driver, and a resumed run redoes the unfinished phase."""

    def __init__(self, trainer: Any) -> None:
        self.outcome: dict[str, Any] = {}

        def fit() -> None:
            try:
                self.outcome["result"] = trainer.fit()
            except BaseException as error:
                self.outcome["error"] = error

        # A daemon: a driver that stops on Ctrl-C must not wait for the run at exit.
        self.thread = threading.Thread(target=fit, name="ray-train-fit", daemon=True)
        self.thread.start()

    def alive(self) -> bool:
        return self.thread.is_alive()

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)

    def raise_error(self) -> None:
        """Raise ``fit``'s error, if it ended with one."""
        if "error" in self.outcome:
            raise self.outcome["error"]


def _prepare(jobs: Sequence[TrainJob], settings: TrainSettings,
             run_name: str) -> tuple[list[TrainResult | None], list[dict[str, Any]]]:
    """The results of jobs that need no training (their base checkpoint back)
    and the workers' configs of the others, each validated and planned."""
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
            "staging_dir": os.path.join(output_dir, STAGING_DIR),
            "num_truncated": sum(a is not b for a, b in zip(job.examples, truncated)),
            # Each worker fetches only its own share; the refs stay alive here until the job is done.
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
    return results, configs


def _placement_key(settings: TrainSettings) -> tuple:
    """The settings that decide where the run's workers are and what they hold."""
    return (settings.learner_workers, settings.cpus_per_learner_worker, settings.use_gpu, settings.simulated_gpus,
            settings.learner_placement)


class LearnerNotPlaced(RuntimeError):
    """Ray could not start a training run's workers within ``TrainSettings.learner_start_timeout_s``."""


def _worker_resources(settings: TrainSettings) -> dict[str, float]:
    return {"CPU": settings.cpus_per_learner_worker, **({"GPU": 1} if settings.use_gpu else {})}


def unplaced_message(settings: TrainSettings, waited: float) -> str:
    """What a learner whose workers Ray could not place asked for, and what the cluster has."""
    def shown(resources: dict[str, float]) -> str:
        return ", ".join(f"{resources.get(key, 0):g} {key}" for key in ("CPU", "GPU"))

    return (f"the learner's {settings.learner_workers} Ray Train worker(s), each asking "
            f"{shown(_worker_resources(settings))}, did not start within {waited:.0f} s "
            f"(resources.learner_start_timeout_s={settings.learner_start_timeout_s:g}): the cluster has "
            f"{shown(ray.available_resources())} free of {shown(ray.cluster_resources())}. Lower "
            "resources.learner_workers or cpus_per_learner_worker, free what holds them, or add a node")


def _trainer(board: Any, settings: TrainSettings, run_name: str, storage_dir: str) -> TorchTrainer:
    """The Ray Train run whose workers serve ``board``'s jobs, its state kept under ``storage_dir``."""
    return TorchTrainer(
        serve_jobs,
        train_loop_config={"board": board},
        scaling_config=ScalingConfig(
            num_workers=settings.learner_workers,
            use_gpu=settings.use_gpu,
            resources_per_worker=_worker_resources(settings),
            placement_strategy=settings.learner_placement,
        ),
        torch_config=TorchConfig(backend="nccl" if settings.use_gpu and not settings.simulated_gpus else "gloo"),
        run_config=RunConfig(name=run_name, storage_path=storage_dir),
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


def _collect(reported: dict[str, Any], config: dict[str, Any], job: TrainJob, restarts: int) -> TrainResult:
    """Move one job's checkpoint from its staging directory into its output_dir (with the
    tokenizer beside it, so engines can load the directory) and read its numbers."""
    output_dir, staging_dir = config["output_dir"], config["staging_dir"]
    for entry in os.listdir(staging_dir):
        target = os.path.join(output_dir, entry)
        if os.path.isdir(target):
            shutil.rmtree(target)
        shutil.move(os.path.join(staging_dir, entry), target)
    os.rmdir(staging_dir)
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
