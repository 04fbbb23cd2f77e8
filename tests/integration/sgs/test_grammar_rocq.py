"""The built-in Rocq statement grammar against real Rocq: every sentence the
grammar offers is a theorem the Conjecturer's extraction takes and Rocq
elaborates.  The grammar itself, the grammar setting and sampling under a
grammar: ``tests/unit/sgs/machinery/test_grammar.py``."""

from __future__ import annotations

from lean_env.rocq import RocqBackend, RocqConfig
from sgs.method.roles import extract_conjecture
from tests.unit.sgs.machinery.test_grammar import SENTENCES, wrap

#: The header of the shipped Rocq targets.
HEADER = "Require Import Arith Lia List Bool.\nImport ListNotations."


def test_every_sentence_elaborates_in_rocq(require_rocq):
    """The constructs the grammar offers are real Rocq: each statement of
    ``SENTENCES`` is a theorem the Conjecturer's extraction takes and Rocq elaborates."""
    backend = RocqBackend(RocqConfig(coqtop=require_rocq, timeout=60, axiom_census=False), worker="test")
    try:
        for statement in SENTENCES:
            extraction = extract_conjecture(wrap(statement), "rocq")
            assert extraction.ok, (statement, extraction)
            verdict = backend.check_statement(HEADER, extraction.value)
            assert verdict.valid, (statement, verdict.messages)
    finally:
        backend.close()
