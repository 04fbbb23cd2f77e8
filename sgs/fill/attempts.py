"""Trying to prove each admitted lemma: the cheap provers first, then the model's.

Per lemma, within its time (``seconds``), in rounds over all the lemmas
still open (each round one verifier pool or one set of search actors, started
once for all of them, on ``workers`` processes), each round a share of the
time (:data:`PLANS`, by what proposes to the search), the search, last,
also what the earlier rounds left unused of that lemma's time:

1. ``automation`` (:data:`sgs.prover.baselines.BASELINES`): Rocq's own
   automation, each tactic a whole proof;
2. ``sauto``: CoqHammer's ``sauto`` alone;
3. ``sample`` (with the model only, and only when asked for:
   :data:`DEFAULT_ROUNDS`): whole proofs sampled from the checkpoint
   (:mod:`sgs.prover.sampling`), the paper's Solver mode;
4. ``search``: best-first tactic search (:mod:`sgs.search`) with the
   finishers, the k-NN learner proposing from the project's own proofs
   (:mod:`sgs.fill.knowledge`), the checkpoint, or both taking turns
   (``knn+model``, :class:`sgs.search.proposers.Interleaved`).

These are :mod:`sgs.prover.proof_rate`'s runners, as ``python -m sgs.prover
proof-rate`` runs them.  The baselines' and the samples' proofs are whole
proofs checked under the usual rules (the pool's, a sampling worker's
backend); a search's proof, which its worker's own backend re-checked, is
checked once more by the pool (:func:`recheck_all`): only a valid verdict
there makes a lemma ``proved``.  Every check allows the project's admitted
lemmas and own axioms (:func:`sgs.fill.admitted.allowed_names`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from lean_env.verdict import ProofTask, Status
from sgs.fill.journal import Entry, Journal
from sgs.prover.accuracy import USE_THE_CHECKPOINT
from sgs.prover.baselines import BASELINES, HAMMER_TACTICS
from sgs.prover.proof_rate import SearchProver, run_baseline, run_search
from sgs.search.settings import ROCQ_FINISHERS

__all__ = ["DEFAULT_ROUNDS", "PLANS", "SHARES", "ROUNDS", "Outcome", "attempt_all", "recheck", "recheck_all",
           "search_seconds"]

#: the rounds, in order, and each one's share of a lemma's time, by what proposes to the
#: search (a predictor of :data:`sgs.prover.accuracy.PREDICTORS`): the k-NN (no checkpoint
#: to sample from), or a model, alone or beside the k-NN (whose whole proofs may be sampled
#: first, when that round is asked for).  The search comes last in each, as it takes what
#: the others leave (:func:`search_seconds`)
_WITH_A_MODEL = {"automation": 0.25, "sauto": 0.15, "sample": 0.2, "search": 0.4}
PLANS: dict[str, dict[str, float]] = {
    "knn": {"automation": 0.3, "sauto": 0.2, "search": 0.5},
    "model": _WITH_A_MODEL,
    "knn+model": _WITH_A_MODEL,
}
SHARES = PLANS["knn"]
#: every round's name
ROUNDS = ("automation", "sauto", "sample", "search")
#: the rounds run unless asked otherwise: whole-proof sampling proved 2 of the shared
#: projects' 90 traced targets at 60 s where the search from the same model proved 69
#: (docs/prover.md, "Proof rate"), so by default its share goes to the search too
DEFAULT_ROUNDS = ("automation", "sauto", "search")
#: the rounds a checkpoint proposes in (their proofs name it)
MODEL_ROUNDS = ("sample", "search")


@dataclass
class Outcome:
    """What the rounds did for one lemma."""

    proof: Optional[str] = None
    #: the round that found it
    prover: str = ""
    #: the checkpoint that proposed it (rounds that use one), else None
    checkpoint: Optional[str] = None
    seconds: float = 0.0
    #: verdict statuses of every check (``not_found:<stop>`` for a search that found nothing)
    statuses: dict[str, int] = field(default_factory=dict)

    def count(self, statuses: dict[str, int]) -> None:
        for status, n in statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + n

    @property
    def error(self) -> Optional[str]:
        """Why nothing could be tried, when that is so: the statement does not
        open at the top level, or every check failed for want of a prover."""
        if self.proof is not None:
            return None
        if self.statuses.get("not_found:open_failed"):
            return "the statement does not elaborate under its header at the top level"
        if self.statuses and set(self.statuses) <= {Status.SYSTEM_ERROR.value}:
            return "system_error: every check failed for want of a working prover"
        return None


def attempt_all(tasks: Sequence[ProofTask], *, seconds: float, workers: int, rocq_options: dict, predictor: str,
                knn_corpus: Optional[Path], checkpoint: str, rounds: Sequence[str] = DEFAULT_ROUNDS, seed: int = 0,
                progress: Callable[[str], None] = lambda line: None,
                journal: Optional[Journal] = None) -> dict[str, Outcome]:
    """Every task's outcome, by id (see the module docstring): the plan of ``predictor``
    (what proposes to the search; the k-NN's memory is ``knn_corpus``), its rounds that
    ``rounds`` names, each with its share of ``seconds``; ``seed`` seeds the samples.
    Each finished round of a lemma goes to ``journal``, and what it holds from an
    earlier run is taken from it instead of tried again (:mod:`sgs.fill.journal`)."""
    outcomes = {task.id: Outcome() for task in tasks}
    plan = PLANS[predictor]

    def open_tasks() -> list[ProofTask]:
        return [task for task in tasks if outcomes[task.id].proof is None]

    def recorder(prover: str, keep: bool = True):
        # the searches' and the samplings' runners pass their details (model use) too: not kept here
        def record(target: ProofTask, proof: Optional[str], spent: float, statuses: dict, details=None) -> None:
            if keep and journal is not None:
                journal.record(Entry(prover, target.id, proof, spent, dict(statuses)))
            outcome = outcomes[target.id]
            outcome.seconds += spent
            outcome.count(statuses)
            if proof is not None and outcome.proof is None:
                outcome.proof, outcome.prover = proof, prover
                if prover in MODEL_ROUNDS and predictor in USE_THE_CHECKPOINT:
                    outcome.checkpoint = checkpoint
        return record

    for name, share in plan.items():
        if name not in rounds:
            continue
        finished = journal.replay(name) if journal is not None else {}
        replay = recorder(name, keep=False)
        for task in open_tasks():
            if task.id in finished:
                entry = finished[task.id]
                replay(task, entry.proof, entry.seconds, entry.statuses)
        todo = [task for task in open_tasks() if task.id not in finished]
        if not todo:
            continue
        what = f"search ({predictor} proposing)" if name == "search" else name
        progress(f"{what}: {len(todo)} lemmas, {share * seconds:.1f} s each"
                 + (" and what the rounds before left" if name == "search" else "")
                 + (f" ({len(finished)} finished before, from the journal)" if finished else ""))
        if name in BASELINES:
            run_baseline(BASELINES[name], todo, seconds=share * seconds, workers=workers,
                         record=recorder(name), rocq_options=rocq_options)
        elif name == "sample":
            _sample(todo, seconds=share * seconds, workers=workers, checkpoint=checkpoint, seed=seed,
                    record=recorder(name), rocq_options=rocq_options)
        else:
            left = {task.id: search_seconds(seconds, share, outcomes[task.id].seconds) for task in todo}
            run_search(SearchProver(predictor, ROCQ_FINISHERS), todo, seconds=lambda task: left[task.id],
                       workers=workers, corpus=knn_corpus, checkpoint=checkpoint, record=recorder("search"),
                       rocq_options=rocq_options)
    return outcomes


def search_seconds(seconds: float, share: float, spent: float) -> float:
    """The search's time on a lemma: what the rounds before it left of ``seconds``
    (they spent ``spent``), and never less than its own ``share``: a round that fails
    fast (Rocq's automation often does) or is left out would otherwise leave its share
    unused on the lemmas that reach the search."""
    return max(share * seconds, seconds - spent)


def _sample(tasks: Sequence[ProofTask], *, seconds: float, workers: int, checkpoint: str, seed: int, record,
            rocq_options: dict) -> None:
    """Whole proofs from ``checkpoint`` for ``seconds`` a lemma (as ``proof-rate``'s ``sample``
    arm, seeded), CoqHammer's tactics loaded as for the searches."""
    from sgs.prover.sampling import SamplingPlan, sample_all

    def done(target: ProofTask, result: dict) -> None:
        status = result["verdict"]["status"] if result["verdict"] else f"not_found:{result['stop']}"
        record(target, result["proof"], result["stats"].get("seconds", 0.0), {status: 1})

    sample_all(tasks, plan=SamplingPlan(seconds, seed=seed), checkpoint=checkpoint,
               rocq_options={**rocq_options, "tactic_libraries": (HAMMER_TACTICS,)}, workers=workers, record=done)


def recheck(tasks: Sequence[ProofTask], *, workers: int, timeout: float, rocq_options: dict,
            tactic_libraries: tuple[str, ...] = ()) -> dict[str, tuple[str, str]]:
    """Each task (with its proof) checked whole by the verifier pool, under
    the usual rules, with ``tactic_libraries`` loaded after its header: its
    verdict's ``(status, reason)``, by id."""
    from lean_env.backends import BackendSpec
    from lean_env.cache import VerdictCache
    from lean_env.pool import VerifierPool, VerifierPoolSettings

    if not tasks:
        return {}
    spec = BackendSpec("rocq", {**rocq_options, "tactic_libraries": tactic_libraries})
    spec.check()
    pool = VerifierPool(spec, VerifierPoolSettings(num_workers=workers, timeout=timeout), VerdictCache())
    verdicts: dict[str, tuple[str, str]] = {}
    try:
        for task in tasks:
            pool.submit(task)
        for task, verdict in pool.results():
            verdicts[task.id] = (verdict.status.value, verdict.reason or "")
    finally:
        pool.shutdown()
    return verdicts


def recheck_all(tasks: Sequence[ProofTask], *, workers: int, timeout: float, rocq_options: dict
                ) -> dict[str, tuple[str, str, bool]]:
    """:func:`recheck` first without any library, then, for the proofs that
    fail so, with CoqHammer's tactics (which ``sauto`` and the search's
    finishers may have used): ``(status, reason, needs_hammer)`` by id.  A
    proof that needs them needs the file to load them too (docs/fill.md)."""
    plain = recheck(tasks, workers=workers, timeout=timeout, rocq_options=rocq_options)
    again = [task for task in tasks if plain[task.id][0] != Status.VALID.value]
    hammer = recheck(again, workers=workers, timeout=timeout, rocq_options=rocq_options,
                     tactic_libraries=(HAMMER_TACTICS,))
    verdicts = {task_id: (*verdict, False) for task_id, verdict in plain.items()}
    verdicts.update({task_id: (*verdict, verdict[0] == Status.VALID.value) for task_id, verdict in hammer.items()
                     if verdict[0] == Status.VALID.value or plain[task_id][0] == Status.SYSTEM_ERROR.value})
    return verdicts
