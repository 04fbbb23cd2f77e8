"""Proof retrieval: the proofs of the earlier lemmas most like a target, for a prompt.

Rango found its largest gain (+47% theorems proved) in showing the model the
proofs of similar lemmas already in scope: a proof of ``Rabs_le`` is the best
hint for ``Rabs_ge``.  Similarity is the premise ranker's BM25
(:class:`sgs.prover.premises.PremiseIndex`) with the target's statement as
the query, over the statements of the theorems whose proof is kept
(``Qed``/``Defined`` with tactic steps); this module adds their proofs and
the prompt block.  ``python -m sgs.prover.premises`` measures it (retrieved
proofs sharing tactics with the target's, against random earlier proofs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from sgs.corpus.records import TheoremRecord
from sgs.prover.premises import (
    PROVED,
    PremiseIndex,
    read_json_gz,
    write_json_gz,
    premises_from_theorems,
    tactic_keys,
)

__all__ = ["RetrievedProof", "ProofIndex", "format_proofs"]


@dataclass(frozen=True)
class RetrievedProof:
    #: fully qualified, as the premise index names it
    name: str
    #: the sentence that opened the proof, as written
    statement: str
    #: the proof as written, up to and including ``Qed.``
    proof: str


class ProofIndex:
    """Earlier theorems with their proofs, searchable by statement."""

    def __init__(self, premises: PremiseIndex, proofs: Sequence[str]):
        if len(premises.premises) != len(proofs):
            raise ValueError(f"{len(premises.premises)} statements but {len(proofs)} proofs")
        self.premises = premises
        self.proofs = list(proofs)

    @classmethod
    def build(cls, theorems: Iterable[TheoremRecord], modules: dict[tuple[str, str], str],
              known: dict[str, set[str]]) -> "ProofIndex":
        """From corpus theorems (see :func:`sgs.prover.premises.premises_from_theorems`
        for ``modules`` and ``known``); only finished tactic proofs are kept."""
        proved = [t for t in theorems if t.ending in PROVED and tactic_keys(t)]
        return cls(PremiseIndex(premises_from_theorems(proved, modules, known)), [t.proof for t in proved])

    def retrieve(self, statement: str, k: int,
                 allowed: Optional[Callable[[int], bool]] = None) -> list[RetrievedProof]:
        """The k theorems whose statements are most like ``statement``, best first;
        ``allowed`` (on positions) keeps those in scope, and should leave out the
        target itself when it is in the index."""
        return [RetrievedProof(self.premises.premises[i].name, self.premises.premises[i].statement, self.proofs[i])
                for i, _ in self.premises.top(statement, k, allowed)]

    def save(self, path: Path) -> int:
        """Write the index as gzip'd JSON; returns its size in bytes."""
        return write_json_gz(Path(path), {"premises": self.premises.to_json(), "proofs": self.proofs})

    @classmethod
    def load(cls, path: Path) -> "ProofIndex":
        raw = read_json_gz(Path(path))
        return cls(PremiseIndex.from_json(raw["premises"]), raw["proofs"])


def format_proofs(proofs: Iterable[RetrievedProof], budget_chars: int) -> str:
    """Statement and proof of each retrieved theorem, best first, a blank line between
    them, within the budget.  Only whole proofs: one that does not fit is skipped (a
    proof cut short teaches a wrong ending), and a shorter one after it may still fit."""
    blocks: list[str] = []
    used = 0
    for p in proofs:
        block = f"{p.statement.strip()}\n{p.proof.strip()}"
        need = len(block) + (2 if blocks else 0)
        if used + need <= budget_chars:
            blocks.append(block)
            used += need
    return "\n\n".join(blocks)
