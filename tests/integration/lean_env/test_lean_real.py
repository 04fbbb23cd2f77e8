"""End-to-end checks against a real Lean REPL with Mathlib.  No Lean can be
installed on the build machines, so these run only where
``tools/setup_lean.sh`` was run and ``LEAN_ENV_REPL_COMMAND`` is set."""

from __future__ import annotations

import os

import pytest

from lean_env.lean import LeanBackend, LeanConfig, TacticStatus
from lean_env.lean.config import ENV_REPL_COMMAND
from lean_env.verdict import ProofTask, Status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get(ENV_REPL_COMMAND), reason=f"{ENV_REPL_COMMAND} is not set (no Lean here)"),
]

HEADER = "import Mathlib\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
STATEMENT = "theorem sgs_real_check (a b : ℕ) (h : a = b) : a + 0 = b := by"


@pytest.fixture(scope="module")
def backend():
    with LeanBackend(LeanConfig.from_env(spare=False)) as b:
        yield b


@pytest.mark.parametrize("proof, status, reason", [
    ("simp [h]", Status.VALID, "ok"),
    ("rfl", Status.INVALID, "prover_error"),
    ("exact absurd h (by native_decide)", Status.INVALID, "banned:native_decide"),
])
def test_proofs(backend, proof, status, reason):
    verdict = backend.check_proof(ProofTask("real", HEADER, STATEMENT, proof), timeout=200)
    assert (verdict.status, verdict.reason) == (status, reason), verdict.messages


def test_statements(backend):
    assert backend.check_statement(HEADER, "theorem sgs_conj (n : ℕ) : n ≤ n ^ 2 := by", 200).valid
    assert not backend.check_statement(HEADER, "theorem sgs_conj : undefined_thing := by", 200).valid


def test_tactic_mode(backend):
    start = backend.start_proof(HEADER, STATEMENT)
    assert start.status is TacticStatus.PROGRESS
    assert backend.run_tactic(start.state, "subst h").status is TacticStatus.PROGRESS
    assert backend.run_tactic(start.state, "simp [h]").status is TacticStatus.COMPLETED


@pytest.mark.parametrize("proof", ["simp [h]", "subst h; rfl", "omega"])
def test_the_separate_axiom_checker_agrees_with_print_axioms(backend, proof):
    """``SgsAxiomCheck.lean`` (the default channel) and ``#print axioms`` in the REPL
    judge honest proofs alike; the checker runs only where Lean does."""
    task = ProofTask("real", HEADER, STATEMENT, proof)
    assert backend.config.axiom_check == "process"
    through_checker = backend.check_proof(task, timeout=200)
    with LeanBackend(LeanConfig.from_env(spare=False, axiom_check="repl")) as repl_channel:
        through_repl = repl_channel.check_proof(task, timeout=200)
    assert (through_checker.status, through_checker.reason) == (through_repl.status, through_repl.reason)
    assert through_checker.valid and any("separate checker" in m for m in through_checker.messages)


def test_the_audit_compiles_and_checks_the_module(backend):
    verdict = backend.audit(ProofTask("real", HEADER, STATEMENT, "simp [h]"), timeout=600)
    assert (verdict.status, verdict.reason) == (Status.VALID, "ok"), verdict.messages
