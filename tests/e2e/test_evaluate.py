"""Benchmark pass@k: loading benchmarks (``sgs.state.benchmarks``), the evaluation
config, ``sgs.evaluate.evaluate_problems`` and ``python -m sgs.evaluate``.

The loading and config tests are plain Python on files the tests write, in
each layout the loaders accept (the hub files cannot be downloaded here).
The evaluation tests use real Ray and the real Rocq verifier pool: once with
a scripted engine whose outputs make every pass@k known in advance, once
with the tiny model's engine; the slow test runs the command end to end.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import huggingface_hub
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir
from transformers import AutoTokenizer

from lean_env.backends import BackendSpec
from lean_env.pool import VerifierPool, VerifierPoolSettings
from sgs.state.benchmarks import HUB_BENCHMARKS, BenchmarkError, load_benchmark
from sgs.config import CONFIG_DIR, CONFIG_NAME, ROCQ_TARGETS, TargetsConfig, TinyModelSettings, config_problems
from sgs.machinery.engines import EngineGroup, EngineGroupSettings, Sample, SamplingSettings
from sgs.evaluate import checkpoint_problems, main
from sgs.analysis.evaluation import PROBLEMS_FILE, SUMMARY_FILE, evaluate_problems, format_table
from sgs.machinery.models import build_tiny_model
from sgs.state.records import Target
from sgs.machinery.prompts import Prompter
from sgs.state.targets import load_targets
from tests.config_support import NO_DASHBOARD
from tests.paths import REPO

LEAN_HEADER = "import Mathlib\nimport Aesop\n\nopen BigOperators Real Nat Topology Rat\n\n"
#: A tiny model small enough to load in a second (head_dim 32).
SMALL = TinyModelSettings(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048)


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def held_out_targets() -> list[Target]:
    return [t for t in load_targets(TargetsConfig(source=ROCQ_TARGETS), "rocq") if t.held_out]


# --------------------------------------------------------------------------
# Benchmarks: every layout
# --------------------------------------------------------------------------

#: miniF2F as the hub data set cat-searcher/minif2f-lean4 lays it out, both splits in one file.
MINIF2F_ROWS = [
    {"id": "mathd_algebra_10", "split": "test", "header": LEAN_HEADER,
     "formal_statement": "theorem mathd_algebra_10 : abs ((120 : ℝ) / 100 * 30 - 130 / 100 * 20) = 10 := by "
                         "sorry",
     "informal_stmt": "Find |0.12 * 30 - 1.3 * 20|.", "informal_proof": "Compute."},
    {"id": "amc12a_2015_p10", "split": "valid", "header": LEAN_HEADER,
     "formal_statement": "theorem amc12a_2015_p10 (x y : ℤ) (h₀ : 0 < y) (h₁ : y < x)\n"
                         "  (h₂ : x + y + x * y = 80) : x = 26 := by\n  sorry",
     "informal_stmt": "...", "informal_proof": "..."},
    {"id": "imo_1964_p1_2", "split": "test", "header": LEAN_HEADER,
     "formal_statement": "theorem imo_1964_p1_2 (n : ℕ) : ¬7 ∣ 2 ^ n + 1 := by\n",
     "informal_stmt": "...", "informal_proof": "..."},
]
#: ProofNet as DeepSeek-Prover's layout has it (UDACA/proofnet-lean4): statements end in a bare ``:=``.
PROOFNET_ROWS = [
    {"name": "exercise_1_13b", "split": "test", "informal_prefix": "/-- Im(f) constant. -/\n",
     "formal_statement": "theorem exercise_1_13b {f : ℂ → ℂ} (Ω : Set ℂ) (a b : Ω) (h : IsOpen Ω)\n"
                         "  (hf : DifferentiableOn ℂ f Ω) (hc : ∃ (c : ℝ), ∀ z ∈ Ω, (f z).im = c) :\n"
                         "  f a = f b :=",
     "goal": "⊢ f ↑a = f ↑b", "header": "import Mathlib\n\nopen Complex Filter Function Metric Finset\n\n"},
    {"name": "exercise_1_13a", "split": "valid", "informal_prefix": "/-- Re(f) constant. -/\n",
     "formal_statement": "theorem exercise_1_13a (z : ℂ) : z = z :=", "goal": "⊢ z = z",
     "header": "import Mathlib\n"},
    {"name": "exercise_1_2", "split": "test", "informal_prefix": "/-- No rational squares to 12. -/\n",
     "formal_statement": "theorem exercise_1_2 : ¬ ∃ (x : ℚ), ( x ^ 2 = 12 ) :=",
     "goal": "⊢ ¬∃ x, x ^ 2 = 12", "header": "import Mathlib\n"},
]


def test_the_rocq_held_out_benchmark_is_the_flagged_targets():
    benchmark = load_benchmark(None, "rocq")  # null is the prover's own benchmark
    expected = held_out_targets()
    assert benchmark.name == "rocq-held-out" and benchmark.language == "rocq"
    assert len(expected) == 50
    assert [(p.id, p.header, p.statement) for p in benchmark.problems] == [
        (t.id, t.header, t.statement) for t in expected]
    first = load_benchmark("rocq-held-out", "rocq", limit=3)
    assert [p.id for p in first.problems] == [t.id for t in expected[:3]]


def test_minif2f_in_the_hub_layout_keeps_the_test_split_and_ends_statements_at_by(tmp_path):
    source = write_jsonl(tmp_path / "minif2f.jsonl", MINIF2F_ROWS)
    benchmark = load_benchmark("minif2f-test", "lean", benchmark_file=str(source))
    assert [p.id for p in benchmark.problems] == ["mathd_algebra_10", "imo_1964_p1_2"]
    assert benchmark.problems[0].statement == (
        "theorem mathd_algebra_10 : abs ((120 : ℝ) / 100 * 30 - 130 / 100 * 20) = 10 := by")
    assert benchmark.problems[1].statement == "theorem imo_1964_p1_2 (n : ℕ) : ¬7 ∣ 2 ^ n + 1 := by"
    assert all(p.header == LEAN_HEADER for p in benchmark.problems)
    assert benchmark.source == str(source)


def test_proofnet_in_deepseeks_layout_gets_by_after_its_bare_assignment(tmp_path):
    source = write_jsonl(tmp_path / "proofnet.jsonl", PROOFNET_ROWS)
    problems = load_benchmark("proofnet-test", "lean", benchmark_file=str(source)).problems
    assert [p.id for p in problems] == ["exercise_1_13b", "exercise_1_2"]  # from the "name" field
    assert problems[1].statement == "theorem exercise_1_2 : ¬ ∃ (x : ℚ), ( x ^ 2 = 12 ) := by"
    assert problems[0].statement.endswith("f a = f b := by")
    assert problems[0].header.startswith("import Mathlib\n\nopen Complex")


def test_json_and_parquet_copies_read_like_the_jsonl(tmp_path):
    jsonl = load_benchmark("minif2f-test", "lean", benchmark_file=str(write_jsonl(tmp_path / "m.jsonl", MINIF2F_ROWS)))
    as_json = tmp_path / "m.json"
    as_json.write_text(json.dumps(MINIF2F_ROWS))
    as_parquet = tmp_path / "m.parquet"
    pq.write_table(pa.Table.from_pylist(MINIF2F_ROWS), as_parquet)
    for path in (as_json, as_parquet):
        assert load_benchmark("minif2f-test", "lean", benchmark_file=str(path)).problems == jsonl.problems


def test_named_hub_benchmarks_download_their_file(tmp_path, monkeypatch):
    source = write_jsonl(tmp_path / "test.jsonl", PROOFNET_ROWS)
    asked = []

    def download(repo_id, filename, *, repo_type):
        asked.append((repo_id, filename, repo_type))
        return str(source)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    benchmark = load_benchmark("proofnet-test", "lean")
    assert asked == [("UDACA/proofnet-lean4", "proofnet/test.jsonl", "dataset")]
    assert [p.id for p in benchmark.problems] == ["exercise_1_13b", "exercise_1_2"]


def test_without_the_hub_the_error_says_to_pass_a_local_file(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(BenchmarkError) as error:
        load_benchmark("minif2f-test", "lean")
    hub = HUB_BENCHMARKS["minif2f-test"]
    message = str(error.value)
    assert hub.repo_id in message and hub.filename in message
    assert "evaluation.benchmark_file=PATH" in message


def test_a_problems_file_by_prefix_or_path(tmp_path):
    rows = [{"id": "a", "statement": "Lemma a : forall n : nat, n = n.", "header": "Require Import Arith."},
            {"id": 7, "statement": "Theorem b : True."}]
    source = write_jsonl(tmp_path / "problems.txt", rows)  # the prefix makes any name JSONL
    problems = load_benchmark(f"jsonl:{source}", "rocq").problems
    assert [(p.id, p.header) for p in problems] == [("a", "Require Import Arith."), ("7", "")]
    by_path = write_jsonl(tmp_path / "problems.jsonl", rows)
    assert load_benchmark(str(by_path), "rocq").problems == problems


# --------------------------------------------------------------------------
# Benchmarks: hostile input
# --------------------------------------------------------------------------

GOOD_ROCQ = {"id": "ok", "statement": "Theorem ok : True.", "header": ""}


@pytest.mark.parametrize("line, problem", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"statement": "Theorem x : True."}', "missing field 'id' or 'name'"),
    ('{"id": true, "statement": "Theorem x : True."}', "the id must be a non-empty string or an integer"),
    ('{"id": "  ", "statement": "Theorem x : True."}', "the id must be a non-empty string or an integer"),
    ('{"id": "x"}', "missing field 'statement' or 'formal_statement' or 'theorem'"),
    ('{"id": "x", "statement": ""}', "the statement must be a non-empty string"),
    ('{"id": "x", "statement": "Theorem x : True.", "header": 3}', "'header' must be a string"),
    ('{"id": "x", "statement": "Theorem x : True. Proof. exact I. Qed."}', "is not a rocq problem: statement_shape"),
    ('{"id": "x", "statement": "Theorem x : True.", "header": "Axiom cheat : False."}',
     "is not a rocq problem: header_rejected"),
    ('{"id": "x", "statement": "theorem x : 1 = 1 := by sorry"}', "is a lean statement, but prover.language='rocq'"),
    ('{"id": "ok", "statement": "Theorem ok2 : True."}', "id 'ok' appears twice (first at"),
])
def test_bad_lines_are_named_by_file_and_line(tmp_path, line, problem):
    source = write_jsonl(tmp_path / "problems.jsonl", [GOOD_ROCQ, "", line])
    with pytest.raises(BenchmarkError) as error:
        load_benchmark(f"jsonl:{source}", "rocq")
    assert str(error.value).startswith(f"{source}:3: ")  # the blank line 2 still counts
    assert problem in str(error.value)


def test_a_rocq_statement_is_not_a_lean_problem(tmp_path):
    source = write_jsonl(tmp_path / "p.jsonl", [{"id": "r", "statement": "Theorem r : True."}])
    with pytest.raises(BenchmarkError, match=r"p.jsonl:1: problem 'r' is a rocq statement, but "
                                             r"prover.language='lean'"):
        load_benchmark(str(source), "lean")


@pytest.mark.parametrize("name, language, problem", [
    ("minif2f-test", "rocq", "evaluation.benchmark='minif2f-test' holds lean statements but prover.language='rocq'"),
    ("rocq-held-out", "lean", "evaluation.benchmark='rocq-held-out' holds rocq statements but prover.language='lean'"),
    ("minif2f", "rocq", "benchmark file not found: minif2f (evaluation.benchmark is a file unless it is one of "
                        "minif2f-test, proofnet-test, rocq-held-out)"),
    ("jsonl:", "rocq", "names no file"),
])
def test_unusable_benchmark_names(name, language, problem):
    with pytest.raises(BenchmarkError) as error:
        load_benchmark(name, language)
    assert problem in str(error.value)


def test_unreadable_or_empty_files(tmp_path):
    with pytest.raises(BenchmarkError, match="benchmark file not found"):
        load_benchmark("minif2f-test", "lean", benchmark_file=str(tmp_path / "missing.jsonl"))
    empty = write_jsonl(tmp_path / "empty.jsonl", [""])
    with pytest.raises(BenchmarkError, match="holds no problems"):
        load_benchmark(f"jsonl:{empty}", "rocq")
    only_valid = write_jsonl(tmp_path / "valid.jsonl", [MINIF2F_ROWS[1]])
    with pytest.raises(BenchmarkError, match="holds no problems"):
        load_benchmark("minif2f-test", "lean", benchmark_file=str(only_valid))
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(BenchmarkError, match="not a readable Parquet table"):
        load_benchmark(str(tmp_path / "bad.parquet"), "rocq")
    (tmp_path / "dict.json").write_text('{"id": "x"}')
    with pytest.raises(BenchmarkError, match="expected a JSON list of problems, got dict"):
        load_benchmark(str(tmp_path / "dict.json"), "rocq")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"id": "\xe9"}\n')
    with pytest.raises(BenchmarkError, match="cannot be read as UTF-8"):
        load_benchmark(str(tmp_path / "latin1.jsonl"), "rocq")


# --------------------------------------------------------------------------
# The evaluation config
# --------------------------------------------------------------------------


def problems_of(*overrides: str) -> list[str]:
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return config_problems(compose(config_name=CONFIG_NAME, overrides=list(overrides)))


@pytest.mark.parametrize("overrides, problem", [
    (["evaluation.ks=[1,8,64]"], "evaluation.samples_per_problem=32 must be at least the largest k of "
                                 "evaluation.ks (64)"),
    (["evaluation.ks=[0,2]"], "evaluation.ks=[0, 2] must list at least one k, each at least 1"),
    (["evaluation.ks=[]"], "evaluation.ks=[] must list at least one k"),
    (["evaluation.ks=[2,2]"], "evaluation.ks=[2, 2] lists a k twice"),
    (["evaluation.samples_per_problem=0", "evaluation.ks=[1]"], "evaluation.samples_per_problem=0 must be at least 1"),
    (["evaluation.confidence=1.0"], "evaluation.confidence=1.0 must lie strictly between 0 and 1"),
    (["evaluation.every=-1"], "evaluation.every=-1 must be at least 0"),
    (["evaluation.limit=0"], "evaluation.limit=0 must be at least 1"),
    (["evaluation.seconds_per_target=0"], "evaluation.seconds_per_target=0.0 must be positive"),
    (["evaluation.search.width=-1"], "evaluation.search.width=-1 must be at least 0"),
    (["evaluation.search.workers=0"], "evaluation.search.workers=0 must be at least 1"),
    (["evaluation.search.width=0", "evaluation.search.finishers=[]"], "would try no tactic at all"),
    (["evaluation.search.finishers=[lia,' ']"], "must not hold an empty tactic"),
    (["evaluation.checkpoint=' '"], "evaluation.checkpoint must not be empty"),
    (["evaluation.benchmark=proofnet-test"], "evaluation.benchmark='proofnet-test' holds lean statements but "
                                             "prover.language='rocq'"),
    (["evaluation.benchmark=jsonl:x.jsonl", "evaluation.benchmark_file=y.jsonl"],
     "evaluation.benchmark='jsonl:x.jsonl' is a file already; drop evaluation.benchmark_file"),
])
def test_evaluation_settings_are_validated(overrides, problem):
    assert any(problem in p for p in problems_of(*overrides)), problems_of(*overrides)


def test_the_default_evaluation_settings_are_valid_for_both_provers():
    assert problems_of() == []
    # The null benchmark follows the prover, so a Lean run does not trip over a Rocq default.
    assert not [p for p in problems_of("prover=lean") if p.startswith("evaluation")]


def test_the_command_refuses_bad_settings_and_benchmarks_before_starting_anything(tmp_path, capsys, require_rocq):
    assert main(["evaluation.ks=[1,4]", "evaluation.samples_per_problem=2"]) == 2
    assert "must be at least the largest k of evaluation.ks (4)" in capsys.readouterr().err
    assert main(["evaluation.no_such_field=1"]) == 2
    assert "no_such_field" in capsys.readouterr().err
    assert main(["evaluation.contamination=ignore", "model.dtype=int8"]) == 2  # every bad choice, named at once
    err = capsys.readouterr().err
    assert "evaluation.contamination='ignore' is not one of exclude, flag" in err
    assert main(["evaluation.solver_mode=beam"]) == 2
    assert "evaluation.solver_mode='beam' is not one of sample, search, both" in capsys.readouterr().err
    assert "model.dtype='int8' is not one of float32, bfloat16, float16" in err
    bad = write_jsonl(tmp_path / "bad.jsonl", [GOOD_ROCQ, '{"id": "x", "statement": 5}'])
    assert main([f"evaluation.benchmark=jsonl:{bad}"]) == 2
    assert f"{bad}:2: the statement must be a non-empty string" in capsys.readouterr().err
    assert main([f"evaluation.checkpoint={tmp_path / 'no-such-checkpoint'}"]) == 3
    assert "checkpoint directory not found" in capsys.readouterr().err


def test_a_hub_id_is_no_missing_directory(tmp_path):
    assert checkpoint_problems("some-org/some-prover") == []
    assert checkpoint_problems(str(tmp_path / "gone")) == [
        f"checkpoint directory not found: evaluation.checkpoint={str(tmp_path / 'gone')!r}"]


# --------------------------------------------------------------------------
# evaluate_problems with the real verifier pool
# --------------------------------------------------------------------------

HEADER = "Require Import Arith."
EASY = Target("easy", HEADER, "Theorem easy : 2 + 2 = 4.")
FALSE = Target("false", HEADER, "Theorem false : 1 = 2.")
PROOF = "```coq\nProof.\n  reflexivity.\nQed.\n```"


class ScriptedEngine:
    """Stands in for an :class:`~sgs.machinery.engines.EngineGroup`: ``answer(prompt, i)``
    is the text of sample i; chunks come back through ``poll`` as the group's do."""

    def __init__(self, answer: Callable[[str, int], str]):
        self.answer = answer
        self.actors = [None]
        self.policy_version = 0
        self._keys = itertools.count()
        self._ready: list[tuple[int, list[list[Sample]]]] = []

    def submit(self, prompts, settings, chunk_size=None):
        submitted = []
        for index, prompt in enumerate(prompts):
            key = next(self._keys)
            self._ready.append((key, [[self._sample(prompt, i) for i in range(settings.n)]]))
            submitted.append((key, [index]))
        return submitted

    def poll(self, timeout=0.0):
        ready, self._ready = self._ready, []
        return ready

    def waitables(self):
        return []  # every chunk is ready at once

    def _sample(self, prompt: str, index: int) -> Sample:
        return Sample(text=self.answer(prompt, index), token_ids=[1], logprobs=[-0.1], prompt_token_ids=[1],
                      finish_reason="stop", policy_version=self.policy_version, entropy=0.0)


