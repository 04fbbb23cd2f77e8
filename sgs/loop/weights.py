"""The weights the engines serve, in one place: which checkpoint each role is
on, the engines' sleep around training, and how newly trained weights reach
them (a reload, the learner's direct transfer, or fresh engines when that
failed), checked on a fixed probe sequence.

During the training phase the engines may sleep (vLLM sleep mode:
``resources.sleep_engines_during_training``); each new checkpoint reaches its
role's running engines when they wake (or at once), or the learner sends the
weights into them directly (``resources.weight_transfer``), and the probe's
log-probs are compared between learner and engines (``probe_logprob_gap_*``
in the training metrics; a warning above ``training.probe_logprob_tolerance``).

Which policy version a checkpoint holds (:func:`checkpoint_version`) is
written into it, and can be told from the run directory that holds it.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path

from sgs.analysis import metrics as M
from sgs.config import SGSConfig, engines_sleep_during_training, weight_transfer_backend
from sgs.loop.phases import TRAINING_PHASE
from sgs.machinery.engines.weight_transfer import WeightTarget
from sgs.machinery.learner import TrainResult
from sgs.machinery.runtime import Checkpoint, Runtime
from sgs.method.registry import trained_roles
from sgs.state.run_reader import ITER_RE, RunReader, is_created_run
from sgs.state.store import Store

log = logging.getLogger(__name__)

#: The learner's numbers, saved beside the checkpoint they describe.
TRAIN_METRICS_FILE = "sgs_train_metrics.json"
#: The roles the training phase trains, in this order, in one learner run.
TRAINED_ROLES = ("solver", "conjecturer")
#: Written into each trained checkpoint: the policy version it holds, so that
#: readers outside the run (``python -m sgs.evaluate``) need not guess it.
POLICY_VERSION_FILE = "sgs_policy_version.json"


def current_weights(store: Store, role: str, base: str) -> Checkpoint:
    """The newest checkpoint of ``role`` whose training phase is done, else ``base`` (version 0)."""
    done = [i for i in store.checkpoint_iterations(role) if store.phase_done(i, TRAINING_PHASE)]
    if not done:
        return Checkpoint(base, 0)
    return Checkpoint(str(store.checkpoint_dir(role, done[-1])), done[-1] + 1)


def write_checkpoint_version(directory: str | Path, version: int) -> None:
    """Write into a checkpoint directory the policy version it holds (:data:`POLICY_VERSION_FILE`)."""
    (Path(directory) / POLICY_VERSION_FILE).write_text(json.dumps({"policy_version": version}))


def checkpoint_version(checkpoint: str | Path) -> int | None:
    """The policy version a checkpoint directory holds: the one written into
    it (:data:`POLICY_VERSION_FILE`); else, for ``<run>/checkpoints/<role>/iter_NNNN``
    of a run whose training phase of iteration NNNN is done, NNNN + 1 (as
    :func:`current_weights` counts); else None, not known: weights from
    outside a run (a hub id, a copy without the file) or from a training
    phase that never finished."""
    directory = Path(checkpoint).expanduser().resolve()
    written = directory / POLICY_VERSION_FILE
    if written.is_file():
        return int(json.loads(written.read_text())["policy_version"])
    match, run_dir = ITER_RE.fullmatch(directory.name), directory.parent.parent.parent
    if match is None or directory.parent.parent.name != "checkpoints" or not is_created_run(run_dir):
        return None
    iteration = int(match.group(1))
    done = RunReader(run_dir, strict=False).marker_path(iteration, TRAINING_PHASE).is_file()
    return iteration + 1 if done else None


class EngineWeights:
    """Which weights each role's engines serve, and getting new ones to them."""

    def __init__(self, cfg: SGSConfig, store: Store, runtime: Runtime, weights: Mapping[str, Checkpoint]):
        self.cfg = cfg
        self.store = store
        self.rt = runtime
        self.current = dict(weights)
        """The checkpoint each role's engines serve (or will, once loaded)."""
        # A method that trains no role (parallel sampling) starts no learner to make room for.
        self._sleep_during_training = engines_sleep_during_training(cfg.resources) and bool(trained_roles(cfg.method))
        self._transfer_backend = weight_transfer_backend(cfg.resources)
        self._asleep = False
        # Newly trained weights not yet confirmed on the engines (trained while they
        # slept, or sent directly): checkpoint, the learner's probe log-probs, and
        # whether the learner sent them (True), failed to (False) or did not try (None).
        self._unloaded: dict[str, tuple[Checkpoint, list[float] | None, bool | None]] = {}

    def versions(self) -> dict[str, int]:
        return {role: checkpoint.version for role, checkpoint in self.current.items()}

    def transfer_target(self, role: str, version: int) -> WeightTarget | None:
        """Where the learner sends ``role``'s trained weights directly, if it does
        (``resources.weight_transfer=direct`` and the engines awake)."""
        if self._transfer_backend is None or self._asleep:
            return None
        return self.rt.engines[role].weight_target(version, self._transfer_backend,
                                                   self.cfg.resources.weight_transfer_timeout_s)

    def trained(self, role: str, result: TrainResult, version: int, sent_to: WeightTarget | None) -> None:
        """``role`` now has the weights of ``result``; its engines get them now, or when they wake."""
        self.current[role] = Checkpoint(result.checkpoint_dir, version)
        write_checkpoint_version(result.checkpoint_dir, version)
        if sent_to is not None and not result.weights_sent:
            log.warning("the learner could not send the %s weights to the engines directly (%s); restarting the "
                        "engines on the checkpoint", role, result.weight_transfer_error)
        self._unloaded[role] = (self.current[role], result.probe_logprobs,
                                None if sent_to is None else result.weights_sent)
        if not self._asleep:
            self._load_new_weights()

    def sleep(self, iteration: int, phase: str) -> None:
        """Free the engines' accelerator memory for the learner (when configured)
        before ``phase`` of ``iteration``; their states go to the run's sleep log."""
        if self._sleep_during_training and not self._asleep:
            for group in self.rt.engines.values():
                group.sleep(self.cfg.resources.engine_sleep_level)
            self._asleep = True
            self.rt.placement.engine_states("sleep", iteration, phase, self.rt.engines)

    def wake(self, iteration: int, phase: str) -> None:
        """Wake the engines before ``phase`` of ``iteration`` and give them the
        weights trained while they slept (the sleep log then shows their versions)."""
        woke = self._asleep
        if self._asleep:
            for group in self.rt.engines.values():
                group.wake_up()
            self._asleep = False
        if self._unloaded:
            self._load_new_weights()
        if woke:
            self.rt.placement.engine_states("wake", iteration, phase, self.rt.engines)

    @functools.cached_property
    def probe_sequence(self) -> tuple[list[int], list[int]]:
        """A fixed (prompt, completion) pair, the same at every update: the
        Solver prompt of the first training target, completed by its statement."""
        target = min((t for t in self.store.targets if not t.held_out), key=lambda t: t.id)
        prompt = self.rt.prompter.solver(target.header, target.statement)
        completion = self.rt.prompter.tokenizer(target.statement, add_special_tokens=False)["input_ids"]
        return self.rt.prompter.token_ids(prompt), completion

    def _load_new_weights(self) -> None:
        """Give each newly trained checkpoint to its role's engines (a reload;
        nothing more when the learner sent the weights directly; fresh engines
        when that failed), then check on the probe that they compute what the
        learner computed."""
        tolerance = self.cfg.training.probe_logprob_tolerance
        for role, (checkpoint, learner_logprobs, sent) in list(self._unloaded.items()):
            engines = self.rt.engines[role]
            start = time.perf_counter()
            if sent:
                engines.adopt_weights(checkpoint.path, checkpoint.version)
            elif sent is None:
                engines.load_weights(checkpoint.path, checkpoint.version)
            else:
                engines.rebuild(checkpoint.path, checkpoint.version)
            numbers = {"weight_load_seconds": time.perf_counter() - start}
            del self._unloaded[role]
            if learner_logprobs is not None:
                gaps = [M.logprob_gap(learner_logprobs, served)
                        for served in engines.served_logprobs(*self.probe_sequence)]
                mean_gap, max_gap = max(g[0] for g in gaps), max(g[1] for g in gaps)
                numbers.update(probe_logprob_gap_mean=mean_gap, probe_logprob_gap_max=max_gap)
            metrics_file = Path(checkpoint.path) / TRAIN_METRICS_FILE
            metrics_file.write_text(json.dumps({**json.loads(metrics_file.read_text()), **numbers}))
            if learner_logprobs is not None and mean_gap > tolerance:
                log.warning("the %s engines' log-probs of the probe differ from the learner's by %.3g nats per "
                            "token on average (max %.3g; tolerance training.probe_logprob_tolerance=%g): the "
                            "engines may not serve the weights of %s", role, mean_gap, max_gap, tolerance,
                            checkpoint.path)
