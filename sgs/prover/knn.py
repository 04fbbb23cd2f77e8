"""A next-tactic predictor with no gradient steps: k nearest neighbours over
proof-state features, in the spirit of Tactician (Blaauwbroek et al., whose
k-NN proves 39.3% of the standard library online).

It stores every (proof state, tactic) pair it is shown and, for a new state,
returns the tactics of the most similar stored states.  Learning is one
:meth:`KnnTactics.add` per step, so a search can teach it every proof earlier
in the same file as it goes, as Tactician does.

**Features.**  A state's features are the tokens (identifiers, numbers,
notation symbols) of the focused goal's conclusion and of its hypotheses'
types, kept apart (``c:`` and ``h:``: ``nat`` in the goal is not ``nat`` in a
hypothesis), and the bigrams of consecutive tokens.  Tactician walks the term
tree; the corpus holds the goals as Rocq printed them, not the terms, and
reading them back would need Rocq's parser and every notation in scope.  Rocq
prints an application head first (``Nat.add n m``) and an infix notation
between its operands (``n + m``), so consecutive tokens are mostly a parent
and a child in the tree: bigrams are a cheap stand-in for walks of length 2.
The other goals are left out: only the focused one is what the tactic acts on.

**Similarity.**  TF-IDF weighted Jaccard, as Tactician: the IDF weight of the
features two states share over that of the features either has.  An inverted
index (feature -> the states that have it) finds the candidates: the states
sharing the most weight of the query's rarer features, one numpy addition per
feature.  Only those candidates get their exact similarity, over every
feature.  IDF is computed at query time from the current counts, so learning
online never leaves stale weights behind.

**Prediction.**  The neighbours, most similar first, each give their tactic;
tactics that agree by :func:`~sgs.prover.steps.tactic_key` count once.  Among
equally similar neighbours the most recently learned comes first: online,
that is the proof just before in the same file.

The model saves as gzip'd JSON of the pairs it learned (no pickle: a file
from elsewhere is data, not code) and is rebuilt from them on load, so a saved
model never disagrees with the feature code that reads it.
"""

from __future__ import annotations

import gzip
import json
import re
from array import array
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from sgs.corpus.rocq_text import parse_goals
from sgs.prover.steps import StepExample, tactic_key

__all__ = ["state_features", "KnnTactics"]

#: a (qualified) identifier, a number, or a run of notation symbols; parentheses and commas only group
_TOKEN = re.compile(r"[^\W\d][\w']*(?:\.[^\W\d][\w']*)*|\d+|[^\w\s(),]+")
#: the name part of a hypothesis (``n, m :``, ``f :=``), which is local and says nothing of its type
_HYPOTHESIS_NAMES = re.compile(r"^[^:]*?(?::=|:)\s*", re.S)
#: saved-file format; a file of another version is refused rather than misread
_FORMAT = 1


def _idf(count, n: int):
    """Smoothed inverse document frequency of a feature ``count`` of ``n`` states have (an
    array of counts gives an array).  The ``+ 1`` keeps a feature every state has worth
    something: without it, a model that has seen one state finds no neighbour for it."""
    return np.log((n + 1) / (count + 1.0)) + 1


