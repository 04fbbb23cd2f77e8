"""What the Solver's searches leave behind in self-play, and what it learns
from them (``solver.mode=search``; docs/search.md, "In self-play").

Every search attempt is an :class:`~sgs.state.records.Attempt` in the prove
phase's log, so solve rates, the solved registry, the Conjecturer's rewards
and the metrics read it as they read a sampled proof.  What an attempt record
cannot hold (the search's cost and the steps of the path it found) is one
:class:`SearchRecord` line of ``iter_NNNN/prove_searches.jsonl``, written just
before the attempt (a resumed phase redoes a search whose attempt was not
stored, and the later line of an attempt id is the one that counts).

The Solver learns from the tactic steps of the found proofs the verifier pool
accepted (expert iteration on steps): its objective's entry
(:mod:`sgs.method.registry`) chooses the attempts and their weights as it
chooses sampled proofs (``select`` among this iteration's attempts, or
``replay`` of the stored proofs of recent iterations); each step of a chosen
proof with a positive weight becomes one example (the proof state's tactic
prompt, :func:`sgs.prover.model_tactics.tactic_prompt`, and the tactic), and
the steps are trained with the reward-weighted NLL of
:data:`sgs.method.registry.STEP_OBJECTIVE` whatever the objective's own
loss.  A failed search has no path, so nothing of it is pushed down.  With
``solver.anchor_corpus``, human tactic steps of that corpus are replayed
beside them (:func:`anchor_steps`), weight 1 each.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from lean_env.verdict import Status
from sgs.machinery.learner import TrainExample
from sgs.method.registry import STEP_OBJECTIVE
from sgs.prover.model_tactics import tactic_prompt
from sgs.state.files import Problems, jsonl_rows
from sgs.state.records import Attempt, RecordError, check_fields, typed_field
from sgs.state.run_reader import iter_name

__all__ = ["ANCHOR", "SEARCHES_FILE", "STEP_OBJECTIVE", "SearchRecord", "StepChoice", "anchor_pool", "anchor_steps",
           "chosen_steps", "read_search_records", "search_metrics", "searches_path", "step_example"]

#: The search attempts' file in an iteration's directory.
SEARCHES_FILE = "prove_searches.jsonl"
#: The problem id (the example's group) of a replayed anchor step.
ANCHOR = "anchor"


def searches_path(run_dir: Path, iteration: int) -> Path:
    return Path(run_dir) / iter_name(iteration) / SEARCHES_FILE


@dataclass(frozen=True)
class SearchRecord:
    """One search attempt: what it cost and the path it found."""

    attempt_id: str
    problem_id: str
    #: why the search stopped (``completed``: it found a path; ``time``, ``exhausted``, ...,
    #: ``system_error``: the machinery ended it)
    stop: str
    #: the status its attempt was stored with: the verifier pool's verdict on a found proof, the
    #: search's own re-check's when that refused it, ``not_found``, or ``system_error``
    status: str
    #: whether the verifier pool checked the proof (the search's own re-check accepted it)
    pool_checked: bool
    model_calls: int
    samples: int
    tokens: int
    expanded: int
    seconds: float
    #: the found path as (proof state, tactic) per step; empty when none was found
    steps: tuple[tuple[str, str], ...] = ()

    @property
    def found(self) -> bool:
        return self.stop == "completed"

    @property
    def proved(self) -> bool:
        return self.status == Status.VALID.value

    def to_json(self) -> dict:
        return {"attempt_id": self.attempt_id, "problem_id": self.problem_id, "stop": self.stop,
                "status": self.status, "pool_checked": self.pool_checked, "model_calls": self.model_calls,
                "samples": self.samples, "tokens": self.tokens, "expanded": self.expanded,
                "seconds": self.seconds, "steps": [list(step) for step in self.steps]}

    @classmethod
    def from_json(cls, d: Any) -> "SearchRecord":
        check_fields(d, cls)
        steps = d["steps"]
        if not isinstance(steps, list) or not all(
                isinstance(s, list) and len(s) == 2 and all(isinstance(x, str) for x in s) for s in steps):
            raise RecordError("field 'steps': expected a list of [state, tactic] strings")
        return cls(attempt_id=typed_field(d, "attempt_id", str), problem_id=typed_field(d, "problem_id", str),
                   stop=typed_field(d, "stop", str), status=typed_field(d, "status", str),
                   pool_checked=typed_field(d, "pool_checked", bool),
                   model_calls=typed_field(d, "model_calls", int), samples=typed_field(d, "samples", int),
                   tokens=typed_field(d, "tokens", int), expanded=typed_field(d, "expanded", int),
                   seconds=typed_field(d, "seconds", float), steps=tuple((s[0], s[1]) for s in steps))


def search_record(attempt_id: str, problem_id: str, result: Mapping[str, Any], status: str,
                  pool_checked: bool) -> SearchRecord:
    """The line of one search's ``result`` (:meth:`sgs.search.workers.SearchWorker.search`),
    stored with ``status``; the steps are kept when the search found a path."""
    stats, generation = result.get("stats") or {}, result.get("generation") or {}
    steps = tuple(zip(result.get("states") or (), result.get("tactics") or ())) if result.get("found") else ()
    return SearchRecord(attempt_id, problem_id, result["stop"], status, pool_checked,
                        int(generation.get("model_calls", 0)), int(generation.get("samples", 0)),
                        int(generation.get("tokens", 0)), int(stats.get("expanded", 0)),
                        float(stats.get("seconds", 0.0)), steps)


def read_search_records(path: Path) -> dict[str, SearchRecord]:
    """The search records of one iteration by attempt id, the later line of an id winning
    (a redone search); a torn or damaged line, and a missing file, give nothing."""
    if not path.is_file():
        return {}
    records = {}
    for _, row in jsonl_rows(path, Problems(strict=False)):
        try:
            record = SearchRecord.from_json(row)
        except RecordError:
            continue
        records[record.attempt_id] = record
    return records


@dataclass(frozen=True)
class StepChoice:
    """One tactic step chosen for training."""

    problem_id: str
    state: str
    tactic: str
    weight: float


def chosen_steps(chosen: Iterable[tuple[Attempt, float]], records: Mapping[int, Mapping[str, SearchRecord]],
                 step_text: Callable[[str], str]) -> list[StepChoice]:
    """The steps of the proofs among ``chosen`` (attempts with the objective's weights)
    that the verifier pool accepted and that weigh more than 0; ``records``: the search
    records by iteration, then attempt id.  Each tactic is written by ``step_text``, the
    proof language's (:mod:`sgs.search.languages`: a Rocq tactic as one sentence, as the
    corpus the prover learned from writes it)."""
    steps = []
    for attempt, weight in chosen:
        record = records.get(attempt.iteration, {}).get(attempt.id)
        if record is None or not attempt.verified or not record.proved or not weight > 0:
            continue
        steps.extend(StepChoice(attempt.problem_id, state, step_text(tactic), weight)
                     for state, tactic in record.steps)
    return steps


@functools.lru_cache(maxsize=4)
def anchor_pool(corpus: str) -> tuple[tuple[str, str], ...]:
    """The (proof state, tactic) steps of ``corpus``'s training split, in corpus order
    (read once per run: an update draws from it every iteration)."""
    from sgs.prover.steps import load_theorems, theorem_steps
    return tuple((step.state, step.tactic) for theorem in load_theorems(Path(corpus), ("train",))
                 for step in theorem_steps(theorem))


def anchor_steps(pool: Sequence[tuple[str, str]], count: int, seed: int) -> list[StepChoice]:
    """``count`` steps of ``pool``, weight 1: a seeded sample without replacement, the
    whole pool again (each pass sampled anew) while ``count`` is larger than it."""
    rng = random.Random(seed)
    chosen: list[tuple[str, str]] = []
    while pool and len(chosen) < count:
        chosen += rng.sample(list(pool), min(len(pool), count - len(chosen)))
    return [StepChoice(ANCHOR, state, tactic, 1.0) for state, tactic in chosen]


def step_example(tokenizer: Any, step: StepChoice, language: str) -> TrainExample:
    """One step as a learner example, tokenised as the prover's tactic examples are
    (the chat-wrapped tactic prompt in ``language``'s template; the tactic, then EOS)."""
    prompt_ids = tokenizer(tactic_prompt(tokenizer, step.state, language=language))["input_ids"]
    completion_ids = tokenizer(step.tactic, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return TrainExample(prompt_ids=prompt_ids, completion_ids=completion_ids, weight=step.weight,
                        group_id=step.problem_id)


def search_metrics(attempts: Sequence[Attempt], records: Mapping[str, SearchRecord],
                   step_examples: int, anchor_examples: int = 0) -> dict[str, float]:
    """The ``search/...`` keys of an iteration's metrics line: its committed search attempts
    (``attempts`` with a record), what the searches found and cost, the found steps trained
    on and the anchor steps replayed beside them."""
    mine = [records[a.id] for a in attempts if a.id in records]
    n = len(mine)
    return {"search/attempts": n,
            "search/found": sum(r.found for r in mine),
            "search/pool_checked": sum(r.pool_checked for r in mine),
            "search/proved": sum(r.proved for r in mine),
            "search/system_errors": sum(r.status == Status.SYSTEM_ERROR.value for r in mine),
            "search/model_calls": sum(r.model_calls for r in mine),
            "search/samples": sum(r.samples for r in mine),
            "search/tokens": sum(r.tokens for r in mine),
            "search/expanded": sum(r.expanded for r in mine),
            "search/mean_seconds": sum(r.seconds for r in mine) / n if n else 0.0,
            "search/step_examples": step_examples,
            "search/anchor_examples": anchor_examples}
