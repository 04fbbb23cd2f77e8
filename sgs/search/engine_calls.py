"""Many searches' model calls batched through one engine group.

Searches run on Ray actors (:mod:`sgs.search.workers`), each with its own
Rocq session; the engines that sample whole proofs are an
:class:`~sgs.machinery.engines.EngineGroup`, a driver-side object that
supervises its actors (restarts, heartbeats, resubmitting lost chunks).
The two meet in a queue:

* :class:`TacticQueue`, a small async actor: a search's proposer
  (:class:`~sgs.search.engine_proposer.EngineProposer`) calls
  ``tactics(state, n)`` on it and waits; the calls of every search pile up.
* :class:`EnginePump`, in the driver beside the group: it takes whatever
  calls have piled up, renders their tactic prompts, submits them to the
  group as one batch per ``n`` (the engines sample a batch of prompts in
  one generate step: vLLM's continuous batching, or one padded
  transformers batch), and answers each call with its ranked tactics
  (:class:`~sgs.search.engine_proposer.TacticReader`) as its chunk comes
  back.  The tokenizer stays in the driver, so the search actors start
  without importing one.
  :func:`sgs.search.workers.search_all` drives it while it waits for the
  searches (its ``pump``).

So the calls go through the group's own supervision: a lost engine is
restarted and its chunks redone.  An error the group raises (an engine
refusing a prompt, a chunk lost too often) fails the calls then in flight,
and their searches end as ``system_error``, never as unproved.  While a pump
runs it is the only caller of the group's ``poll``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import replace
from typing import Any

import ray

from sgs.search.engine_proposer import TacticAnswer, TacticReader

__all__ = ["EngineCallError", "EnginePump", "TacticQueue"]


class EngineCallError(RuntimeError):
    """A model call the engines could not answer."""


@ray.remote(num_cpus=0, max_restarts=0)
class TacticQueue:
    """Model calls waiting for the driver's :class:`EnginePump` (module docstring)."""

    def __init__(self, linger_s: float = 0.005) -> None:
        #: after the first call arrives, how long ``take`` waits for more to batch with it
        self._linger_s = linger_s
        self._keys = itertools.count()
        self._new: list[tuple[int, str, int]] = []
        #: when the first of ``_new`` arrived (the linger counts from it)
        self._first_arrival = 0.0
        self._waiting: dict[int, asyncio.Future] = {}
        self._arrived: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        # Created on the actor's event loop, at first use.
        if self._arrived is None:
            self._arrived = asyncio.Event()
        return self._arrived

    async def tactics(self, state: str, n: int) -> TacticAnswer:
        """The tactics of ``n`` completions for ``state``, once the pump has had them sampled."""
        key = next(self._keys)
        future = asyncio.get_running_loop().create_future()
        self._waiting[key] = future
        if not self._new:
            self._first_arrival = time.monotonic()
        self._new.append((key, state, n))
        self._event().set()
        answer = await future
        if isinstance(answer, str):
            raise EngineCallError(answer)
        return answer

    async def take(self, timeout: float) -> list[tuple[int, str, int]]:
        """The calls that arrived since the last take, waiting up to ``timeout`` seconds for one,
        then until the first of them has waited ``linger_s`` (also when it arrived between two
        takes: a batch never leaves sooner than its first call's linger)."""
        if not self._new:
            try:
                await asyncio.wait_for(self._event().wait(), timeout)
            except asyncio.TimeoutError:
                return []
        left = self._first_arrival + self._linger_s - time.monotonic()
        if left > 0:
            await asyncio.sleep(left)
        taken, self._new = self._new, []
        self._event().clear()
        return taken

    async def answer(self, answers: list[tuple[int, Any]]) -> None:
        """Wake each call with its answer, or with a message saying why there is none."""
        for key, answer in answers:
            future = self._waiting.pop(key, None)
            if future is not None and not future.done():
                future.set_result(answer)


class EnginePump:
    """The driver's side of :class:`TacticQueue`: calls in, engine chunks out, answers back."""

    def __init__(self, group: Any, queue: Any, settings: Any, reader: TacticReader, *,
                 take_timeout_s: float = 1.0) -> None:
        """``group``: an :class:`~sgs.machinery.engines.EngineGroup`; ``queue``: a
        :class:`TacticQueue` handle; ``settings``: the
        :class:`~sgs.machinery.engines.SamplingSettings` of every call (its ``n`` set per call);
        ``reader``: the engines' tokenizer at work (prompts in, ranked tactics out)."""
        self.group, self.queue, self.settings, self.reader = group, queue, settings, reader
        self._take_timeout_s = take_timeout_s
        self._take = queue.take.remote(take_timeout_s)
        #: chunk id -> the queue's call keys, in the chunk's prompt order
        self._chunks: dict[int, list[int]] = {}
        #: calls answered, and engine chunks they went out in
        self.calls = 0
        self.chunks = 0

    def waitables(self) -> list[ray.ObjectRef]:
        """What :meth:`advance` has work for once ready."""
        # The group's heartbeat pings only while chunks of ours are out: poll(0) consumes them only then.
        return [self._take, *(self.group.waitables() if self._chunks else [])]

    def advance(self) -> None:
        """Submit the calls that arrived, answer those whose chunks came back; never blocks."""
        if ray.wait([self._take], timeout=0)[0]:
            calls = ray.get(self._take)
            self._take = self.queue.take.remote(self._take_timeout_s)
            self._submit(calls)
        if not self._chunks:
            return
        try:
            done = self.group.poll(0.0)
        except Exception as error:  # the group names no chunk: every call in flight fails
            failed = [key for keys in self._chunks.values() for key in keys]
            self._chunks.clear()
            self.queue.answer.remote([(key, f"engine call failed: {type(error).__name__}: {error}")
                                      for key in failed])
            return
        answers = []
        for chunk, samples in done:
            for key, drawn in zip(self._chunks.pop(chunk, []), samples):
                answers.append((key, self.reader.answer(drawn)))
        if answers:
            self.calls += len(answers)
            self.queue.answer.remote(answers)

    def _submit(self, calls: list[tuple[int, str, int]]) -> None:
        for n in sorted({n for _, _, n in calls}):
            batch = [(key, self.reader.prompt(state)) for key, state, count in calls if count == n]
            for chunk, indices in self.group.submit([prompt for _, prompt in batch], replace(self.settings, n=n)):
                self._chunks[chunk] = [batch[i][0] for i in indices]
                self.chunks += 1
