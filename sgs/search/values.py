"""How a best-first search ranks its open states: one entry per score in :data:`SCORES`.

A score is a function of a search :class:`~sgs.search.strategies.Node`;
higher is expanded first.  The entries:

* ``logprob``: the summed log-probabilities of the tactics on the state's
  path (what the proposer thinks of how it got there);
* ``value``: the log of a value estimate of the state itself, V(s) ≈
  γ^(tactics left), as QEDCartographer trains its value on states of known
  proofs; here the estimate needs no gradient step: :class:`KnnValue`
  averages γ^(tactics left) over the most similar states of the corpus's
  proofs (the k-NN learner's features and similarity, so the two learn from
  the same proofs the same way);
* ``logprob+value``: both summed: the path's likelihood and how close the
  state looks to done.

The value's data: for a closed proof of n tactic steps, the state before
step i (0-based) is n - i tactics from done.  It keeps learning as it
searches (QEDCartographer's second stage, on its own results): every proof
a search finds and its own backend re-checks adds the states of its path
(:meth:`ValueScore.learn`), so the worker's later searches rank states like
those it has closed; each search worker learns from its own searches.  That counts every remaining
tactic of the script, the other goals' too, so a state with several goals
reads as farther from done than its focused goal alone: the order the search
needs (fewer goals left is closer to a proof).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from sgs.corpus.records import TheoremRecord
from sgs.prover.knn import KnnTactics
from sgs.prover.steps import load_theorems, proof_state, theorem_steps
from sgs.search.strategies import Node, Score, cumulative_logprob

__all__ = ["DISCOUNT", "KnnValue", "SCORES", "ValueScore", "build_score", "learn_from", "steps_left"]

#: γ: a state k tactics from done is worth γ^k
DISCOUNT = 0.9


def steps_left(theorems: Iterable[TheoremRecord]) -> Iterator[tuple[str, int]]:
    """(proof state, tactics left to the end of its proof, itself included) of every step of closed proofs."""
    for theorem in theorems:
        steps = theorem_steps(theorem)
        for step in steps:
            yield step.state, len(steps) - step.index


class KnnValue:
    """V(s): the similarity-weighted mean of γ^(tactics left) over the
    ``neighbours`` most similar stored states; a state like none stored gets
    the mean over every stored state (what is known of a state of unknown shape)."""

    def __init__(self, neighbours: int = 16, discount: float = DISCOUNT) -> None:
        if not 0 < discount < 1:
            raise ValueError(f"the value's discount must lie in (0, 1), got {discount}")
        self.neighbours, self.discount = neighbours, discount
        self._index = KnnTactics()
        self._values: list[float] = []

    def __len__(self) -> int:
        return len(self._values)

    def add(self, state: str, left: int) -> None:
        if left < 1:
            raise ValueError(f"a stored state has at least its own tactic left, got {left}")
        self._index.add(state, "")
        self._values.append(self.discount ** left)

    def estimate(self, state: str) -> float:
        """V(state) in (0, 1]; the prior (the stored mean) when nothing is stored like it."""
        near = self._index.neighbours(state, self.neighbours)
        weight = sum(similarity for similarity, _ in near)
        if weight > 0:
            return sum(similarity * self._values[i] for similarity, i in near) / weight
        return sum(self._values) / len(self._values) if self._values else self.discount

    @classmethod
    def from_corpus(cls, corpus: Path, libraries: Optional[Iterable[str]] = None, **options) -> "KnnValue":
        """Trained on the closed proofs of the corpus's training split."""
        value = cls(**options)
        for state, left in steps_left(load_theorems(corpus, ("train",), libraries)):
            value.add(state, left)
        return value


class ValueScore:
    """A score from a :class:`KnnValue` (log V(s), plus the path's log-probability
    ``with_logprob``), whose memory grows with the proofs found (:meth:`learn`)."""

    def __init__(self, value: KnnValue, with_logprob: bool) -> None:
        self.value, self.with_logprob = value, with_logprob

    def __call__(self, node: Node) -> float:
        estimate = math.log(self.value.estimate(proof_state(node.goals)))
        return node.logprob + estimate if self.with_logprob else estimate

    def learn(self, states: Sequence[str]) -> None:
        """A found proof's path: the goals each of its n tactics ran on, root first;
        the i-th (0-based) is n - i tactics from done."""
        for index, goals in enumerate(states):
            self.value.add(proof_state(goals), len(states) - index)


def learn_from(score: Score, result: Mapping[str, Any]) -> None:
    """Let ``score`` learn from a search's ``result`` (:class:`~sgs.search.workers.SearchWorker`'s
    record) when it proved its target and the score learns (a :class:`ValueScore`)."""
    if result.get("proved") and result.get("states") and isinstance(score, ValueScore):
        score.learn(result["states"])


#: score name -> builder(corpus) -> score; the names are ``--score`` / ``score`` choices
SCORES: dict[str, Callable[[Optional[Path]], Score]] = {
    "logprob": lambda corpus: cumulative_logprob,
    "value": lambda corpus: ValueScore(_value_of(corpus), with_logprob=False),
    "logprob+value": lambda corpus: ValueScore(_value_of(corpus), with_logprob=True),
}


def _value_of(corpus: Optional[Path]) -> KnnValue:
    if corpus is None or not Path(corpus).is_dir():
        raise ValueError(f"a value estimate learns from a corpus directory; got {corpus!r}")
    value = KnnValue.from_corpus(Path(corpus))
    if not len(value):
        raise ValueError(f"the corpus {corpus} holds no closed proof to learn a value from")
    return value


def build_score(name: str, corpus: Optional[Path] = None) -> Score:
    """The score ``name`` of :data:`SCORES` (ValueError naming the known ones otherwise)."""
    if name not in SCORES:
        raise ValueError(f"unknown search score {name!r}; known: {', '.join(SCORES)}")
    return SCORES[name](corpus)
