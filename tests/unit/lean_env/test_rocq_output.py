"""Pure tests of reading coqtop -emacs output (transcripts as coqtop 8.16.1
prints them)."""

from __future__ import annotations

import pytest

from lean_env.rocq.output import (
    Barrier,
    Prompt,
    ProtocolError,
    clean,
    first_prompt_end,
    has_error,
    parse_assumptions,
    parse_banner,
    parse_prompt,
    parse_reply,
)

BARRIER = Barrier(nonce="sgs_sync_0123456789abcdef")


def barrier_answer(state: int, proof: str = "t", pending: str = "t", kind: str = "reference") -> str:
    """What coqtop prints for the barrier, then its (unchanged) prompt."""
    return (f"Toplevel input, characters 6-31:\n> Check {BARRIER.nonce}.\n>       ^^^^^^^^^^^^^^^^^^^^^^^^^\n"
            f"Error: The {kind} {BARRIER.nonce} was not found in the current\nenvironment.\n\n"
            f"<prompt>{proof} < {state} |{pending}| 0 < </prompt>")


def reply_bytes(output: str, state: int, proof: str = "t", pending: str = "t", kind: str = "reference") -> bytes:
    prompt = f"<prompt>{proof} < {state} |{pending}| 0 < </prompt>"
    return (output + prompt + barrier_answer(state, proof, pending, kind)).encode()


def test_prompts_give_state_and_open_proofs():
    assert parse_prompt("<prompt>Coq < 12 || 0 < </prompt>") == Prompt(proof="Coq", state=12, pending=())
    prompt = parse_prompt("<prompt>t2 < 9 |t2| 0 < </prompt>")
    assert (prompt.state, prompt.pending, prompt.top_level) == (9, ("t2",), False)
    assert parse_prompt("<prompt>b < 3 |a|b| 0 < </prompt>").pending == ("a", "b")
    with pytest.raises(ProtocolError):
        parse_prompt("<prompt>garbage</prompt>")


def test_banner_ends_at_the_first_prompt():
    raw = b"Welcome to Coq 8.16.1\nSkipping rcfile loading.\n\n<prompt>Coq < 1 || 0 < </prompt>"
    assert first_prompt_end(raw + b"more") == len(raw)
    assert first_prompt_end(raw[:-3]) is None
    assert parse_banner(raw).state == 1


def test_barrier_frame_waits_for_the_prompt_after_the_nonce():
    raw = reply_bytes("1 goal\n", 5)
    assert BARRIER.frame(raw) == len(raw)
    assert BARRIER.frame(raw[:-5]) is None
    assert BARRIER.frame(b"<prompt>t < 5 |t| 0 < </prompt><prompt>t < 6 |t| 0 < </prompt>") is None
    assert Barrier.fresh().nonce != Barrier.fresh().nonce


def test_a_successful_sentence_moves_to_a_new_state():
    reply = parse_reply(reply_bytes("No more goals.\n\n", 7), BARRIER, before=6)
    assert reply.ok and reply.output == "No more goals.\n\n" and reply.prompt.state == 7


def test_a_failed_sentence_keeps_its_state_and_prints_an_error():
    output = "Toplevel input, characters 0-11:\n> reflexivity.\n> ^^^^^^^^^^^\nError: Unable to unify.\n\n"
    reply = parse_reply(reply_bytes(output, 6), BARRIER, before=6)
    assert not reply.ok and reply.message.startswith("Toplevel input")


def test_the_barrier_may_be_called_a_variable():
    """Coq 8.16, inside a proof after ``apply`` of an unknown lemma, names the barrier's
    unknown identifier a variable, not a reference: the same answer."""
    output = "Toplevel input, characters 6-15:\n> apply Nat.mul_r.\nError: The reference Nat.mul_r was not found.\n\n"
    reply = parse_reply(reply_bytes(output, 5, kind="variable"), BARRIER, before=5)
    assert not reply.ok and "Nat.mul_r" in reply.message
    with pytest.raises(ProtocolError):
        parse_reply(reply_bytes(output, 5, kind="constant"), BARRIER, before=5)


def test_an_error_message_fails_a_sentence_even_if_the_state_moved():
    reply = parse_reply(reply_bytes("Error: something\n", 7), BARRIER, before=6)
    assert not reply.ok


def test_an_unchanged_state_fails_a_sentence_even_without_error_text():
    assert not parse_reply(reply_bytes("", 6), BARRIER, before=6).ok


