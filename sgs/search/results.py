"""What a search returns: the proof it found, the re-check's verdict on it,
and where its time went."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from lean_env.verdict import Verdict

__all__ = ["SearchStats", "SearchResult"]


@dataclass
class SearchStats:
    """Counts and seconds of one search (the re-check's seconds apart)."""

    #: wall time of the search, from opening the proof to the last tactic
    seconds: float = 0.0
    #: in the proposer's calls, and in the prover's (opening, tactics, replays)
    proposer_seconds: float = 0.0
    prover_seconds: float = 0.0
    recheck_seconds: float = 0.0
    proposer_calls: int = 0
    #: states whose tactics were tried
    expanded: int = 0
    #: tactics run (finishers included; a replay is not one)
    tactics_tried: int = 0
    #: of those: failed, timed out or lost the proof, left the goals as they were,
    #: reached a state seen before
    errors: int = 0
    ended: int = 0
    unchanged: int = 0
    repeated: int = 0
    #: open states dropped to keep the frontier within its bound, and its largest size
    dropped: int = 0
    frontier_peak: int = 0
    #: tactic steps the prover ran again to bring back a state (backtracking on a linear prover)
    replayed: int = 0

    @property
    def other_seconds(self) -> float:
        """The search's own work: bookkeeping, pruning, the frontier."""
        return max(self.seconds - self.proposer_seconds - self.prover_seconds, 0.0)

    @property
    def expanded_per_second(self) -> float:
        return self.expanded / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "other_seconds": self.other_seconds,
                "expanded_per_second": self.expanded_per_second}


@dataclass
class SearchResult:
    problem_id: str
    strategy: str
    #: why it stopped: ``completed`` (the prover closed the proof), ``exhausted`` (no open
    #: state left), ``time``, ``expansions``, or ``open_failed`` (the statement did not open)
    stop: str
    #: the path the prover completed (empty unless ``completed``), and the proof sent to the re-check
    tactics: tuple[str, ...] = ()
    #: the proof state (:func:`sgs.prover.steps.proof_state`) each of ``tactics`` was run on
    states: tuple[str, ...] = ()
    proof: str = ""
    #: the whole-proof re-check of ``proof``: the final word (a search bug is never a reward)
    verdict: Optional[Verdict] = None
    #: the prover's explanation when the statement did not open
    messages: tuple[str, ...] = ()
    stats: SearchStats = field(default_factory=SearchStats)

    @property
    def found(self) -> bool:
        """The prover reported the proof complete during the search."""
        return self.stop == "completed"

    @property
    def proved(self) -> bool:
        """Found, and the whole proof passed the re-check."""
        return self.found and self.verdict is not None and self.verdict.valid
