"""Tactics sampled from the engines that sample whole proofs, ranked by their log-probabilities.

Two halves, so that a search actor needs no tokenizer (importing one costs
an actor start tens of seconds on a loaded machine):

* :class:`TacticReader`, where the engines' tokenizer is (the driver's pump
  of :mod:`sgs.search.engine_calls`, or the service's engine replica):
  ``prompt(state)`` is the tactic prompt (:func:`sgs.prover.model_tactics.tactic_prompt`,
  the prompt the prover model was trained on, in the proof language's
  template); ``answer(completions)`` cuts each sampled completion to its
  first tactic (the language's ``first_tactic``, :mod:`sgs.search.languages`:
  a model may go on past one tactic), drops repeats
  (:func:`sgs.prover.steps.tactic_key`) and ranks the tactics by their real log-probabilities: the sum of the sampled
  tokens' log-probabilities up to the tactic's last character, the tokens
  after the cut left out.  Unlike :class:`~sgs.search.proposers.RankedProposer`'s
  rank prior, these scores compare across states, so best-first search
  orders its frontier by the model's own belief in each path.
* :class:`EngineProposer`, in the search: ``propose(state, k)`` is one
  model call, ``draw(state, k)``, answered with a :class:`TacticAnswer`.
  It counts what the calls cost: ``calls`` (one per state it is asked
  about), ``samples`` and ``tokens`` (generated tokens, every sampled token
  counted, the ones after a cut too), so a search's generations can be
  compared with sampling's at equal budgets.

A completion needs ``text``, ``token_ids`` and ``logprobs`` (per token), as
:class:`~sgs.machinery.engines.Sample` has them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from sgs.prover.model_tactics import tactic_prompt
from sgs.prover.steps import tactic_key
from sgs.search.languages import tactic_language
from sgs.search.proposers import Proposal

__all__ = ["Drawn", "EngineProposer", "TacticAnswer", "TacticReader", "tactic_logprob"]


class Drawn(Protocol):
    """One completion as the reader reads it."""

    text: str
    token_ids: Sequence[int]
    logprobs: Sequence[float]


@dataclass(frozen=True)
class TacticAnswer:
    """One model call's answer: the tactics best first, and what it cost."""

    proposals: tuple[Proposal, ...]
    samples: int
    tokens: int


def tactic_logprob(tokenizer: Any, completion: Drawn, tactic: str) -> float:
    """The summed log-probability of the fewest leading tokens of
    ``completion`` whose text holds all of ``tactic`` (its first tactic);
    the whole completion's when no prefix does (a tokenizer whose pieces do
    not decode one by one)."""
    ids, logprobs = list(completion.token_ids), list(completion.logprobs)
    total = 0.0
    for count, logprob in enumerate(logprobs, start=1):
        total += logprob
        if tokenizer.decode(ids[:count], skip_special_tokens=True).strip().startswith(tactic):
            return total
    return sum(logprobs)


class TacticReader:
    """The tactic prompt of a state, and a call's completions as ranked tactics (module docstring),
    in ``language`` (a key of :data:`sgs.search.languages.TACTIC_LANGUAGES`)."""

    def __init__(self, tokenizer: Any, language: str = "rocq") -> None:
        self.tokenizer = tokenizer
        self.language = language
        self._first_tactic = tactic_language(language).first_tactic

    def prompt(self, state: str) -> str:
        return tactic_prompt(self.tokenizer, state, language=self.language)

    def answer(self, completions: Sequence[Drawn]) -> TacticAnswer:
        best: dict[str, Proposal] = {}
        for completion in completions:
            tactic = self._first_tactic(completion.text)
            if not tactic:
                continue
            proposal = Proposal(tactic, tactic_logprob(self.tokenizer, completion, tactic))
            key = tactic_key(tactic)
            if key not in best or proposal.logprob > best[key].logprob:
                best[key] = proposal
        return TacticAnswer(tuple(sorted(best.values(), key=lambda p: -p.logprob)), len(completions),
                            sum(len(c.token_ids) for c in completions))


class EngineProposer:
    """``propose(state, k)``: one model call, ``draw(state, k)`` (module docstring)."""

    def __init__(self, draw: Callable[[str, int], TacticAnswer]) -> None:
        self.draw = draw
        self.calls = 0
        self.samples = 0
        self.tokens = 0

    def counts(self) -> dict[str, int]:
        """What the proposer has cost so far."""
        return {"model_calls": self.calls, "samples": self.samples, "tokens": self.tokens}

    def propose(self, state: str, k: int) -> list[Proposal]:
        if k < 1:
            return []
        answer = self.draw(state, k)
        self.calls += 1
        self.samples += answer.samples
        self.tokens += answer.tokens
        return list(answer.proposals)
