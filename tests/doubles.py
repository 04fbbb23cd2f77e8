"""Test doubles of what the loop's phases drive, so that the phases and
:class:`~sgs.loop.iteration.Loop` run in process, without Ray, a prover or a
model, in milliseconds (``tests/unit/sgs/loop/test_phases_in_process.py``,
``tests/unit/sgs/loop/test_loop_in_process.py``):

* :class:`TableEngines` stands for an engine group
  (:class:`~sgs.machinery.engines.EngineGroup`): it answers each prompt from
  a function of the prompt, the sample index and the weights it serves;
* :class:`TableVerifier` for the verifier pool
  (:class:`~lean_env.pool.VerifierPool`): a proof or a statement is valid
  when a function of it says so;
* :class:`TableLearner` for the learner (:class:`~sgs.machinery.learner.RayTrainLearner`,
  the :class:`~sgs.machinery.learner.Learner` protocol): it records the jobs it
  is asked to train and writes a stand-in checkpoint;
* :class:`TablePrompter` for :class:`~sgs.machinery.prompts.Prompter`, and
  :class:`RecordingPlacement` for the run directory's placement record.

The engines and the verifier satisfy :class:`lean_env.streaming_pool.StreamingPool`,
all that :mod:`sgs.machinery.streaming` relies on.  Everything between the
doubles is the real code: the phases, the run context's sample caches,
streaming, the store, the weights' bookkeeping.
"""

from __future__ import annotations

import copy
import functools
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace

from omegaconf import OmegaConf

from lean_env.verdict import ProofTask, Status, Verdict
from sgs.config import CONFIG_DIR, CONFIG_NAME, MethodConfig, SGSConfig
from sgs.loop.context import RunContext
from sgs.loop.iteration import PHASE_STEPS
from sgs.loop.phases import RECORD_PHASES
from sgs.loop.weights import EngineWeights
from sgs.machinery.engines import Sample, SamplingSettings
from sgs.machinery.engines.group import EngineGroupStats
from sgs.machinery.learner import TrainJob, TrainMetrics, TrainResult, TrainSettings
from sgs.machinery.runtime import Checkpoint
from sgs.state.benchmarks import Benchmark
from sgs.state.phase_log import PhaseStats
from sgs.state.records import Target
from sgs.state.store import Store

#: ``write(prompt, sample index, policy version) -> completion text``: what a table engine samples.
Write = Callable[[str, int, int], str]


class Killed(Exception):
    """The driver dies (raised by a double: :class:`TableEngines` after some
    chunks, :class:`TableLearner` in the middle of writing its checkpoint)."""


def checkpoint_logprobs(checkpoint: str, length: int) -> list[float]:
    """The log-probs that the weights in ``checkpoint`` give a probe sequence
    (the same for the learner that wrote them and the engines that load them:
    a gap means the engines serve other weights than the learner wrote)."""
    return [-1.0 - zlib.crc32(str(checkpoint).encode()) % 1000 / 1000] * length


