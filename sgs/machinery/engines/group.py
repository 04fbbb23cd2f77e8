"""The driver-side group of generation engines for one role.

Each engine is an :class:`~sgs.machinery.engines.actor.EngineActor`.  Actors
are named ``engine-<role>-<i>`` so the Ray dashboard shows who is doing what.

``EngineGroup`` owns the N actors of one role (Solver, Conjecturer or Guide),
reserved together in one placement group and supervised as the verifier
pool's workers are (:mod:`lean_env.supervised`).  Like the pool it offers
the streaming protocol (:class:`lean_env.streaming_pool.StreamingPool`):
``submit`` splits a prompt list into chunks and returns their ids, ``poll``
hands back the chunks that are done, ``outstanding`` counts those not handed
back yet; ``generate`` is the blocking form.  ``load_weights`` broadcasts a
new checkpoint to every actor (or a learner sends the weights itself:
``weight_target``, ``adopt_weights``); ``policy_version``,
``served_logprobs``, ``placement`` and ``sleep`` / ``wake_up`` also ask every
actor, with the same recovery as chunks.

Lost work is redone, never dropped.  The group remembers every chunk in
flight (its actor, prompts and settings).  When an actor dies, or stops
answering its heartbeat (a separate concurrency group, so it answers while
``generate`` runs), the group kills it, starts a new actor of the same name
in the same placement-group bundle on the group's current weights, and
resubmits every chunk that was in flight on it.  A chunk keeps its seed, so
the redone samples are the ones the lost actor would have returned.  A chunk
whose actor is lost more than ``max_chunk_retries`` times ends the call with
:class:`EngineFailure`, so a prompt that crashes the engine cannot loop forever.

Ordering: an actor runs its generate and load calls one at a time in the
order it received them, so a ``load_weights`` issued after ``submit`` takes
effect only after the chunks already queued on that actor are done.  (A chunk
redone after that ``load_weights`` runs on the new weights.)
"""


from __future__ import annotations

import itertools
import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import ray
from ray.exceptions import RayActorError
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from lean_env.supervised import SupervisedActors
from sgs.machinery.engines.actor import BACKENDS, EngineActor
from sgs.machinery.engines.base import Sample, SamplingSettings, first_line
from sgs.machinery.engines.weight_transfer import WeightTarget

log = logging.getLogger(__name__)


def shares_gpu(gpu_ids: list[str] | None, num_gpus: float) -> bool:
    """Whether two engines of one group may land on one GPU: pinned to the same
    id, or each reserving a fraction of a GPU from Ray.  Such engines must
    not load at the same time: vLLM sizes its KV cache from the GPU's free
    memory during its start, and counts what another engine allocates
    meanwhile as its own overhead (vllm-project/vllm#55827: three engines
    started at once at 0.2 of a GPU each can get very unequal KV caches)."""
    pinned_twice = gpu_ids is not None and len(set(gpu_ids)) < len(gpu_ids)
    return pinned_twice or 0 < num_gpus < 1


class EngineFailure(RuntimeError):
    """A chunk lost its actor more often than the group's ``max_chunk_retries`` allows."""


@dataclass
class EngineGroupStats:
    """What the group's recovery did since it started."""

    actor_restarts: int = 0
    """Actors replaced by a new one (dead or hung)."""
    hung_actors: int = 0
    """Of those, actors killed because they missed their heartbeat."""
    chunks_resubmitted: int = 0
    """Chunks sent again because the actor holding them was lost."""


@dataclass
class _Chunk:
    """One slice of a ``submit`` call, remembered until its samples are handed back."""

    key: int
    """The chunk id ``submit`` returned."""
    prompts: list[str]
    """The chunk's prompts, in the order of its indices."""
    settings: SamplingSettings
    """The call's settings with the chunk's own seed; a resubmission reuses them unchanged."""
    engine: int
    """Index of the actor the chunk is queued on."""
    ref: ray.ObjectRef | None = None
    """The pending ``generate`` call on that actor."""
    losses: list[str] = field(default_factory=list)
    """Why each actor that was running this chunk was lost."""


