"""Sampling from an engine group while the verifier pool checks: the Ray
plumbing that the loop's phases, the evaluations and the rollout benchmark
share.

:func:`submit` queues requests (a prompt and the record ids of the samples
wanted for it) on an engine group in chunks; :func:`stream` hands every
sample to a callback as its chunk comes back, and every verdict to another
as the pool answers, so that the pool checks one chunk while the engines
write the next.  Faults are handled below this: the engine group redoes a
lost actor's chunks, the pool a lost worker's checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import ray

from lean_env.streaming_pool import StreamingPool
from lean_env.verdict import ProofTask, Verdict
from sgs.machinery.engines import EngineGroup, Sample, SamplingSettings

#: Engine calls per engine and phase: more chunks start verification sooner.
CHUNKS_PER_ENGINE = 8

#: Longest single wait, so the engines' heartbeats and the pool's hang checks run often enough.
WAIT_S = 1.0



@dataclass
class Request:
    """Samples wanted for one prompt: one record id per sample."""

    prompt: str
    """The prompt as the engine receives it."""
    sample_ids: list[str]
    """One record id per sample wanted; their number is the call's n."""
    item: Any
    """What the samples are for: a Target or a Problem."""


@dataclass
class Submitted:
    """Chunks that :func:`submit` queued on one engine group, for :func:`stream`."""

    engine: EngineGroup
    """The group running the chunks; it redoes a chunk whose actor was lost."""
    requests: dict[int, list[Request]]
    """Chunk id -> the requests it answers, in the chunk's prompt order."""


def submit(engine: EngineGroup, requests: Sequence[Request], settings: SamplingSettings) -> Submitted:
    """Queue every request on the engine group, in chunks of a few prompts.

    Requests wanting the same number of samples share one call (a resumed
    phase may want fewer than k for a few problems).
    """
    by_count: dict[int, list[Request]] = {}
    for request in requests:
        by_count.setdefault(len(request.sample_ids), []).append(request)
    submitted = Submitted(engine, {})
    for n, group in by_count.items():
        chunk = max(1, math.ceil(len(group) / (len(engine.actors) * CHUNKS_PER_ENGINE)))
        for key, indices in engine.submit([r.prompt for r in group], replace(settings, n=n), chunk_size=chunk):
            submitted.requests[key] = [group[i] for i in indices]
    return submitted


def stream(
    submitted: Submitted,
    on_sample: Callable[[Request, str, Sample], None],
    pool: StreamingPool | None = None,
    on_verdict: Callable[[ProofTask, Verdict], None] | None = None,
) -> None:
    """Hand each sample to ``on_sample`` as its chunk returns, and each verdict
    to ``on_verdict`` as the pool answers, until every chunk is back and every
    check ``on_sample`` submitted is answered.  Generation and verification
    overlap: the pool checks one chunk while the engines write the next.

    Engine and verifier faults are handled below this: a lost engine actor's
    chunks are redone by the group, a lost verifier's checks by the pool.  The
    group must have no other chunks in flight (one stream at a time).
    """
    engine = submitted.engine
    waiting = dict(submitted.requests)
    while waiting or (pool is not None and pool.outstanding):
        checking = pool is not None and pool.outstanding > 0
        if waiting and checking:
            # Wake on whichever comes first, a chunk or a verdict, then take both
            # without waiting: polling one side on a timer would leave the
            # verifiers without new checks between polls.
            refs = engine.waitables() + pool.waitables()
            if refs:
                ray.wait(refs, num_returns=1, timeout=WAIT_S)
        if waiting:
            for key, chunk in engine.poll(timeout=0.0 if checking else WAIT_S):
                for request, samples in zip(waiting.pop(key), chunk):
                    for sample_id, sample in zip(request.sample_ids, samples):
                        on_sample(request, sample_id, sample)
        if pool is not None and pool.outstanding:
            for task, verdict in pool.poll(timeout=0.0 if waiting else WAIT_S):
                on_verdict(task, verdict)
