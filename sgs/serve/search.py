"""The ``/prove`` attempt loop: proofs drawn in calls, each checked as it comes, the first valid one wins.

:func:`search` starts every engine call of a request at once (``attempts``
samples in calls of ``serve.samples_per_call``; the engine batches them with
other requests' calls), extracts the proof body of each sample as its call
returns (:func:`sgs.method.roles.extract_proof`: the model's restatement is
dropped and the body is checked under the given statement), sends each body
to the verifier at once, and stops at the first ``valid`` verdict or at the
deadline.  Whatever is still running then is cancelled.  Every attempt
ends with a status: a verdict status, ``no_proof`` (the output held no
proof to check), ``unchecked`` (its check was still running) or
``not_sampled`` (its engine call was still running).

It takes the engine and the verifier as two functions returning awaitables,
so it runs against Ray Serve handles in the service and against plain
coroutines in tests.  (The loop's :mod:`sgs.machinery.streaming` drives one
fixed set of requests from one thread to the end; a service needs many
requests side by side on one event loop, each stopping at its first proof.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lean_env.verdict import ProofTask, Verdict
from sgs.method.roles import extract_proof

NOT_SAMPLED = "not_sampled"
NO_PROOF = "no_proof"
UNCHECKED = "unchecked"

#: Prover messages kept per attempt in a response (characters, all messages together).
MESSAGES_CAP = 2000


@dataclass
class Attempt:
    """What became of one sample of a ``/prove`` request."""

    index: int
    """The attempt's number, from 0."""
    status: str = NOT_SAMPLED
    """A verdict status (``valid``, ``invalid``, ``timeout``, ``system_error``) or
    ``no_proof``, ``unchecked``, ``not_sampled``."""
    reason: str = ""
    """The verdict's reason, or why no proof could be extracted."""
    seconds: float = 0.0
    """Prover seconds of its check."""
    messages: list[str] = field(default_factory=list)
    """The prover's messages (capped at :data:`MESSAGES_CAP` characters)."""
    proof: str = ""
    """The extracted proof body, once there is one."""

    def to_json(self) -> dict[str, Any]:
        return {"attempt": self.index, "status": self.status, "reason": self.reason,
                "seconds": round(self.seconds, 4), "messages": self.messages}


@dataclass
class Outcome:
    """A search's result."""

    proof: str | None
    """The first valid proof body, or None."""
    winner: int | None
    """Its attempt's index."""
    attempts: list[Attempt]
    """Every attempt, in index order."""
    timed_out: bool
    """The deadline came with work still running and no valid proof."""

    @property
    def verifier_seconds(self) -> float:
        return sum(attempt.seconds for attempt in self.attempts)


def call_sizes(attempts: int, per_call: int) -> list[int]:
    """``attempts`` samples as engine calls of at most ``per_call`` each."""
    return [min(per_call, attempts - start) for start in range(0, attempts, per_call)]


def capped(messages: Sequence[str], cap: int = MESSAGES_CAP) -> list[str]:
    """The first messages, cut so that together they hold at most ``cap`` characters."""
    kept, left = [], cap
    for message in messages:
        if left <= 0:
            break
        kept.append(message[:left])
        left -= len(message)
    return kept


async def search(draw: Callable[[str, int], Awaitable[Sequence[Any]]], check: Callable[[ProofTask], Awaitable[Verdict]],
                 *, prompt: str, header: str, statement: str, language: str, attempts: int, per_call: int,
                 deadline: float, clock: Callable[[], float] = time.monotonic) -> Outcome:
    """Draw ``attempts`` samples for ``prompt`` and check their proofs of
    ``statement`` until one is valid or ``clock()`` reaches ``deadline``.

    ``draw(prompt, n)`` returns an awaitable of n samples (objects with a
    ``text``), ``check(task)`` one of a verdict; an awaitable with a
    ``cancel()`` method (a Ray Serve response) is cancelled with its task.
    An exception from either ends the search and propagates.
    """
    running: dict[asyncio.Future, tuple[str, int, Any]] = {}
    results = [Attempt(index) for index in range(attempts)]
    proof = winner = None

    def start(kind: str, index: int, awaitable: Any) -> None:
        running[asyncio.ensure_future(awaited(awaitable))] = (kind, index, awaitable)

    first = 0
    for n in call_sizes(attempts, per_call):
        start("draw", first, draw(prompt, n))
        first += n
    try:
        while running and proof is None:
            remaining = deadline - clock()
            if remaining <= 0:
                break
            done, _ = await asyncio.wait(running, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                kind, index, _ = running.pop(future)
                if kind == "draw":
                    for offset, sample in enumerate(future.result()):
                        attempt = results[index + offset]
                        extraction = extract_proof(sample.text, language)
                        if not extraction.ok:
                            attempt.status = NO_PROOF
                            attempt.reason = extraction.failure.value
                            continue
                        attempt.status, attempt.proof = UNCHECKED, extraction.value
                        start("check", attempt.index, check(ProofTask(f"attempt-{attempt.index}", header, statement,
                                                                      extraction.value)))
                    continue
                verdict: Verdict = future.result()
                attempt = results[index]
                attempt.status, attempt.reason = verdict.status.value, verdict.reason
                attempt.seconds, attempt.messages = verdict.seconds, capped(verdict.messages)
                if verdict.valid and proof is None:
                    proof, winner = attempt.proof, index
        timed_out = proof is None and bool(running)
    finally:
        for future, (_, _, awaitable) in running.items():
            future.cancel()
            if callable(getattr(awaitable, "cancel", None)):
                awaitable.cancel()
    return Outcome(proof, winner, results, timed_out)


async def awaited(awaitable: Awaitable) -> Any:
    """``awaitable``'s result, as a coroutine (what ``asyncio`` wraps in a task; a
    Ray Serve response is awaitable but no coroutine)."""
    return await awaitable
