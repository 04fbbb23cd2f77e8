"""BM25 premise ranking: scores as the formula gives them, the prompt block within
its budget, the index saved and loaded, and the measuring command on a tiny corpus."""

from __future__ import annotations

import json
import math

import pytest

from sgs.corpus.records import FileRecord, Mention, Step, TheoremRecord, shard_path, write_shard
from sgs.prover.premises import BM25, Premise, PremiseIndex, format_premises, main, premise_line, terms


def test_bm25_scores_by_hand():
    # N = 3, lengths 2, 3, 4: avgdl = 3; k1 = 1.2, b = 0.75.
    # "a" is in d0 and d1, "c" in d1 and d2: idf = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6) = 0.470004
    # d0: tf(a) = 1, norm = 1.2 * (0.25 + 0.75 * 2/3) = 0.9   -> idf * 2.2 / 1.9 = 0.544215
    # d1: tf(a) = 2, norm = 1.2 * (0.25 + 0.75 * 3/3) = 1.2   -> idf * 4.4 / 3.2 = 0.646255
    #     tf(c) = 1                                           -> idf * 2.2 / 2.2 = 0.470004
    # d2: tf(c) = 1, norm = 1.2 * (0.25 + 0.75 * 4/3) = 1.5   -> idf * 2.2 / 2.5 = 0.413603
    # "b" is in d0 only: idf = ln(1 + 2.5 / 1.5) = 0.980829, d0 -> 0.980829 * 2.2 / 1.9 = 1.135697
    index = BM25([["a", "b"], ["a", "a", "c"], ["c", "d", "e", "f"]])
    assert index.scores(["a"]) == pytest.approx({0: 0.544215, 1: 0.646255}, abs=1e-6)
    # a query term counts once however often it is repeated
    assert index.scores(["a", "c", "a"]) == pytest.approx({0: 0.544215, 1: 1.116259, 2: 0.413603}, abs=1e-6)
    assert index.scores(["b"])[0] == pytest.approx(1.135697, abs=1e-6)
    assert math.isclose(index.idf["a"], math.log(1.6))
    assert index.top(["a", "c"], 2) == [(1, pytest.approx(1.116259, abs=1e-6)), (0, pytest.approx(0.544215, abs=1e-6))]
    assert [d for d, _ in index.top(["a", "c"], 3, allowed=lambda d: d != 1)] == [0, 2]
    assert index.scores(["zzz"]) == {}


def test_terms_split_qualified_names_and_keep_notation():
    assert terms("(Rabs (x-y) <= x)%R -> Nat.add_comm") == [
        "Rabs", "x", "-", "y", "<=", "x", "%", "R", "->", "Nat.add_comm", "Nat", "add_comm", "add", "comm"]


PREMISES = [
    Premise("Coq.Arith.PeanoNat.Nat.add_comm", "Lemma add_comm : forall n m, n + m = m + n.", "stdlib", "A.v", 3),
    Premise("Coq.Arith.PeanoNat.Nat.mul_comm", "Lemma mul_comm : forall n m, n * m = m * n.", "stdlib", "A.v", 9),
    Premise("Flocq.Core.Raux.Rabs_le", "Theorem Rabs_le (x y : R) :\n  (-y <= x <= y)%R -> (Rabs x <= y)%R.",
            "flocq", "Core/Raux.v", 40),
]


def test_the_state_ranks_the_premise_about_its_symbols_first():
    index = PremiseIndex(PREMISES)
    assert [p.short for p in index.rank("n, m : nat\n============================\nm * n = n * m", 3)][:2] == [
        "mul_comm", "add_comm"]
    assert index.rank("x, y : R\n============================\n(Rabs x <= y)%R", 1)[0].short == "Rabs_le"
    assert [p.short for p in index.rank("n * m", 3, allowed=lambda i: i != 1)] == ["add_comm"]


def test_the_index_saves_and_loads(tmp_path):
    index = PremiseIndex(PREMISES, k1=1.5, b=0.5)
    size = index.save(tmp_path / "premises.json.gz")
    assert size == (tmp_path / "premises.json.gz").stat().st_size
    loaded = PremiseIndex.load(tmp_path / "premises.json.gz")
    assert loaded.premises == PREMISES and (loaded.bm25.k1, loaded.bm25.b) == (1.5, 0.5)
    assert loaded.bm25.scores(terms("n * m")) == index.bm25.scores(terms("n * m"))


