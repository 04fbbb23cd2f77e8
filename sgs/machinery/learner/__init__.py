"""Training the roles' weights through Ray Train: one run for a whole self-play run.

The loop keeps a :class:`RayTrainLearner` (one Ray Train run whose workers
start once) and calls it each iteration with its jobs, the Solver's and the
Conjecturer's models, which it trains one after another; :func:`train`
(one model) and :func:`train_models` (several) do the same in a run of
their own (the warm start).  The modules, in the order a job goes through
them:

1. :mod:`~sgs.machinery.learner.settings`: the examples, the settings, the
   metrics and result, the file names a run leaves in a checkpoint.
2. :mod:`~sgs.machinery.learner.plan`: on the driver, reject malformed input
   naming the bad example, cut over-long completions, and decide every
   optimizer step up front (deterministic given ``TrainSettings.seed``).
3. :mod:`~sgs.machinery.learner.steps` (the math, usable without Ray):
   gradient accumulation over micro-batches with the loss of the run's
   objective (:mod:`sgs.method.registry`), one clipped Adam step per planned step.
4. :mod:`~sgs.machinery.learner.strategy`: the update object the steps go
   through: :class:`TorchUpdate` (a plain module, or DDP) or
   :class:`DeepSpeedUpdate` (a DeepSpeed ZeRO-2 engine).
5. :mod:`~sgs.machinery.learner.worker` (Ray plumbing): what each rank runs:
   take each batch of jobs from the run's job board
   (:mod:`~sgs.machinery.learner.board`), and per job load, wrap, step,
   write a checkpoint, optionally send the weights to running vLLM engines.
6. :mod:`~sgs.machinery.learner.driver`: :class:`RayTrainLearner` runs the
   TorchTrainer, posts the jobs and leaves a Hugging Face checkpoint
   directory in each ``output_dir``.

The optimizer is recreated for every job (the reference behaviour); with
``optimizer_state="persist"`` its state is saved next to the weights and
restored from the base checkpoint by the next job (for DeepSpeed the next job
must have as many workers: one ZeRO-2 shard per rank).

The names other modules use are exported here.
"""

from sgs.machinery.learner.driver import Learner, RayTrainLearner, TrainJob, train, train_models
from sgs.machinery.learner.plan import PlannedSequence, WorkerStep, plan_steps, truncate, validate_examples
from sgs.machinery.learner.settings import (
    DEEPSPEED_DIR,
    DEEPSPEED_TAG,
    OPTIMIZER_FILE,
    PROBE_FILE,
    STAGING_DIR,
    TrainExample,
    TrainMetrics,
    TrainResult,
    TrainSettings,
)
from sgs.machinery.learner.steps import micro_batch_loss, probe_logprobs, run_steps
from sgs.machinery.learner.strategy import DeepSpeedUpdate, TorchUpdate, make_optimizer

__all__ = [
    "DEEPSPEED_DIR", "DEEPSPEED_TAG", "OPTIMIZER_FILE", "PROBE_FILE", "STAGING_DIR",
    "DeepSpeedUpdate", "Learner", "PlannedSequence", "RayTrainLearner", "TorchUpdate", "TrainExample", "TrainJob",
    "TrainMetrics", "TrainResult", "TrainSettings", "WorkerStep", "make_optimizer", "micro_batch_loss", "plan_steps",
    "probe_logprobs", "run_steps", "train", "train_models", "truncate", "validate_examples",
]
