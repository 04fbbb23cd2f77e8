"""The job board between the driver and the workers of a long-lived Ray
Train run (:class:`~sgs.machinery.learner.driver.RayTrainLearner`).

The driver posts a batch of jobs and waits for their metrics; every rank
takes each batch once, trains its jobs in order, and rank 0 marks a job
finished once every rank has written its part of the checkpoint.  An async
actor, so that a waiting side holds no thread and every wait ends by its
timeout: an idle worker asks again, and finds out when the board (and so
the driver that owns it) is gone.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray


@ray.remote(num_cpus=0)
class JobBoard:
    """One batch at a time: its number, its jobs (the workers' job configs)
    and the metrics of those finished so far."""

    def __init__(self) -> None:
        self._number = 0
        self._jobs: list[dict[str, Any]] = []
        self._finished: dict[int, dict[str, Any]] = {}
        self._taken = 0  # the newest batch a worker has taken: the run's workers are up
        self._closed = False
        self._changed = asyncio.Condition()

    async def post(self, jobs: list[dict[str, Any]]) -> int:
        """Make ``jobs`` the current batch; its number."""
        async with self._changed:
            self._number += 1
            self._jobs, self._finished = jobs, {}
            self._changed.notify_all()
            return self._number

    async def next_batch(self, after: int, wait_s: float) -> tuple[int, list[dict[str, Any]] | None] | None:
        """``(number, jobs)`` of the batch posted after batch ``after``;
        ``(number, None)`` once the board is closed; None when neither
        happened within ``wait_s`` seconds."""
        async with self._changed:
            if not await self._wait(lambda: self._closed or self._number > after, wait_s):
                return None
            if self._closed:
                return self._number, None
            self._taken = self._number
            return self._number, self._jobs

    async def taken(self, number: int) -> bool:
        """Whether a worker has taken batch ``number`` (so the run's workers started)."""
        return self._taken >= number

    async def finish(self, number: int, job: int, metrics: dict[str, Any]) -> None:
        """Job ``job`` of batch ``number`` is trained and its checkpoint written."""
        async with self._changed:
            if number == self._number:
                self._finished[job] = metrics
                self._changed.notify_all()

    async def finished(self, number: int, count: int, wait_s: float) -> dict[int, dict[str, Any]]:
        """The metrics of batch ``number``'s finished jobs, by job index, once
        ``count`` have finished or ``wait_s`` seconds have passed."""
        async with self._changed:
            await self._wait(lambda: self._number != number or len(self._finished) >= count, wait_s)
            return dict(self._finished) if number == self._number else {}

    async def close(self) -> None:
        """Tell every worker to end its run."""
        async with self._changed:
            self._closed = True
            self._changed.notify_all()

    async def _wait(self, predicate: Any, wait_s: float) -> bool:
        try:
            await asyncio.wait_for(self._changed.wait_for(predicate), wait_s)
        except asyncio.TimeoutError:
            return False
        return True
