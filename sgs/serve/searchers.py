"""``/prove``'s search mode: tactic-level searches on Ray actors, their model calls to the service's engine.

:class:`Searchers` keeps ``evaluation.search.workers``
:class:`~sgs.search.workers.SearchWorker` actors per front replica, started
at the first search request, each with its own prover session (Rocq's or a Lean REPL).  Their
proposer (:class:`~sgs.search.engine_proposer.EngineProposer`) calls the
service's engine deployment (``SolverEngine.tactics``), so the searches'
model calls are batched with the sampling requests' by Ray Serve.  A search
gets the request's time less a share kept for the re-checks (its own, then
the verifier's, as a sampled proof gets); a request that finds every worker
busy waits for one within its time.  A worker that dies is replaced and its
search reported as ``system_error``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Optional

import ray

from lean_env.backends import BackendSpec
from lean_env.verdict import ProofTask
from sgs.search.settings import SearchSettings
from sgs.search.workers import ENGINE, ProposerSpec, SearchWorker, failed

#: Share of what is left of a request's time that the search itself may take;
#: the rest is for its re-check and the verifier's.
SEARCH_SHARE = 0.75


@dataclass(frozen=True)
class SearchOptions:
    """The service's search: strategy, workers, :class:`SearchSettings` fields (the
    time per search is the request's), and the prover its sessions run."""

    strategy: str
    workers: int
    settings: dict
    backend: BackendSpec


class Searchers:
    """The front replica's search actors (module docstring)."""

    def __init__(self, engine: Any, options: SearchOptions) -> None:
        self._engine, self._options = engine, options
        #: idle workers; None until the first search starts them
        self._idle: Optional[asyncio.Queue] = None

    def _start(self) -> Any:
        return SearchWorker.remote(self._options.backend, ProposerSpec(ENGINE, engine=self._engine))

    async def search(self, task: ProofTask, seconds: float) -> Optional[dict]:
        """A worker's result (:meth:`SearchWorker.search`) within ``seconds``, or
        None when no worker was free or the search had not ended by then."""
        if self._idle is None:
            self._idle = asyncio.Queue()
            for _ in range(self._options.workers):
                self._idle.put_nowait(self._start())
        deadline = time.monotonic() + seconds
        try:
            worker = await asyncio.wait_for(self._idle.get(), max(seconds, 0.0))
        except TimeoutError:
            return None
        left = deadline - time.monotonic()
        settings = SearchSettings(**{**self._options.settings, "lemma_seconds": max(SEARCH_SHARE * left, 0.1),
                                     "recheck_seconds": max((1 - SEARCH_SHARE) * left / 2, 0.1)})
        settings = dataclasses.replace(settings, tactic_seconds=min(settings.tactic_seconds, settings.lemma_seconds))
        job = asyncio.ensure_future(self._run(worker, task, settings))
        try:
            return await asyncio.wait_for(asyncio.shield(job), max(deadline - time.monotonic(), 0.0))
        except TimeoutError:
            return None  # the worker goes back to the idle ones when its search ends

    async def _run(self, worker: Any, task: ProofTask, settings: SearchSettings) -> dict:
        try:
            return await worker.search.remote(task, settings, self._options.strategy)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as error:
            worker = self._start()
            return failed(task, f"search worker died: {type(error).__name__}")
        except ray.exceptions.RayTaskError as error:  # the search raised (a model call failed)
            return failed(task, f"search failed: {type(error.cause).__name__}: {error.cause}"[:500])
        finally:
            self._idle.put_nowait(worker)
