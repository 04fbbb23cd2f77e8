"""The Rocq backend against the real coqtop: valid and invalid proofs, a
hostile catalogue, isolation between checks, headers, statements, the
tactic-level API, timeouts and crashes."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

from lean_env.rocq import RocqBackend, RocqConfig, RocqConfigError
from lean_env.rocq import backend as backend_module
from lean_env.rocq.checks import split_sentences
from lean_env.verdict import ProofTask, Status

HEADER = "Require Import Arith Lia List.\nImport ListNotations."


def task(statement: str, proof: str, header: str = HEADER) -> ProofTask:
    return ProofTask(id="t", header=header, statement=statement, proof=proof)


# These tests exercise the per-proof Print Assumptions audit (and, with the
# text checks bypassed, show it catches what they would miss); the axiom census
# that makes it unnecessary is tested in test_rocq_census.py.
@pytest.fixture(scope="module")
def backend(coqtop):
    b = RocqBackend(RocqConfig(coqtop=coqtop, timeout=60, axiom_census=False), worker="test")
    yield b
    b.close()


@pytest.fixture
def own_backend(coqtop):
    """A backend of its own, for tests that kill or replace sessions."""
    made: list[RocqBackend] = []

    def make(**options) -> RocqBackend:
        b = RocqBackend(RocqConfig(coqtop=coqtop, axiom_census=False, **options))
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by process ``pid`` and its descendants (a session's coqtop may run
    under a confinement prefix)."""
    total = 0.0
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return total
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def check(backend: RocqBackend, statement: str, proof: str, header: str = HEADER):
    return backend.check_proof(task(statement, proof, header), 60)


# -- valid proofs --------------------------------------------------------------

@pytest.mark.rocq
@pytest.mark.parametrize("statement, proof", [
    ("Theorem t : forall n m : nat, n + m = m + n.", "Proof. intros. lia. Qed."),
    ("Theorem t : forall a b : nat, (a + b) * (a + b) = a * a + 2 * a * b + b * b.", "Proof. intros. ring. Qed."),
    ("Theorem t : forall n : nat, n + 0 = n.",
     "Proof.\n  induction n as [|n IH]; simpl.\n  - reflexivity.\n  - rewrite IH. reflexivity.\nQed."),
    ("Theorem t : forall (A : Type) (l : list A), l ++ [] = l.",
     "Proof. intros A l. induction l as [|x xs IH]; simpl; [reflexivity | rewrite IH; reflexivity]. Qed."),
    ("Theorem t : forall P Q : Prop, P /\\ Q -> Q /\\ P.", "Proof. intuition. Qed."),
    ("Theorem t : forall P Q : Prop, P -> (P -> Q) -> Q.", "Proof. tauto. Qed."),
    ("Theorem t : forall (A : Type) (P Q : A -> Prop), (forall x, P x /\\ Q x) -> forall x, Q x.",
     "Proof. firstorder. Qed."),
    ("Lemma t : True /\\ True.", "Proof. split. 2: { exact I. } { exact I. } Qed."),
    ("Example t : True /\\ (True /\\ True).", "Proof. split.\n- exact I.\n- split.\n  + exact I.\n  + exact I.\nQed."),
    ("Theorem t : True.", 'Proof. idtac "Qed. Admitted.". (* Qed. *) exact I. Qed.'),
    ("Theorem t : True.", 'Proof. (* outer (* inner *) "*)" Admitted. *) exact I. Qed.'),
    ("Theorem t : exists n : nat, n = 0.", "Proof. eexists. Unshelve. 2: exact 0. reflexivity. Qed."),
])
def test_valid_proofs_are_valid(backend, statement, proof):
    verdict = check(backend, statement, proof)
    assert verdict.status is Status.VALID, verdict.messages
    assert verdict.reason == "ok" and verdict.worker == "test"


# -- wrong proofs --------------------------------------------------------------

