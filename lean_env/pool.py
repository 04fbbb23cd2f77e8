"""The Ray verifier pool: many prover processes behind one streaming API.

Each worker is a Ray actor that owns one :class:`~lean_env.backend.ProverBackend`
(one prover process plus its spare; :mod:`lean_env.pool_worker`).  The driver-side :class:`VerifierPool`

* streams: ``submit`` a task the moment a proof exists, read verdicts with
  ``poll`` / ``results`` as they complete;
* routes by header, so a worker keeps the header environments it already
  built warm;
* deduplicates identical (statement, proof) pairs in flight and counts the
  multiplicity, and caches verdicts by content (:mod:`lean_env.cache`);
* hedges: when nothing is queued and a worker is idle, the oldest running
  check is duplicated on it and the first verdict wins;
* never drops work: a worker that dies (or stops answering) is replaced in
  its placement-group bundle (:mod:`lean_env.supervised`) and its check
  requeued; after ``max_worker_losses`` losses the check ends as
  ``system_error`` so every submitted task gets exactly one verdict;
* audits: a sample of the ``valid`` verdicts (``audit_fraction``) gets a
  second opinion through :meth:`ProverBackend.audit` before it is returned;
  a disagreement turns the verdict ``invalid`` (reason
  ``audit_disagreement``), so the proof earns no reward, and is logged.

Audit sample: which proofs are audited, and what the audit does to their
verdict, is :mod:`lean_env.audit_rule` (a fixed function of the task id and
``audit_seed``, so a rerun audits the same proofs).  An audit is a work item of its own, queued behind the checks
already waiting when the first verdict arrives: it runs on whichever worker
is free, the worker's warm coqtop keeps serving checks between audits, and
the hedging, hang and loss handling of checks covers audits too.  Only the
audited proof waits for its second opinion.  A lost or timed-out audit, or a
backend without an audit path, is ``inconclusive``: the verdict stays
``valid`` and is counted.

Usage::

    pool = VerifierPool(BackendSpec("rocq"), VerifierPoolSettings(num_workers=2, timeout=30))
    for task in tasks:
        pool.submit(task)
    for task, verdict in pool.results():
        ...
    pool.shutdown()
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import itertools
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional

import ray
from ray.exceptions import RayActorError, RayTaskError
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from lean_env.audit_rule import DISAGREE, INCONCLUSIVE, audit_sampled, combine_audit
from lean_env.backends import BackendSpec
from lean_env.cache import VerdictCache
from lean_env.pool_worker import AUDIT, PROOF, STATEMENT, VerifierWorker
from lean_env.supervised import SupervisedActors
from lean_env.verdict import ProofTask, Status, Verdict

log = logging.getLogger(__name__)


@dataclass
class _Job:
    """One distinct check; ``waiters`` are the submitted tasks it answers."""

    key: str
    kind: str
    task: ProofTask
    waiters: list[ProofTask]
    submitted_at: float
    #: wall-clock seconds the backend gets for it
    timeout: float
    #: for an audit: the ``valid`` verdict under audit, and the key it is cached under
    first: Optional[Verdict] = None
    cache_key: str = ""
    #: workers currently running this check (more than one when hedged)
    running_on: set[int] = field(default_factory=set)
    #: times a worker died or hung while running this check
    losses: int = 0


@dataclass
class PoolStats:
    """Counters since the pool started."""

    submitted: int = 0
    cache_hits: int = 0
    duplicates: int = 0
    dispatched: int = 0
    hedged: int = 0
    hedge_wins: int = 0
    requeued: int = 0
    workers_restarted: int = 0
    #: audits finished (agreeing, disagreeing or inconclusive)
    audited: int = 0
    #: audits that rejected a proof the first check accepted
    audit_disagreements: int = 0
    #: audits that could not decide (timeout, no audit path, lost workers)
    audit_inconclusive: int = 0
    #: distinct checks by final status
    verdicts: collections.Counter = field(default_factory=collections.Counter)
    #: reason of every non-valid verdict returned (cache hits and duplicates included)
    rejected: collections.Counter = field(default_factory=collections.Counter)

    def as_dict(self) -> dict:
        """Flat counters: the fields, ``verdict_<status>`` and ``rejected/<reason>``."""
        d = {k: v for k, v in self.__dict__.items() if k not in ("verdicts", "rejected")}
        d.update({f"verdict_{k}": v for k, v in self.verdicts.items()})
        d.update({f"rejected/{k}": v for k, v in self.rejected.items()})
        return d


@dataclass(frozen=True)
class VerifierPoolSettings:
    """How a :class:`VerifierPool` runs its workers and checks."""

    num_workers: int = 1
    """Worker actors, one prover process (and its spare) each."""
    timeout: float = 60.0
    """Wall-clock seconds per check, enforced by the backend."""
    cpus_per_worker: float = 1.0
    """Ray CPUs reserved per worker."""
    memory_per_worker: Optional[int] = None
    """Ray memory (bytes) reserved per worker; ``None``: none reserved."""
    hedge: bool = True
    """Duplicate the oldest running check on an idle worker when the queue is
    empty; the first verdict wins."""
    hedge_after: float = 5.0
    """Only checks running longer than this many seconds are duplicated, so a
    stream that merely keeps workers waiting for proofs is not checked twice."""
    max_worker_losses: int = 3
    """A check whose worker died this many times ends as ``system_error``: a
    proof that reliably kills workers must not loop forever."""
    hang_grace: float = 60.0
    """A worker that has not answered ``timeout + hang_grace`` seconds after a
    check started running is hung: killed and replaced.  A worker's first
    check gets ``start_timeout`` more, since its prover starts then (a Lean
    worker loading Mathlib takes far longer than a check)."""
    pipeline_depth: int = 2
    """Checks queued on each worker at once; a second one waiting in the actor
    hides the round trip to the driver."""
    name: str = "verifier"
    """Prefix of the actors' names (shown in the Ray dashboard)."""
    placement_strategy: str = "PACK"
    """How the workers' placement group spreads them over nodes: "PACK" (few
    nodes) or "SPREAD" (a cluster's prover load over its CPU nodes)."""
    bundle_resources: Optional[dict[str, float]] = None
    """Extra Ray resources per worker's bundle, e.g. ``{"verifier_node":
    0.001}`` to keep workers on nodes started with that resource."""
    start_timeout: float = 300.0
    """Seconds to wait for the cluster to have room for every worker, and a
    new worker's allowance for starting its prover (see ``hang_grace``)."""
    audit_fraction: float = 0.01
    """Share of the ``valid`` proof checks that get a second opinion (module
    docstring: how they are drawn)."""
    audit_log: Optional[str | os.PathLike] = None
    """JSONL file each audit disagreement is appended to; ``None``: they are
    only counted and logged as warnings."""
    audit_seed: int = 0
    """Seed of the audit sample."""
    audit_timeout: Optional[float] = None
    """Wall-clock seconds per audit; ``None``: three times ``timeout`` (an audit
    starts its prover from nothing, three times over for Rocq: coqc, coqchk,
    coqc)."""

    def __post_init__(self) -> None:
        if self.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {self.num_workers}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.pipeline_depth < 1:
            raise ValueError(f"pipeline_depth must be >= 1, got {self.pipeline_depth}")
        fraction = self.audit_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
            raise ValueError(f"audit_fraction must be a number in [0, 1], got {fraction!r}")
        if self.audit_timeout is not None and not self.audit_timeout > 0:
            raise ValueError(f"audit_timeout must be > 0 seconds, got {self.audit_timeout}")

    @property
    def audit_timeout_s(self) -> float:
        return float(self.audit_timeout) if self.audit_timeout is not None else 3 * float(self.timeout)

    def bundle(self) -> dict[str, float]:
        """One worker's Ray resources, as its placement-group bundle."""
        bundle = {"CPU": self.cpus_per_worker, **(self.bundle_resources or {})}
        if self.memory_per_worker:
            bundle["memory"] = self.memory_per_worker
        return bundle


