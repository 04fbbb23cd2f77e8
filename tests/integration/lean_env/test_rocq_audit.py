"""The Rocq audit (second opinion): the pure reading of coqc/coqchk results on
hand-written outputs, and the whole path against the real coqc and coqchk,
including proofs the session would wrongly accept if its text checks failed
(simulated by handing the audit sentences the checks never saw)."""

from __future__ import annotations

import glob
import os
import tempfile
import tomllib

import pytest

from lean_env.rocq import RocqBackend, RocqConfig
from lean_env.rocq.audit import audit_proof, audit_source, commands, judge, judge_term, query_source, term_source
from lean_env.rocq.checks import split_sentences, validate_header, validate_proof, validate_statement
from lean_env.rocq.term_check import tokens
from lean_env.sandbox import CommandResult
from lean_env.verdict import ProofTask, Status
from tests.conftest import require_binary
from tests.paths import REPO

ATTACKS = REPO / "tests" / "data" / "rocq_attacks.toml"

SUMMARY_CLEAN = """Modules were successfully checked

CONTEXT SUMMARY
===============

* Theory: Set is predicative
  
* Axioms:
    Coq.ssr.ssrunder.Under_rel.Under_rel
  
* Constants/Inductives relying on type-in-type: <none>
  
* Constants/Inductives relying on unsafe (co)fixpoints: <none>
  
* Inductives whose positivity is assumed: <none>
  
"""


def ran(returncode=0, stdout="", stderr="") -> CommandResult:
    return CommandResult(argv=("x",), returncode=returncode, stdout=stdout, stderr=stderr, seconds=0.1)


def summary_with(axioms: str = "", unsafe_fixpoints: str = "<none>") -> str:
    text = SUMMARY_CLEAN.replace("    Coq.ssr.ssrunder.Under_rel.Under_rel\n",
                                 "    Coq.ssr.ssrunder.Under_rel.Under_rel\n" + axioms)
    if unsafe_fixpoints != "<none>":
        text = text.replace("unsafe (co)fixpoints: <none>", f"unsafe (co)fixpoints:\n    {unsafe_fixpoints}")
    return text


# -- judge: hand-written results -------------------------------------------------

def test_everything_clean_agrees():
    # a library's axiom in the coqchk summary is not the proof's doing
    results = [ran(), ran(stdout="Welcome to Chicken", stderr=SUMMARY_CLEAN),
               ran(stdout="Closed under the global context\n")]
    assert judge(results, frozenset()).status is Status.VALID


def test_compile_failure_is_named():
    outcome = judge([ran(1, stderr='File "./Audited.v", line 3: Error: No such goal.')], frozenset())
    assert (outcome.status, outcome.reason) == (Status.INVALID, "audit_compile_failed")
    assert "No such goal" in outcome.messages[0] and "status 1" in outcome.messages[0]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_command_past_the_deadline_is_a_timeout(which):
    results = [ran(), ran(stderr=SUMMARY_CLEAN), ran(stdout="Closed under the global context")][:which + 1]
    results[which] = ran(returncode=None)
    outcome = judge(results, frozenset())
    assert (outcome.status, outcome.reason) == (Status.TIMEOUT, "audit_timeout")


def test_coqchk_failure_and_unreadable_summary():
    assert judge([ran(), ran(1, stderr="Error: anomaly")], frozenset()).reason == "audit_coqchk_failed"
    no_summary = judge([ran(), ran(0, stderr="Modules were successfully checked\n")], frozenset())
    assert no_summary.reason == "audit_coqchk_failed" and "no context summary" in no_summary.messages[0]
    not_checked = judge([ran(), ran(0, stderr=SUMMARY_CLEAN.replace("Modules were successfully checked", ""))],
                        frozenset())
    assert not_checked.reason == "audit_coqchk_failed"


def test_axioms_and_unsafe_fixpoints_declared_in_the_proof_file():
    axiom = judge([ran(), ran(stderr=summary_with(axioms="    SgsAudit.Audited.cheat\n"))], frozenset())
    assert (axiom.status, axiom.reason) == (Status.INVALID, "audit_axioms:Audited.cheat")
    loop = judge([ran(), ran(stderr=summary_with(unsafe_fixpoints="SgsAudit.Audited.loop"))], frozenset())
    assert loop.reason == "audit_axioms:Audited.loop"