def four_samples(prompt: str, index: int) -> str:
    """Per problem: a proof by reflexivity (valid for ``easy`` only), a wrong
    proof, no proof at all, reflexivity again."""
    return [PROOF, "```coq\nProof.\n  exact I.\nQed.\n```", "no proof here \x00", PROOF][index]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", [], SMALL, seed=0)


@pytest.fixture(scope="module")
def prompter(tiny_dir) -> Prompter:
    return Prompter("rocq", AutoTokenizer.from_pretrained(tiny_dir))


@pytest.fixture(scope="module")
def pool(ray_session, require_rocq):
    pool = VerifierPool(BackendSpec("rocq"), VerifierPoolSettings(num_workers=1, timeout=30))
    yield pool
    pool.shutdown()


def test_pass_at_k_from_known_verdicts(tmp_path, pool, prompter):
    result = evaluate_problems(ScriptedEngine(four_samples), pool, prompter, [EASY, FALSE], ks=[1, 2, 4],
                               settings=SamplingSettings(n=4, seed=3), language="rocq", benchmark="two",
                               checkpoint="scripted")
    easy, false = result.problems
    assert (easy.n, easy.c) == (4, 2) and (false.n, false.c) == (4, 0)
    assert easy.statuses == {"valid": 2, "invalid": 1, "timeout": 0, "system_error": 0, "no_proof": 1}
    assert false.statuses == {"valid": 0, "invalid": 3, "timeout": 0, "system_error": 0, "no_proof": 1}
    # easy: pass@1 = 2/4, pass@2 = 1 - C(2,2)/C(4,2) = 5/6, pass@4 = 1; false: 0.
    estimates = result.estimates
    assert estimates[1].value == pytest.approx(0.25)
    assert estimates[2].value == pytest.approx(5 / 12)
    assert estimates[4].value == pytest.approx(0.5)
    # Two problems, one at 0: the bootstrap interval spans 0 to easy's value.
    assert estimates[2].low == pytest.approx(0.0) and estimates[2].high == pytest.approx(5 / 6)

    problems_path, summary_path = result.write(tmp_path / "out")
    lines = [json.loads(line) for line in problems_path.read_text().splitlines()]
    assert lines[0] == {"id": "easy", "n": 4, "c": 2, "pass_at_k": {"1": 0.5, "2": pytest.approx(5 / 6), "4": 1.0},
                        "statuses": easy.statuses, "tokens": 4}  # the scripted samples are one token each
    assert lines[1]["id"] == "false" and lines[1]["pass_at_k"] == {"1": 0.0, "2": 0.0, "4": 0.0}
    summary = json.loads(summary_path.read_text())
    assert summary["pass_at_k"]["2"] == {"k": 2, "pass_at_k": pytest.approx(5 / 12), "ci_low": pytest.approx(0.0),
                                         "ci_high": pytest.approx(5 / 6), "problems": 2, "confidence": 0.95}
    assert (summary["benchmark"], summary["checkpoint"], summary["n"], summary["seed"]) == ("two", "scripted", 4, 3)
    assert summary["statuses"] == {"valid": 2, "invalid": 4, "timeout": 0, "system_error": 0, "no_proof": 2}
    assert summary["tokens"] == 8
    assert summary["seconds"] >= 0 and summary["wall_seconds"] is None
    table = format_table(result)
    assert "pass@k on two: 2 problems, n = 4 samples each" in table
    assert "     2    0.417  [0.000, 0.833]" in table


