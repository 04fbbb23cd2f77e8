"""The Rocq (Coq 8.16) backend: a persistent ``coqtop -emacs`` session per
backend instance, with paranoid validity checks (see :mod:`.backend`)."""

from lean_env.rocq.backend import PROP_CHECK, RocqBackend, TacticResult
from lean_env.rocq.census import AxiomCensus, Census
from lean_env.rocq.commands import COMMANDS, Command
from lean_env.rocq.checks import (
    REJECTION_REASONS,
    THEOREM_KEYWORDS,
    RocqTextError,
    Sentence,
    Statement,
    split_sentences,
    validate_header,
    validate_proof,
    validate_statement,
    validate_tactics,
)
from lean_env.rocq.config import CHECKS_VERSION, RocqConfig, RocqConfigError

__all__ = [
    "AxiomCensus",
    "CHECKS_VERSION",
    "COMMANDS",
    "Command",
    "Census",
    "PROP_CHECK",
    "REJECTION_REASONS",
    "THEOREM_KEYWORDS",
    "RocqBackend",
    "RocqConfig",
    "RocqConfigError",
    "RocqTextError",
    "Sentence",
    "Statement",
    "TacticResult",
    "split_sentences",
    "validate_header",
    "validate_proof",
    "validate_statement",
    "validate_tactics",
]
