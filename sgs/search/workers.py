"""Many searches at once: one Ray actor per search, each with its own prover session.

A :class:`SearchWorker` builds its prover (the backend a
:class:`~lean_env.backends.BackendSpec` names: a Rocq session, or a Lean
REPL, under the run's settings; its adapter from
:mod:`sgs.search.languages`) and its proposer once, then runs one search per
call.  :func:`search_all` keeps ``workers`` of them busy, hands out the
targets as they free up, and reports each result as it arrives.  A worker
that dies (its process killed, out of memory) or outlives its call's bound
(its budget plus :data:`CALL_SLACK_SECONDS`: hung) is replaced and its target
is reported as a ``system_error``, never as a failed proof, and never retried.

The proposer is named, not passed (:class:`ProposerSpec`), because a model
or a k-NN index is built inside the worker's process: the predictors of
:data:`sgs.prover.accuracy.PREDICTORS`, or none (the finishers alone); or
``engine``: an :class:`~sgs.search.engine_proposer.EngineProposer` whose
calls go to a handle with ``tactics(state, n)`` (a
:class:`~sgs.search.engine_calls.TacticQueue` that a ``pump`` feeds to an
engine group, or the service's engine deployment), so the model calls of all
the workers are batched by the engines.  A search whose model call failed
ends as ``system_error`` too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import ray

from lean_env.backends import BackendSpec
from lean_env.verdict import ProofTask
from sgs.search.settings import SearchSettings

__all__ = ["ENGINE", "ProposerSpec", "SearchWorker", "search_all", "search_bound", "drive_actors", "failed"]

#: the :attr:`ProposerSpec.predictor` of tactics sampled through the engines
ENGINE = "engine"

#: what a new actor may take to build (its model, its k-NN index over a corpus, its Rocq
#: session) on a loaded machine, on top of its first call's bound
ACTOR_START_SECONDS = 600.0
#: what a call may take past its own budget (one last tactic or model call, the
#: re-check's start) before its actor is taken for hung
CALL_SLACK_SECONDS = 120.0


@dataclass(frozen=True)
class ProposerSpec:
    #: a predictor of :data:`sgs.prover.accuracy.PREDICTORS` (``knn``, ``model``), :data:`ENGINE`,
    #: or None: no proposer
    predictor: Optional[str] = None
    #: the corpus the predictor learns from (its training split) and the model's checkpoint
    corpus: Optional[str] = None
    checkpoint: str = "pkg://sgs/data/rocq_prover"
    #: for :data:`ENGINE`: the handle whose ``tactics(state, n)`` samples and ranks the tactics
    engine: Any = None


class _NoProposer:
    def propose(self, state: str, k: int) -> list:
        return []


def engine_draw(engine: Any) -> Callable[[str, int], Any]:
    """``draw(state, n)`` through ``engine.tactics``: an actor's (an object ref)
    or a Ray Serve deployment's (a response, whose refusal is an object with a
    ``message``)."""
    from sgs.search.engine_calls import EngineCallError
    from sgs.search.engine_proposer import TacticAnswer

    def draw(state: str, n: int) -> TacticAnswer:
        response = engine.tactics.remote(state, n)
        answer = ray.get(response) if isinstance(response, ray.ObjectRef) else response.result()
        if not isinstance(answer, TacticAnswer):
            raise EngineCallError(getattr(answer, "message", repr(answer)))
        return answer
    return draw


def build_proposer(spec: ProposerSpec):
    if spec.predictor is None:
        return _NoProposer()
    if spec.predictor == ENGINE:
        from sgs.search.engine_proposer import EngineProposer
        return EngineProposer(engine_draw(spec.engine))
    from sgs.prover.accuracy import PREDICTORS
    from sgs.search.proposers import RankedProposer
    return RankedProposer(PREDICTORS[spec.predictor](Path(spec.corpus or "."), spec.checkpoint))


@ray.remote(num_cpus=1, max_restarts=0)
class SearchWorker:
    def __init__(self, backend: BackendSpec, proposer: ProposerSpec) -> None:
        from sgs.search.languages import build_prover

        self._prover = build_prover(backend)
        self._proposer = build_proposer(proposer)
        self._corpus = proposer.corpus
        #: score name -> score, built on first use (a value estimate reads the corpus once)
        self._scores: dict[str, Any] = {}

    def search(self, task: ProofTask, settings: SearchSettings, strategy: str,
               forbidden: frozenset[str] = frozenset(), score: str = "logprob") -> dict:
        """One search, its open states ranked by ``score`` (:data:`sgs.search.values.SCORES`);
        the proposer's tactics never name the ``forbidden`` lemmas."""
        from sgs.search.proposers import WithoutNames
        from sgs.search.strategies import search
        from sgs.search.values import build_score, learn_from
        if score not in self._scores:
            self._scores[score] = build_score(score, Path(self._corpus) if self._corpus else None)
        proposer = WithoutNames(self._proposer, forbidden) if forbidden else self._proposer
        before = self._counts()
        result = search(task, self._prover, proposer, settings, strategy=strategy, score=self._scores[score])
        verdict = result.verdict
        # The path's steps (the tactics and the states they were run on) whenever one was found:
        # self-play trains on those of the proofs its verifier pool accepts.
        record = {"target": task.id, "proved": result.proved, "found": result.found, "stop": result.stop,
                  "proof": result.proof if result.proved else None,
                  "tactics": list(result.tactics), "states": list(result.states),
                  "verdict": None if verdict is None else {"status": verdict.status.value, "reason": verdict.reason},
                  "stats": result.stats.as_dict(),
                  "generation": {key: count - before[key] for key, count in self._counts().items()}}
        # A value estimate learns from the proofs its own backend re-checked (sgs/search/values.py).
        learn_from(self._scores[score], record)
        return record

    def _counts(self) -> dict[str, int]:
        """The proposer's model calls and tokens so far (an engine proposer counts them; others none)."""
        counts = getattr(self._proposer, "counts", None)
        return counts() if counts is not None else {}