def test_evaluate_problems_refuses_what_it_cannot_estimate(pool, prompter):
    engine = ScriptedEngine(four_samples)
    common = {"language": "rocq", "benchmark": "b", "checkpoint": "c"}
    with pytest.raises(ValueError, match="pass@8 needs at least 8 samples per problem"):
        evaluate_problems(engine, pool, prompter, [EASY], ks=[1, 8], settings=SamplingSettings(n=4), **common)
    with pytest.raises(ValueError, match="at least one k"):
        evaluate_problems(engine, pool, prompter, [EASY], ks=[0], settings=SamplingSettings(n=4), **common)
    with pytest.raises(ValueError, match="no problem"):
        evaluate_problems(engine, pool, prompter, [], ks=[1], settings=SamplingSettings(n=4), **common)
    with pytest.raises(ValueError, match="repeated: easy"):
        evaluate_problems(engine, pool, prompter, [EASY, EASY], ks=[1], settings=SamplingSettings(n=4), **common)


@pytest.mark.slow
def test_the_tiny_models_engine_on_rocq_held_out_targets(tmp_path, pool, prompter, tiny_dir):
    problems = load_benchmark("rocq-held-out", "rocq", limit=3).problems
    engine = EngineGroup("eval-test", str(tiny_dir), EngineGroupSettings(num_engines=1,
                                                                         engine_options={"dtype": "float32"}))
    try:
        result = evaluate_problems(engine, pool, prompter, problems, ks=[1, 2],
                                   settings=SamplingSettings(n=2, max_tokens=16, seed=0), language="rocq",
                                   benchmark="rocq-held-out", checkpoint=str(tiny_dir))
    finally:
        engine.shutdown()
    problems_path, summary_path = result.write(tmp_path)
    lines = [json.loads(line) for line in problems_path.read_text().splitlines()]
    assert [line["id"] for line in lines] == [p.id for p in problems]
    for line in lines:
        assert line["n"] == 2 and sum(line["statuses"].values()) == 2 and line["c"] == line["statuses"]["valid"]
        assert set(line["pass_at_k"]) == {"1", "2"}
    summary = json.loads(summary_path.read_text())
    assert summary["problems"] == 3 and set(summary["pass_at_k"]) == {"1", "2"}
    for estimate in summary["pass_at_k"].values():
        assert 0.0 <= estimate["ci_low"] <= estimate["pass_at_k"] <= estimate["ci_high"] <= 1.0


