"""Tactic-level proof search: one function per strategy, in :data:`STRATEGIES`
(the layout of Proverbot9001's ``search_strategies.py``).

Every strategy pops an open state, *expands* it (:meth:`Run.expand`: the
finishers, then the proposer's ``width`` tactics, each run on the state at
once) and puts the new states back in its frontier; they differ only in the
frontier:

* ``best_first``: the state with the highest score first (by default the
  cumulative log-probability of the tactics on its path; any
  ``score(node)`` may be passed, a value estimate for one);
* ``breadth_first``: the shallowest first;
* ``depth_first``: the deepest first, the best tactic's child before its
  siblings (Proverbot9001's search with ``width`` and ``max_depth``).

An expansion drops a tactic that fails, times out (the prover answers
``ended``), leaves the goals as they were, or reaches a state seen before
anywhere in this search (compared by :func:`sgs.prover.steps.proof_state`,
through a 16-byte digest: the set grows by at most one entry per tactic
tried, so the expansion budget bounds it).  The frontier keeps at most
``max_frontier`` states.  The search stops when the prover completes a
proof, when no state is left, or at the time or expansion budget.

A completed path is written out as one proof and checked again as a whole
(``verify``, by default the prover's ``check_proof``; the verifier pool in
a run): the result records the search's claim and the re-check's verdict,
and only the verdict counts (:attr:`~sgs.search.results.SearchResult.proved`).
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import dataclasses
import hashlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from lean_env.verdict import ProofTask, Verdict
from sgs.prover.steps import proof_state, tactic_key
from sgs.search.proposers import Proposer
from sgs.search.provers import Outcome, Prover
from sgs.search.results import SearchResult, SearchStats
from sgs.search.settings import SearchSettings

__all__ = ["Node", "Run", "STRATEGIES", "best_first", "breadth_first", "depth_first", "cumulative_logprob",
           "search"]


@dataclass(frozen=True)
class Node:
    """An open proof state of the search."""

    handle: Any
    goals: str
    #: the tactics from the root to this state
    tactics: tuple[str, ...]
    #: their summed log-probabilities (finishers count 0)
    logprob: float
    #: digest of the state's :func:`proof_state`
    key: bytes
    #: the goals each tactic of ``tactics`` was run on, root first (a found proof's steps)
    states: tuple[str, ...] = ()

    @property
    def depth(self) -> int:
        return len(self.tactics)


Score = Callable[[Node], float]


def cumulative_logprob(node: Node) -> float:
    return node.logprob


def state_key(goals: str) -> bytes:
    return hashlib.blake2b(proof_state(goals).encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _same_tactic(tactic: str) -> str:
    """The form two candidate tactics of one state are compared in: a finisher
    ``lia`` and a proposed ``lia.`` are one tactic (Rocq's sentence period)."""
    return tactic_key(tactic).rstrip(".")


class Run:
    """One search in progress: opens the proof, expands states, keeps the
    budget and the counts (:class:`~sgs.search.results.SearchStats`)."""

    def __init__(self, prover: Prover, proposer: Proposer, settings: SearchSettings) -> None:
        self.prover, self.proposer, self.settings = prover, proposer, settings
        self.stats = SearchStats()
        self.seen: set[bytes] = set()
        #: why the search stopped ("" while it goes on), the completed path and the goals of its steps
        self.stop = ""
        self.found: Optional[tuple[str, ...]] = None
        self.found_states: tuple[str, ...] = ()
        self.messages: tuple[str, ...] = ()
        self.started = time.monotonic()
        self.deadline = self.started + settings.lemma_seconds

    @contextlib.contextmanager
    def _timed(self, part: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            setattr(self.stats, part, getattr(self.stats, part) + time.monotonic() - start)

    def open(self, problem: ProofTask) -> Optional[Node]:
        with self._timed("prover_seconds"):
            opened = self.prover.open(problem, min(self.settings.tactic_seconds, self.settings.lemma_seconds))
        if opened.kind != "progress":
            self.stop, self.messages = "open_failed", opened.messages
            return None
        root = Node(opened.handle, opened.goals, (), 0.0, state_key(opened.goals))
        self.seen.add(root.key)
        return root

    def _candidates(self, node: Node) -> Iterator[tuple[str, float]]:
        """The finishers, then (asked only when no finisher completed) the proposer's tactics."""
        for finisher in self.settings.finishers:
            yield finisher, 0.0
        if self.settings.width:
            with self._timed("proposer_seconds"):
                proposals = self.proposer.propose(proof_state(node.goals), self.settings.width)
            self.stats.proposer_calls += 1
            for proposal in proposals[:self.settings.width]:
                yield proposal.tactic, proposal.logprob

    def _apply(self, node: Node, tactic: str) -> Optional[Outcome]:
        """``tactic`` run on ``node`` (``None``, and the search stopped, when no time is left)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.stop = "time"
            return None
        self.stats.tactics_tried += 1
        with self._timed("prover_seconds"):
            return self.prover.apply(node.handle, tactic, min(self.settings.tactic_seconds, left))

    def expand(self, node: Node) -> list[Node]:
        """Run every candidate tactic on ``node``: its new states that may be
        expanded in turn (shallower than ``max_depth``), best candidate first.
        Sets :attr:`found` when a tactic completes the proof."""
        self.stats.expanded += 1
        children: list[Node] = []
        tried: set[str] = set()
        for tactic, logprob in self._candidates(node):
            if _same_tactic(tactic) in tried:
                continue
            tried.add(_same_tactic(tactic))
            outcome = self._apply(node, tactic)
            if outcome is None:
                break
            if outcome.kind == "completed":
                self.stop, self.found = "completed", node.tactics + (tactic,)
                self.found_states = node.states + (node.goals,)
                return []
            if outcome.kind != "progress":
                self.stats.errors += outcome.kind == "error"
                self.stats.ended += outcome.kind != "error"
                continue
            key = state_key(outcome.goals)
            if key == node.key:
                self.stats.unchanged += 1
            elif key in self.seen:
                self.stats.repeated += 1
            else:
                self.seen.add(key)
                child = Node(outcome.handle, outcome.goals, node.tactics + (tactic,), node.logprob + logprob, key,
                             node.states + (node.goals,))
                if child.depth < self.settings.max_depth:
                    children.append(child)
        return children


# -- frontiers: where the strategies differ ------------------------------------------------------

class _Best:
    """Highest score first; past the bound the lowest-scored state is dropped."""

    def __init__(self, bound: int, score: Score) -> None:
        self.bound, self.score = bound, score
        #: (score, -arrival, node) ascending: the best at the end, the oldest first among equals
        self._items: list[tuple[float, int, Node]] = []
        self._arrivals = 0

    def __len__(self) -> int:
        return len(self._items)

    def pop(self) -> Node:
        return self._items.pop()[2]

    def push_all(self, nodes: list[Node]) -> int:
        for node in nodes:
            self._arrivals += 1
            bisect.insort(self._items, (self.score(node), -self._arrivals, node))
        dropped = max(len(self._items) - self.bound, 0)
        del self._items[:dropped]
        return dropped


class _Queue:
    """Oldest first; past the bound new states are dropped (they would be reached last)."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._items: collections.deque[Node] = collections.deque()

    def __len__(self) -> int:
        return len(self._items)

    def pop(self) -> Node:
        return self._items.popleft()

    def push_all(self, nodes: list[Node]) -> int:
        kept = nodes[:max(self.bound - len(self._items), 0)]
        self._items.extend(kept)
        return len(nodes) - len(kept)


class _Stack:
    """Newest first, the best of one expansion on top; past the bound the
    oldest states (the shallowest, reached last) are dropped."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._items: list[Node] = []

    def __len__(self) -> int:
        return len(self._items)

    def pop(self) -> Node:
        return self._items.pop()

    def push_all(self, nodes: list[Node]) -> int:
        self._items.extend(reversed(nodes))
        dropped = max(len(self._items) - self.bound, 0)
        del self._items[:dropped]
        return dropped


def _drive(run: Run, root: Node, frontier: Any) -> None:
    """Expand states in the frontier's order until the search stops."""
    frontier.push_all([root])
    while len(frontier):
        if run.stats.expanded >= run.settings.max_expansions:
            run.stop = "expansions"
            return
        children = run.expand(frontier.pop())
        if run.stop:
            return
        run.stats.dropped += frontier.push_all(children)
        run.stats.frontier_peak = max(run.stats.frontier_peak, len(frontier))
    run.stop = "exhausted"


def best_first(run: Run, root: Node, score: Score) -> None:
    _drive(run, root, _Best(run.settings.max_frontier, score))


def breadth_first(run: Run, root: Node, score: Score) -> None:
    _drive(run, root, _Queue(run.settings.max_frontier))


def depth_first(run: Run, root: Node, score: Score) -> None:
    _drive(run, root, _Stack(run.settings.max_frontier))


#: strategy name -> function(run, root, score); the name is the ``strategy`` of :func:`search`
STRATEGIES: dict[str, Callable[[Run, Node, Score], None]] = {
    "best_first": best_first,
    "breadth_first": breadth_first,
    "depth_first": depth_first,
}


def search(problem: ProofTask, prover: Prover, proposer: Proposer, settings: SearchSettings = SearchSettings(), *,
           strategy: str = "best_first", score: Score = cumulative_logprob,
           verify: Optional[Callable[[ProofTask, float], Verdict]] = None) -> SearchResult:
    """Search for a proof of ``problem`` and re-check what is found as one
    whole proof with ``verify`` (default: ``prover.check``)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown search strategy {strategy!r}; known: {sorted(STRATEGIES)}")
    run = Run(prover, proposer, settings)
    replayed = prover.replayed
    root = run.open(problem)
    if root is not None:
        STRATEGIES[strategy](run, root, score)
    run.stats.seconds = time.monotonic() - run.started
    run.stats.replayed = prover.replayed - replayed
    result = SearchResult(problem.id, strategy, run.stop, messages=run.messages, stats=run.stats)
    if run.found is not None:
        result.tactics = run.found
        result.states = tuple(proof_state(goals) for goals in run.found_states)
        result.proof = prover.proof_text(run.found)
        started = time.monotonic()
        result.verdict = (verify or prover.check)(dataclasses.replace(problem, proof=result.proof),
                                                  settings.recheck_seconds)
        run.stats.recheck_seconds = time.monotonic() - started
    return result
