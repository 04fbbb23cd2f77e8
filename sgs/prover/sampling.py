"""Whole-proof sampling for a time budget: the Solver's other mode, as a proof-rate arm.

Issue 45 compares the tactic-level search with whole-proof sampling *at equal
wall time*.  Sampling here is what the Solver does in a run, at the run's
settings (the Solver's prompt with the target's header and statement,
temperature 1, 256 new tokens): draw a round of proofs, check each new one
with the verifier under the usual rules, and stop at the first valid one or
when the target's seconds are spent.  Generation and checking both count
against the budget, as a search's model calls and tactic steps do, so that the
two arms get the same wall time on the same cores.

:func:`sample_until_proved` is the loop, written against two callables (a
draw and a check) so that it is tested on fakes; :class:`SamplingWorker` is
the Ray actor that binds them to a model checkpoint (Hugging Face
``generate`` on the CPU, as the search's model proposer) and a Rocq backend.
"""

from __future__ import annotations

import dataclasses
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import ray

from lean_env.verdict import ProofTask, Status, Verdict
from sgs.method.roles.solver import extract_proof
from sgs.search.proposers import names_any

__all__ = ["SamplingPlan", "Draw", "sample_until_proved", "ModelProofs", "SamplingWorker", "sample_all"]


@dataclass(frozen=True)
class SamplingPlan:
    #: wall time per target: generation and checking together
    seconds: float
    #: proofs drawn per model call (the run's pass@8 batch)
    samples_per_round: int = 8
    temperature: float = 1.0
    #: the laptop scale's Solver budget (conf/scale/laptop.yaml)
    max_new_tokens: int = 256
    #: most time one proof's check may take (less when the budget has less left)
    check_seconds: float = 30.0
    #: with the target's id, seeds the sampling: a rerun draws the same proofs
    seed: int = 0


@dataclass(frozen=True)
class Draw:
    """One round of samples: the model's whole answers and the tokens they took."""

    outputs: tuple[str, ...]
    tokens: int


def sample_until_proved(task: ProofTask, draw: Callable[[ProofTask, int], Draw],
                        check: Callable[[ProofTask, float], Verdict], plan: SamplingPlan,
                        forbidden: frozenset[str] = frozenset(), clock: Callable[[], float] = time.monotonic) -> dict:
    """Draw rounds of whole proofs for ``task`` and check every new one until one
    is valid or ``plan.seconds`` are spent.  A proof naming a ``forbidden`` lemma
    is never checked; a proof already checked is not checked again.  The result
    has the search's shape (``proof``, ``verdict``, ``stop``, ``stats``,
    ``generation``), so one record function serves both."""
    started = clock()
    deadline = started + plan.seconds
    stats: Counter = Counter()
    seen: set[str] = set()

    def result(proof: str | None, verdict: Verdict | None, stop: str) -> dict:
        stats["seconds"] = clock() - started
        return {"target": task.id, "proved": verdict is not None and verdict.status is Status.VALID,
                "proof": proof, "stop": stop,
                "verdict": None if verdict is None else {"status": verdict.status.value, "reason": verdict.reason},
                "stats": dict(stats),
                "generation": {"model_calls": stats["rounds"], "samples": stats["samples"],
                               "tokens": stats["tokens"]}}

    while clock() < deadline:
        before = clock()
        round_ = draw(task, plan.samples_per_round)
        stats["model_seconds"] += clock() - before
        stats["rounds"] += 1
        stats["samples"] += len(round_.outputs)
        stats["tokens"] += round_.tokens
        for output in round_.outputs:
            extraction = extract_proof(output, "rocq")
            if not extraction.ok:
                stats["no_proof"] += 1
                continue
            proof = extraction.value
            if proof in seen:
                stats["repeated"] += 1
                continue
            seen.add(proof)
            if names_any(proof, forbidden):
                stats["forbidden"] += 1
                continue
            left = deadline - clock()
            if left <= 0:
                return result(None, None, "time")
            before = clock()
            verdict = check(dataclasses.replace(task, proof=proof), min(plan.check_seconds, left))
            stats["check_seconds"] += clock() - before
            stats["checked"] += 1
            if verdict.status is Status.VALID:
                return result(proof, verdict, "proved")
    return result(None, None, "time")


class ModelProofs:
    """Whole proofs sampled from a checkpoint, prompted as the Solver is prompted in a run."""

    def __init__(self, path: str | Path, *, threads: int = 1) -> None:
        import torch
        from sgs.machinery.models.tiny import load_model_and_tokenizer

        torch.set_num_threads(threads)
        self._model, self._tokenizer = load_model_and_tokenizer(path, dtype="float32")

    def draw(self, task: ProofTask, n: int, plan: SamplingPlan) -> Draw:
        import torch
        from sgs.machinery.prompts import chat_prompt
        from sgs.method.roles import PromptSet

        prompt = chat_prompt(self._tokenizer, PromptSet("rocq").solver(task.header, task.statement))
        ids = self._tokenizer(prompt, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = self._model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=plan.max_new_tokens,
                do_sample=True, temperature=plan.temperature, top_k=0, num_return_sequences=n,
                eos_token_id=self._tokenizer.eos_token_id, pad_token_id=self._tokenizer.pad_token_id)
        answers = out[:, ids.shape[1]:]
        tokens = int((answers != self._tokenizer.pad_token_id).sum()) if self._tokenizer.pad_token_id is not None \
            else int(answers.numel())
        return Draw(tuple(self._tokenizer.decode(row, skip_special_tokens=True) for row in answers), tokens)


@ray.remote(num_cpus=1, max_restarts=0)
class SamplingWorker:
    """A model and a Rocq backend, built once; one target's sampling per call."""

    def __init__(self, rocq_options: dict, checkpoint: str) -> None:
        from lean_env.rocq.backend import RocqBackend
        from lean_env.rocq.config import RocqConfig
        from sgs.config import model_location

        self._backend = RocqBackend(RocqConfig(**rocq_options))
        self._model = ModelProofs(Path(model_location(checkpoint)))

    def attempt(self, task: ProofTask, plan: SamplingPlan, forbidden: frozenset[str]) -> dict:
        import torch
        torch.manual_seed(plan.seed + zlib.crc32(task.id.encode()))
        return sample_until_proved(task, lambda t, n: self._model.draw(t, n, plan), self._backend.check_proof,
                                   plan, forbidden)


def sample_all(tasks: Sequence[ProofTask], *, plan: SamplingPlan, checkpoint: str, rocq_options: dict,
               workers: int, record: Callable[[ProofTask, dict], None],
               forbidden: dict[str, frozenset[str]] | None = None) -> None:
    """Sample for every task on ``workers`` actors; ``record(task, result)`` as each ends."""
    from sgs.search.workers import drive_actors

    forbidden = forbidden or {}
    drive_actors(tasks, start=lambda: SamplingWorker.remote(rocq_options, checkpoint),
                 submit=lambda worker, task: worker.attempt.remote(task, plan, forbidden.get(task.id, frozenset())),
                 seconds=lambda task: plan.seconds + plan.check_seconds, workers=workers, record=record,
                 what="sampling")
