"""How close the Conjecturer's problems are to the targets they were written for.

The paper's mechanism is that a conjecture is a stepping stone: a simpler
statement about the same objects, whose proof teaches the Solver something
the target's proof needs.  Two measurements per iteration, both pure:

* statement overlap: the Jaccard index of the symbol sets of a conjecture's
  statement and its target's, each in canonical form (bound names renamed,
  the theorem's name dropped), so ``forall n, n + 0 = n`` and
  ``forall m, m + 0 = m`` share everything;
* proof overlap: of the names (tactics and lemmas) the target's verified
  proofs use, the share that verified proofs of its kept conjectures used
  too.  Only targets with both kinds of proof count.

A Conjecturer that drifts away from its targets (the reward hacking the paper
warns of: long, easy, unrelated statements) shows as falling overlaps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean

from sgs.method.roles import canonical_form
from sgs.method.roles.lexer import tokenize
from sgs.state.records import Attempt, Conjecture, ConjectureScore


def jaccard(a: set[str], b: set[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets are identical (1.0)."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def statement_symbols(statement: str, language: str) -> set[str]:
    """The distinct tokens of a statement's canonical form: its identifiers,
    numbers and operators, bound names renamed in order of binding."""
    return set(canonical_form(statement, language).split())


#: Words every Rocq proof body has, which say nothing about its content.
PROOF_FRAME = frozenset({"Proof", "Qed", "Defined"})


def proof_names(proof: str, language: str) -> set[str]:
    """The identifiers a proof uses: its tactics, the lemmas it cites and its
    hypothesis names (``Proof`` and ``Qed`` aside)."""
    return {token.text for token in tokenize(proof, language) if token.kind == "ident"} - PROOF_FRAME


def closeness_metrics(conjectures: Sequence[Conjecture], scores: Mapping[str, ConjectureScore],
                      attempts: Sequence[Attempt], target_statements: Mapping[str, str],
                      target_proofs: Mapping[str, Iterable[str]], language: str) -> dict[str, float | None]:
    """One iteration's overlaps (None where nothing was measured):

    ``conjecture_statement_overlap``: mean over the attempted conjectures;
    ``kept_conjecture_statement_overlap``: mean over the kept ones;
    ``conjecture_proof_overlap``: mean over the targets with a verified proof
    (``target_proofs``: their proof texts so far) and a kept conjecture proved
    this iteration.
    """
    symbols = {tid: statement_symbols(text, language) for tid, text in target_statements.items()}
    attempted = [c for c in conjectures if c.statement is not None and c.target_id in symbols]
    overlap = {c.id: jaccard(statement_symbols(c.statement, language), symbols[c.target_id]) for c in attempted}
    kept = {c.id: c.target_id for c in attempted if c.id in scores and scores[c.id].kept}
    conjecture_names: dict[str, set[str]] = {}
    for a in attempts:
        if a.problem_kind == "conjecture" and a.problem_id in kept and a.verdict is not None and a.verdict.valid:
            conjecture_names.setdefault(kept[a.problem_id], set()).update(proof_names(a.proof, language))
    covered = []
    for target_id, names in conjecture_names.items():
        needed = set().union(*(proof_names(p, language) for p in target_proofs.get(target_id, ())))
        if needed:
            covered.append(coverage(needed, names))
    return {
        "conjecture_statement_overlap": _mean(overlap.values()),
        "kept_conjecture_statement_overlap": _mean(overlap[c] for c in kept),
        "conjecture_proof_overlap": _mean(covered),
    }


def coverage(needed: set[str], used: set[str]) -> float:
    """The share of ``needed`` that ``used`` holds (1.0 when nothing is needed)."""
    return len(needed & used) / len(needed) if needed else 1.0


@dataclass(frozen=True)
class OwnAndOther:
    """A closeness measured against each item's own target and, as the chance
    level, against every other target: generic statements or proof words
    (``intros``, ``lia``) score as high on the second as on the first."""

    own: float | None
    """Mean over the items of the measure against their own target."""
    other: float | None
    """Mean over the items and every other target of the measure."""
    items: int
    """Items measured (those whose own target has a reference)."""


def own_and_other(items: Sequence[tuple[str, set[str]]], references: Mapping[str, set[str]],
                  measure: Callable[[set[str], set[str]], float]) -> OwnAndOther:
    """``measure(reference, item)`` of each ``(target id, item)`` against its own
    target's reference and against every other target's."""
    measured = [(target, item) for target, item in items if target in references]
    own = [measure(references[target], item) for target, item in measured]
    other = [measure(reference, item) for target, item in measured
             for other_target, reference in references.items() if other_target != target]
    return OwnAndOther(_mean(own), _mean(other), len(measured))


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return fmean(values) if values else None