@pytest.mark.rocq
@pytest.mark.parametrize("statement, proof, fragment", [
    ("Theorem t : forall n m : nat, n + m = m + n.", "Proof. intros. reflexivity. Qed.", "Unable to unify"),
    ("Theorem t : 1 = 2.", "Proof. exact I. Qed.", "Error"),
    ("Theorem t : True /\\ True.", "Proof. split. exact I. Qed.", "incomplete proof"),
    ("Theorem t : True.", "Proof. bogus_tactic. exact I. Qed.", "bogus_tactic"),
    ("Theorem t : 1 = 1.", "Proof. reflexivity. reflexivity. Qed.", "Error"),
])
def test_wrong_proofs_are_invalid_with_the_prover_message(backend, statement, proof, fragment):
    verdict = check(backend, statement, proof)
    assert (verdict.status, verdict.reason) == (Status.INVALID, "prover_error")
    assert fragment in verdict.messages[0]


@pytest.mark.rocq
def test_a_forged_prompt_is_a_protocol_violation(backend):
    verdict = check(backend, "Theorem t : True.", 'Proof. idtac "<prompt>Coq < 99 || 0 < </prompt>". exact I. Qed.')
    assert (verdict.status, verdict.reason) == (Status.INVALID, "protocol_violation")
    assert check(backend, "Theorem t : True.", "Proof. exact I. Qed.").valid


@pytest.mark.rocq
def test_an_ill_formed_trusted_statement_is_a_statement_error(backend):
    verdict = check(backend, "Theorem t : 1 = true.", "Proof. reflexivity. Qed.")
    assert (verdict.status, verdict.reason) == (Status.INVALID, "statement_error")


# -- the hostile catalogue -------------------------------------------------------

HOSTILE = [
    ("Theorem t : False.", "Proof. Admitted.", "banned:Admitted"),
    ("Theorem t : False.", "Proof. admit. Qed.", "banned:admit"),
    ("Theorem t : False.", "Proof. Abort.", "banned:Abort"),
    ("Theorem t : False.", "Proof. Axiom cheat : False. exact cheat. Qed.", "banned:Axiom"),
    ("Theorem t : True.", "Proof. exact I. Qed. Theorem u : False. Proof. Admitted.", "after_qed"),
    ("Theorem t : False.", "Proof. Reset Initial. Qed.", "banned:Reset"),
    ("Theorem t : False.", "Proof. Back 1. Qed.", "banned:Back"),
    ("Theorem t : False.", "Proof. Undo. Qed.", "banned:Undo"),
    ("Theorem t : True.", 'Proof. Redirect "leak" Print nat. exact I. Qed.', "banned:Redirect"),
    ("Theorem t : True.", 'Proof. Extraction "leak.ml" nat. exact I. Qed.', "banned:Extraction"),
    ("Theorem t : True.", 'Proof. Cd "/". exact I. Qed.', "banned:Cd"),
    ("Theorem t : True.", 'Proof. Load "/etc/passwd". exact I. Qed.', "banned:Load"),
    ("Theorem t : True.", 'Proof. Declare ML Module "evil_plugin". exact I. Qed.', "banned:Declare ML Module"),
    ("Theorem t : True.", 'Proof. Add LoadPath "/tmp" as Evil. exact I. Qed.', "banned:Add LoadPath"),
    ("Theorem t : True.", "Proof. Drop. exact I. Qed.", "banned:Drop"),
    ("Theorem t : False.", "Proof. Unset Guard Checking. exact ((fix f (n : nat) : False := f n) 0). Qed.",
     "banned:Unset Guard Checking"),
    ("Theorem t : True.", "Proof. exact I. Qed. Check I.", "after_qed"),
    ("Theorem t : True.", "Proof. exact I. Qed. junk", "syntax:unterminated"),
    ("Theorem t : 1 = 2.", "Proof. Abort. Theorem t : True. Proof. exact I. Qed.", "banned:Abort"),
    ("Theorem t : True.", "Proof. exact I. Qed. Goal False. Admitted.", "after_qed"),
    ("Theorem t : True.", "Proof. exact I. Save u.", "banned:Save"),
    ("Theorem t : forall P, P \\/ ~ P.", "Proof. Require Import Classical. exact classic. Qed.", "banned:Require"),
    ("Theorem t : False.", "Proof. (* Qed. *) Admitted.", "banned:Admitted"),
    ("Theorem t : False.", 'Proof. idtac "Qed.". Admitted.', "banned:Admitted"),
    ("Theorem t : True.", "Proof. Time exact I. Qed.", "banned:Time"),
    ("Theorem t : True.", "Proof. Fail exact I. exact I. Qed.", "banned:Fail"),
    ("Theorem t : True.", "Proof. Set Printing All. exact I. Qed.", "banned:Set"),
    ("Theorem t : True.", "Proof. Ltac t := exact I. t. Qed.", "banned:Ltac"),
    ("Theorem t : True.", 'Proof. Print Universes "leak.dot". exact I. Qed.', "banned:Print Universes"),
    ("Theorem t : 1 = 2.", "Proof. exact_no_check (eq_refl 1). Qed.", "banned:exact_no_check"),
    ("Theorem t : True.", "Proof I. Qed.", "banned:Proof_variant"),
    ("Theorem t : True.", "exact I. Qed.", "proof_start"),
    ("Theorem t : True.", "", "empty"),
    ("Theorem t : True.", "Proof. exact I..Qed.", "syntax:ellipsis"),
]


