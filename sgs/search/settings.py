"""The settings of one search (:func:`sgs.search.strategies.search`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SearchSettings", "ROCQ_FINISHERS"]

#: Rocq's decision procedures and search tactics, cheap to try and all-or-nothing on
#: the goal they work on.  ``sauto`` exists only where CoqHammer's tactics are
#: loaded (``prover.rocq.tactic_libraries``); elsewhere it fails like any unknown tactic.
ROCQ_FINISHERS = ("sauto", "lia", "auto", "easy", "congruence")


@dataclass(frozen=True)
class SearchSettings:
    #: tactics asked of the proposer per state (Proverbot9001's width; 0: the finishers alone)
    width: int = 8
    #: most tactics on a path: a state this deep is not expanded (Proverbot9001's depth)
    max_depth: int = 16
    #: time limit of one tactic, and of the whole search (the re-check comes after, with its own)
    tactic_seconds: float = 10.0
    lemma_seconds: float = 60.0
    #: most states expanded
    max_expansions: int = 10_000
    #: most open states kept; past it the least promising is dropped (memory stays bounded)
    max_frontier: int = 4096
    #: tried on every state before the proposer's tactics, at no cost to the path's score
    finishers: tuple[str, ...] = ROCQ_FINISHERS
    #: time limit of the final whole-proof check
    recheck_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.width < 0:
            raise ValueError(f"search setting width must be at least 0, got {self.width}")
        for name in ("max_depth", "max_expansions", "max_frontier"):
            if getattr(self, name) < 1:
                raise ValueError(f"search setting {name} must be at least 1, got {getattr(self, name)}")
        for name in ("tactic_seconds", "lemma_seconds", "recheck_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"search setting {name} must be positive, got {getattr(self, name)}")