def test_print_assumptions_lists_only_allowed_axioms():
    listing = "Axioms:\nclassic : forall P : Prop, P \\/ ~ P\n"
    results = [ran(), ran(stderr=SUMMARY_CLEAN), ran(stdout=listing)]
    assert judge(results, frozenset({"classic"})).status is Status.VALID
    refused = judge(results, frozenset())
    assert (refused.status, refused.reason) == (Status.INVALID, "audit_axioms:classic")
    guarded = judge([ran(), ran(stderr=SUMMARY_CLEAN), ran(stdout="Axioms:\nloop is assumed to be guarded.\n")],
                    frozenset())
    assert guarded.reason == "audit_axioms:loop"
    assert judge(results[:2] + [ran(1, stderr="Error: t not found")], frozenset()).reason == "audit_compile_failed"


# -- the files and command lines -----------------------------------------------------

def test_files_and_commands():
    header = validate_header("Require Import Arith.")
    statement = validate_statement("Theorem t : 1 = 1.")
    body = validate_proof("Proof.\n- reflexivity.\nQed.")
    assert audit_source(header, statement, body) == "Require Import Arith.\nTheorem t : 1 = 1.\nProof.\n-\nreflexivity.\nQed.\n"
    assert query_source(header, "t") == ("Require Import Arith.\nRequire SgsAudit.Audited.\n"
                                         "Print Assumptions SgsAudit.Audited.t.\n")
    config = RocqConfig(coqc="/opt/coqc", coqchk="/opt/coqchk", extra_args=("-R", "/lib", "Lib", "-w", "none"))
    assert term_source(header, "t") == ("Require Import Arith.\nRequire SgsAudit.Audited.\nSet Printing All.\n"
                                        "Set Printing Depth 2147483647.\n"
                                        "Unset Printing Factorizable Match Patterns.\n"
                                        "Unset Printing Allow Match Default Clause.\nPrint SgsAudit.Audited.t.\n")
    compile_, check, query, term = commands(config)
    assert compile_ == ["/opt/coqc", "-q", "-native-compiler", "no", "-R", "/lib", "Lib", "-w", "none",
                        "-Q", ".", "SgsAudit", "Audited.v"]
    # coqchk gets the load paths only, and checks our module alone (the libraries are the census's)
    assert check == ["/opt/coqchk", "-o", "-R", "/lib", "Lib", "-Q", ".", "SgsAudit", "-norec", "SgsAudit.Audited"]
    assert query[-1] == "AssumptionsQuery.v" and term[-1] == "TermQuery.v"


LIBRARY_MAP = "fun (A B : Type) (f : forall _ : A, B) => fix map (l : list A) : list B := l"


@pytest.mark.parametrize("printed, axioms, allowed, library, reason", [
    ("t = fun n : nat => @eq_refl nat n\n : T", (), frozenset(), False, "ok"),
    # a fixpoint the proof built (Ltac2's unsafe API writes no `fix` in the text)
    ("t = (fix F (sz : nat) : nat := F sz) 0\n : T", (), frozenset(), False, "audit_known_bug:fixpoints"),
    ("t = (fix F (sz : nat) : nat := F sz) 0\n : T", (), frozenset({"fixpoints"}), False, "ok"),
    # an exact copy of a library body is the library's (what `unfold` leaves)
    ("t = (fix map (l : list nat) : list nat := l) x\n : T", (), frozenset(),
     True, "ok"),
    # a VM cast matters only where primitive integers are reachable
    ("t = (@eq_refl bool true <: T)\n : T", (), frozenset(), False, "ok"),
    ("t = (@eq_refl bool true <: T)\n : T", ("Coq.Numbers.Cyclic.Int63.PrimInt63.int",), frozenset(), False,
     "audit_known_bug:vm_reduction"),
])
def test_the_audit_judges_the_term_as_the_session_does(printed, axioms, allowed, library, reason):
    bodies = [tokens(LIBRARY_MAP)] if library else []
    assert judge_term(printed, axioms, allowed, bodies).reason == reason


def test_coqc_must_be_a_string():
    with pytest.raises(ValueError, match="coqc"):
        RocqConfig(coqc=["coqc"])


# -- against the real coqc and coqchk --------------------------------------------------

@pytest.fixture(scope="module")
def backend(require_rocq):
    require_binary("coqc")
    require_binary("coqchk")
    b = RocqBackend(RocqConfig(axiom_census=False, spare=False))
    yield b
    b.close()


def scratch_dirs() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "lean_env-rocq-audit-*")))


def direct(backend: RocqBackend, header: str, statement: str, proof: str, config: RocqConfig | None = None):
    """The audit on sentences that never went through the text checks: what
    it would see if those checks had a hole."""
    return audit_proof(config or backend.config, split_sentences(header), validate_statement(statement),
                       split_sentences(proof), 60)


