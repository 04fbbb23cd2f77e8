"""Finding the lemmas a file left Admitted, and what the written proof opens with."""

from __future__ import annotations

import pytest

from sgs.fill.admitted import allowed_names, find_admitted, written_proof

FILE = """\
Require Import Arith.
(* Lemma in_comment : True. Admitted. *)
(* nested (* Lemma nested : True. Admitted. *) still a comment. Admitted. *)
Definition s := "Lemma in_string : True. Admitted.".
Lemma after_statement : 1 = 1.
Admitted.
Lemma after_proof : 2 = 2.
Proof. Admitted.
Lemma proved : 3 = 3. Proof. reflexivity. Qed.
Section S.
Variable n : nat.
Hypothesis H : n > 0.
Variable m : nat.
Lemma using_h : n >= 1.
Proof using H.
Admitted.
Lemma all_variables : n >= 1.
Admitted.
Lemma partial : n >= 1.
Proof. intros. (* Admitted. *) admit.
Admitted.
Lemma strange_using : n >= 1.
Proof using Type*.
Admitted.
Lemma using_none : m = m.
Proof using .
Admitted.
End S.
Module M.
Lemma in_module : True. Proof.
Admitted.
End M.
"""


def by_name(admits: bool = False):
    targets, problems = find_admitted(FILE, "F.v", "P.F", admits=admits)
    return {t.name: t for t in targets}, {p.name: p for p in problems}


def test_every_form_is_found_and_comments_and_strings_are_not():
    targets, problems = by_name()
    assert set(targets) == {"after_statement", "after_proof", "using_h", "all_variables", "in_module", "using_none"}
    assert set(problems) == {"strange_using"}
    assert "only a list of names, Type or All" in problems["strange_using"].reason
    assert targets["after_statement"].form == "statement"
    assert targets["after_proof"].form == "proof"
    assert targets["using_h"].form == "proof using"


def test_a_span_is_the_proof_as_written_and_lines_count_from_one():
    targets, _ = by_name()
    for name, text in [("after_statement", "Admitted."), ("after_proof", "Proof. Admitted."),
                       ("using_h", "Proof using H.\nAdmitted.")]:
        start, end = targets[name].span
        assert FILE[start:end] == text
    assert targets["after_statement"].line == 5
    assert FILE.splitlines()[targets["in_module"].line - 1].startswith("Lemma in_module")


def test_ids_headers_and_statements_follow_the_blocks():
    targets, _ = by_name()
    assert targets["in_module"].id == "P.F.M.in_module"
    assert targets["in_module"].header.rstrip().endswith("End M.\nImport M.")
    assert targets["after_statement"].header == FILE[:FILE.index("Lemma after_statement")]
    # Coq generalises an Admitted lemma over every section variable, one with Proof using over those named
    assert targets["all_variables"].statement == "Lemma all_variables (n : nat) (H : n > 0) (m : nat) : n >= 1."
    assert targets["using_h"].statement == "Lemma using_h (n : nat) (H : n > 0) : n >= 1."
    assert targets["all_variables"].opening == "Proof using All."
    assert targets["using_h"].opening == "Proof using H."
    # Proof using . (as Coq suggests it): the statement's own variables only
    assert targets["using_none"].statement == "Lemma using_none (m : nat) : m = m."
    assert targets["using_none"].opening == "Proof using ."
    assert targets["after_proof"].opening == "Proof."
    assert "End S." in targets["using_h"].header


def test_partial_proofs_count_only_with_admits():
    targets, _ = by_name(admits=True)
    assert targets["partial"].form == "partial"
    start, end = targets["partial"].span
    assert FILE[start:end].startswith("Proof. intros.") and FILE[start:end].endswith("Admitted.")
    assert targets["partial"].statement.startswith("Lemma partial (n : nat) (H : n > 0) (m : nat)")


def test_the_written_proof_keeps_the_lemmas_opening():
    targets, _ = by_name()
    assert written_proof(targets["all_variables"], "Proof.\n  lia.\nQed.") == "Proof using All.\n  lia.\nQed."
    assert written_proof(targets["after_proof"], "Proof.\n  auto.\nQed.") == "Proof.\n  auto.\nQed."
    with pytest.raises(ValueError):
        written_proof(targets["after_proof"], "auto.")


def test_allowed_names_cover_the_admitted_lemmas_and_the_projects_axioms():
    targets, _ = by_name()
    functor = "Module Type T.\nParameter V : Set.\nEnd T.\nAxiom ax : False.\n"
    names = set(allowed_names({"F.v": ("P.F", FILE), "G.v": ("P.G", functor)}, list(targets.values())))
    assert {"after_statement", "F.after_statement", "P.F.after_statement", "Top.after_statement",
            "M.in_module", "P.F.M.in_module", "Top.M.in_module"} <= names
    assert {"ax", "G.ax", "P.G.ax", "V", "P.G.V"} <= names
    assert "proved" not in names and "classic" not in names


def test_a_variable_named_only_through_implicit_types_is_kept():
    text = ("Section T.\nVariable A : Type.\nVariable B : Type.\nImplicit Types v : A.\n"
            "Lemma imp : forall v, v = v.\nProof using Type.\nAdmitted.\nEnd T.\n")
    [target], _ = find_admitted(text, "F.v", "P.F")
    assert target.statement == "Lemma imp (A : Type) : forall (v : A), v = v."