class VerifierPool:
    """Driver-side dispatcher over :class:`VerifierWorker` actors."""

    def __init__(self, spec: BackendSpec, settings: VerifierPoolSettings,
                 cache: Optional[VerdictCache] = None) -> None:
        """Start ``settings.num_workers`` workers, each building ``spec``'s
        backend, reserved together in one placement group (all fit or none
        start); ``cache`` is the verdict cache (``None``: no caching)."""
        self.spec = spec
        self.settings = settings
        self.cache = cache
        self.stats = PoolStats()
        self._generations = itertools.count(1)
        self._actors = SupervisedActors("verifier workers", self._launch, count=settings.num_workers,
                                        bundle=settings.bundle(), strategy=settings.placement_strategy,
                                        start_timeout_s=settings.start_timeout)
        self._worker_names = [f"{settings.name}-{i}" for i in range(settings.num_workers)]
        self._worker_headers: list[set[str]] = [set() for _ in range(settings.num_workers)]
        #: per worker, its checks in the order the actor will run them
        self._inflight: list[collections.deque[ray.ObjectRef]] = [collections.deque()
                                                                  for _ in range(settings.num_workers)]
        #: ref -> (worker, job key, when the check started running: None while
        #: it still waits behind another check on its worker)
        self._running: dict[ray.ObjectRef, tuple[int, str, Optional[float]]] = {}
        self._queue: collections.deque[_Job] = collections.deque()
        self._jobs: dict[str, _Job] = {}
        self._ready: collections.deque[tuple[ProofTask, Verdict]] = collections.deque()
        self._outstanding = 0
        try:
            # Configuration errors (prover not installed...) surface now, with
            # the original message, not as a stream of dead actors later.
            versions = ray.get([self._actors.start(i).ready.remote() for i in range(settings.num_workers)])
        except BaseException:
            self.shutdown()
            raise
        self.version = versions[0]

    # -- workers ------------------------------------------------------------
    def _launch(self, index: int, in_bundle: PlacementGroupSchedulingStrategy) -> ray.actor.ActorHandle:
        options = {"num_cpus": self.settings.cpus_per_worker}
        if self.settings.memory_per_worker:
            options["memory"] = self.settings.memory_per_worker
        return VerifierWorker.options(name=f"{self._worker_names[index]}-{os.getpid()}-{id(self):x}",
                                      scheduling_strategy=in_bundle, **options).remote(
                                          self.spec, self._worker_names[index])

    def _replace_worker(self, index: int, why: str) -> None:
        """Kill worker ``index``, requeue every check it held, start a new one."""
        log.warning("verifier worker %s %s; replacing it", self._worker_names[index], why)
        held, self._inflight[index] = self._inflight[index], collections.deque()
        for ref in held:
            _, key, _ = self._running.pop(ref)
            self._lost(self._jobs.get(key), index, why)
        self.stats.workers_restarted += 1
        self._worker_names[index] = f"{self.settings.name}-{index}-r{next(self._generations)}"
        self._worker_headers[index] = set()
        self._actors.replace(index)

    @property
    def num_workers(self) -> int:
        return len(self._actors)

    def worker(self, index: int) -> ray.actor.ActorHandle:
        """The actor handle of worker ``index`` (for tests and diagnostics)."""
        return self._actors.handle(index)

    # -- submission -------------------------------------------------------------
    def submit(self, task: ProofTask) -> None:
        """Queue a proof check; its verdict comes out of :meth:`poll`."""
        self._submit(PROOF, task)

    def submit_statement(self, task: ProofTask) -> None:
        """Queue a statement check (``task.proof`` is ignored): does the
        statement elaborate with a placeholder proof?"""
        self._submit(STATEMENT, task)

    def _submit(self, kind: str, task: ProofTask) -> None:
        self.stats.submitted += 1
        self._outstanding += 1
        key = f"{kind}:{task.key(self.version)}"
        job = self._jobs.get(key) or self._jobs.get(f"{AUDIT}:{key}")
        if job is not None:
            self.stats.duplicates += 1
            job.waiters.append(task)
            return
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None:
            self.stats.cache_hits += 1
            # a valid verdict cached before any audit decided gets its audit now
            if hit.audit in ("", INCONCLUSIVE) and self._audit_due(kind, hit, task):
                self._queue_audit(key, task, [task], hit)
                self._dispatch()
            else:
                self._finish_one(task, hit)
            return
        job = _Job(key=key, kind=kind, task=task, waiters=[task], submitted_at=time.monotonic(),
                   timeout=self.settings.timeout)
        self._jobs[key] = job
        self._queue.append(job)
        self._dispatch()

    def _audit_due(self, kind: str, verdict: Verdict, task: ProofTask) -> bool:
        settings = self.settings
        return kind == PROOF and verdict.valid and audit_sampled(task.id, settings.audit_seed, settings.audit_fraction)

    def _queue_audit(self, cache_key: str, task: ProofTask, waiters: list[ProofTask], first: Verdict) -> None:
        """Queue the audit of ``first``, the valid verdict of ``task``; its
        ``waiters`` get their verdict when the audit is done."""
        job = _Job(key=f"{AUDIT}:{cache_key}", kind=AUDIT, task=task, waiters=waiters,
                   submitted_at=time.monotonic(), timeout=self.settings.audit_timeout_s, first=first,
                   cache_key=cache_key)
        self._jobs[job.key] = job
        self._queue.append(job)

    # -- dispatch ---------------------------------------------------------------
    def _next_job_for(self, worker: int) -> Optional[_Job]:
        """The oldest queued job whose header this worker has warm, else the oldest."""
        warm = self._worker_headers[worker]
        if warm:
            for i, job in enumerate(itertools.islice(self._queue, 64)):
                if job.task.header in warm:
                    del self._queue[i]
                    return job
        return self._queue.popleft() if self._queue else None

    def _start(self, worker: int, job: _Job) -> None:
        ref = self._actors.handle(worker).check.remote(job.kind, job.task, job.timeout)
        queue = self._inflight[worker]
        self._running[ref] = (worker, job.key, None if queue else time.monotonic())
        queue.append(ref)
        self._worker_headers[worker].add(job.task.header)
        job.running_on.add(worker)
        self.stats.dispatched += 1

    def _dispatch(self) -> None:
        for w in range(len(self._actors)):
            while len(self._inflight[w]) < self.settings.pipeline_depth:
                job = self._next_job_for(w)
                if job is None:
                    # only a worker with nothing at all to do takes a hedge
                    job = self._hedge_candidate(w) if self.settings.hedge and not self._inflight[w] else None
                    if job is None:
                        break
                    self.stats.hedged += 1
                self._start(w, job)

    def _hedge_candidate(self, worker: int) -> Optional[_Job]:
        """The oldest job running for over ``hedge_after`` seconds, not already
        running on ``worker`` and not yet hedged."""
        best: Optional[_Job] = None
        now = time.monotonic()
        for _, key, started in self._running.values():
            job = self._jobs.get(key)
            if (job is None or started is None or worker in job.running_on or len(job.running_on) > 1
                    or now - started < self.settings.hedge_after):
                continue
            if best is None or job.submitted_at < best.submitted_at:
                best = job
        return best

    # -- completion ----------------------------------------------------------
    def _finish_one(self, task: ProofTask, verdict: Verdict) -> None:
        if not verdict.valid:
            self.stats.rejected[verdict.reason] += 1
        self._ready.append((task, verdict))

    def _resolve(self, job: _Job, verdict: Verdict) -> None:
        del self._jobs[job.key]
        if job.first is not None:
            verdict = self._audited(job, verdict)
        elif self._audit_due(job.kind, verdict, job.task):
            self._queue_audit(job.key, job.task, job.waiters, verdict)
            return
        if self.cache is not None:
            self.cache.put(job.cache_key or job.key, verdict)
        self.stats.verdicts[verdict.status.value] += 1
        for i, task in enumerate(job.waiters):
            copy = verdict if i == 0 else Verdict(**{**verdict.__dict__, "messages": list(verdict.messages)})
            self._finish_one(task, copy)

    def _audited(self, job: _Job, audit: Verdict) -> Verdict:
        """Count an audit's outcome, log a disagreement, and return the verdict
        the waiters get."""
        assert job.first is not None
        final = combine_audit(job.first, audit)
        self.stats.audited += 1
        if final.audit == INCONCLUSIVE:
            self.stats.audit_inconclusive += 1
        elif final.audit == DISAGREE:
            self.stats.audit_disagreements += 1
            log.warning("audit disagreement on task %s: the first check said valid, the audit %s (%s)",
                        job.task.id, audit.status.value, audit.reason)
            if self.settings.audit_log is not None:
                record = {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                          "task": dataclasses.asdict(job.task), "first": job.first.to_json(),
                          "audit": audit.to_json()}
                with open(self.settings.audit_log, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")
        return final

    def _lost(self, job: Optional[_Job], worker: int, why: str) -> None:
        """A worker died or hung while running ``job``: requeue or give up."""
        if job is None:  # a hedge loser that was already resolved
            return
        job.running_on.discard(worker)
        job.losses += 1
        if job.losses >= self.settings.max_worker_losses:
            self._resolve(job, Verdict(Status.SYSTEM_ERROR, reason="worker_lost",
                                       messages=[f"{job.losses} workers lost on this check: {why}"],
                                       worker=self._worker_names[worker]))
        elif not job.running_on:
            self.stats.requeued += 1
            self._queue.appendleft(job)

    def _collect(self, ref: ray.ObjectRef) -> None:
        if ref not in self._running:
            return  # its worker was already replaced and the check requeued
        worker, key, _ = self._running.pop(ref)
        self._actors.mark_answered(worker)
        queue = self._inflight[worker]
        queue.remove(ref)
        if queue:  # the next check on this worker starts running now
            w, k, _ = self._running[queue[0]]
            self._running[queue[0]] = (w, k, time.monotonic())
        job = self._jobs.get(key)
        try:
            verdict: Verdict = ray.get(ref)
        except RayActorError as e:
            self._replace_worker(worker, f"died ({type(e).__name__})")
            self._lost(job, worker, str(e).splitlines()[0] if str(e) else type(e).__name__)
            return
        except RayTaskError as e:
            # A bug in the backend (it must not raise on bad input): count it as
            # a lost check so it is retried elsewhere, then reported.
            log.error("verifier worker %s raised: %s", self._worker_names[worker], e)
            self._replace_worker(worker, "raised an exception")
            self._lost(job, worker, str(e).splitlines()[-1])
            return
        if job is None:
            return  # the hedged twin already answered
        if len(job.running_on) > 1:
            self.stats.hedge_wins += 1
        job.running_on.discard(worker)
        self._resolve(job, verdict)

    def _check_hung(self) -> None:
        now = time.monotonic()
        for ref, (worker, key, started) in list(self._running.items()):
            job = self._jobs.get(key)
            steady = (job.timeout if job is not None else self.settings.timeout) + self.settings.hang_grace
            limit = self._actors.deadline_s(worker, steady, steady + self.settings.start_timeout)
            if started is not None and now - started > limit and ref in self._running:
                self._replace_worker(worker, f"did not answer within {limit:.0f} s")

    def poll(self, timeout: float = 0.0) -> list[tuple[ProofTask, Verdict]]:
        """Verdicts that are ready now, waiting up to ``timeout`` seconds for the
        first one.  Each submitted task appears exactly once over all polls."""
        deadline = time.monotonic() + timeout
        while not self._ready and self._running:
            remaining = max(0.0, deadline - time.monotonic())
            done, _ = ray.wait(list(self._running), num_returns=1, timeout=min(remaining, 1.0))
            for ref in done:
                self._collect(ref)
            self._check_hung()
            self._dispatch()
            if time.monotonic() >= deadline:
                break
        out = list(self._ready)
        self._ready.clear()
        self._outstanding -= len(out)
        return out

    @property
    def outstanding(self) -> int:
        """Submitted tasks that have not yet been returned by :meth:`poll`."""
        return self._outstanding

    def waitables(self) -> list[ray.ObjectRef]:
        """The checks in flight, which :meth:`poll` waits on: for a caller that
        waits on the pool and something else at once and then calls ``poll(0)``."""
        return list(self._running)

    def results(self) -> Iterator[tuple[ProofTask, Verdict]]:
        """Yield ``(task, verdict)`` as checks complete, until every submitted
        task has been answered."""
        while self._outstanding > 0:
            yield from self.poll(timeout=1.0)

    def verify(self, tasks: Iterable[ProofTask]) -> list[Verdict]:
        """Check ``tasks`` and return their verdicts in input order."""
        if self._outstanding:
            raise RuntimeError("verify() cannot be mixed with pending streamed submissions; "
                               "drain them with results() first")
        tasks = list(tasks)
        slots: dict[int, list[int]] = collections.defaultdict(list)
        for i, t in enumerate(tasks):
            slots[id(t)].append(i)
            self.submit(t)
        out: list[Optional[Verdict]] = [None] * len(tasks)
        for task, verdict in self.results():
            out[slots[id(task)].pop()] = verdict
        return out  # type: ignore[return-value]

    def shutdown(self) -> None:
        """Stop every worker (their prover processes are killed)."""
        self._actors.shutdown(farewell="shutdown")
