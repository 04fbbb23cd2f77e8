"""Tactic libraries against real Rocq (lean_env.rocq.tactic_libraries):
CoqHammer's ``sauto`` family serves targets whose header never loads it,
``hammer`` and the ``best`` family stay refused, a library that changes what
a statement means is caught (a scope it opens, a notation it rebinds, a
coercion it adds, a notation only it defines), the audit agrees, and headers
loading each Debian library the corpus uses (stdpp, Coquelicot, Flocq,
ExtLib, MathClasses, Bignums) work with CoqHammer on top, their axioms
caught unless allowed.  Without coqtop: ``tests/unit/lean_env/test_rocq_tactic_libraries.py``."""

from __future__ import annotations

import pytest

from lean_env.rocq import RocqBackend, RocqConfig
from lean_env.rocq.tactic_libraries import CHANGED
from lean_env.verdict import ProofTask, Status

pytestmark = pytest.mark.rocq

HAMMER = "From Hammer Require Import Tactics."
ARITH = "Require Import Arith."
#: the axioms of the standard library's real numbers, as Print Assumptions names them under Coquelicot/Flocq
REALS_AXIOMS = ("ClassicalDedekindReals.sig_forall_dec", "FunctionalExtensionality.functional_extensionality_dep")


def task(header: str, statement: str, proof: str) -> ProofTask:
    return ProofTask(id="t", header=header, statement=statement, proof=proof)


def outcome(backend: RocqBackend, header: str, statement: str, proof: str) -> tuple[Status, str]:
    verdict = backend.check_proof(task(header, statement, proof), 120)
    return verdict.status, verdict.reason


@pytest.fixture(scope="module")
def backends(coqtop):
    made: dict[tuple, RocqBackend] = {}

    def get(*libraries: str, allowed_axioms: tuple[str, ...] = ()) -> RocqBackend:
        key = (libraries, allowed_axioms)
        if key not in made:
            made[key] = RocqBackend(RocqConfig(coqtop=coqtop, timeout=120, spare=False, axiom_census=False,
                                               tactic_libraries=libraries, allowed_axioms=allowed_axioms))
        return made[key]

    yield get
    for backend in made.values():
        backend.close()


SAUTO = [
    ("Theorem t (n : nat) : n + 0 = n.", "Proof. sauto. Qed."),
    ("Theorem t (n m : nat) : n + m = m + n.", "Proof. hauto use: Nat.add_comm. Qed."),
    ("Theorem t (P Q : Prop) : P /\\ Q -> Q /\\ P.", "Proof. qauto. Qed."),
    ("Theorem t (A : Type) (x y : A) (f : A -> A) : x = y -> f x = f y.", "Proof. sauto. Qed."),
    # maximal implicit binders: the comparison takes the types of @copy, not of copy
    ("Theorem t {A : Type} {x y : A} (f : A -> A) : x = y -> f x = f y.", "Proof. sauto. Qed."),
]


@pytest.mark.parametrize(("statement", "proof"), SAUTO)
def test_sauto_proves_targets_whose_header_never_loads_hammer(backends, statement, proof):
    assert outcome(backends(HAMMER), ARITH, statement, proof) == (Status.VALID, "ok")
    # without the setting the tactic does not exist
    assert outcome(backends(), ARITH, statement, proof) == (Status.INVALID, "prover_error")


@pytest.mark.parametrize("proof", ["Proof. hammer. Qed.", "Proof. best. Qed.", "Proof. sauto; hammer. Qed.",
                                   "Proof. predict 8. Qed."])
def test_tactics_that_start_processes_stay_refused_under_the_libraries(backends, proof):
    status, reason = outcome(backends(HAMMER), ARITH, "Theorem t (n : nat) : n + 0 = n.", proof)
    assert (status, reason) == (Status.INVALID, "banned:hammer")


def test_the_statement_api_and_the_tactic_api_use_the_libraries(backends):
    backend = backends(HAMMER)
    assert backend.check_statement(ARITH, "Theorem c (n : nat) : n * 1 = n.").valid
    opened = backend.start_proof(ARITH, "Theorem s (n : nat) : 0 + n = n.")
    assert opened.kind == "goals"
    finished = backend.run_tactic("sauto.")
    assert finished.kind == "finished" and finished.verdict.valid


