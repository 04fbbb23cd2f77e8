"""Proof retrieval: the proofs of the statements most like a target, in scope only,
saved and loaded, and a prompt block of whole proofs within its budget."""

from __future__ import annotations

from sgs.corpus.records import Step, TheoremRecord
from sgs.prover.premises import mentioned_paths
from sgs.prover.proof_retrieval import ProofIndex, RetrievedProof, format_proofs


def _theorem(name: str, statement: str, proof: str, ending: str = "Qed") -> TheoremRecord:
    steps = [Step(tactic=t.strip() + ".", kind="tactic", goals="1 goal\n  \n  ============================\n  G",
                  num_goals=1, line=1) for t in proof.split(".")[1:-2]]
    return TheoremRecord(library="lib", file="A.v", name=name, line=len(name), statement=statement, proof=proof,
                         ending=ending, split="train", steps=steps)


THEOREMS = [
    _theorem("app_nil_r", "Lemma app_nil_r : forall l : list nat, l ++ nil = l.",
             "Proof. induction l. reflexivity. simpl. now rewrite IHl. Qed."),
    _theorem("rev_involutive", "Lemma rev_involutive : forall l : list nat, rev (rev l) = l.",
             "Proof. induction l. reflexivity. simpl. rewrite rev_app. now rewrite IHl. Qed."),
    _theorem("mul_pos", "Lemma mul_pos : forall n m, 0 < n -> 0 < m -> 0 < n * m.",
             "Proof. intros. lia. Qed."),
    # an admitted proof is no example to show
    _theorem("rev_app", "Lemma rev_app : forall l m : list nat, rev (l ++ m) = rev m ++ rev l.",
             "Proof. admit. Admitted.", ending="Admitted"),
]
MODULES = {("lib", "A.v"): "Lib.A"}


def test_the_most_similar_statements_come_first_and_only_finished_proofs():
    index = ProofIndex.build(THEOREMS, MODULES, mentioned_paths(THEOREMS))
    assert [p.name for p in index.premises.premises] == ["Lib.A.app_nil_r", "Lib.A.rev_involutive", "Lib.A.mul_pos"]
    found = index.retrieve("Lemma rev_length : forall l : list nat, length (rev l) = length l.", 2)
    assert [p.name for p in found] == ["Lib.A.rev_involutive", "Lib.A.app_nil_r"]
    assert found[0] == RetrievedProof("Lib.A.rev_involutive", THEOREMS[1].statement, THEOREMS[1].proof)
    # what is out of scope (here: the target itself) is never shown
    assert [p.name for p in index.retrieve(THEOREMS[1].statement, 3, allowed=lambda i: i != 1)][0] == \
        "Lib.A.app_nil_r"


def test_the_index_saves_and_loads(tmp_path):
    index = ProofIndex.build(THEOREMS, MODULES, {})
    index.save(tmp_path / "proofs.json.gz")
    loaded = ProofIndex.load(tmp_path / "proofs.json.gz")
    assert loaded.proofs == index.proofs and loaded.premises.premises == index.premises.premises
    query = "forall n, 0 < n * n"
    assert loaded.retrieve(query, 3) == index.retrieve(query, 3)


def test_the_prompt_block_holds_whole_proofs_within_the_budget():
    proofs = [RetrievedProof(t.name, t.statement, t.proof) for t in THEOREMS[:3]]
    blocks = [f"{t.statement}\n{t.proof}" for t in THEOREMS[:3]]
    assert format_proofs(proofs, 10_000) == "\n\n".join(blocks)
    # the second proof does not fit beside the first, the shorter third does
    budget = len(blocks[0]) + 2 + len(blocks[2])
    assert format_proofs(proofs, budget) == blocks[0] + "\n\n" + blocks[2]
    assert format_proofs(proofs, 10) == ""