@pytest.mark.rocq
def test_a_valid_proof_agrees(backend, tmp_path, monkeypatch):
    # A temporary directory of its own: another xdist worker's audits make scratch directories too.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = scratch_dirs()
    task = ProofTask("ok", "Require Import Arith Lia.", "Theorem t1 : forall n : nat, n + 1 = 1 + n.",
                     "Proof.\n  intros n.\n  - lia.\nQed.")
    assert backend.check_proof(task, 30).status is Status.VALID
    verdict = backend.audit(task, 60)
    assert (verdict.status, verdict.reason) == (Status.VALID, "ok"), verdict.messages
    assert verdict.worker == backend.worker and verdict.seconds > 0
    assert scratch_dirs() <= before   # the scratch directory is gone


@pytest.mark.rocq
@pytest.mark.parametrize("header, proof, reason", [
    ("Axiom cheat : False.", "Proof. destruct cheat. Qed.", "audit_axioms:Audited.cheat"),
    ("Unset Guard Checking.\nFixpoint loop (n : nat) : False := loop n.\nSet Guard Checking.",
     "Proof. destruct (loop 0). Qed.", "audit_axioms:Audited.loop"),
    ("", "Proof. Admitted.", "audit_axioms:Audited.t"),
    ("", "Proof. reflexivity. Qed.", "audit_compile_failed"),
])
def test_a_proof_the_session_would_wrongly_accept_disagrees(backend, header, proof, reason):
    found = direct(backend, header, "Theorem t : 1 = 2.", proof)
    assert (found.status, found.reason) == (Status.INVALID, reason), found.messages


@pytest.mark.rocq
def test_a_fixpoint_built_without_the_word_fix_is_refused_by_the_audit_too(backend):
    """rocq#20413's fixpoint made with Ltac2's unsafe term API: coqc and coqchk
    accept the proof of False (they share the guard checker); the term shows it."""
    case = next(c for c in tomllib.loads(ATTACKS.read_text())["case"]
                if c["reason"] == "known_bug:fixpoints" and "Constr.Unsafe" in c["proof"]
                and c["statement"] == "Theorem t : False.")
    found = direct(backend, case["header"], case["statement"], case["proof"])
    assert (found.status, found.reason) == (Status.INVALID, "audit_known_bug:fixpoints"), found.messages


@pytest.mark.rocq
def test_a_library_body_unfolded_into_the_proof_is_accepted_by_the_audit(backend):
    """`unfold Nat.testbit` and `cbv in H` put copies of library fixpoints in the term."""
    for header, statement, proof in [
            ("Require Import Arith.", "Theorem t : forall a : nat, Nat.testbit a 0 = Nat.odd a.",
             "Proof. intros a. unfold Nat.testbit. reflexivity. Qed."),
            ("", "Theorem t : forall x y : nat, x + 2 = y -> y = S (S x).",
             "Proof. intros x y H. cbv in H. subst y. induction x as [|x IH]. - reflexivity. "
             "- simpl. rewrite IH. reflexivity. Qed.")]:
        found = direct(backend, header, statement, proof)
        assert (found.status, found.reason) == (Status.VALID, "ok"), found.messages


@pytest.mark.rocq
def test_allowed_axioms_are_named_as_in_the_session(backend):
    header, statement, proof = "Require Import Classical.", "Theorem em : forall P, P \\/ ~ P.", "Proof. exact classic. Qed."
    refused = direct(backend, header, statement, proof)
    assert refused.reason == "audit_axioms:classic"
    allowed = direct(backend, header, statement, proof, RocqConfig(allowed_axioms=("classic",)))
    assert allowed.status is Status.VALID, allowed.messages


@pytest.mark.rocq
def test_text_the_checks_refuse_is_not_run(backend):
    verdict = backend.audit(ProofTask("x", "", "Theorem t : 1 = 2.", "Proof. Admitted."), 30)
    assert (verdict.status, verdict.reason) == (Status.INVALID, "audit_text_rejected")
    assert "banned:Admitted" in verdict.messages[0]


@pytest.mark.rocq
def test_missing_coqc_is_unavailable_and_a_tiny_budget_times_out(backend):
    task = ProofTask("ok", "", "Theorem t : True.", "Proof. exact I. Qed.")
    missing = RocqBackend(RocqConfig(coqc="/nonexistent/coqc", axiom_census=False, spare=False))
    try:
        verdict = missing.audit(task, 30)
    finally:
        missing.close()
    assert (verdict.status, verdict.reason) == (Status.SYSTEM_ERROR, "audit_unavailable")
    before = scratch_dirs()
    late = backend.audit(task, 0.001)
    assert (late.status, late.reason) == (Status.TIMEOUT, "audit_timeout")
    assert scratch_dirs() <= before