@pytest.mark.rocq
@pytest.mark.parametrize("statement, proof, expected", HOSTILE)
def test_hostile_proofs_are_invalid_with_a_specific_reason(backend, statement, proof, expected):
    verdict = check(backend, statement, proof)
    assert (verdict.status, verdict.reason) == (Status.INVALID, expected)
    assert verdict.messages


@pytest.mark.rocq
@pytest.mark.parametrize("field, value, expected", [
    ("proof", "Proof. exact I.\x00 Qed.", "bad_character"),
    ("proof", "Proof. exact I. \x1b[2J Qed.", "bad_character"),
    ("proof", "Proof. exact \ud800I. Qed.", "bad_character"),
    ("proof", "Proof. " + "idtac. " * 750_000 + "Qed.", "too_long"),
    ("proof", None, "bad_input"),
    ("statement", "Theorem t : True\udfff.", "bad_character"),
    ("statement", 12, "bad_input"),
    ("header", "Require Import Arith.\x00", "bad_character"),
])
def test_garbage_input_is_invalid_without_a_crash(backend, field, value, expected):
    fields = {"id": "g", "header": HEADER, "statement": "Theorem t : True.", "proof": "Proof. exact I. Qed."}
    fields[field] = value
    verdict = backend.check_proof(ProofTask(**fields), 60)
    assert (verdict.status, verdict.reason) == (Status.INVALID, expected)


@pytest.mark.rocq
def test_coqtop_level_checks_reject_what_the_text_checks_would_let_through(backend, monkeypatch):
    """Defence in depth: with the text checks reduced to sentence splitting,
    the session-level checks (open proofs, Print Assumptions) still refuse."""
    monkeypatch.setattr(backend_module, "validate_proof", lambda text, **_: split_sentences(text))
    cases = [
        ("Theorem t : True.", "Proof. Admitted.", "axioms"),
        ("Theorem t : False.", "Proof. admit. Qed.", "prover_error"),
        ("Theorem t : False.", "Proof. Axiom cheat : False. exact cheat. Qed.", "axioms"),
        ("Theorem t : False.", "Proof. Unset Guard Checking. exact ((fix f (n : nat) : False := f n) 0). Qed.",
         "axioms"),
        ("Theorem t : 1 = 2.", "Proof. Abort. Theorem t : True. Proof. exact I. Qed.", "protocol_violation"),
        ("Theorem t : True.", "Proof. exact I. Qed. Theorem u : True. Proof. exact I. Qed.", "protocol_violation"),
        ("Theorem t : False.", "Proof. BackTo 1. Qed.", "protocol_violation"),
    ]
    for statement, proof, expected in cases:
        verdict = check(backend, statement, proof)
        assert (verdict.status, verdict.reason) == (Status.INVALID, expected), (proof, verdict)
    # the guard checking flag did not survive the check that unset it
    verdict = check(backend, "Theorem t : False.", "Proof. exact ((fix f (n : nat) : False := f n) 0). Qed.")
    assert (verdict.status, verdict.reason) == (Status.INVALID, "prover_error")


# -- isolation -----------------------------------------------------------------