class TableEngines:
    """Test double of an engine group: one chunk per prompt, handed back one
    per poll in order; sample ``j`` of a prompt is ``write(prompt, j, version)``,
    ``version`` being the policy version of the weights it serves (set by
    :meth:`load_weights`, :meth:`adopt_weights` or :meth:`rebuild`, which it
    records).  Asleep, it refuses to sample or take weights.  With
    ``die_after``, the poll after that many chunks raises :class:`Killed`."""

    def __init__(self, write: Write, die_after: int | None = None, *, checkpoint: str = "base", version: int = 0):
        self.write = write
        self.die_after = die_after
        self.checkpoint, self.version = checkpoint, version
        self.actors = [object()]
        self.stats = EngineGroupStats()
        self.samples_drawn = 0
        self.prompts: list[str] = []
        """Every prompt submitted, in order (once per submit call)."""
        self.loaded: list[tuple[str, int]] = []
        """Every (checkpoint, version) :meth:`load_weights` gave it."""
        self.adopted: list[tuple[str, int]] = []
        """Every (checkpoint, version) it took as sent by the learner (:meth:`adopt_weights`)."""
        self.rebuilt: list[tuple[str, int]] = []
        """Every (checkpoint, version) it was started afresh on (:meth:`rebuild`)."""
        self.asleep = False
        self._chunks: dict[int, list[list[Sample]]] = {}
        self._next = 0
        self._returned = 0

    def submit(self, prompts: list[str], settings: SamplingSettings, chunk_size: int = 1):
        if self.asleep:
            raise RuntimeError("an engine asked to sample while asleep")
        queued = []
        for index, prompt in enumerate(prompts):
            self.prompts.append(prompt)
            self._chunks[self._next] = [[self.sample(prompt, j, settings) for j in range(settings.n)]]
            queued.append((self._next, [index]))
            self._next += 1
        return queued

    def poll(self, timeout: float = 0.0):
        if self.die_after is not None and self._returned >= self.die_after:
            raise Killed()
        if not self._chunks:
            return []
        key = min(self._chunks)
        self._returned += 1
        chunk = self._chunks.pop(key)
        self.samples_drawn += sum(len(samples) for samples in chunk)
        return [(key, chunk)]

    def waitables(self) -> list:
        return []

    @property
    def outstanding(self) -> int:
        return len(self._chunks)

    @property
    def policy_version(self) -> int:
        return self.version

    def load_weights(self, checkpoint_dir: str, policy_version: int) -> None:
        if self.asleep:
            raise RuntimeError("an engine asked to load weights while asleep")
        self.checkpoint, self.version = checkpoint_dir, policy_version
        self.loaded.append((checkpoint_dir, policy_version))

    def weight_target(self, policy_version: int, backend: str, timeout_s: float) -> SimpleNamespace:
        return SimpleNamespace(backend=backend, policy_version=policy_version, engines=self)

    def adopt_weights(self, checkpoint_dir: str, policy_version: int) -> None:
        if self.asleep:
            raise RuntimeError("an engine asked to take weights while asleep")
        self.checkpoint, self.version = checkpoint_dir, policy_version
        self.adopted.append((checkpoint_dir, policy_version))

    def rebuild(self, checkpoint_dir: str, policy_version: int) -> None:
        self.checkpoint, self.version = checkpoint_dir, policy_version
        self.rebuilt.append((checkpoint_dir, policy_version))
        self.stats.actor_restarts += len(self.actors)

    def sleep(self, level: int = 1) -> None:
        self.asleep = True

    def wake_up(self) -> None:
        self.asleep = False

    def served_logprobs(self, prompt_ids: list[int], completion_ids: list[int]) -> list[list[float]]:
        """One actor's log-probs of the probe: those of the checkpoint it serves."""
        return [checkpoint_logprobs(self.checkpoint, len(completion_ids))]

    def sample(self, prompt: str, index: int, settings: SamplingSettings) -> Sample:
        text = self.write(prompt, index, self.version)
        tokens = [ord(c) % 97 + 3 for c in text][: settings.max_tokens]
        return Sample(text=text, token_ids=tokens, logprobs=[-0.5] * len(tokens), prompt_token_ids=[1, 2, 3],
                      finish_reason="stop", policy_version=self.version, entropy=0.7)


class TableVerifier:
    """Test double of the verifier pool: answers each check on the next poll,
    or with ``lag``, that many polls later (while the engines hand back more
    samples: a driver killed then leaves samples drawn but not yet stored); a
    proof is valid when ``valid(task)``, a statement (a check with an empty
    proof) elaborates when ``elaborates(task)``."""

    def __init__(self, valid: Callable[[ProofTask], bool],
                 elaborates: Callable[[ProofTask], bool] = lambda task: True, *, lag: int = 0):
        self.valid = valid
        self.elaborates = elaborates
        self.lag = lag
        self.checked: list[ProofTask] = []
        """Every proof submitted, in order."""
        self.statements: list[ProofTask] = []
        """Every statement submitted, in order."""
        self.stats = SimpleNamespace(workers_restarted=0, requeued=0)
        self._polls = 0
        self._answers: list[tuple[ProofTask, Verdict, int]] = []  # with the poll that answers it

    def submit(self, task: ProofTask) -> None:
        self.checked.append(task)
        self._answer(task, self.valid(task))

    def submit_statement(self, task: ProofTask) -> None:
        self.statements.append(task)
        self._answer(task, self.elaborates(task))

    def poll(self, timeout: float = 0.0):
        self._polls += 1
        ready = [(task, verdict) for task, verdict, due in self._answers if due <= self._polls]
        self._answers = [answer for answer in self._answers if answer[2] > self._polls]
        return ready

    def waitables(self) -> list:
        return []

    @property
    def outstanding(self) -> int:
        return len(self._answers)

    def _answer(self, task: ProofTask, valid: bool) -> None:
        status = Status.VALID if valid else Status.INVALID
        self._answers.append((task, Verdict(status, "ok" if valid else "prover_error"), self._polls + 1 + self.lag))