def test_the_prompt_block_fits_its_budget():
    assert premise_line(PREMISES[0]) == "Coq.Arith.PeanoNat.Nat.add_comm : forall n m, n + m = m + n"
    assert premise_line(PREMISES[2]) == "Flocq.Core.Raux.Rabs_le (x y : R) : (-y <= x <= y)%R -> (Rabs x <= y)%R"
    lines = [premise_line(p) for p in PREMISES]
    assert format_premises(PREMISES, 10_000) == "\n".join(lines)
    two = len(lines[0]) + 1 + len(lines[1])
    assert format_premises(PREMISES, two) == "\n".join(lines[:2])
    cut = format_premises(PREMISES, two + 30)
    assert len(cut) == two + 30 and cut.endswith("...") and cut.startswith("\n".join(lines[:2]) + "\nFlocq")
    assert format_premises(PREMISES, two + 10) == "\n".join(lines[:2])  # under 20 characters left: no stub
    assert format_premises(PREMISES, 5) == ""


def _step(tactic: str, goal: str, lemmas: list[str]) -> Step:
    return Step(tactic=tactic, kind="tactic", goals=f"1 goal (ID 3)\n  \n  ============================\n  {goal}",
                num_goals=1, line=1, mentions=[Mention(p.rpartition(".")[2], "Constant", p) for p in lemmas])


def _theorem(file: str, split: str, name: str, line: int, statement: str, steps: list[Step]) -> TheoremRecord:
    proof = "Proof.\n" + "\n".join(s.tactic for s in steps) + "\nQed."
    return TheoremRecord(library="lib", file=file, name=name, line=line, statement=statement, proof=proof,
                         ending="Qed", split=split, steps=steps)


def tiny_corpus(root):
    """A training file of two lemmas and a held-out file whose second lemma uses the first's
    and a training lemma: every kind of premise in scope."""
    train = [_theorem("T.v", "train", "plus_swap", 1, "Lemma plus_swap : forall a b, a + b = b + a.",
                      [_step("intros.", "forall a b, a + b = b + a", [])]),
             _theorem("T.v", "train", "times_swap", 5, "Lemma times_swap : forall a b, a * b = b * a.",
                      [_step("intros.", "forall a b, a * b = b * a", []),
                       _step("apply Lib.T.plus_swap.", "a * b = b * a", ["Lib.T.plus_swap"])])]
    test = [_theorem("H.v", "test", "max_self", 1, "Lemma max_self : forall a, max a a = a.",
                     [_step("intros.", "forall a, max a a = a", [])]),
            _theorem("H.v", "test", "use", 4, "Lemma use : forall a b, max (a * b) (a * b) = b * a.",
                     [_step("rewrite Lib.H.max_self.", "forall a b, max (a * b) (a * b) = b * a",
                            ["Lib.H.max_self"]),
                      _step("apply Lib.T.times_swap.", "forall a b, a * b = b * a", ["Lib.T.times_swap"])])]
    for file, split, theorems in (("T.v", "train", train), ("H.v", "test", test)):
        meta = FileRecord(library="lib", file=file, module="Lib." + file[:-2], split=split, status="ok")
        write_shard(shard_path(root, "lib", file), meta, theorems)
    return root


def test_the_command_measures_a_tiny_corpus(tmp_path, capsys):
    corpus = tiny_corpus(tmp_path / "corpus")
    out = tmp_path / "figures.json"
    assert main(["--corpus", str(corpus), "--split", "test", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "premise retrieval on the test split" in printed and "proof retrieval" in printed
    figures = json.loads(out.read_text())
    premises = figures["premise_retrieval"]
    assert (premises["steps"], premises["lemmas"], premises["lemmas_in_scope"]) == (2, 2, 2)
    assert figures["premises"] == 4
    # both lemmas are among the four premises, so both rankers find them by rank 10
    assert premises["all"]["bm25"]["recall@10"] == premises["all"]["frequency"]["recall@10"] == 1.0
    # max_self's statement is the one that speaks of max: BM25 ranks it first
    assert premises["all"]["bm25"]["recall@1"] >= 0.5
    assert figures["proof_retrieval"]["theorems"] == 2


def test_bad_arguments_exit_2(tmp_path, capsys):
    corpus = tiny_corpus(tmp_path / "corpus")
    assert main(["--corpus", str(tmp_path / "nowhere")]) == 2
    assert "no corpus shards" in capsys.readouterr().err
    assert main(["--corpus", str(corpus), "--libraries", "lib,nolib"]) == 2
    assert "nolib" in capsys.readouterr().err
    assert main(["--corpus", str(corpus), "--split", "train"]) == 2


def test_save_index_writes_every_theorem(tmp_path, capsys):
    corpus = tiny_corpus(tmp_path / "corpus")
    assert main(["--corpus", str(corpus), "--save-index", str(tmp_path / "index.json.gz")]) == 0
    index = PremiseIndex.load(tmp_path / "index.json.gz")
    assert sorted(p.name for p in index.premises) == ["Lib.H.max_self", "Lib.H.use", "Lib.T.plus_swap",
                                                     "Lib.T.times_swap"]
    assert "wrote 4 premises" in capsys.readouterr().out