@dataclass
class _Heartbeat:
    """The heartbeat of one actor slot: the ping in flight and when it was sent."""

    ping: ray.ObjectRef | None = None
    """The heartbeat call in flight, if any."""
    ping_sent: float = 0.0
    """``time.monotonic()`` when ``ping`` was sent."""
    last_answer: float = -math.inf
    """``time.monotonic()`` of the last heartbeat answer (pings are spaced from it)."""


@dataclass(frozen=True)
class EngineGroupSettings:
    """How an :class:`EngineGroup` runs its actors."""

    num_engines: int = 1
    """Actors in the group."""
    backend: str = "transformers"
    """The ``engine_backend`` config value (see :func:`~sgs.machinery.engines.actor.build_engine`)."""
    engine_options: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the backend's engine."""
    num_cpus: float = 1.0
    """Ray CPUs reserved per actor."""
    num_gpus: float = 0.0
    """Ray GPUs reserved per actor (a fraction shares one GPU)."""
    start_timeout_s: float = 300.0
    """How long to wait for the cluster to have room for the whole group."""
    heartbeat_interval_s: float = 5.0
    """How often an actor with work in flight (chunks, or a ``load_weights`` /
    ``policy_version`` call) is pinged."""
    heartbeat_timeout_s: float = 60.0
    """An actor that leaves a ping unanswered this long is hung: killed and
    replaced.  A thread of its own answers the ping, so a long ``generate``
    does not count."""
    load_timeout_s: float = 900.0
    """The same limit for an actor's first answer, which waits until it has
    loaded its model."""
    max_chunk_retries: int = 3
    """Times one chunk may be resubmitted after losing its actor; one more
    loss raises :class:`EngineFailure`."""
    placement_strategy: str = "PACK"
    """The group's placement-group strategy ("PACK", "SPREAD" over a
    cluster's GPU nodes, ...)."""
    gpu_ids: list[int | str] | None = None
    """Colocated engines (one GPU node shared with the learner): actor i sees
    only GPU ``gpu_ids[i]`` (CUDA_VISIBLE_DEVICES) without reserving it in
    Ray, whose GPUs the learner holds."""

    def __post_init__(self) -> None:
        if self.num_engines < 1:
            raise ValueError(f"num_engines must be at least 1, got {self.num_engines!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown engine_backend {self.backend!r}; available: {', '.join(BACKENDS)}")
        if self.num_cpus <= 0 and self.num_gpus <= 0:
            raise ValueError("each engine needs some resources: set num_cpus > 0 or num_gpus > 0")
        if not 0 < self.heartbeat_interval_s < self.heartbeat_timeout_s:
            raise ValueError(f"need 0 < heartbeat_interval_s < heartbeat_timeout_s, got "
                             f"{self.heartbeat_interval_s!r} and {self.heartbeat_timeout_s!r}")
        if self.max_chunk_retries < 0:
            raise ValueError(f"max_chunk_retries must be >= 0, got {self.max_chunk_retries!r}")
        if self.gpu_ids is not None and (len(self.gpu_ids) != self.num_engines or self.num_gpus > 0):
            raise ValueError(f"gpu_ids pins each of the {self.num_engines} engines to one GPU outside Ray's "
                             f"accounting: give {self.num_engines} ids and num_gpus=0, got {self.gpu_ids!r} "
                             f"and num_gpus={self.num_gpus!r}")

    def bundle(self) -> dict[str, float]:
        """One actor's Ray resources, as its placement-group bundle."""
        return {"CPU": self.num_cpus} if self.num_gpus <= 0 else {"CPU": self.num_cpus, "GPU": self.num_gpus}