def _segment_sums(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Sums of consecutive runs of ``values`` of these lengths (a run of 0 sums to 0)."""
    totals = np.concatenate(([0.0], np.cumsum(values)))
    ends = np.cumsum(lengths)
    return totals[ends] - totals[ends - lengths]


def _token_features(prefix: str, text: str) -> set[str]:
    tokens = _TOKEN.findall(text)
    found = {prefix + token for token in tokens}
    found.update(f"{prefix}{a} {b}" for a, b in zip(tokens, tokens[1:]))
    return found


def state_features(state: str) -> set[str]:
    """The features of a proof state (:func:`~sgs.prover.steps.proof_state` text):
    conclusion tokens and bigrams (``c:``), hypothesis-type ones (``h:``)."""
    # proof_state drops the "N goals" header that parse_goals reads the display by
    goals = parse_goals("1 goal\n" + state)
    if not goals:
        return _token_features("c:", state)
    focused = goals[0]
    found = _token_features("c:", focused.conclusion)
    for hypothesis in focused.hypotheses:
        found |= _token_features("h:", _HYPOTHESIS_NAMES.sub("", hypothesis, count=1))
    return found


class KnnTactics:
    """Tactics of the nearest stored proof states.

    ``candidates``: how many states get their exact similarity computed;
    ``common``: the fraction of the states above which a feature ("=", "nat")
    is too common to look candidates up by (a pass over most of the index for
    little weight; it still counts in the exact similarity).  On the corpus's
    valid split 128 and 0.05 predict as well as 512 and 1.0 (every feature:
    exact but for the bound) and 3-4 times as fast.
    """

    def __init__(self, candidates: int = 128, common: float = 0.05) -> None:
        self.candidates = candidates
        self.common = common
        self._feature_ids: dict[str, int] = {}
        #: feature id -> ids of the states that have it, in increasing order (the inverted index)
        self._postings: list[array] = []
        #: feature id -> how many states have it (the postings' lengths, where numpy can read them)
        self._counts = array("i")
        #: state id -> its feature ids
        self._state_features: list[np.ndarray] = []
        self._tactics: list[str] = []
        #: what was learned, as given (what :meth:`save` writes)
        self._pairs: list[tuple[str, str]] = []

    def __len__(self) -> int:
        return len(self._tactics)

    def add(self, state: str, tactic: str) -> None:
        """Learn that ``tactic`` was applied in ``state``."""
        state_id = len(self._tactics)
        ids = []
        for feature in state_features(state):
            fid = self._feature_ids.get(feature)
            if fid is None:
                fid = self._feature_ids[feature] = len(self._postings)
                self._postings.append(array("i"))
                self._counts.append(0)
            self._postings[fid].append(state_id)
            self._counts[fid] += 1
            ids.append(fid)
        self._state_features.append(np.array(sorted(ids), dtype=np.int32))
        self._tactics.append(tactic)
        self._pairs.append((state, tactic))

    def add_steps(self, steps: Iterable[StepExample]) -> None:
        for step in steps:
            self.add(step.state, step.tactic)

    def neighbours(self, state: str, count: int) -> list[tuple[float, int]]:
        """Up to ``count`` stored states sharing a feature with ``state``:
        ``(similarity, state id)``, most similar (then most recent) first."""
        n = len(self._tactics)
        if n == 0 or count <= 0:
            return []
        features = state_features(state)
        known = np.array(sorted(fid for fid in map(self._feature_ids.get, features) if fid is not None),
                         dtype=np.int64)
        if len(known) == 0:
            return []
        counts = np.frombuffer(self._counts, dtype=np.int32)
        known_weights = _idf(counts[known], n)
        query_weight = known_weights.sum() + (len(features) - len(known)) * _idf(0, n)
        # candidates: the states sharing the most weight of the query's rarer features (all of its
        # features when every one is common)
        rare = counts[known] <= max(1.0, self.common * n)
        if not rare.any():
            rare[:] = True
        shared = np.zeros(n)
        for fid, weight in zip(known[rare].tolist(), known_weights[rare].tolist()):
            # a view, not a copy, of the posting list; it is gone when this method returns, so a
            # later add() may grow the array again (an array refuses to resize while viewed)
            shared[np.frombuffer(self._postings[fid], dtype=np.int32)] += weight
        best = np.flatnonzero(shared)
        if len(best) > self.candidates:
            best = best[np.argpartition(shared[best], -self.candidates)[-self.candidates:]]
        # exact weighted Jaccard of the candidates, over every feature
        arrays = [self._state_features[i] for i in best.tolist()]
        lengths = np.array([len(a) for a in arrays])
        stored = np.concatenate(arrays)
        at = np.minimum(np.searchsorted(known, stored), len(known) - 1)
        in_query = known[at] == stored
        both = _segment_sums(np.where(in_query, known_weights[at], 0.0), lengths)
        own = _segment_sums(_idf(counts[stored], n), lengths)
        similarity = both / (query_weight + own - both)
        # most similar first; among equals, the most recently learned
        order = np.lexsort((-best, -similarity))[:count]
        return [(float(similarity[i]), int(best[i])) for i in order]

    def predict(self, state: str, k: int) -> list[str]:
        """Up to ``k`` tactics, distinct by :func:`tactic_key`, of the nearest states first."""
        tactics: list[str] = []
        seen: set[str] = set()
        if k <= 0:
            return tactics
        # more neighbours than k: several neighbours often share a tactic (intros., auto.)
        for _, state_id in self.neighbours(state, self.candidates):
            tactic = self._tactics[state_id]
            key = tactic_key(tactic)
            if key not in seen:
                seen.add(key)
                tactics.append(tactic)
                if len(tactics) == k:
                    break
        return tactics

    # -- saving ------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write what the model learned (the pairs, in order) as gzip'd JSON."""
        data = {"format": _FORMAT, "candidates": self.candidates, "common": self.common, "pairs": self._pairs}
        Path(path).write_bytes(gzip.compress(json.dumps(data, ensure_ascii=False).encode("utf-8"), mtime=0))

    @classmethod
    def load(cls, path: Path) -> "KnnTactics":
        """A model rebuilt from :meth:`save`'s file (ValueError when it is not one)."""
        try:
            data = json.loads(gzip.decompress(Path(path).read_bytes()).decode("utf-8"))
        except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: not a saved k-NN model ({error})") from error
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f"{path}: not a k-NN model of format {_FORMAT}")
        try:
            model = cls(candidates=int(data["candidates"]), common=float(data["common"]))
            pairs = [(str(state), str(tactic)) for state, tactic in data["pairs"]]
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: a malformed k-NN model ({error!r})") from error
        for state, tactic in pairs:
            model.add(state, tactic)
        return model
