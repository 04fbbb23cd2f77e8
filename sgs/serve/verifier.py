"""The verifier as a Ray Serve deployment: a verifier pool per replica, driven by a pump thread.

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
import logging
import threading
import uuid
from dataclasses import replace
from typing import Any

import ray
from ray import serve

from lean_env.backends import BackendSpec
from lean_env.cache import VerdictCache
from lean_env.pool import VerifierPool, VerifierPoolSettings
from lean_env.verdict import ProofTask, Verdict

log = logging.getLogger("ray.serve")

#: Longest wait of the verifier's pump on the checks it knows of; checks
#: submitted meanwhile reach the pool when it ends, so it bounds their extra latency.
PUMP_WAIT_S = 0.01
#: Longest idle wait of the pump (a submission wakes it at once).
IDLE_WAIT_S = 0.5


# Helpers come before the deployment classes: Ray Serve pickles a deployment's
# class when it is declared, with the module globals that exist by then.


def _settle(future: asyncio.Future, verdict: Verdict) -> None:
    if not future.done():  # the caller may have stopped waiting
        future.set_result(verdict)



@serve.deployment
class Verifier:
    """A verifier pool per replica, driven by a pump thread (module docstring)."""

    def __init__(self, spec: BackendSpec, settings: VerifierPoolSettings, cache_entries: int) -> None:
        self._pool = VerifierPool(spec, settings, VerdictCache(max_entries=cache_entries))
        self._info = {"backend": spec.name, "version": self._pool.version, "workers": settings.num_workers,
                      "timeout_s": settings.timeout}
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