def failed(task: ProofTask, reason: str) -> dict:
    """The result of a search that the machinery ended (never a failed proof)."""
    return {"target": task.id, "proved": False, "found": False, "stop": "system_error", "proof": None,
            "tactics": [], "states": [], "verdict": {"status": "system_error", "reason": reason}, "stats": {},
            "generation": {}}


def search_all(tasks: Sequence[ProofTask], *, settings: SearchSettings | Callable[[ProofTask], SearchSettings],
               proposer: ProposerSpec,
               backend: BackendSpec, workers: int, record: Callable[[ProofTask, dict], None],
               strategy: str = "best_first", forbidden: Optional[Mapping[str, frozenset[str]]] = None,
               pump: Any = None, score: str = "logprob") -> None:
    """Search every task on ``workers`` actors with ``settings`` (or ``settings(task)``: a
    task's own) on ``backend``'s prover, ranking states by ``score``;
    ``record(task, result)`` as each finishes;
    ``forbidden``: by task id, lemmas its searches may not name; ``pump``: an
    :class:`~sgs.search.engine_calls.EnginePump` to drive while waiting (the
    workers' model calls)."""
    forbidden = forbidden or {}

    def settings_of(task: ProofTask) -> SearchSettings:
        return settings(task) if callable(settings) else settings

    drive_actors(tasks, start=lambda: SearchWorker.remote(backend, proposer),
                 submit=lambda worker, task: worker.search.remote(
                     task, settings_of(task), strategy, forbidden.get(task.id, frozenset()), score),
                 seconds=lambda task: search_bound(settings_of(task)),
                 workers=workers, record=record, pump=pump, what="search")


def search_bound(settings: SearchSettings) -> float:
    """The most a search with ``settings`` may take: its budget, its last tactic, its re-check."""
    return settings.lemma_seconds + settings.tactic_seconds + settings.recheck_seconds


def drive_actors(tasks: Sequence[ProofTask], *, start: Callable[[], Any], submit: Callable[[Any, ProofTask], Any],
                 seconds: Callable[[ProofTask], float], workers: int, record: Callable[[ProofTask, dict], None],
                 pump: Any = None, what: str = "attempt", start_seconds: float = ACTOR_START_SECONDS) -> None:
    """Keep ``workers`` actors (each from ``start()``) busy with ``submit(actor, task)``
    until every task is done, calling ``record(task, result)`` as each ends.  A
    dead actor, or one whose call outlives ``seconds(task)`` plus
    :data:`CALL_SLACK_SECONDS` (plus ``start_seconds`` on a new actor), is
    replaced and its task recorded as a :func:`failed` one (never retried); a
    call that raised leaves its actor in place."""
    pool = [start() for _ in range(max(1, min(workers, len(tasks))))]
    fresh = set(range(len(pool)))      # actors that have not finished a call yet: still building
    queue = list(tasks)
    running: dict[ray.ObjectRef, tuple[int, ProofTask, float]] = {}

    def hand_out(index: int) -> None:
        if queue:
            task = queue.pop(0)
            bound = seconds(task) + CALL_SLACK_SECONDS + (start_seconds if index in fresh else 0.0)
            running[submit(pool[index], task)] = (index, task, time.monotonic() + bound)

    def replace(index: int) -> None:
        pool[index] = start()
        fresh.add(index)

    for index in range(len(pool)):
        hand_out(index)
    while running:
        # Checked on every pass: with a pump, its waitables may keep ray.wait from ever timing out.
        for ref, (index, task, deadline) in list(running.items()):
            if deadline <= time.monotonic():
                del running[ref]
                ray.kill(pool[index])
                record(task, failed(task, f"{what} worker hung: no answer within its bound"))
                replace(index)
                hand_out(index)
        if not running:
            break
        wait = max(0.0, min(deadline for _, _, deadline in running.values()) - time.monotonic())
        ready, _ = ray.wait(list(running) + (pump.waitables() if pump is not None else []), num_returns=1,
                            timeout=wait)
        if pump is not None:
            pump.advance()
        if not ready or ready[0] not in running:
            continue
        index, task, _ = running.pop(ready[0])
        fresh.discard(index)
        try:
            result = ray.get(ready[0])
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as error:
            result = failed(task, f"{what} worker died: {type(error).__name__}")
            replace(index)
        except ray.exceptions.RayTaskError as error:  # the call raised (a model call failed); the worker lives
            result = failed(task, f"{what} failed: {type(error.cause).__name__}: {error.cause}"[:500])
        record(task, result)
        hand_out(index)
    for actor in pool:
        ray.kill(actor)
