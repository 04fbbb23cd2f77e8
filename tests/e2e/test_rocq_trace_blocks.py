"""Declarations inside sections, modules, functors and module types traced
from a small hand-written project, and their round trip with real coqtop.

Each of them is checked at the top level after a header that closes (or, for
functors and module types, inlines) its blocks: see
:mod:`sgs.state.rocq_declarations`.  The whole file runs in about 15 s here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lean_env.rocq.backend import RocqBackend
from lean_env.rocq.config import RocqConfig
from lean_env.verdict import ProofTask, Status
from sgs.state.rocq_declarations import find_declarations, project_axioms
from sgs.state.rocq_project import build, read_project
from sgs.state.rocq_trace import trace

BASE = """\
Module Type Base.
Parameter V : Set.
Axiom V_dec : forall x y : V, {x = y} + {x <> y}.
End Base.
"""

#: one file with every kind of block; the comments say what the tracer must make of each lemma
BLOCKS = """\
Require Import Blocks.Base.

Section Plain.
Definition two := 2.
Lemma two_pos : 0 < two.   (* a section without variables: the header closes it *)
Proof. unfold two. auto. Qed.
End Plain.

Section WithVariables.
Variable n : nat.
Variables (m : nat) (k : nat).
Hypothesis H : n = m.
Hint Resolve two_pos : core.   (* given again after the section's end; the next one, about H, is not *)
Hint Resolve H : core.
Lemma uses_h : m = n.      (* the variables become binders; auto still finds H in the context *)
Proof. symmetry. auto. Qed.
Section Inner.
Hypothesis Hk : k = 0.
Lemma nested : k + n = m.  (* two sections: both closed, all their variables bound *)
Proof using H Hk. rewrite Hk. simpl. exact H. Qed.
End Inner.
Definition shifted := n + 1.
Lemma shifted_m : shifted = m + 1.   (* shifted takes n once the section is closed: the proof fails *)
Proof. unfold shifted. rewrite H. reflexivity. Qed.
Let limit := 3.
Lemma limit_pos : 0 < limit.         (* a Let is a let binder *)
Proof. unfold limit. auto. Qed.
End WithVariables.

Module M.
Definition three := 3.
Module N.
Lemma three_eq : three = 3.          (* nested modules: closed, then imported *)
Proof. reflexivity. Qed.
End N.
End M.

Module F (X : Base).
Definition eqb (x y : X.V) : bool := if X.V_dec x y then true else false.
Lemma eqb_refl : forall x, eqb x x = true.   (* a functor's parameter is declared: its fields are axioms *)
Proof. intro x. unfold eqb. destruct (X.V_dec x x); congruence. Qed.
Lemma plain_in_functor : 1 + 1 = 2.          (* needs none of them *)
Proof. reflexivity. Qed.
End F.

Module Type Spec.
Parameter f : nat -> nat.
Axiom f_id : forall x, f x = x.
Lemma f_twice : forall x, f (f x) = x.       (* a module type's lemma relies on its own axioms *)
Proof. intro. rewrite !f_id. reflexivity. Qed.
End Spec.

Section Proved.
Variable p : nat.
Let p_eq : p = p.
Proof. reflexivity. Qed.
Lemma after_proved_let : p = p.              (* a Let proved by tactics has no binder form *)
Proof. exact p_eq. Qed.
End Proved.
"""


def write_project(root: Path) -> Path:
    root.mkdir()
    (root / "_CoqProject").write_text("-R . Blocks\nBase.v\nBlocks.v\n")
    (root / "Base.v").write_text(BASE)
    (root / "Blocks.v").write_text(BLOCKS)
    return root


def test_headers_and_statements_of_declarations_in_blocks():
    found, skipped = find_declarations(BLOCKS)
    by_name = {d.name: d for d in found}
    assert [s.name for s in skipped] == ["after_proved_let"]
    assert skipped[0].reason == "a section Let proved by tactics"

    uses_h = by_name["uses_h"]
    # first the variables it names; then with the hypotheses about them (auto uses H unnamed); then all
    assert (uses_h.statement, *uses_h.alternatives) == (
        "Lemma uses_h (n : nat) (m : nat) : m = n.", "Lemma uses_h (n : nat) (m : nat) (H : n = m) : m = n.",
        "Lemma uses_h (n : nat) (m : nat) (k : nat) (H : n = m) : m = n.")
    closing = "\nEnd WithVariables.\nHint Resolve two_pos : core.\n"
    assert uses_h.header.endswith("Hint Resolve H : core." + closing)
    assert BLOCKS.startswith(uses_h.header[:-len(closing)])
    assert (uses_h.path, uses_h.context, uses_h.generalised) == ((), "section WithVariables", True)

    nested = by_name["nested"]   # "Proof using H Hk" names them, and their types name n, m, k
    assert nested.statement == "Lemma nested (n : nat) (m : nat) (k : nat) (H : n = m) (Hk : k = 0) : k + n = m."
    assert nested.alternatives == ()
    assert nested.header.endswith("\nEnd Inner.\nEnd WithVariables.\nHint Resolve two_pos : core.\n")
    assert nested.proof.startswith("Proof. rewrite Hk.")   # "Proof using" named section variables only

    assert by_name["limit_pos"].statement == "Lemma limit_pos (limit := 3) : 0 < limit."
    assert by_name["three_eq"].header.endswith("\nEnd N.\nEnd M.\nImport M.\nImport M.N.\n")
    assert by_name["three_eq"].path == ("M", "N")

    functor = by_name["eqb_refl"]
    assert "Module F" not in functor.header and "Declare Module X : Base.\nDefinition eqb" in functor.header
    assert functor.path == ("F",) and functor.statement == "Lemma eqb_refl : forall x, eqb x x = true."
    assert "Module Type Spec" not in by_name["f_twice"].header

    plain = by_name["two_pos"]
    assert plain.header.endswith("End Plain.\n") and plain.statement == "Lemma two_pos : 0 < two."
    assert project_axioms(BASE) == {"V", "V_dec"} and project_axioms(BLOCKS) == {"f", "f_id"}


@pytest.fixture(scope="module")
def traced(tmp_path_factory, require_rocq):
    folder = tmp_path_factory.mktemp("blocks")
    project = read_project(write_project(folder / "project"))
    build(project, folder / "build")
    return (trace(project, folder / "build"), trace(project, folder / "build", allow_project_axioms=True))


def test_blocks_are_traced_with_their_reasons(traced):
    default, allowing = traced
    ids = sorted(t["id"] for t in default.targets)
    assert ids == ["Blocks.Blocks.F.plain_in_functor", "Blocks.Blocks.M.N.three_eq", "Blocks.Blocks.limit_pos",
                   "Blocks.Blocks.nested", "Blocks.Blocks.two_pos", "Blocks.Blocks.uses_h"]
    reasons = {s.id: s.reason for s in default.skipped}
    assert reasons["Blocks.Blocks.F.eqb_refl"] == "needs axioms: X.V_dec, X.V"
    assert reasons["Blocks.Blocks.Spec.f_twice"] == "needs axioms: f_id, f"
    assert reasons["Blocks.Blocks.shifted_m"].startswith("human proof fails at the top level: ")
    assert reasons["Blocks.Blocks.after_proved_let"] == "a section Let proved by tactics"
    assert all("allowed_axioms" not in t for t in default.targets) and default.allowed_axioms == ()
    by_id = {t["id"]: t for t in default.targets}
    assert by_id["Blocks.Blocks.uses_h"]["context"] == "section WithVariables"
    # the first statement that holds the human proof is kept: with the hypothesis auto uses, not k
    assert by_id["Blocks.Blocks.uses_h"]["statement"] == "Lemma uses_h (n : nat) (m : nat) (H : n = m) : m = n."

    # the project's own axioms, when allowed: the functor's parameter's and the module type's
    extra = {t["id"]: t["allowed_axioms"] for t in allowing.targets if "allowed_axioms" in t}
    assert extra == {"Blocks.Blocks.F.eqb_refl": ["X.V_dec", "X.V"], "Blocks.Blocks.Spec.f_twice": ["f_id", "f"]}
    assert allowing.allowed_axioms == ("X.V", "X.V_dec", "f", "f_id")


def test_admitted_lemmas_are_never_project_axioms(tmp_path, require_rocq):
    root = tmp_path / "project"
    root.mkdir()
    (root / "_CoqProject").write_text("-R . Adm\nA.v\n")
    (root / "A.v").write_text("Parameter cheat : False.\nLemma cheat2 : False.\nAdmitted.\n"
                              "Lemma uses : 0 = 1.\nProof. destruct cheat2. Qed.\n"
                              "Lemma uses_parameter : 0 = 1.\nProof. destruct cheat. Qed.\n"
                              "Module Type T.\nLemma inner : 0 = 1.\nProof. destruct cheat2. Qed.\nEnd T.\n")
    project = read_project(root)
    build(project, tmp_path / "build")
    result = trace(project, tmp_path / "build", allow_project_axioms=True)
    assert [(t["id"], t["allowed_axioms"]) for t in result.targets] == [("Adm.A.uses_parameter", ["cheat"])]
    reasons = {s.id: s.reason for s in result.skipped}
    assert reasons["Adm.A.uses"].startswith("needs axioms") and "cheat2" in reasons["Adm.A.uses"]
    assert reasons["Adm.A.T.inner"] == "needs axioms: cheat2"


def test_every_traced_block_target_round_trips(traced):
    """Valid with its human proof (under the union of the allowed axioms, as
    the run is told), invalid with Admitted and with a proof that proves nothing."""
    _, allowing = traced
    config = RocqConfig(spare=False, axiom_census=False, allowed_axioms=allowing.allowed_axioms)
    failures = []
    with RocqBackend(config) as backend:
        for row in allowing.targets:
            for proof, expected in ((row["proof"], Status.VALID), ("Proof.\nAdmitted.", Status.INVALID),
                                    ("Proof.\nidtac.\nQed.", Status.INVALID)):
                task = ProofTask(row["id"], row["header"], row["statement"], proof,
                                 tuple(tuple(e) for e in row["load_path"]))
                verdict = backend.check_proof(task, 60)
                if verdict.status is not expected:
                    failures.append(f"{row['id']} {proof[:20]!r}: {verdict.status.value} {verdict.reason}")
    assert failures == []
