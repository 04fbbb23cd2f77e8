"""Against real Rocq: the check by what the proof term contains, and the
crash rule (issue 43).

The attacks themselves (Ltac2's unsafe term API building rocq#20413's
fixpoint, CoqHammer and Ltac2 commands, process-starting tactics) are cases
of ``tests/data/rocq_attacks.toml``; the legitimate proofs under the same
headers are cases of ``tests/data/rocq_legit.toml``.  Here: that the refusal
comes from the term check and nothing else (the same proof is valid with the
feature allowed), the VM rule on both sides, the tactic-level API, and a
real proof that exhausts coqtop's memory on every session.

Run: ``pytest tests/integration/lean_env/test_rocq_proof_terms.py`` (needs ``coqtop``).
"""

from __future__ import annotations

import tomllib

import psutil
import pytest

from lean_env.rocq import RocqBackend, RocqConfig
from lean_env.verdict import ProofTask, Status
from tests.integration.lean_env.test_rocq_attacks import stray_processes
from tests.paths import DATA

ATTACKS = {case["attack"]: case for case in tomllib.loads((DATA / "rocq_attacks.toml").read_text("utf-8"))["case"]}
LTAC2_FIX = next(case for name, case in ATTACKS.items() if name.startswith("rocq#20413's non-terminating fixpoint"))
LTAC2_VM = next(case for name, case in ATTACKS.items() if "through Ltac2's Std.vm" in name)
PRIMITIVES = ("int", "eqb", "addmuldiv")


def task(case: dict) -> ProofTask:
    return ProofTask(id="t", header=case["header"], statement=case["statement"], proof=case["proof"])


@pytest.fixture
def make(coqtop):
    made: list[RocqBackend] = []

    def build(**options) -> RocqBackend:
        backend = RocqBackend(RocqConfig(coqtop=coqtop, axiom_census=False, timeout=60, **options))
        made.append(backend)
        return backend

    yield build
    for backend in made:
        backend.close()


@pytest.mark.rocq
def test_the_ltac2_fixpoint_is_refused_by_the_term_check_alone(make):
    # with fixpoints allowed the same proof of False is valid: coqc, the kernel and
    # Print Assumptions all accept it, so the term check is what refuses it
    verdict = make().check_proof(task(LTAC2_FIX), 60)
    assert (verdict.status, verdict.reason) == (Status.INVALID, "known_bug:fixpoints")
    assert "proof term contains" in verdict.messages[0]
    assert make(allow_bug_prone_features=("fixpoints",)).check_proof(task(LTAC2_FIX), 60).valid


@pytest.mark.rocq
def test_a_vm_cast_is_refused_when_the_proof_reaches_primitives(make):
    # the words are refused first (Std.vm); with them allowed, the text passes and
    # the VM's wrong answer on addmuldiv proves False, depending only on the
    # primitives: an allowed-axioms deployment would accept it without the term check
    assert make().check_proof(task(LTAC2_VM), 60).reason == "known_bug:vm_reduction"
    backend = make(allowed_axioms=PRIMITIVES)
    proof = LTAC2_VM["proof"]
    bypass = dict(LTAC2_VM, proof=proof)
    from lean_env.rocq import backend as module
    original = module.validate_proof
    module.validate_proof = lambda text, **kw: original(text, **{**kw, "allowed": frozenset({"vm_reduction"})})
    try:
        verdict = backend.check_proof(task(bypass), 60)
    finally:
        module.validate_proof = original
    assert (verdict.status, verdict.reason) == (Status.INVALID, "known_bug:vm_reduction")
    assert "primitive" in verdict.messages[0]
    assert make(allowed_axioms=PRIMITIVES, allow_bug_prone_features=("vm_reduction",)).check_proof(
        task(LTAC2_VM), 60).valid


@pytest.mark.rocq
def test_library_vm_casts_without_primitives_stay_valid(make):
    backend = make()
    for statement, proof in [
        ("Theorem t1 : forall x y : nat, x < y -> x + 1 <= y.", "Proof. lia. Qed."),
        ("Theorem t2 : forall a b : nat, (a + b) * (a + b) = a * a + 2 * a * b + b * b.", "Proof. intros. ring. Qed."),
    ]:
        verdict = backend.check_proof(ProofTask(id="t", header="Require Import Arith Lia.", statement=statement,
                                                proof=proof), 60)
        assert verdict.valid, verdict.messages


@pytest.mark.rocq
def test_the_tactic_api_refuses_the_ltac2_fixpoint_too(make):
    backend = make()
    opened = backend.start_proof(LTAC2_FIX["header"], LTAC2_FIX["statement"], 60)
    assert opened.kind == "goals", opened.messages
    steps = LTAC2_FIX["proof"].strip()
    assert steps.startswith("Proof.") and steps.endswith("Qed.")
    result = backend.run_tactic(steps[len("Proof."):-len("Qed.")], 60)
    assert result.kind == "failed", (result.kind, result.messages)
    assert result.verdict.reason == "known_bug:fixpoints"


@pytest.mark.rocq
@pytest.mark.slow
def test_a_proof_that_exhausts_memory_on_every_session_is_invalid(make):
    # coqtop aborts with "Fatal error: out of memory" under its address-space limit
    # (1 GiB here, so that it dies within a second or two); once on each of two
    # fresh sessions makes it the proof's fault, cached like any invalid verdict
    # what runs under this process already (a Ray cluster an earlier test of this worker left) is no stray
    baseline = frozenset(p.pid for p in psutil.Process().children(recursive=True))
    backend = make(address_space_bytes=1 << 30)
    header = "Require Import List."
    assert backend.check_proof(ProofTask(id="g", header=header, statement="Theorem g : True.",
                                         proof="Proof. exact I. Qed."), 60).valid
    oom = ProofTask(id="oom", header=header, statement="Theorem t : True.",
                    proof="Proof.\n  Eval cbv in (List.repeat (List.repeat (List.repeat tt 1000) 1000) 1000).\n"
                          "  exact I.\nQed.")
    verdict = backend.check_proof(oom, 120)
    assert (verdict.status, verdict.reason) == (Status.INVALID, "prover_crash"), verdict.messages
    assert "out of memory" in verdict.messages[0]
    # the backend goes on with a fresh session, and no dead coqtop is left behind
    assert backend.check_proof(ProofTask(id="g", header=header, statement="Theorem g : True.",
                                         proof="Proof. exact I. Qed."), 60).valid
    assert not stray_processes(backend, baseline)