# --------------------------------------------------------------------------
# The command, end to end
# --------------------------------------------------------------------------


#: Small lemmas the search's finishers prove (``auto``, ``tauto``), and a false one it cannot.
SEARCHED = [{"id": "four", "statement": "Theorem four : 2 + 2 = 4."},
            {"id": "imp_refl", "statement": "Theorem imp_refl : forall P : Prop, P -> P."},
            {"id": "and_swap", "statement": "Theorem and_swap : forall P Q : Prop, P /\\ Q -> Q /\\ P."},
            {"id": "zero_plus", "statement": "Theorem zero_plus : forall n : nat, 0 + n = n."},
            {"id": "square", "statement": "Theorem square : forall n : nat, n * n = n."}]


@pytest.mark.slow
def test_the_command_end_to_end(tmp_path, tiny_dir, require_rocq):
    """``evaluation.solver_mode=both``, so one command run covers both modes (the suite's time):
    pass@k from the samples, then one search per problem no sample proved, on Ray actors, the
    model's calls through the same engine group (the untrained model's samples and tactics all
    fail, so what is proved is the finishers'), every proof re-checked by the verifier pool."""
    out, bench = tmp_path / "eval", write_jsonl(tmp_path / "bench.jsonl", SEARCHED)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "SGS_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "sgs.evaluate", f"evaluation.benchmark=jsonl:{bench}", "evaluation.solver_mode=both",
         "evaluation.samples_per_problem=2", "evaluation.ks=[1,2]", "sampling.solver.max_tokens=16",
         "evaluation.seconds_per_target=10", "evaluation.search.finishers=[auto,tauto]", "evaluation.search.width=2",
         "evaluation.search.workers=2", f"evaluation.checkpoint={tiny_dir}", f"evaluation.output_dir={out}",
         "resources.verifier_workers=1", NO_DASHBOARD],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"== pass@k on jsonl:{bench}: 5 problems, n = 2 samples each ==" in proc.stdout
    assert "search (best_first, 10 s per target) on 5 problems: proved 4" in proc.stdout
    assert f"wrote {out / PROBLEMS_FILE} and {out / SUMMARY_FILE}" in proc.stdout
    lines = {line["id"]: line for line in map(json.loads, (out / PROBLEMS_FILE).read_text().splitlines())}
    assert list(lines) == [p["id"] for p in SEARCHED]
    assert all(line["n"] == 2 and sum(line["statuses"].values()) == 2 and line["c"] == 0 for line in lines.values())
    assert {i: line["proved_by"] for i, line in lines.items()} == {
        "four": "search", "imp_refl": "search", "and_swap": "search", "zero_plus": "search", "square": None}
    assert lines["and_swap"]["search"]["proof"] == "Proof.\n  tauto.\nQed."
    assert lines["and_swap"]["search"]["status"] == "valid"
    # The finishers fail on the false lemma, so the model was asked: width samples per call.
    square = lines["square"]["search"]
    assert square["status"] == "not_found" and square["proof"] is None and square["model_calls"] >= 1
    assert square["samples"] == 2 * square["model_calls"] and square["tokens"] >= square["samples"]
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert (summary["benchmark"], summary["checkpoint"], summary["n"], summary["seed"]) == (
        f"jsonl:{bench}", str(tiny_dir), 2, 0)
    assert set(summary["pass_at_k"]) == {"1", "2"} and summary["problems"] == 5
    # Weights from outside a run: their policy version is not known, and is not claimed to be 0.
    assert summary["policy_version"] is None and "(policy version unknown)" in proc.stdout
    assert summary["wall_seconds"] >= summary["seconds"] > 0
    assert summary["solver_mode"] == "both" and summary["solve_rate"] == {"sample": 0.0, "search": 0.8, "total": 0.8}
    assert summary["search"]["proved_within_time"] == 0.8 and summary["search"]["seconds_per_target"] == 10
    assert summary["generations"] == {
        "sample": {"samples": 10, "tokens": sum(line["tokens"] for line in lines.values())},
        "search": {key: sum(line["search"][key] for line in lines.values())
                   for key in ("model_calls", "samples", "tokens")}}
    assert 1 <= summary["search"]["engine_batches"] <= summary["generations"]["search"]["model_calls"]