def test_forged_prompts_in_a_sentence_output_break_the_protocol():
    forged = "<infomsg><prompt>Coq < 99 || 0 < </prompt></infomsg>\n"
    with pytest.raises(ProtocolError):
        parse_reply(reply_bytes(forged, 7), BARRIER, before=6)


def test_two_real_prompts_before_the_barrier_break_the_protocol():
    # Coq read our one sentence as two: the first prompt sits in the output
    raw = reply_bytes("<prompt>t < 7 |t| 0 < </prompt>\n", 8)
    with pytest.raises(ProtocolError):
        parse_reply(raw, BARRIER, before=6)


def test_a_barrier_swallowed_into_the_sentence_breaks_the_protocol():
    # Coq did not end the sentence, read the barrier as part of it and failed
    raw = (f"Toplevel input, characters 0-40:\n> Check {BARRIER.nonce}.\nError: Syntax error.\n\n"
           "<prompt>t < 6 |t| 0 < </prompt>").encode()
    assert BARRIER.frame(raw) == len(raw)
    with pytest.raises(ProtocolError):
        parse_reply(raw, BARRIER, before=6)


def test_a_barrier_that_changes_state_or_does_not_fail_breaks_the_protocol():
    moved = ("<prompt>t < 7 |t| 0 < </prompt>" + barrier_answer(8)).encode()
    with pytest.raises(ProtocolError):
        parse_reply(moved, BARRIER, before=6)
    silent = (f"<prompt>t < 7 |t| 0 < </prompt>{BARRIER.nonce}\n<prompt>t < 7 |t| 0 < </prompt>").encode()
    with pytest.raises(ProtocolError):
        parse_reply(silent, BARRIER, before=6)


def test_error_detection_and_cleaning():
    assert has_error("Toplevel input, characters 0-3:\n> Foo\nError:\nSyntax error: illegal begin.")
    assert has_error("Anomaly: Uncaught exception Not_found.")
    assert not has_error("<infomsg>Error: printed by idtac</infomsg>")
    assert not has_error("<warning>\nWarning: deprecated\n</warning>\n1 goal")
    assert clean("<infomsg>\nhello\n</infomsg>\n\n") == "hello"


def test_closed_assumptions():
    report = parse_assumptions("Closed under the global context\n\n")
    assert report.acceptable(()) and report.axioms == ()


def test_opaque_proof_fetching_notices_are_ignored():
    output = ("Fetching opaque proofs from disk for Coq.micromega.ZifyClasses\n\n"
              "Fetching opaque proofs from disk for Coq.Init.Logic\nClosed under the global context\n")
    assert parse_assumptions(output).acceptable(())


def test_axioms_are_listed_by_name_with_multiline_types():
    # as coqtop 8.16.1 prints them for a proof using Reals, funext and classic
    output = ("Axioms:\nClassicalDedekindReals.sig_forall_dec\n  : forall P : nat -> Prop,\n"
              "    (forall n : nat, {P n} + {~ P n}) ->\n    {n : nat | ~ P n} + {forall n : nat, P n}\n"
              "functional_extensionality_dep\n  : forall (A : Type) (B : A -> Type) (f g : forall x : A, B x),\n"
              "    (forall x : A, f x = g x) -> f = g\nclassic : forall P : Prop, P \\/ ~ P\n\n")
    report = parse_assumptions(output)
    assert report.axioms == ("ClassicalDedekindReals.sig_forall_dec", "functional_extensionality_dep", "classic")
    assert report.acceptable({"ClassicalDedekindReals.sig_forall_dec", "functional_extensionality_dep", "classic"})
    assert not report.acceptable({"classic"})


def test_a_lone_line_that_is_not_an_axiom_name_is_not_acceptable():
    assert not parse_assumptions("Axioms:\nsomething odd here\n").acceptable({"classic"})


def test_allowed_axioms_are_acceptable_and_others_are_not():
    report = parse_assumptions("Axioms:\nclassic : forall P : Prop, P \\/ ~ P\n")
    assert report.acceptable({"classic"})
    assert not report.acceptable(())


@pytest.mark.parametrize("output", [
    "Section Variables:\nx : nat\n",
    "Axioms:\nclassic : forall P : Prop, P \\/ ~ P\nFixpoints relying on an unsafe guard:\nf\n",
    "Constants relying on type-in-type:\nfoo\n",
    "",
    "something unexpected",
])
def test_unknown_or_unsafe_assumption_sections_are_not_acceptable(output):
    assert not parse_assumptions(output).acceptable({"classic"})
