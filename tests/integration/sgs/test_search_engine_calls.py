"""Many searches' model calls through one engine group (:mod:`sgs.search.engine_calls`):
the real queue actor and pump, a scripted group in place of the engines and a
reader that shows what it was given (the real reader: tests/unit/sgs/search/test_engine_proposer.py)."""

from __future__ import annotations

import time

import pytest
import ray

from sgs.machinery.engines import Sample, SamplingSettings
from sgs.search.engine_calls import EngineCallError, EnginePump, TacticQueue
from sgs.search.engine_proposer import TacticAnswer
from sgs.search.proposers import Proposal


class ScriptedGroup:
    """Stands in for an :class:`~sgs.machinery.engines.EngineGroup`: every chunk is
    ready at once (sample j of prompt p is ``p/j``), or ``poll`` raises ``fail``."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.submitted: list[tuple[list[str], SamplingSettings]] = []
        self._ready: list[tuple[int, list[list[Sample]]]] = []

    def submit(self, prompts, settings, chunk_size=None):
        self.submitted.append((list(prompts), settings))
        key = len(self.submitted)
        self._ready.append((key, [[Sample(f"{p}/{j}", [7, 2], [-0.5, -0.25], [1, 2, 3], "stop", 0, 0.0)
                                   for j in range(settings.n)] for p in prompts]))
        return [(key, list(range(len(prompts))))]

    def poll(self, timeout=0.0):
        if self.fail is not None:
            raise self.fail
        ready, self._ready = self._ready, []
        return ready

    def waitables(self):
        return []


class EchoReader:
    """The prompt names the state; the answer lists the completions' texts in order."""

    def prompt(self, state: str) -> str:
        return f"prompt of {state}"

    def answer(self, completions) -> TacticAnswer:
        return TacticAnswer(tuple(Proposal(c.text, sum(c.logprobs)) for c in completions), len(completions),
                            sum(len(c.token_ids) for c in completions))


def pump_until(pump: EnginePump, refs: list, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while ray.wait(refs, num_returns=len(refs), timeout=0)[1]:
        assert time.monotonic() < deadline, "the calls were never answered"
        ray.wait(pump.waitables() + refs, num_returns=1, timeout=0.2)
        pump.advance()


def test_the_calls_of_many_searches_reach_the_engines_as_one_batch(ray_session):
    group = ScriptedGroup()
    # the four calls go out back to back; the linger counts from the first call's arrival, also
    # when it lands between two of the pump's takes (a take then used to return it alone: twice
    # in CI under load), so 10 s keeps the four in one batch on any load
    queue = TacticQueue.remote(linger_s=10.0)
    try:
        pump = EnginePump(group, queue, SamplingSettings(max_tokens=8, temperature=0.7), EchoReader(),
                          take_timeout_s=0.5)
        calls = [queue.tactics.remote(f"state {i}", 2) for i in range(3)] + [queue.tactics.remote("state 3", 1)]
        pump_until(pump, calls)
        answers = ray.get(calls)
    finally:
        ray.kill(queue)
    # One generate call per n, each with every prompt waiting; the settings are the pump's, n the call's.
    # (The actor takes concurrent calls in any order.)
    assert [(sorted(prompts), s.n, s.max_tokens, s.temperature) for prompts, s in group.submitted] == [
        (["prompt of state 3"], 1, 8, 0.7),
        (["prompt of state 0", "prompt of state 1", "prompt of state 2"], 2, 8, 0.7)]
    assert answers[1] == TacticAnswer((Proposal("prompt of state 1/0", -0.75), Proposal("prompt of state 1/1", -0.75)),
                                      samples=2, tokens=4)
    assert [p.tactic for p in answers[3].proposals] == ["prompt of state 3/0"]
    assert (pump.calls, pump.chunks) == (4, 2)


def test_an_engine_error_fails_the_calls_in_flight_not_the_driver(ray_session):
    queue = TacticQueue.remote(linger_s=0.0)
    try:
        pump = EnginePump(ScriptedGroup(fail=ValueError("the prompt is longer than the model's context")), queue,
                          SamplingSettings(), EchoReader(), take_timeout_s=0.5)
        call = queue.tactics.remote("state", 2)
        pump_until(pump, [call])
        with pytest.raises(EngineCallError, match="engine call failed: ValueError: the prompt is longer"):
            ray.get(call)
    finally:
        ray.kill(queue)
