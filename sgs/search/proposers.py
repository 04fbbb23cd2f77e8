"""The model side of a search: tactics for a proof state, each with a score.

A best-first search orders states by the summed log-probabilities of the
tactics on their paths, so a proposer answers :class:`Proposal` s, not bare
tactics.  The predictors of :mod:`sgs.prover` (``ModelTactics``, the k-NN
predictor) answer ``predict(state, k) -> list[str]``, best first, without
scores; :class:`RankedProposer` gives their answers a rank prior instead
(``log 1/(rank+1)``: the first is free, the second costs log 2, ...), which
keeps their order and lets a path of first choices win over a path of
second choices.  A predictor that knows its log-probabilities (sampling
through the engine group) is a proposer of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, Sequence

__all__ = ["Proposal", "Proposer", "Predictor", "RankedProposer", "FixedTactics", "Interleaved", "WithoutNames",
           "names_any"]


@dataclass(frozen=True)
class Proposal:
    tactic: str
    #: the tactic's log-probability given the state (0 at most)
    logprob: float


class Proposer(Protocol):
    def propose(self, state: str, k: int) -> list[Proposal]:
        """At most ``k`` tactics for ``state`` (:func:`sgs.prover.steps.proof_state`), best first."""


class Predictor(Protocol):
    def predict(self, state: str, k: int) -> list[str]:
        """At most ``k`` tactics for ``state``, best first."""


class RankedProposer:
    """A :class:`Predictor`'s answers scored by rank (see the module's docstring)."""

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor

    def propose(self, state: str, k: int) -> list[Proposal]:
        return [Proposal(tactic, -math.log(rank + 1)) for rank, tactic in enumerate(self.predictor.predict(state, k))]


class FixedTactics:
    """The same tactics for every state: a learning-free predictor (a search
    over fixed automation), and the scripted proposer of tests."""

    def __init__(self, tactics: Sequence[str]) -> None:
        self.tactics = tuple(tactics)

    def predict(self, state: str, k: int) -> list[str]:
        return list(self.tactics[:k])


class Interleaved:
    """Several predictors taking turns: the first's best, the second's best, the
    first's second, ..., each tactic once (by :func:`sgs.prover.steps.tactic_key`),
    ``k`` in all.  The k-NN and the model prove different lemmas
    (docs/prover.md, proof rate); at the same width, the search sees both."""

    def __init__(self, predictors: Sequence[Predictor]) -> None:
        self.predictors = tuple(predictors)

    def predict(self, state: str, k: int) -> list[str]:
        from sgs.prover.steps import tactic_key
        answers = [predictor.predict(state, k) for predictor in self.predictors]
        seen, merged = set(), []
        for rank in range(k):
            for answer in answers:
                if rank < len(answer) and tactic_key(answer[rank]) not in seen:
                    seen.add(tactic_key(answer[rank]))
                    merged.append(answer[rank])
        return merged[:k]


class WithoutNames:
    """A proposer whose tactics never name the given lemmas (a benchmark's rule:
    a held-out theorem's own name, and the names stated after it in its file,
    are loaded with its library but were not in its author's scope)."""

    def __init__(self, proposer: Proposer, names: frozenset[str]) -> None:
        self.proposer, self.names = proposer, names

    def propose(self, state: str, k: int) -> list[Proposal]:
        return [p for p in self.proposer.propose(state, k) if not names_any(p.tactic, self.names)]


def names_any(text: str, names: frozenset[str]) -> bool:
    """Whether Rocq ``text`` (a tactic, a proof) mentions one of ``names``, qualified or not."""
    from sgs.corpus.rocq_text import tactic_identifiers
    return bool(names) and any(word.rpartition(".")[2] in names for word in tactic_identifiers(text))
