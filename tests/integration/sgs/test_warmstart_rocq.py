"""The shipped warm-start corpus (``sgs/data/warmstart_rocq.jsonl``) against
real Rocq: every statement and proof it holds, read back from the file
itself, compiles in one ``coqc`` run.  The corpus's plain-Python tests:
``tests/unit/sgs/state/test_warmstart.py``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.unit.sgs.state.test_warmstart import gen, lines, shipped_text, targets_tool  # noqa: F401  (fixtures)


@pytest.fixture(scope="module")
def coqc(require_rocq) -> str:
    path = shutil.which("coqc") or str(Path(require_rocq).with_name("coqc"))
    assert Path(path).is_file(), f"coqtop is installed at {require_rocq} but coqc is not"
    return path


@pytest.mark.rocq
def test_every_statement_and_proof_checks_in_rocq(lines, coqc):
    """All distinct statements of the shipped file (solver statements with
    their proofs, conjectures with their checking proofs, the Guide's
    conjectures) elaborate to propositions, and every proof is accepted with
    no axiom, in one batch."""
    records = gen.records_from_corpus(lines)
    assert len(records) > 1000
    assert targets_tool.check_targets(records, coqc=coqc) == []
