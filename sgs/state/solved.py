"""The solved registry: which targets have a verified proof, since when, and
up to ``max_proofs`` verified proofs per target for expert iteration
(``method.max_proofs_per_target``, 16 by default): the first found, distinct
ones or repeats included (:data:`PROOF_KEYS`).

A target is solved from the first iteration in which any attempt on it
verifies, and stays solved.  The registry only ever grows; the store rebuilds
it at start-up from the proofs each finished phase admitted.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
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


def _proof_text(proof: StoredProof) -> str:
    # Two proofs that differ only in leading/trailing whitespace are one proof.
    return proof.proof.strip()


def _verified_attempt(proof: StoredProof) -> tuple[int, str]:
    # Every verified attempt is a proof of its own (an attempt id is unique within its iteration).
    return proof.iteration, proof.attempt_id


#: ``method.ei_solved_count``: what tells two proofs of a target apart.  A
#: candidate is not stored when a stored proof of its target has its key:
#: ``distinct`` stores (and counts) a proof text once, ``all`` every verified attempt.
PROOF_KEYS = {"distinct": _proof_text, "all": _verified_attempt}


class SolvedRegistry:
    """Verified proofs per target, the first ``max_proofs`` found, told apart
    as ``counting`` (a key of :data:`PROOF_KEYS`) says."""

    def __init__(self, targets: Sequence[Target], max_proofs: int = MAX_PROOFS, counting: str = "distinct"):
        self.max_proofs = max_proofs
        self.counting = counting
        """How :meth:`admissible` tells new proofs apart; stored ones may have
        been admitted under another rule (a run resumed with it changed)."""
        self._targets = {t.id: t for t in targets}
        self._proofs: dict[str, list[StoredProof]] = {}

    def admissible(self, candidates: Iterable[StoredProof]) -> list[StoredProof]:
        """The candidates that ``add`` would keep, in order: while the target
        has fewer than ``max_proofs`` stored proofs, each whose key
        (:data:`PROOF_KEYS`) no stored proof of its target and no earlier
        candidate has.  Does not change the registry."""
        return self._admissible(candidates, PROOF_KEYS[self.counting])

    def add(self, proofs: Iterable[StoredProof]) -> None:
        """Store proofs that ``admissible`` returned, under this registry's
        counting or another (a resumed run replays the proofs each phase
        admitted, whatever rule was in force then).  A proof over the cap,
        of an unknown target or of an attempt already stored is a bug or a
        damaged run directory, so it raises instead of silently dropping."""
        proofs = list(proofs)
        if self._admissible(proofs, _verified_attempt) != proofs:
            raise ValueError("add() was given proofs the registry does not admit (an attempt stored twice, or over "
                             "the cap)")
        for p in proofs:
            self._proofs.setdefault(p.target_id, []).append(p)

    def _admissible(self, candidates: Iterable[StoredProof], key: Callable[[StoredProof], Hashable]
                    ) -> list[StoredProof]:
        stored = {tid: len(ps) for tid, ps in self._proofs.items()}
        taken = {tid: {key(p) for p in ps} for tid, ps in self._proofs.items()}
        admitted = []
        for c in candidates:
            if c.target_id not in self._targets:
                raise KeyError(f"unknown target id {c.target_id!r}")
            seen = taken.setdefault(c.target_id, set())
            if stored.get(c.target_id, 0) < self.max_proofs and key(c) not in seen:
                seen.add(key(c))
                stored[c.target_id] = stored.get(c.target_id, 0) + 1
                admitted.append(c)
        return admitted

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

    def cumulative_solve_rate(self, through_iteration: int | None = None) -> float:
        """Share of the training targets (held-out ones excluded) solved by the
        end of ``through_iteration`` (default: everything finished so far)."""
        training = [t.id for t in self._targets.values() if not t.held_out]
        if not training:
            return 0.0
        return sum(self.is_solved(tid, through_iteration) for tid in training) / len(training)