@pytest.mark.rocq
def test_proofs_never_see_each_other(backend):
    assert check(backend, "Theorem leak : 1 = 1.", "Proof. assert (H : 2 = 2) by reflexivity. reflexivity. Qed.").valid
    verdict = check(backend, "Theorem uses_leak : 1 = 1.", "Proof. exact leak. Qed.")
    assert verdict.reason == "prover_error" and "leak" in verdict.messages[0]


@pytest.mark.rocq
def test_many_sequential_checks_on_one_session_stay_correct(backend):
    check(backend, "Theorem t : True.", "Proof. exact I. Qed.")
    pid = backend.pid
    for i in range(30):
        good = check(backend, f"Theorem t : {i} + 1 = S {i}.", "Proof. lia. Qed.")
        bad = check(backend, f"Theorem t : {i} + 1 = {i}.", "Proof. lia. Qed.")
        assert good.valid, good.messages
        assert (bad.status, bad.reason) == (Status.INVALID, "prover_error")
    assert backend.pid == pid


@pytest.mark.rocq
def test_an_unknown_lemma_is_a_prover_error_and_keeps_the_session(backend):
    """After ``apply`` of a lemma that does not exist, Coq 8.16 answers the barrier with
    "The variable ..." instead of "The reference ...": still the same session, and the
    verdict names the prover's error (a fresh coqtop would cost a second or more)."""
    check(backend, "Theorem t : True.", "Proof. exact I. Qed.")
    pid = backend.pid
    for _ in range(3):
        verdict = check(backend, "Theorem t : forall n : nat, n * 1 = n.", "Proof. intros n. apply Nat.mul_r. lia. Qed.")
        assert (verdict.status, verdict.reason) == (Status.INVALID, "prover_error"), verdict.messages
        assert "Nat.mul_r" in verdict.messages[0]
    assert check(backend, "Theorem t : forall n : nat, n * 1 = n.", "Proof. intros n. lia. Qed.").valid
    assert backend.pid == pid


@pytest.mark.rocq
def test_switching_headers_unloads_the_previous_one(backend):
    statement, proof = "Theorem t : forall P : Prop, P \\/ ~ P.", "Proof. exact classic. Qed."
    classical = check(backend, statement, proof, header="Require Import Classical.")
    assert (classical.status, classical.reason) == (Status.INVALID, "axioms")
    assert "classic" in classical.messages[0]
    plain = check(backend, statement, proof)
    assert plain.reason == "prover_error" and "classic" in plain.messages[0]
    assert check(backend, "Theorem t : True.", "Proof. exact I. Qed.", header="").valid
    assert check(backend, "Theorem t : 1 + 1 = 2.", "Proof. lia. Qed.", header="").reason == "prover_error"


@pytest.mark.rocq
def test_allowed_axioms_are_accepted_and_change_the_version(backend, own_backend):
    permissive = own_backend(allowed_axioms=["classic"])
    verdict = permissive.check_proof(task("Theorem t : forall P : Prop, P \\/ ~ P.", "Proof. exact classic. Qed.",
                                          header="Require Import Classical."), 60)
    assert verdict.valid, verdict.messages
    assert permissive.version != backend.version and backend.version.startswith("rocq-8.16")


@pytest.mark.rocq
@pytest.mark.parametrize("header, expected", [
    ("Require Import NoSuchLibraryAnywhere.", "header_error"),
    ("Axiom cheat : False.", "header_rejected"),
    ("Require Import Arith.\nUnset Guard Checking.", "header_rejected"),
])
def test_bad_headers_are_invalid(backend, header, expected):
    verdict = check(backend, "Theorem t : True.", "Proof. exact I. Qed.", header=header)
    assert (verdict.status, verdict.reason) == (Status.INVALID, expected)


# -- statements ----------------------------------------------------------------