class EngineGroup:
    """The engine actors of one role, driven from the driver."""

    def __init__(self, role: str, model_path: str, settings: EngineGroupSettings, *, wait: bool = True) -> None:
        """Start ``settings.num_engines`` actors of ``role`` ("solver", ...:
        used in actor names), all loading ``model_path`` (a Hugging Face
        checkpoint directory or hub id).  ``wait``: block until they loaded
        (else see :meth:`wait_until_loaded`)."""
        self.role = role
        self.settings = settings
        self.stats = EngineGroupStats()
        self._model_path = model_path
        # What a restarted actor loads: the last checkpoint the group switched to (None: the initial weights).
        self._weights: tuple[str, int] | None = None
        # One placement group reserves the whole role at once: either all engines fit or none start.
        self._actors = SupervisedActors(f"{role!r} engines", self._launch, count=settings.num_engines,
                                        bundle=settings.bundle(), strategy=settings.placement_strategy,
                                        start_timeout_s=settings.start_timeout_s)
        self._heartbeats = [_Heartbeat() for _ in range(settings.num_engines)]
        # The actors' first calls, until wait_until_loaded has seen them answer.
        self._loaded: list[ray.ObjectRef] = []
        # Chunks in flight, and samples of chunks back but not yet handed to the caller; both by chunk id.
        self._chunks: dict[int, _Chunk] = {}
        self._finished: dict[int, list[list[Sample]]] = {}
        self._chunk_ids = itertools.count()
        try:
            for index in range(settings.num_engines):
                # The first call returns once the constructor ran, so loading errors surface there.
                self._loaded.append(self._actors.start(index).policy_version.remote())
                if shares_gpu(settings.gpu_ids, settings.num_gpus):
                    ray.get(self._loaded[-1])
        except Exception:
            self.shutdown()
            raise
        if wait:
            self.wait_until_loaded()

    def wait_until_loaded(self) -> None:
        """Block until every actor has loaded its model; an actor that failed
        to load raises here, after the group is shut down.

        A group started with ``wait=False`` must be waited for before use;
        several groups then load at once (a vLLM engine takes about a minute
        to start on a GPU).  Actors that may share a GPU (:func:`shares_gpu`)
        load one after another in any case."""
        if not self._loaded:
            return
        try:
            ray.get(self._loaded)
        except Exception:
            self.shutdown()
            raise
        self._loaded = []
        for index in range(len(self._actors)):
            self._mark_answered(index)

    @property
    def actors(self) -> list[ray.actor.ActorHandle]:
        """The live actors, by index (a restarted actor replaces its predecessor here)."""
        return self._actors.handles

    # -- streaming -------------------------------------------------------------

    def submit(
        self, prompts: list[str], settings: SamplingSettings, chunk_size: int | None = None
    ) -> list[tuple[int, list[int]]]:
        """Queue the prompts on the actors in chunks; returns (chunk id, prompt indices) per chunk.

        :meth:`poll` hands back each chunk as ``list[list[Sample]]`` for its
        prompts, in the order of its indices.  Chunks go to the actors
        round-robin; the default chunk size gives each actor one chunk.  With
        a seed, the chunk starting at prompt index i samples with seed + i, so
        chunks draw independent streams, and a repeated call (same chunk size)
        or a resubmitted chunk repeats the samples exactly.
        """
        if not prompts:
            return []
        if chunk_size is None:
            chunk_size = math.ceil(len(prompts) / len(self._actors))
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {chunk_size!r}")
        submitted = []
        for number, start in enumerate(range(0, len(prompts), chunk_size)):
            indices = list(range(start, min(start + chunk_size, len(prompts))))
            chunk = _Chunk(
                key=next(self._chunk_ids),
                prompts=[prompts[i] for i in indices],
                settings=settings if settings.seed is None else replace(settings, seed=settings.seed + start),
                engine=number % len(self._actors),
            )
            self._send(chunk)
            self._chunks[chunk.key] = chunk
            submitted.append((chunk.key, indices))
        return submitted

    def poll(self, timeout: float = 0.0) -> list[tuple[int, list[list[Sample]]]]:
        """(chunk id, samples) of the chunks that are back, waiting up to
        ``timeout`` seconds for the first.  Each submitted chunk is handed back
        exactly once over all polls, redone first if its actor was lost.

        Raises :class:`EngineFailure` when a chunk lost its actor more than
        ``max_chunk_retries`` times, and the engine's own error when a chunk's
        ``generate`` raised; that chunk is then dropped, the others go on.
        """
        deadline = time.monotonic() + timeout
        while not self._finished and self._chunks:
            self._advance(deadline - time.monotonic())
            if time.monotonic() >= deadline:
                break
        done = list(self._finished.items())
        self._finished.clear()
        return done

    @property
    def outstanding(self) -> int:
        """Submitted chunks that :meth:`poll` has not handed back yet."""
        return len(self._chunks) + len(self._finished)

    def waitables(self) -> list[ray.ObjectRef]:
        """What :meth:`poll` waits on (chunks in flight, heartbeat pings), for a
        caller that waits on this group and something else at once and then
        calls ``poll(0)``."""
        return ([chunk.ref for chunk in self._chunks.values()]
                + [beat.ping for beat in self._heartbeats if beat.ping is not None])

    def generate(
        self, prompts: list[str], settings: SamplingSettings, chunk_size: int | None = None
    ) -> list[list[Sample]]:
        """Blocking form of :meth:`submit`: samples for every prompt, in prompt order.

        Chunks submitted earlier and not yet polled stay for :meth:`poll`.
        """
        results: list[list[Sample]] = [[] for _ in prompts]
        waiting = dict(self.submit(prompts, settings, chunk_size))
        try:
            while waiting:
                for key in [key for key in waiting if key in self._finished]:
                    for index, samples in zip(waiting.pop(key), self._finished.pop(key)):
                        results[index] = samples
                if waiting:
                    self._advance(self.settings.heartbeat_interval_s)
        finally:
            # On an error, this call's other chunks are abandoned: no later poll returns them.
            for key in waiting:
                self._chunks.pop(key, None)
                self._finished.pop(key, None)
        return results

    # -- weights -----------------------------------------------------------------

    def load_weights(self, checkpoint_dir: str, policy_version: int) -> None:
        """Load a new checkpoint on every actor; returns when all have it.

        An actor lost meanwhile is restarted on the new checkpoint.
        """
        self._switch_weights("load_weights", checkpoint_dir, policy_version)

    def weight_target(self, policy_version: int, backend: str, timeout_s: float) -> WeightTarget:
        """Where a learner sends weights for this group directly (see
        :mod:`sgs.machinery.engines.weight_transfer`); follow with :meth:`adopt_weights`
        once they arrived, or :meth:`rebuild` if the transfer failed."""
        return WeightTarget(backend=backend, actors=self.actors, policy_version=policy_version, timeout_s=timeout_s)

    def adopt_weights(self, checkpoint_dir: str, policy_version: int) -> None:
        """The actors received ``policy_version`` directly; ``checkpoint_dir``
        holds the same weights, and restarted actors now load it.  Raises when
        an actor does not serve that version."""
        self._switch_weights("adopt_checkpoint", checkpoint_dir, policy_version)

    def _switch_weights(self, method: str, checkpoint_dir: str, policy_version: int) -> None:
        """Make ``checkpoint_dir`` the group's weights (what restarted actors
        load) and call ``method`` with it on every actor."""
        previous, self._weights = self._weights, (checkpoint_dir, policy_version)
        try:
            self._on_every_actor(method, checkpoint_dir, policy_version)
        except BaseException:
            # Actors that did switch keep the new weights; policy_version then reports the disagreement.
            self._weights = previous
            raise

    def rebuild(self, checkpoint_dir: str, policy_version: int) -> None:
        """Replace every actor by a new one on ``checkpoint_dir``: after a
        failed direct transfer, an engine may hold part of the new weights,
        and only a fresh process is sure not to."""
        self._weights = (checkpoint_dir, policy_version)
        for index in range(len(self._actors)):
            self._restart(index)
        self.stats.actor_restarts += len(self._actors)
        self._on_every_actor("policy_version")

    @property
    def policy_version(self) -> int:
        """The weights' version, checked to agree across the group's actors."""
        versions = set(self._on_every_actor("policy_version"))
        if len(versions) != 1:
            raise RuntimeError(f"engines of role {self.role!r} disagree on policy_version: {sorted(versions)}")
        return versions.pop()

    def served_logprobs(self, prompt_ids: list[int], completion_ids: list[int]) -> list[list[float]]:
        """Each actor's :meth:`~sgs.machinery.engines.base.GenerationEngine.served_logprobs`
        of one sequence, by actor index: whether every actor serves the weights
        the learner wrote."""
        return self._on_every_actor("served_logprobs", prompt_ids, completion_ids)

    def placement(self) -> list[dict[str, Any]]:
        """Each actor's :meth:`~sgs.machinery.engines.actor.EngineActor.placement`
        (node, GPUs, device, asleep, policy version), by actor index."""
        return self._on_every_actor("placement")

    def sleep(self, level: int = 1) -> None:
        """Every actor releases its accelerator memory (see
        :meth:`~sgs.machinery.engines.base.GenerationEngine.sleep`); returns when all have."""
        self._on_every_actor("sleep", level)

    def wake_up(self) -> None:
        """Undo :meth:`sleep` on every actor (a restarted actor is awake already)."""
        self._on_every_actor("wake_up")

    def shutdown(self) -> None:
        """Kill the actors and release their placement group; chunks in flight are dropped."""
        self._actors.shutdown()
        self._chunks.clear()
        self._finished.clear()

    # -- recovery: deciding ----------------------------------------------------------

    def _advance(self, timeout: float, calls: dict[ray.ObjectRef, int] | None = None,
                 answers: dict[int, Any] | None = None) -> dict[int, str]:
        """Wait up to ``timeout`` seconds (at most one heartbeat interval) for
        chunks, ``calls`` and heartbeats; keep what came back, replace lost
        actors, and return those replaced (actor index -> why it was lost).

        ``calls`` are other calls in flight (ref -> actor index), such as a
        ``load_weights`` broadcast: one that ends moves to ``answers``; one
        whose actor was lost is dropped, for the caller to ask again.

        Results are taken before any actor is replaced, so a chunk that an
        actor finished before dying is not redone.  Errors (an engine's own,
        or :class:`EngineFailure`) are raised after the bookkeeping is done.
        """
        calls = {} if calls is None else calls
        answers = {} if answers is None else answers
        self._send_heartbeats({chunk.engine for chunk in self._chunks.values()} | set(calls.values()))
        chunks = {chunk.ref: chunk for chunk in self._chunks.values()}
        pings = {beat.ping: index for index, beat in enumerate(self._heartbeats) if beat.ping is not None}
        lost: dict[int, str] = {}  # actor index -> why it is lost
        errors: list[BaseException] = []
        for ref in _ready([*chunks, *calls, *pings], min(max(timeout, 0.0), self.settings.heartbeat_interval_s)):
            if ref in chunks:
                self._collect(chunks[ref], lost, errors)
            elif ref in calls:
                index = calls.pop(ref)
                try:
                    answers[index] = ray.get(ref)
                    self._mark_answered(index)
                except RayActorError as error:
                    lost.setdefault(index, first_line(error))
                except Exception as error:  # the engine raised (a bad checkpoint, ...): the caller's error
                    errors.append(error)
            else:
                self._heard(pings[ref], lost)
        now = time.monotonic()
        for index, beat in enumerate(self._heartbeats):
            limit = self._actors.deadline_s(index, self.settings.heartbeat_timeout_s, self.settings.load_timeout_s)
            if index not in lost and beat.ping is not None and now - beat.ping_sent > limit:
                lost[index] = f"hung: no heartbeat answer for {now - beat.ping_sent:.0f} s"
                self.stats.hung_actors += 1
        for index, cause in lost.items():
            errors.extend(self._replace(index, cause))
        for ref in [ref for ref, index in calls.items() if index in lost]:
            del calls[ref]
        if errors:
            raise errors[0]
        return lost

    def _collect(self, chunk: _Chunk, lost: dict[int, str], errors: list[BaseException]) -> None:
        """Keep the samples of a chunk whose call ended, or note its actor as lost."""
        try:
            self._finished[chunk.key] = ray.get(chunk.ref)
        except RayActorError as error:
            lost.setdefault(chunk.engine, first_line(error))
            return
        except Exception as error:  # the engine itself raised (a bad prompt, ...): the caller's error
            errors.append(error)
        del self._chunks[chunk.key]
        self._mark_answered(chunk.engine)

    def _heard(self, index: int, lost: dict[int, str]) -> None:
        """Actor ``index`` answered its heartbeat, or its death is now known."""
        beat = self._heartbeats[index]
        ping, beat.ping = beat.ping, None
        try:
            ray.get(ping)
        except RayActorError as error:
            lost.setdefault(index, first_line(error))
            return
        self._mark_answered(index)
        beat.last_answer = time.monotonic()

    def _mark_answered(self, index: int) -> None:
        """Note that actor ``index`` answered a call.  A ping sent before its
        first answer waited behind the model load, which ``load_timeout_s``
        bounds; from now on it is held to the heartbeat limit, counted from now."""
        beat = self._heartbeats[index]
        if not self._actors.answered(index) and beat.ping is not None:
            beat.ping_sent = time.monotonic()
        self._actors.mark_answered(index)

    def _replace(self, index: int, cause: str) -> list[EngineFailure]:
        """Restart actor ``index`` and resubmit the chunks it held, oldest first.

        Only the oldest of them is charged with the loss: the actor runs its
        chunks in order, so that one was running; the others were waiting.
        Returns the failure of a chunk charged once too often (not resubmitted).
        """
        held = sorted((c for c in self._chunks.values() if c.engine == index), key=lambda c: c.key)
        log.warning("engine-%s-%d lost (%s); restarting it and resubmitting %d chunk(s)",
                    self.role, index, cause, len(held))
        failures = []
        if held:
            running = held[0]
            running.losses.append(cause)
            if len(running.losses) > self.settings.max_chunk_retries:
                del self._chunks[running.key]
                held = held[1:]
                failures.append(EngineFailure(
                    f"{self.role!r} engine chunk {running.key} ({len(running.prompts)} prompt(s), the first "
                    f"{running.prompts[0][:80]!r}) lost its actor {len(running.losses)} times, more than "
                    f"max_chunk_retries={self.settings.max_chunk_retries}: " + "; ".join(running.losses)))
        self._restart(index)
        for chunk in held:
            self._send(chunk)
        self.stats.actor_restarts += 1
        self.stats.chunks_resubmitted += len(held)
        return failures

    def _on_every_actor(self, method: str, *args: Any) -> list[Any]:
        """Call ``method`` on every actor and wait for all, under the same
        watch as chunks: an actor lost meanwhile (dead or hung) is replaced,
        on the current weights, and asked again, at most ``max_chunk_retries``
        times."""
        calls = {getattr(handle, method).remote(*args): index for index, handle in enumerate(self._actors.handles)}
        answers: dict[int, Any] = {}
        losses: list[list[str]] = [[] for _ in range(len(self._actors))]
        while calls:
            for index, cause in self._advance(self.settings.heartbeat_interval_s, calls, answers).items():
                if index in answers:
                    continue  # it answered before it was lost
                losses[index].append(cause)
                if len(losses[index]) > self.settings.max_chunk_retries:
                    raise EngineFailure(
                        f"engine-{self.role}-{index} was lost {len(losses[index])} times during {method}, more "
                        f"than max_chunk_retries={self.settings.max_chunk_retries}: " + "; ".join(losses[index]))
                calls[getattr(self._actors.handle(index), method).remote(*args)] = index
        return [answers[index] for index in range(len(self._actors))]

    # -- recovery: Ray plumbing -------------------------------------------------------

    def _launch(self, index: int, in_bundle: PlacementGroupSchedulingStrategy) -> ray.actor.ActorHandle:
        """Create actor ``index`` in its bundle, on the group's current weights."""
        gpu_ids = self.settings.gpu_ids
        return EngineActor.options(
            name=f"engine-{self.role}-{index}", num_cpus=self.settings.num_cpus, num_gpus=self.settings.num_gpus,
            scheduling_strategy=in_bundle,
        ).remote(self.settings.backend, self._model_path, self.settings.engine_options, self._weights,
                 None if gpu_ids is None else gpu_ids[index])

    def _restart(self, index: int) -> None:
        self._actors.replace(index)
        self._heartbeats[index] = _Heartbeat()

    def _send(self, chunk: _Chunk) -> None:
        chunk.ref = self._actors.handle(chunk.engine).generate.remote(chunk.prompts, chunk.settings)

    def _send_heartbeats(self, busy: set[int]) -> None:
        """Ping each actor with work in flight, once per interval."""
        now = time.monotonic()
        for index in busy:
            beat = self._heartbeats[index]
            if beat.ping is None and now - beat.last_answer >= self.settings.heartbeat_interval_s:
                beat.ping, beat.ping_sent = self._actors.handle(index).heartbeat.remote(), now


def _ready(refs: list[ray.ObjectRef], timeout: float) -> list[ray.ObjectRef]:
    """Those of ``refs`` that are done, waiting up to ``timeout`` seconds for the first."""
    if not refs:
        return []
    ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
    if ready:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
    return ready