class TablePrompter:
    """Test double of :class:`sgs.machinery.prompts.Prompter`: plain prompts, one token per character."""

    def solver(self, header: str, statement: str) -> str:
        return f"prove: {statement}"

    def conjecturer(self, target: Target | None) -> str:
        return "conjecture" if target is None else f"conjecture for: {target.statement}"

    def guide(self, target: Target, conjecture: str) -> str:
        return f"review: {conjecture} for {target.statement}"

    def token_ids(self, prompt: str) -> list[int]:
        return [ord(c) % 97 + 3 for c in prompt]

    def tokenizer(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": self.token_ids(text)}


class TableLearner:
    """Test double of the learner (:class:`~sgs.machinery.learner.Learner`):
    records every call's jobs, and for each job with examples writes a
    stand-in checkpoint into its ``output_dir`` and answers with the metrics a
    run on those examples would report; the probe's log-probs are those of
    :func:`checkpoint_logprobs`.  A job with a ``weight_target`` has its
    weights sent there, unless ``sending_fails``.  With ``die_on_call=n``,
    its n-th call (from 1) raises :class:`Killed` after starting to write
    the first checkpoint."""

    def __init__(self, die_on_call: int | None = None, *, sending_fails: bool = False):
        self.die_on_call = die_on_call
        self.sending_fails = sending_fails
        self.calls: list[list[TrainJob]] = []
        """Every call's jobs, in order."""
        self.finished: list[list[TrainJob]] = []
        """The jobs of every call that returned (not killed), in order."""
        self.settings: list[TrainSettings] = []
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def __call__(self, jobs: Sequence[TrainJob], *, settings: TrainSettings, run_name: str) -> list[TrainResult]:
        self.calls.append(list(jobs))
        self.settings.append(settings)
        results = []
        for job in jobs:
            if not job.examples:
                results.append(TrainResult(checkpoint_dir=job.base_checkpoint, metrics=metrics(0, 0)))
                continue
            output = Path(job.output_dir)
            output.mkdir(parents=True, exist_ok=True)
            if len(self.calls) == self.die_on_call:
                (output / "model.safetensors.partial").write_text("half")
                raise Killed()
            (output / "model.safetensors").write_text(f"trained from {job.base_checkpoint}")
            probe = None if job.probe is None else checkpoint_logprobs(str(output), len(job.probe[1]))
            sent = job.weight_target is not None and not self.sending_fails
            if sent:
                job.weight_target.engines.checkpoint = str(output)  # what arrives: the trained weights
            results.append(TrainResult(
                checkpoint_dir=str(output), probe_logprobs=probe, placement=[{"rank": 0, "device": "table"}],
                metrics=metrics(len(job.examples), sum(len(e.completion_ids) for e in job.examples)),
                weights_sent=sent, weight_transfer_seconds=0.01 if sent else 0.0,
                weight_transfer_error="the double refused" if job.weight_target is not None and not sent else None))
        self.finished.append(list(jobs))
        return results

    def jobs(self, role_dir: str) -> list[TrainJob]:
        """Every job whose output went under a ``checkpoints/<role_dir>/`` directory."""
        return [job for call in self.calls for job in call if Path(job.output_dir).parent.name == role_dir]


def metrics(examples: int, tokens: int) -> TrainMetrics:
    return TrainMetrics(loss=0.5 if examples else 0.0, grad_norm=1.0 if examples else 0.0, num_examples=examples,
                        num_tokens=tokens, num_steps=1 if examples else 0, num_truncated=0, train_seconds=0.0,
                        tokens_per_second=0.0)


class SilentMonitor:
    """Test double of :class:`sgs.machinery.monitor.LiveMonitor` for a phase run alone: counts, publishes nothing."""

    def __init__(self):
        self.samples = self.verdicts = 0

    def sampled(self, count: int, generation_queue: int) -> None:
        self.samples += count

    def verified(self, status: Status, verification_queue: int) -> None:
        self.verdicts += 1


class RecordingPlacement:
    """Test double of :class:`sgs.machinery.placement.PlacementRecord`: records what it is told."""

    def __init__(self):
        self.learner_runs: list[tuple[str, int]] = []
        self.actors_recorded = 0
        self.engine_events: list[tuple[str, int, str]] = []

    def actors(self, engines, pool) -> None:
        self.actors_recorded += 1

    def learner(self, role: str, iteration: int, ranks) -> None:
        if ranks is not None:
            self.learner_runs.append((role, iteration))

    def engine_states(self, event: str, iteration: int, phase: str, engines) -> None:
        self.engine_events.append((event, iteration, phase))


def table_runtime(engines: dict[str, TableEngines], pool: TableVerifier,
                  learner: TableLearner | None = None) -> SimpleNamespace:
    """A :class:`~sgs.machinery.runtime.Runtime` of test doubles."""
    return SimpleNamespace(engines=engines, pool=pool, prompter=TablePrompter(), placement=RecordingPlacement(),
                           learner=learner if learner is not None else TableLearner())


@functools.cache
def _default_config() -> SGSConfig:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return OmegaConf.to_object(compose(config_name=CONFIG_NAME))


@functools.cache
def _experiment_method(name: str) -> MethodConfig:
    from hydra import compose, initialize_config_dir

    overrides = [f"+experiment={name}", "model=tiny", "prover=rocq", "resources=local_cpu", "scale=laptop"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return OmegaConf.to_object(compose(config_name=CONFIG_NAME, overrides=overrides)).method


def experiment_method(name: str) -> MethodConfig:
    """The method of ``python -m sgs +experiment=<name>`` (a fresh copy)."""
    return copy.deepcopy(_experiment_method(name))


def default_config() -> SGSConfig:
    """``python -m sgs``'s own default config (Rocq, laptop scale), a fresh
    copy, without what lives outside the run directory (the shared start
    cache) and without progress bars."""
    cfg = copy.deepcopy(_default_config())
    cfg.sampling.share_start_samples = False
    cfg.logging.progress_bars = False
    return cfg


# --------------------------------------------------------------------------
# Putting them together


#: The roles whose weights the engines serve.
ROLES = ("solver", "conjecturer", "guide")


def table_context(store: Store, method: MethodConfig, engines: dict[str, TableEngines], pool: TableVerifier,
                  learner: TableLearner | None = None, benchmark: Benchmark | None = None) -> RunContext:
    """The run as the phases see it, on test doubles: ``python -m sgs``'s default
    config with ``method``, every role on the base weights (version 0)."""
    cfg = default_config()
    cfg.method = method
    runtime = table_runtime(engines, pool, learner)
    weights = EngineWeights(cfg, store, runtime, {role: Checkpoint("base", 0) for role in ROLES})
    return RunContext(cfg, store, runtime, weights, SilentMonitor(), run_name="fast", benchmark=benchmark)


def run_phase(ctx: RunContext, iteration: int, phase: str) -> PhaseStats:
    """One phase, committed, as :meth:`sgs.loop.iteration.Loop.run_phase` runs it (without the engines'
    sleep and wake, the timing and the pruning)."""
    log = ctx.store.begin_phase(iteration, phase) if phase in RECORD_PHASES else None
    stats = PHASE_STEPS[phase](ctx, iteration, log)
    ctx.store.mark_done(iteration, phase)
    return stats
