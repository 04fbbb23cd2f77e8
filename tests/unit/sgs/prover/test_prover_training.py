"""The general prover's recipe: its examples, batches, schedule, and a tiny resumable run."""

from __future__ import annotations

import json
import random

import pytest

from sgs.corpus.records import FileRecord, Step, TheoremRecord, shard_path, write_shard
from sgs.method.roles import PromptSet
from sgs.prover.examples import clip_state, proof_example, tactic_example, training_examples
from sgs.prover.model_tactics import first_sentence
from sgs.prover.steps import proof_state, tactic_key, theorem_steps
from sgs.prover.train import TrainOptions, batches, learning_rate, train
from sgs.prover.train import main as train_main

GOALS = "1 goal (ID 7)\n  \n  n : nat\n  ============================\n  n + 0 = n"


def _theorem(name: str, split: str, tactics: list[str], file: str = "A.v", ending: str = "Qed") -> TheoremRecord:
    steps = [Step(tactic=t, kind="tactic", goals=GOALS, num_goals=1, line=i + 2) for i, t in enumerate(tactics)]
    steps.insert(1, Step(tactic="-", kind="bullet", goals=GOALS, num_goals=1, line=9))
    return TheoremRecord(library="lib", file=file, name=name, line=1, statement=f"Lemma {name} (n : nat) : n + 0 = n.",
                         proof="Proof.\n" + "\n".join(tactics) + f"\n{ending}.", ending=ending, split=split, steps=steps)


def _write(root, file: str, split: str, theorems: list[TheoremRecord]) -> None:
    meta = FileRecord(library="lib", file=file, module="Lib.A", split=split, status="ok", theorems=len(theorems))
    write_shard(shard_path(root, "lib", file), meta, theorems)


def test_proof_state_drops_the_session_counters():
    display = "2 goals (ID 12)\n  \n  x : nat\n  ============================\n  x = x\n\ngoal 2 (ID 13) is:\n True"
    assert proof_state(display) == "x : nat\n============================\nx = x\ngoal 2 is:\nTrue"
    assert tactic_key("intros  n (* why *) .") == "intros n."


def test_only_tactic_steps_of_finished_proofs_are_examples():
    assert [s.tactic for s in theorem_steps(_theorem("a", "train", ["induction n.", "auto."]))] == \
        ["induction n.", "auto."]
    assert theorem_steps(_theorem("b", "train", ["admit."], ending="Admitted")) == []


def test_a_long_state_keeps_the_conclusion_and_the_nearest_hypotheses():
    state = "\n".join(f"H{i} : P{i}" for i in range(10)) + "\n============================\nGoal"
    clipped = clip_state(state, limit=60)
    assert clipped.endswith("============================\nGoal")
    assert "H9 : P9" in clipped and "H0 : P0" not in clipped
    assert len(clipped) <= 60
    assert clip_state("short", limit=40) == "short"


def test_examples_use_the_products_prompts():
    prompts = PromptSet("rocq")
    theorem = _theorem("a", "train", ["auto."])
    example = tactic_example(theorem_steps(theorem)[0], prompts)
    assert example.prompt == prompts.tactic("n : nat\n============================\nn + 0 = n")
    assert example.completion == "auto."
    whole = proof_example(theorem, prompts)
    assert whole.prompt == prompts.solver("", theorem.statement)
    assert whole.completion.startswith("```coq\nLemma a (n : nat)") and whole.completion.endswith("Qed.\n```")
    long = _theorem("b", "train", ["auto." * 400])
    assert proof_example(long, prompts) is None


def test_batches_hold_every_example_once_within_the_token_budget():
    lengths = [random.Random(i).randint(5, 100) for i in range(200)]
    groups = batches(lengths, 256, random.Random(0))
    assert sorted(i for g in groups for i in g) == list(range(200))
    assert all(len(g) * max(lengths[i] for i in g) <= 256 for g in groups)


def test_the_schedule_warms_up_then_follows_a_cosine_to_a_tenth():
    assert learning_rate(1.0, 0, 0.0, 100.0, warmup=10) == pytest.approx(0.1)
    assert learning_rate(1.0, 50, 0.0, 100.0, warmup=10) == pytest.approx(1.0)
    assert learning_rate(1.0, 50, 50.0, 100.0, warmup=10) == pytest.approx(0.55)
    assert learning_rate(1.0, 50, 100.0, 100.0, warmup=10) == pytest.approx(0.1)


def test_first_sentence_respects_comments_and_strings():
    assert first_sentence("rewrite (* a. b *) H. auto.") == "rewrite (* a. b *) H."
    assert first_sentence('idtac "x. y". z') == 'idtac "x. y".'
    assert first_sentence("apply Nat.add_comm. ") == "apply Nat.add_comm."
    assert first_sentence("no end") == "no end"


