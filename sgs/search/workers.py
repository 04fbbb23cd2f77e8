"""Many searches at once: one Ray actor per search, each with its own Rocq session.

A :class:`SearchWorker` builds its prover (a :class:`~lean_env.rocq.backend.RocqBackend`
with the run's settings) and its proposer once, then runs one search per
call.  :func:`search_all` keeps ``workers`` of them busy, hands out the
targets as they free up, and reports each result as it arrives.  A worker
that dies (its process killed, out of memory) is replaced and its target is
reported as a ``system_error``, never as a failed proof, and never retried
without a bound.

The proposer is named, not passed (:class:`ProposerSpec`), because a model
or a k-NN index is built inside the worker's process: the predictors of
:data:`sgs.prover.accuracy.PREDICTORS`, or none (the finishers alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import ray

from lean_env.verdict import ProofTask
from sgs.search.settings import SearchSettings

__all__ = ["ProposerSpec", "SearchWorker", "search_all"]


@dataclass(frozen=True)
class ProposerSpec:
    #: a predictor of :data:`sgs.prover.accuracy.PREDICTORS` (``knn``, ``model``), or None: no proposer
    predictor: Optional[str] = None
    #: the corpus the predictor learns from (its training split) and the model's checkpoint
    corpus: Optional[str] = None
    checkpoint: str = "pkg://sgs/data/rocq_prover"


class _NoProposer:
    def propose(self, state: str, k: int) -> list:
        return []


def build_proposer(spec: ProposerSpec):
    if spec.predictor is None:
        return _NoProposer()
    from sgs.prover.accuracy import PREDICTORS
    from sgs.search.proposers import RankedProposer
    return RankedProposer(PREDICTORS[spec.predictor](Path(spec.corpus or "."), spec.checkpoint))


@ray.remote(num_cpus=1, max_restarts=0)
class SearchWorker:
    def __init__(self, rocq_options: dict, proposer: ProposerSpec) -> None:
        from lean_env.rocq.backend import RocqBackend
        from lean_env.rocq.config import RocqConfig
        from sgs.search.provers import RocqProver

        self._backend = RocqBackend(RocqConfig(**rocq_options))
        self._prover = RocqProver(self._backend)
        self._proposer = build_proposer(proposer)

    def search(self, task: ProofTask, settings: SearchSettings, strategy: str,
               forbidden: frozenset[str] = frozenset()) -> dict:
        """One search; the proposer's tactics never name the ``forbidden`` lemmas."""
        from sgs.search.proposers import WithoutNames
        from sgs.search.strategies import search
        proposer = WithoutNames(self._proposer, forbidden) if forbidden else self._proposer
        result = search(task, self._prover, proposer, settings, strategy=strategy)
        verdict = result.verdict
        return {"target": task.id, "proved": result.proved, "found": result.found, "stop": result.stop,
                "proof": result.proof if result.proved else None,
                "verdict": None if verdict is None else {"status": verdict.status.value, "reason": verdict.reason},
                "stats": result.stats.as_dict()}


def search_all(tasks: Sequence[ProofTask], *, settings: SearchSettings, proposer: ProposerSpec,
               rocq_options: dict, workers: int, record: Callable[[ProofTask, dict], None],
               strategy: str = "best_first", forbidden: Optional[Mapping[str, frozenset[str]]] = None) -> None:
    """Search every task on ``workers`` actors; ``record(task, result)`` as each finishes;
    ``forbidden``: by task id, lemmas its searches may not name."""
    forbidden = forbidden or {}
    def start() -> ray.actor.ActorHandle:
        return SearchWorker.remote(rocq_options, proposer)

    pool = [start() for _ in range(max(1, min(workers, len(tasks))))]
    queue = list(tasks)
    running: dict[ray.ObjectRef, tuple[int, ProofTask]] = {}
    for index in range(len(pool)):
        if queue:
            task = queue.pop(0)
            running[pool[index].search.remote(task, settings, strategy, forbidden.get(task.id, frozenset()))] = \
                (index, task)
    while running:
        ready, _ = ray.wait(list(running), num_returns=1)
        index, task = running.pop(ready[0])
        try:
            result = ray.get(ready[0])
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as error:
            result = {"target": task.id, "proved": False, "found": False, "stop": "system_error", "proof": None,
                      "verdict": {"status": "system_error", "reason": f"search worker died: {type(error).__name__}"},
                      "stats": {}}
            pool[index] = start()
        record(task, result)
        if queue:
            task = queue.pop(0)
            running[pool[index].search.remote(task, settings, strategy, forbidden.get(task.id, frozenset()))] = \
                (index, task)
    for actor in pool:
        ray.kill(actor)