#: (library, header, statement): the library changes what the statement means
CHANGES = [
    # a scope the library opens: 1 + 1 = 2 becomes a statement about rationals
    ("From Coq Require Import QArith.", ARITH, "Theorem t : 1 + 1 = 2."),
    # ... and variables of type nat no longer fit it (elaborates only without the library)
    ("From Coq Require Import QArith.", ARITH, "Theorem t (n : nat) : n + 0 = n."),
    # a notation the library rebinds: + in nat_scope becomes ssrnat's addn
    ("From mathcomp Require Import ssreflect ssrbool ssrnat.", "", "Theorem t (n m : nat) : n + m = m + n."),
    # a coercion the library adds (is_true : bool >-> Sortclass)
    ("From mathcomp Require Import ssreflect ssrbool.", "", "Theorem t (b : bool) : b -> b."),
    # notations only the library brings (stdpp's base exports Coq.Unicode.Utf8)
    ("From stdpp Require Import base.", "", "Theorem t (P Q : Prop) : P ∧ Q → Q ∧ P."),
]


@pytest.mark.parametrize(("library", "header", "statement"), CHANGES)
def test_a_library_that_changes_the_statement_is_caught(backends, library, header, statement):
    backend = backends(library)
    assert outcome(backend, header, statement, "Proof. auto. Qed.") == (Status.INVALID, CHANGED)
    verdict = backend.check_statement(header, statement)
    assert (verdict.status, verdict.reason) == (Status.INVALID, CHANGED)
    assert backend.start_proof(header, statement).verdict.reason == CHANGED


def test_statements_the_libraries_leave_alone_are_checked_as_usual(backends):
    backend = backends("From Coq Require Import QArith.")
    assert outcome(backend, ARITH, "Theorem t (P : Prop) : P -> P.", "Proof. auto. Qed.") == (Status.VALID, "ok")
    assert outcome(backend, ARITH, "Theorem t (P : Prop) : P -> P.", "Proof. exact I. Qed.") == \
        (Status.INVALID, "prover_error")
    # a statement that elaborates with neither is the statement's own error
    assert outcome(backend, ARITH, "Theorem t : undefined_name = 0.", "Proof. auto. Qed.") == \
        (Status.INVALID, "statement_error")


def test_the_audit_compares_the_statement_too(backends):
    good = backends(HAMMER).audit(task(ARITH, "Theorem t (n : nat) : n + 0 = n.", "Proof. sauto. Qed."), 120)
    assert (good.status, good.reason) == (Status.VALID, "ok")
    changed = backends("From Coq Require Import QArith.").audit(
        task(ARITH, "Theorem t : 1 + 1 = 2.", "Proof. reflexivity. Qed."), 120)
    assert (changed.status, changed.reason) == (Status.INVALID, f"audit_{CHANGED}")


#: (header, a statement and a proof that uses the library, the axioms it depends on: none, the standard
#: library's real numbers' (allowed, it is valid) or the primitive integers' (many: only the refusal is checked))
LIBRARIES = [
    ("From stdpp Require Import base list.", "Theorem t (l : list nat) : l ++ [] = l.",
     "Proof. apply app_nil_r. Qed.", ()),
    ("From Coquelicot Require Import Coquelicot.", "Theorem t (x y : Rbar) : Rbar_plus x y = Rbar_plus y x.",
     "Proof. apply Rbar_plus_comm. Qed.", REALS_AXIOMS),
    ("From Coq Require Import Reals. From Flocq Require Import Core.",
     "Theorem t (x y : R) : (x < y)%R -> Rcompare x y = Lt.", "Proof. apply Rcompare_Lt. Qed.", REALS_AXIOMS),
    ("From ExtLib Require Import Structures.Monad.", "Theorem t (n : nat) : n = n.", "Proof. sauto. Qed.", ()),
    ("From MathClasses Require Import interfaces.abstract_algebra.", "Theorem t (P : Prop) : P -> P.",
     "Proof. sauto. Qed.", ()),
    ("From Bignums Require Import BigZ.", "Theorem t (x y : BigZ.t) : BigZ.eq (BigZ.add x y) (BigZ.add y x).",
     "Proof. apply BigZ.add_comm. Qed.", ("Uint63.tail0_spec", "...")),
]


@pytest.mark.slow
@pytest.mark.parametrize(("header", "statement", "proof", "axioms"), LIBRARIES,
                         ids=[h.split()[-3] for h, *_ in LIBRARIES])
def test_headers_loading_each_corpus_library_with_hammer_on_top(backends, header, statement, proof, axioms):
    backend = backends(HAMMER)
    assert outcome(backend, header, "Theorem w : True.", "Proof. sauto. Qed.") == (Status.VALID, "ok")
    if not axioms:
        assert outcome(backend, header, statement, proof) == (Status.VALID, "ok")
        return
    assert outcome(backend, header, statement, proof) == (Status.INVALID, "axioms")
    if "..." not in axioms:
        assert outcome(backends(HAMMER, allowed_axioms=axioms), header, statement, proof) == (Status.VALID, "ok")
