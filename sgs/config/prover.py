"""The proof checker and the proof language (a part of the schema in
:mod:`sgs.config.schema`, kept in its own module so that each reads in one
sitting), and their checks (:func:`prover_problems`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from lean_env.lean.config import AXIOM_CHECKS
from lean_env.rocq.config import TACTIC_LIBRARY_SENTENCE
from lean_env.rocq.known_bugs import FEATURE_NAMES as BUG_PRONE_FEATURES
from sgs.config.checks import Choice, positive


class ProverBackend(Choice):
    """``prover.backend``: the checker process."""

    lean = "lean"
    rocq = "rocq"


class ProofLanguage(Choice):
    """``prover.language``: the language of statements and proofs."""

    lean = "lean"
    rocq = "rocq"


#: The proof language each prover backend checks.
BACKEND_LANGUAGE = {ProverBackend.lean: ProofLanguage.lean, ProverBackend.rocq: ProofLanguage.rocq}


@dataclass
class LeanSettings:
    """How to start the Lean 4 REPL (leanprover-community/repl)."""

    #: Command that starts one REPL process, run in ``project_dir``; the first
    #: word must be an executable on PATH or a path (relative paths are
    #: relative to ``project_dir``).
    repl_command: str = "lake env repl"
    #: Lean project (with Mathlib built) that the REPL runs in.
    project_dir: str = MISSING
    #: Where a proof's axioms are read: ``process`` (the REPL pickles the proof's
    #: environment; the trusted checker ``lean_env/lean/SgsAxiomCheck.lean`` replays
    #: it through the kernel in a separate ``lake env lean --run``) or ``repl``
    #: (``#print axioms`` in the proof's own environment, which a proof that adds
    #: syntax could forge).  docs/proof_checking.md.
    axiom_check: str = "process"
    #: The ``lake`` command the axiom checker and the audit run with.
    lake_command: str = "lake"
    #: Directories the REPL, the checker and the audit may write to besides their
    #: scratch directories (everything else is refused where Landlock exists).
    writable_paths: list[str] = field(default_factory=list)


@dataclass
class RocqSettings:
    """How to start the Rocq (Coq) checker."""

    #: The ``coqtop`` executable: a name on PATH or a path.
    coqtop: str = "coqtop"
    #: Proof features that reach Coq 8.16's known soundness bugs, accepted
    #: anyway: ``fixpoints`` (``fix``/``cofix`` in proofs and statements; the
    #: guard checker's bugs, which the audit shares) and ``vm_reduction``
    #: (``vm_compute``, ``native_compute``, ``Compute``, ``<:`` casts; the
    #: VM's bugs).  Empty by default: such proofs are refused with
    #: ``known_bug:<feature>`` (``lean_env/rocq/known_bugs.py``).
    allow_bug_prone_features: list[str] = field(default_factory=list)
    #: ``Require`` sentences the checker runs after every target's own header
    #: and before its statement (``From Hammer Require Import Tactics.``: the
    #: ``sauto`` family under headers that never load CoqHammer).  A statement
    #: whose term they change is refused with
    #: ``tactic_libraries_change_statement`` (docs/proof_checking.md).
    tactic_libraries: list[str] = field(default_factory=list)


@dataclass
class ProverConfig:
    """The proof checker and the proof language (SPEC §3)."""

    #: Checker process: ``lean`` (Lean 4 REPL) or ``rocq`` (coqtop).
    backend: ProverBackend = MISSING
    #: Language of statements and proofs; selects prompt templates, output
    #: parsers and the target format.  Must be the backend's language.
    language: ProofLanguage = MISSING
    #: Wall-clock limit for checking one proof, in seconds.
    timeout: float = 200.0
    #: Axioms a valid proof may depend on (Lean: as ``#print axioms`` names them); Rocq
    #: proofs must be closed under the global context, so its list is empty.
    allowed_axioms: list[str] = field(default_factory=list)
    #: Share (0 to 1) of the ``valid`` verdicts re-checked through the
    #: backend's independent audit path (Rocq: ``coqc`` + ``coqchk`` in a fresh
    #: sandbox; Lean: ``lean -o`` + the separate axiom checker).  A disagreement
    #: withholds the proof's reward, is logged to
    #: ``<run_dir>/audit_disagreements.jsonl`` and counted
    #: (``verifier/audit_disagreements``).  The sample is fixed by the proof's
    #: task id, so a resumed run audits the same proofs.
    audit_fraction: float = 0.01
    #: Target set used when ``targets.source`` is not given.
    default_targets: str = MISSING
    #: Warm-start corpus used when ``warmstart.corpus`` is not given; null
    #: when the language ships none.
    default_warmstart_corpus: str | None = None
    #: Lean settings; required when ``backend`` is ``lean``.
    lean: LeanSettings | None = None
    #: Rocq settings; required when ``backend`` is ``rocq``.
    rocq: RocqSettings | None = None


def prover_problems(prover: ProverConfig) -> list[str]:
    """Every problem within the ``prover`` node, one message per problem, each naming its key."""
    problems: list[str] = []
    expected = BACKEND_LANGUAGE.get(prover.backend)  # None while unset (MISSING, in a config built in Python)
    if expected is not None and prover.language not in (expected, MISSING):
        problems.append(
            f"prover.language={prover.language!r} cannot be checked by prover.backend={prover.backend!r}, "
            f"which checks {expected}"
        )
    positive(problems, "prover.timeout", prover.timeout, "seconds")
    if not 0 <= prover.audit_fraction <= 1:
        problems.append(f"prover.audit_fraction={prover.audit_fraction!r} must be between 0 and 1")
    if prover.backend == "lean" and prover.lean is None:
        problems.append("prover.backend='lean' needs prover.lean settings (use prover=lean)")
    if prover.backend == "rocq" and prover.rocq is None:
        problems.append("prover.backend='rocq' needs prover.rocq settings (use prover=rocq)")
    if prover.lean is not None and prover.lean.axiom_check not in AXIOM_CHECKS:
        problems.append(f"prover.lean.axiom_check={prover.lean.axiom_check!r} must be one of {list(AXIOM_CHECKS)}")
    if prover.rocq is not None:
        unknown = sorted(set(prover.rocq.allow_bug_prone_features) - set(BUG_PRONE_FEATURES))
        if unknown:
            problems.append(f"prover.rocq.allow_bug_prone_features: unknown {unknown} "
                            f"(choose from {list(BUG_PRONE_FEATURES)})")
        for sentence in prover.rocq.tactic_libraries:
            if not isinstance(sentence, str) or not TACTIC_LIBRARY_SENTENCE.fullmatch(sentence):
                problems.append(f"prover.rocq.tactic_libraries: {sentence!r} is not one Require sentence "
                                f"(such as 'From Hammer Require Import Tactics.')")
    return problems