@pytest.mark.rocq
@pytest.mark.parametrize("statement, expected", [
    ("Theorem conj1 : forall n : nat, n + 0 = n.", "ok"),
    ("Lemma conj2 (l : list nat) : rev (rev l) = l.", "ok"),
    ("Theorem conj3 : nat.", "not_a_proposition"),
    ("Theorem conj4 : 1 = true.", "statement_error"),
    ("Theorem conj5 : no_such_thing = 0.", "statement_error"),
    ("Theorem conj6 : True := I.", "statement_error"),
    ("Theorem a : True with b : True.", "statement_shape"),
    ("Theorem a : True. Theorem b : True.", "statement_shape"),
    ("Definition d : nat.", "statement_shape"),
    ("Theorem t : True. Admitted.", "statement_shape"),
])
def test_check_statement(backend, statement, expected):
    verdict = backend.check_statement(HEADER, statement, 60)
    assert verdict.reason == expected, verdict.messages
    assert verdict.valid == (expected == "ok")


@pytest.mark.rocq
def test_an_admitted_statement_does_not_survive_its_check(backend):
    assert backend.check_statement(HEADER, "Theorem admitted_once : False.", 60).valid
    verdict = check(backend, "Theorem t : False.", "Proof. exact admitted_once. Qed.")
    assert verdict.reason == "prover_error"


# -- tactic-level API -----------------------------------------------------------

@pytest.mark.rocq
def test_tactic_steps_build_a_verified_proof(backend):
    start = backend.start_proof(HEADER, "Theorem t : forall n : nat, n + 0 = n /\\ True.")
    assert start.kind == "goals" and "n + 0 = n" in start.goals
    step = backend.run_tactic("intros n. split.")
    assert step.kind == "goals" and "2 goals" in step.goals
    wrong = backend.run_tactic("- exact I. - lia.")
    assert wrong.kind == "error" and wrong.goals == step.goals      # the step was undone
    refused = backend.run_tactic("Admitted.")
    assert refused.kind == "error" and "Admitted" in refused.messages[0]
    assert backend.run_tactic("- lia.").kind == "goals"
    done = backend.run_tactic("- exact I.")
    assert done.kind == "finished" and done.verdict is not None and done.verdict.valid
    with pytest.raises(RuntimeError):
        backend.run_tactic("idtac.")


@pytest.mark.rocq
def test_tactic_api_reports_a_statement_that_cannot_open(backend):
    result = backend.start_proof(HEADER, "Theorem t : 1 = true.")
    assert result.kind == "failed" and result.verdict is not None
    assert result.verdict.reason == "statement_error"


@pytest.mark.rocq
def test_a_new_check_abandons_an_open_tactic_proof(backend):
    assert backend.start_proof(HEADER, "Theorem t : True.").kind == "goals"
    assert check(backend, "Theorem u : True.", "Proof. exact I. Qed.").valid
    with pytest.raises(RuntimeError):
        backend.run_tactic("exact I.")


# -- timeouts and crashes --------------------------------------------------------

HANG = ("Theorem t : True.", "Proof. do 1000000000 idtac. exact I. Qed.")


@pytest.mark.rocq
@pytest.mark.slow
def test_a_hanging_proof_times_out_and_the_session_is_replaced(own_backend):
    b = own_backend()
    assert check(b, "Theorem t : True.", "Proof. exact I. Qed.").valid
    pid = b.pid
    verdict = b.check_proof(task(*HANG), 2)
    assert (verdict.status, verdict.reason) == (Status.TIMEOUT, "timeout")
    assert check(b, "Theorem t : 2 + 2 = 4.", "Proof. lia. Qed.").valid
    assert b.pid != pid


@pytest.mark.rocq
@pytest.mark.slow
def test_a_hanging_tactic_fails_the_tactic_proof_with_a_timeout(own_backend):
    b = own_backend()
    assert b.start_proof(HEADER, "Theorem t : True.").kind == "goals"
    result = b.run_tactic("do 1000000000 idtac.", timeout=2)
    assert result.kind == "failed" and result.verdict is not None and result.verdict.status is Status.TIMEOUT


