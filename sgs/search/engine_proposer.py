"""Tactics sampled from the engines that sample whole proofs, ranked by their log-probabilities.

:class:`EngineProposer` asks a ``draw(prompt, n)`` function for ``n``
completions of the tactic prompt (:func:`sgs.prover.model_tactics.tactic_prompt`,
the prompt the prover model was trained on), cuts each at its first sentence
(:func:`~sgs.prover.model_tactics.first_sentence`: a model may go on past
one tactic), drops repeats (:func:`sgs.prover.steps.tactic_key`) and answers
the tactics best first by their real log-probabilities: the sum of the
sampled tokens' log-probabilities up to the tactic's last character, the
tokens after the cut left out.  Unlike :class:`~sgs.search.proposers.RankedProposer`'s
rank prior, these scores compare across states, so best-first search
orders its frontier by the model's own belief in each path.

``draw`` is where the engines are: :class:`sgs.search.engine_calls.TacticQueue`
behind an :class:`~sgs.machinery.engines.EngineGroup` (evaluation, and any
driver that owns the group), or the service's engine deployment.  Each
completion needs ``text``, ``token_ids`` and ``logprobs`` (per token), as
:class:`~sgs.machinery.engines.Sample` has them.

The proposer counts what it cost: ``calls`` (model calls: one per state it
is asked about), ``samples`` and ``tokens`` (generated tokens, every
sampled token counted, the ones after a cut too), so a search's generations
can be compared with sampling's at equal budgets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from sgs.prover.model_tactics import first_sentence, tactic_prompt
from sgs.prover.steps import tactic_key
from sgs.search.proposers import Proposal

__all__ = ["Completion", "Drawn", "EngineProposer", "tactic_logprob"]


class Drawn(Protocol):
    """One completion as the proposer reads it."""

    text: str
    token_ids: Sequence[int]
    logprobs: Sequence[float]


@dataclass(frozen=True)
class Completion:
    """A :class:`~sgs.machinery.engines.Sample` without what a search does not
    need (the prompt's tokens): what crosses from the engines to a search actor."""

    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]

    @classmethod
    def of(cls, sample: Any) -> "Completion":
        return cls(sample.text, tuple(sample.token_ids), tuple(sample.logprobs))


def tactic_logprob(tokenizer: Any, completion: Drawn, tactic: str) -> float:
    """The summed log-probability of the fewest leading tokens of
    ``completion`` whose text holds all of ``tactic`` (its first sentence);
    the whole completion's when no prefix does (a tokenizer whose pieces do
    not decode one by one)."""
    ids, logprobs = list(completion.token_ids), list(completion.logprobs)
    total = 0.0
    for count, logprob in enumerate(logprobs, start=1):
        total += logprob
        if tokenizer.decode(ids[:count], skip_special_tokens=True).strip().startswith(tactic):
            return total
    return sum(logprobs)


class EngineProposer:
    """``propose(state, k)`` from ``k`` sampled completions (module docstring)."""

    def __init__(self, draw: Callable[[str, int], Sequence[Drawn]], tokenizer: Any) -> None:
        self.draw = draw
        self.tokenizer = tokenizer
        self.calls = 0
        self.samples = 0
        self.tokens = 0

    def counts(self) -> dict[str, int]:
        """What the proposer has cost so far."""
        return {"model_calls": self.calls, "samples": self.samples, "tokens": self.tokens}

    def propose(self, state: str, k: int) -> list[Proposal]:
        if k < 1:
            return []
        completions = self.draw(tactic_prompt(self.tokenizer, state), k)
        self.calls += 1
        self.samples += len(completions)
        self.tokens += sum(len(c.token_ids) for c in completions)
        best: dict[str, Proposal] = {}
        for completion in completions:
            tactic = first_sentence(completion.text)
            if not tactic:
                continue
            proposal = Proposal(tactic, tactic_logprob(self.tokenizer, completion, tactic))
            key = tactic_key(tactic)
            if key not in best or proposal.logprob > best[key].logprob:
                best[key] = proposal
        return sorted(best.values(), key=lambda p: -p.logprob)
