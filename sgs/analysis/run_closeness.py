"""How close a whole run's trained-on conjectures stayed to their targets,
read after the run (``python -m tools.compare``).

The per-iteration ``conjecture_proof_overlap`` can only count targets
already solved when their conjecture was proved, which is rare for the hard
ones.  Here every conjecture the Conjecturer was trained on is set against
its target with everything the run ended up with: its statement against the
target's (Jaccard of canonical symbols), and the names its valid proofs used
against the names of every valid proof the run found for the target
(coverage).  Each is also measured against the other targets, the chance
level (:class:`sgs.analysis.closeness.OwnAndOther`: every other training
target, or every other solved one): a conjecture that helps with its own
target should share more with it than with the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sgs.analysis.closeness import OwnAndOther, coverage, jaccard, own_and_other, proof_names, statement_symbols
from sgs.analysis.report.series import trained_on
from sgs.state.records import Attempt, Conjecture, ConjectureScore
from sgs.state.run_reader import RunReader
from sgs.state.solved import MAX_PROOFS


@dataclass(frozen=True)
class RunCloseness:
    statements: OwnAndOther
    """Statement overlap of each trained-on conjecture with its target, and with the others."""
    proofs: OwnAndOther
    """Share of a solved target's proof names that a trained-on conjecture's valid proofs used."""


def run_closeness(run_dir: str | Path) -> RunCloseness | None:
    """The closeness of a run's trained-on conjectures (None: the Conjecturer was never trained)."""
    reader = RunReader(run_dir, strict=False)
    config = reader.config()
    method = config.get("method", {})
    if not method.get("train_conjecturer", True):
        return None
    language = config.get("prover", {}).get("language", "rocq")
    targets = reader.targets()
    markers = reader.markers()
    registry = reader.solved_registry(targets, markers, method.get("ei_solved_count", "distinct"),
                                      method.get("max_proofs_per_target", MAX_PROOFS))
    conjectures: dict[str, Conjecture] = {}
    trained: set[str] = set()
    proof_words: dict[str, set[str]] = {}
    for marker in markers:
        for record in reader.records(marker, ("conjecture", "conjecture_score", "attempt")):
            if isinstance(record, Conjecture) and record.statement is not None:
                conjectures[record.id] = record
            elif isinstance(record, ConjectureScore) and trained_on(record):
                trained.add(record.conjecture_id)
            elif (isinstance(record, Attempt) and record.problem_kind == "conjecture" and record.verdict is not None
                  and record.verdict.valid and record.proof is not None):
                proof_words.setdefault(record.problem_id, set()).update(proof_names(record.proof, language))
    kept = [conjectures[cid] for cid in sorted(trained) if cid in conjectures]
    if not kept:
        return None
    training = [t for t in targets if not t.held_out]
    target_symbols = {t.id: statement_symbols(t.statement, language) for t in training}
    target_words = {t.id: set().union(*(proof_names(p.proof, language) for p in registry.proofs(t.id)))
                    for t in training if registry.proofs(t.id)}
    return RunCloseness(
        statements=own_and_other([(c.target_id, statement_symbols(c.statement, language)) for c in kept],
                                 target_symbols, jaccard),
        proofs=own_and_other([(c.target_id, proof_words[c.id]) for c in kept if c.id in proof_words],
                             target_words, coverage))