@pytest.mark.rocq
@pytest.mark.slow
def test_a_session_killed_mid_check_is_retried_on_a_fresh_one(own_backend):
    b = own_backend()
    assert check(b, "Theorem t : True.", "Proof. exact I. Qed.").valid   # header loaded, spare started
    pid = b.pid
    verdicts = []
    # A few seconds of work (an idtac takes about 0.5 us here), killed as soon as the session is seen
    # busy on it rather than after a fixed sleep: the fresh session runs it again in full, so sixty
    # million of them (a kill after 1 s) cost about 30 CPU-seconds.
    slow = task("Theorem t : True.", "Proof. do 5000000 idtac. exact I. Qed.")
    idle = cpu_seconds(pid)
    worker = threading.Thread(target=lambda: verdicts.append(b.check_proof(slow, 300)))
    worker.start()
    deadline = time.monotonic() + 120
    while cpu_seconds(pid) < idle + 0.1:
        assert worker.is_alive() and time.monotonic() < deadline, "the slow check never kept the session busy"
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    worker.join()
    assert verdicts[0].status is Status.VALID, verdicts[0]
    assert b.pid not in (None, pid)


@pytest.mark.rocq
def test_a_session_killed_between_checks_is_replaced(own_backend):
    b = own_backend()
    assert check(b, "Theorem t : True.", "Proof. exact I. Qed.").valid
    pid = b.pid
    os.kill(pid, signal.SIGKILL)
    assert check(b, "Theorem t : True.", "Proof. exact I. Qed.").valid
    assert b.pid not in (None, pid)


@pytest.mark.rocq
def test_a_flood_of_output_is_invalid_and_the_session_replaced(own_backend):
    b = own_backend(max_output_bytes=20_000)
    verdict = check(b, "Theorem t : True.", 'Proof. do 3000 idtac "flooding the output". exact I. Qed.')
    assert (verdict.status, verdict.reason) == (Status.INVALID, "output_too_large")
    assert check(b, "Theorem t : True.", "Proof. exact I. Qed.").valid


@pytest.mark.rocq
def test_sessions_are_recycled_after_max_checks(own_backend):
    b = own_backend(max_checks=2, spare=False)
    check(b, "Theorem t : True.", "Proof. exact I. Qed.")
    pid = b.pid
    assert check(b, "Theorem t : True.", "Proof. exact I. Qed.").valid
    assert b.pid is None                       # worn out after two checks
    assert check(b, "Theorem t : True.", "Proof. exact I. Qed.").valid
    assert b.pid not in (None, pid)


@pytest.mark.rocq
def test_a_header_that_does_not_load_in_time_is_a_system_error(own_backend):
    b = own_backend(header_timeout=0.001)
    verdict = check(b, "Theorem t : 1 + 1 = 2.", "Proof. lia. Qed.")
    assert (verdict.status, verdict.reason) == (Status.SYSTEM_ERROR, "header_timeout")


def fake_coqtop(tmp_path, behaviour: str) -> str:
    """A coqtop stand-in that reports a version and then ``behaviour``."""
    script = tmp_path / "coqtop"
    script.write_text('#!/bin/sh\nif [ "$1" = "-v" ]; then echo "The Coq Proof Assistant, version 8.16.1"; '
                      f"exit 0; fi\n{behaviour}\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("behaviour", ["exit 3", "exec sleep 60"])
def test_a_coqtop_that_never_works_gives_a_system_error(tmp_path, behaviour):
    b = RocqBackend(RocqConfig(coqtop=fake_coqtop(tmp_path, behaviour), start_timeout=1, spare=False))
    try:
        verdict = b.check_proof(task("Theorem t : True.", "Proof. exact I. Qed."), 5)
        assert (verdict.status, verdict.reason) == (Status.SYSTEM_ERROR, "crash")
        assert b.check_statement(HEADER, "Theorem t : True.", 5).status is Status.SYSTEM_ERROR
    finally:
        b.close()


def test_a_missing_coqtop_is_a_configuration_error(tmp_path):
    with pytest.raises(RocqConfigError):
        RocqBackend(RocqConfig(coqtop=str(tmp_path / "no-such-coqtop")))


@pytest.mark.parametrize("options", [{"timeout": 0}, {"max_checks": -1}, {"allowed_axioms": "classic"}])
def test_nonsensical_settings_are_configuration_errors(options):
    with pytest.raises(RocqConfigError):
        RocqConfig(**options)


def test_lists_from_a_config_file_become_tuples():
    config = RocqConfig(extra_args=["-w", "-all"], allowed_axioms=["classic"])
    assert config.extra_args == ("-w", "-all") and config.allowed_axioms == ("classic",)
