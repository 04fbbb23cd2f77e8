"""The Lean warm-start corpus (``sgs/data/warmstart_lean.jsonl``) and its
generator (``tools/make_lean_warmstart.py``): what ships is what the
generator builds, every line parses as the loop parses a model's output,
every proof passes the Lean REPL stand-in (a test double) and every
conjecture elaborates there, and the warm start picks the corpus of the
prover's language."""

from __future__ import annotations

import importlib.resources
import json
import re

import pytest

from sgs.config import validate
from sgs.method.roles import PromptSet, extract_proof
from sgs.state.warmstart import load_corpus
from tests.config_support import compose_cfg
from tools import make_lean_warmstart as gen


@pytest.fixture(scope="module")
def shipped() -> str:
    return (importlib.resources.files("sgs.data") / "warmstart_lean.jsonl").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def built():
    return gen.build()


def test_shipped_file_is_what_the_generator_builds(shipped, built):
    assert gen.to_jsonl(built[0]) == shipped, "sgs/data/warmstart_lean.jsonl is stale: run tools/make_lean_warmstart.py"


def test_every_line_loads_and_the_corpus_is_small(shipped):
    examples = load_corpus("pkg://sgs/data/warmstart_lean.jsonl", "lean")
    counts = {role: sum(e.role.value == role for e in examples) for role in ("solver", "conjecturer", "guide")}
    assert len(examples) == len(shipped.splitlines()) < 600      # the warm start stays quick
    assert counts["solver"] >= 150 and counts["conjecturer"] >= 40 and counts["guide"] >= 40


def test_solver_lines_are_d3k_records_and_the_loops_prompts(shipped):
    prompts = PromptSet("lean")
    for row in map(json.loads, shipped.splitlines()):
        if row["role"] != "solver":
            continue
        meta = row["meta"]
        assert meta["header"] == gen.HEADER and meta["theorem"].endswith(":= by") and meta["id"] == row["source"]
        assert row["prompt"] == prompts.solver(meta["header"], meta["theorem"])
        assert extract_proof(row["completion"], "lean").value.strip() == meta["tactic"].strip()


def test_every_tactic_family_is_present(shipped):
    tactics = {json.loads(row)["meta"].get("tactic", "").split()[-1] for row in shipped.splitlines()
               if json.loads(row)["role"] == "solver"}
    assert {"norm_num", "decide", "linarith", "omega", "ring", "positivity"} <= tactics


def test_the_stand_in_accepts_every_proof_and_statement(built):
    """The check the generator runs before writing (the stand-in through the real Lean backend)."""
    _, proved, conjectured = built
    assert gen.check_with_standin(proved, conjectured) == []


def test_the_check_catches_a_wrong_proof_and_a_broken_statement():
    wrong = gen.Lemma("wrong", "", "2 + 2 = 5", "norm_num", "test")
    broken = gen.Lemma("broken", "(x : ℝ", "x = x", None, "test")
    problems = gen.check_with_standin([wrong], [broken])
    assert len(problems) == 2
    assert problems[0].startswith("wrong: the proof `norm_num` is prover_error")
    assert problems[1].startswith("broken: the statement does not elaborate")


@pytest.mark.parametrize("binders, claim, expected", [
    ("(x y : ℝ) (h₀ : x + y = 4) (h₁ : x - y = 2)", "x = 3", {"relevance": 4, "redundancy": 0, "complexity": 0}),
    ("(x y : ℝ) (h₀ : x + y = 4) (h₁ : x - y = 2) (z : ℕ) (hz : z = 1)", "x = 3", None),
    ("(x y : ℝ) (h₀ : x + y = 4) (h₁ : x - y = 2)", "x = 3 ∨ 7 % 2 = 1", None),
])
def test_guide_scores_follow_the_rules(binders, claim, expected):
    target = gen.Lemma("t", "(x y : ℝ) (h₀ : x + y = 4) (h₁ : x - y = 2)", "x = 3 ∧ y = 1", None, "test")
    scores = gen.guide_scores(target, gen.Lemma("c", binders, claim, None, "test"))
    if expected is not None:
        assert scores == expected
    if "hz" in binders:
        assert scores["redundancy"] == 1
    if "∨" in claim:
        assert scores["complexity"] == 2
    assert gen.guide_scores(target, target)["relevance"] == 0


@pytest.mark.parametrize("prover, corpus", [("rocq", "warmstart_rocq.jsonl"), ("lean", "warmstart_lean.jsonl")])
def test_the_warm_start_picks_the_corpus_of_the_provers_language(prover, corpus):
    cfg = validate(compose_cfg(f"prover={prover}"))
    assert re.fullmatch(rf"pkg://sgs/data/{corpus}", cfg.warmstart.corpus)
    assert load_corpus(cfg.warmstart.corpus, cfg.prover.language)