def test_a_tiny_run_trains_saves_and_resumes(tmp_path):
    corpus = tmp_path / "corpus"
    _write(corpus, "A.v", "train", [_theorem(f"t{i}", "train", ["induction n.", "auto."]) for i in range(6)])
    _write(corpus, "B.v", "valid", [_theorem("v", "valid", ["auto."], file="B.v")])
    assert {e.kind for e in training_examples(corpus, ("train",))} == {"tactic", "proof"}
    options = TrainOptions(corpus=corpus, out=tmp_path / "run", size="xs", minutes=0.02, warmstart=None,
                           batch_tokens=768, warmup_steps=2)
    first = train(options, log=lambda _: None)
    assert first["steps"] >= 1 and first["held_out_examples"] == 1
    saved = json.loads((tmp_path / "run" / "checkpoint" / "progress.json").read_text())
    assert saved["steps"] == first["steps"]
    assert (tmp_path / "run" / "checkpoint" / "model.safetensors").is_file()
    second = train(TrainOptions(**{**options.__dict__, "minutes": 0.04}), log=lambda _: None)
    assert second["steps"] > first["steps"]


def test_without_held_out_examples_no_held_out_loss_is_claimed(tmp_path):
    corpus = tmp_path / "corpus"
    _write(corpus, "A.v", "train", [_theorem(f"t{i}", "train", ["auto."]) for i in range(3)])
    said: list[str] = []
    done = train(TrainOptions(corpus=corpus, out=tmp_path / "run", size="xs", minutes=0.01, warmstart=None,
                              batch_tokens=768, warmup_steps=1), log=said.append)
    assert done["held_out_examples"] == 0 and done["held_out_loss"] is None
    assert said[-1].endswith("no held-out examples") and "loss 0.000" not in said[-1]


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert train_main(["--corpus", str(tmp_path / "missing"), "--out", str(tmp_path / "out"), "--size", "huge"]) == 2
    err = capsys.readouterr().err
    assert "not a directory" in err and "known sizes" in err
    assert not (tmp_path / "out").exists()


def test_premise_blocks_show_only_what_the_author_had_in_scope():
    from sgs.prover.examples import PremisePrompts
    from sgs.prover.premises import Premise, PremiseIndex
    index = PremiseIndex([Premise("Lib.A.add_zero", "Lemma add_zero n : n + 0 = n.", "lib", "A.v", 5),
                          Premise("Lib.A.later_add", "Lemma later_add n : n + 0 + 0 = n.", "lib", "A.v", 50)])
    blocks = PremisePrompts(index, shown=2, budget=500)
    state = "n : nat\n============================\nn + 0 = n"
    assert "later_add" in blocks.block(state)                       # no theorem given: everything
    in_file = blocks.block(state, "lib", "A.v", 20)                  # a theorem at line 20 of A.v
    assert "Lib.A.add_zero" in in_file and "later_add" not in in_file
    assert "add_zero" in blocks.block(state, "lib", "B.v", 1)        # other files' lemmas stay in scope


def test_proof_blocks_show_whole_earlier_proofs_of_similar_lemmas_in_the_prompt():
    from sgs.prover.examples import ProofPrompts
    from sgs.prover.premises import Premise, PremiseIndex
    from sgs.prover.proof_retrieval import ProofIndex
    index = ProofIndex(PremiseIndex([
        Premise("Lib.A.add_zero", "Lemma add_zero n : n + 0 = n.", "lib", "A.v", 5),
        Premise("Lib.A.mul_one", "Lemma mul_one n : n * 1 = n.", "lib", "A.v", 9),
        Premise("Lib.A.later_add", "Lemma later_add n : n + 0 + 0 = n.", "lib", "A.v", 50)]),
        ["Proof. induction n; simpl; auto. Qed.", "Proof. lia. Qed.", "Proof. rewrite !add_zero. easy. Qed."])
    blocks = ProofPrompts(index, shown=2, budget=500)
    state = "n : nat\n============================\nn + 0 = n"
    # the two proofs of statements most like the goal, each whole, best first
    assert blocks.block(state).startswith("Lemma later_add n : n + 0 + 0 = n.\nProof. rewrite !add_zero. easy. Qed.")
    in_file = blocks.block(state, "lib", "A.v", 20)                  # a theorem at line 20 of A.v
    assert in_file.startswith("Lemma add_zero n : n + 0 = n.\nProof. induction n; simpl; auto. Qed.")
    assert "later_add" not in in_file
    assert ProofPrompts(index, shown=2, budget=40).block(state, "lib", "A.v", 20) == ""  # no proof fits: none cut
    prompt = tactic_example(theorem_steps(_theorem("t", "train", ["lia."]))[0], PromptSet("rocq"), "",
                            in_file).prompt
    assert "Proofs of similar lemmas:\nLemma add_zero n : n + 0 = n." in prompt and "Lemmas that may help" not in prompt


def test_a_model_trained_with_similar_proofs_is_asked_with_them(tmp_path):
    corpus = tmp_path / "corpus"
    _write(corpus, "A.v", "train", [_theorem(f"t{i}", "train", ["induction n.", "auto."]) for i in range(3)])
    done = train(TrainOptions(corpus=corpus, out=tmp_path / "run", size="xs", minutes=0.01, warmstart=None,
                              batch_tokens=1024, warmup_steps=1, proofs=True), log=lambda _: None)
    assert done["proofs"] is True and done["premises"] is False
    from sgs.prover.accuracy import PREDICTORS
    model = PREDICTORS["model"](corpus, str(tmp_path / "run" / "checkpoint"))
    prompt = model.prompt(theorem_steps(_theorem("q", "test", ["auto."]))[0].state)
    assert "Proofs of similar lemmas:\nLemma t0 (n : nat) : n + 0 = n.\nProof.\ninduction n." in prompt
