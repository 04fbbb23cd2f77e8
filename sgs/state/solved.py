"""The solved registry: which targets have a verified proof, since when, and
up to ``MAX_PROOFS`` distinct verified proofs per target for expert iteration.

A target is solved from the first iteration in which any attempt on it
verifies, and stays solved.  The registry only ever grows; the store rebuilds
it at start-up from the proofs each finished phase admitted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sgs.state.records import Target, check_fields, typed_field

MAX_PROOFS = 16


@dataclass(frozen=True)
class StoredProof:
    """One verified proof of a target."""

    target_id: str
    """The target it proves."""
    iteration: int
    """The iteration whose attempt produced it."""
    attempt_id: str
    """The attempt it came from (its tokens are in that iteration's attempt log)."""
    proof: str
    """The proof body, as verified."""
    reward: float
    """The attempt's Solver reward (a verified proof can still score 0 or less:
    the ``try`` rule, the overlong penalty); expert iteration weights by it."""

    def to_json(self) -> dict:
        return {"target_id": self.target_id, "iteration": self.iteration, "attempt_id": self.attempt_id,
                "proof": self.proof, "reward": self.reward}

    @classmethod
    def from_json(cls, d: Any) -> "StoredProof":
        check_fields(d, cls)
        return cls(
            target_id=typed_field(d, "target_id", str),
            iteration=typed_field(d, "iteration", int),
            attempt_id=typed_field(d, "attempt_id", str),
            proof=typed_field(d, "proof", str),
            reward=typed_field(d, "reward", float),
        )


def _same_proof_key(proof: str) -> str:
    # Two proofs that differ only in leading/trailing whitespace are one proof.
    return proof.strip()


class SolvedRegistry:
    """Verified proofs per target, capped at ``max_proofs`` distinct proofs each."""

    def __init__(self, targets: Sequence[Target], max_proofs: int = MAX_PROOFS):
        self.max_proofs = max_proofs
        self._targets = {t.id: t for t in targets}
        self._proofs: dict[str, list[StoredProof]] = {}

    def admissible(self, candidates: Iterable[StoredProof]) -> list[StoredProof]:
        """The candidates that ``add`` would keep, in order: distinct from every
        stored proof of their target and from each other, while the target has
        fewer than ``max_proofs``.  Does not change the registry."""
        taken = {tid: {_same_proof_key(p.proof) for p in ps} for tid, ps in self._proofs.items()}
        admitted = []
        for c in candidates:
            if c.target_id not in self._targets:
                raise KeyError(f"unknown target id {c.target_id!r}")
            seen = taken.setdefault(c.target_id, set())
            key = _same_proof_key(c.proof)
            if len(seen) < self.max_proofs and key not in seen:
                seen.add(key)
                admitted.append(c)
        return admitted

    def add(self, proofs: Iterable[StoredProof]) -> None:
        """Store proofs that ``admissible`` returned; anything else is a bug or
        a damaged run directory, so it raises instead of silently dropping."""
        proofs = list(proofs)
        if self.admissible(proofs) != proofs:
            raise ValueError("add() was given proofs the registry does not admit (duplicates or over the cap)")
        for p in proofs:
            self._proofs.setdefault(p.target_id, []).append(p)

    def is_solved(self, target_id: str, through_iteration: int | None = None) -> bool:
        solved_at = self.solved_at(target_id)
        return solved_at is not None and (through_iteration is None or solved_at <= through_iteration)

    def solved_at(self, target_id: str) -> int | None:
        """The first iteration in which the target had a verified attempt."""
        if target_id not in self._targets:
            raise KeyError(f"unknown target id {target_id!r}")
        proofs = self._proofs.get(target_id)
        return min(p.iteration for p in proofs) if proofs else None

    def proofs(self, target_id: str) -> list[StoredProof]:
        if target_id not in self._targets:
            raise KeyError(f"unknown target id {target_id!r}")
        return list(self._proofs.get(target_id, ()))

    def recent_proofs(self, since_iteration: int) -> list[StoredProof]:
        """Stored proofs created in ``since_iteration`` or later (expert
        iteration trains on those of the last three iterations)."""
        return [p for ps in self._proofs.values() for p in ps if p.iteration >= since_iteration]

    def solved_ids(self, through_iteration: int | None = None) -> list[str]:
        return [tid for tid in self._targets if self.is_solved(tid, through_iteration)]

    def cumulative_solve_rate(self, through_iteration: int | None = None) -> float:
        """Share of the training targets (held-out ones excluded) solved by the
        end of ``through_iteration`` (default: everything finished so far)."""
        training = [t.id for t in self._targets.values() if not t.held_out]
        if not training:
            return 0.0
        return sum(self.is_solved(tid, through_iteration) for tid in training) / len(training)
