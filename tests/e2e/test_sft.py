"""The warm start (``sgs.sft``) and the evaluation helpers (``sgs.evaluate``).

The prompt and cache-key tests are plain Python.  The others use real Ray:
the warm start runs the real Ray Train learner on a few corpus lines, and the
evaluation helpers check scripted model outputs with the real Rocq verifier
pool.  The slow test kills ``python -m sgs.sft`` mid-training and runs it
again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from transformers import AutoModelForCausalLM, AutoTokenizer

from lean_env.backends import BackendSpec
from lean_env.pool import VerifierPool, VerifierPoolSettings
from sgs.config import CONFIG_DIR, CONFIG_NAME, ROCQ_TARGETS, SGSConfig, TargetsConfig, TinyModelSettings, validate
from sgs.machinery.engines import Sample, SamplingSettings
from sgs.analysis.evaluation import HELD_OUT_FILE, conjecturer_outputs, guide_parse_rate, held_out_pass_at_k, solver_pass_at_k
from sgs.machinery.learner import TrainExample
from sgs.machinery.models import ModelPaths, build_tiny_model
from sgs.state.records import Target
from sgs.method.roles import Role
from sgs.machinery.prompts import Prompter, chat_prompt
from sgs import sft
from sgs.sft import (
    CACHE_SUBDIR,
    INFO_FILE,
    REPORT_FILE,
    _sampled_as,
    cache_key,
    cached_checkpoint,
    key_digest,
    prepare,
    training_examples,
    warm_start,
)
from sgs.state.targets import load_targets, seeded_subsample
from sgs.state.warmstart import load_corpus
from tests.kill_support import run_until_then_kill
from tests.paths import REPO

#: A tiny model small enough to train in seconds (head_dim 32).
SMALL = TinyModelSettings(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048)


def config(*overrides: str) -> SGSConfig:
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return validate(compose(config_name=CONFIG_NAME, overrides=list(overrides)))


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", [], SMALL, seed=0)


@pytest.fixture(scope="module")
def paths(tiny_dir) -> ModelPaths:
    return ModelPaths(base=str(tiny_dir), tokenizer=str(tiny_dir), guide=str(tiny_dir))


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    """The first four lines of each role of the shipped corpus."""
    lines = (REPO / "sgs" / "data" / "warmstart_rocq.jsonl").read_text().splitlines()
    chosen = [line for role in ("solver", "conjecturer", "guide")
              for line in [x for x in lines if json.loads(x)["role"] == role][:4]]
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("\n".join(chosen) + "\n")
    return path


# --------------------------------------------------------------------------
# Prompts and the cache key
# --------------------------------------------------------------------------


def test_corpus_prompts_are_the_loops_prompts_tokenised_as_the_engines_do(tiny_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    prompter = Prompter("rocq", tokenizer)
    targets = {t.id: t for t in load_targets(TargetsConfig(source=ROCQ_TARGETS), "rocq")}
    corpus = load_corpus()
    solver = [e for e in corpus if e.role is Role.SOLVER and e.source in targets][:25]
    conjecturer = [e for e in corpus if e.role is Role.CONJECTURER][:25]
    assert len(solver) == len(conjecturer) == 25
    for example, trained in zip(solver + conjecturer, training_examples(solver + conjecturer, tokenizer,
                                                                         ["solver", "conjecturer"])):
        target = targets[example.source]
        # What the loop sends the engines for this target, token for token.
        sampled = (prompter.solver(target.header, target.statement) if example.role is Role.SOLVER
                   else prompter.conjecturer(target))
        assert trained.prompt_ids == prompter.token_ids(sampled)
        assert trained.completion_ids[-1] == tokenizer.eos_token_id  # the model learns to stop
        assert tokenizer.decode(trained.completion_ids[:-1]) == example.completion
        assert trained.weight == 1.0
    guide = [e for e in corpus if e.role is Role.GUIDE][:5]
    trained = training_examples(corpus, tokenizer, ["guide"])
    assert len(trained) == sum(e.role is Role.GUIDE for e in corpus)
    assert [t.prompt_ids for t in trained[:5]] == [prompter.token_ids(chat_prompt(tokenizer, e.prompt))
                                                   for e in guide]


def test_max_examples_keeps_a_seeded_sample_in_corpus_order():
    examples = [TrainExample(prompt_ids=[i], completion_ids=[i], weight=1.0) for i in range(10)]
    sample = seeded_subsample(examples, 4, seed=0)
    assert len(sample) == 4 and len(set(map(id, sample))) == 4
    assert [e.prompt_ids for e in sample] == sorted(e.prompt_ids for e in sample)  # corpus order
    assert sample == seeded_subsample(examples, 4, seed=0) != seeded_subsample(examples, 4, seed=1)
    assert seeded_subsample(examples, None, seed=0) == examples == seeded_subsample(examples, 10, seed=0)


def test_the_cache_key_covers_corpus_model_and_settings(tmp_path, small_corpus, paths):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(small_corpus.read_bytes())
    base = config(f"warmstart.corpus={corpus}")
    digest = key_digest(cache_key(base, paths))
    assert digest == key_digest(cache_key(config(f"warmstart.corpus={corpus}"), paths))
    # Placement changes the speed, not the weights.
    assert digest == key_digest(cache_key(config(f"warmstart.corpus={corpus}", "resources.cpus_per_learner_worker=2"),
                                          paths))
    changed = [
        config(f"warmstart.corpus={corpus}", "warmstart.learning_rate=0.5"),
        config(f"warmstart.corpus={corpus}", "warmstart.epochs=7"),
        config(f"warmstart.corpus={corpus}", "warmstart.roles=[guide]"),
        config(f"warmstart.corpus={corpus}", "seed=3"),
        config(f"warmstart.corpus={corpus}", "warmstart.max_examples=3"),
    ]
    assert len({digest, *(key_digest(cache_key(cfg, paths)) for cfg in changed)}) == 6
    # Unset, it is not in the key: full-corpus caches written before it existed stay valid.
    assert "max_examples" not in cache_key(base, paths)
    other_model = build_tiny_model(tmp_path / "other", [], SMALL, seed=1)
    assert key_digest(cache_key(base, replace(paths, base=str(other_model)))) != digest
    corpus.write_text(corpus.read_text() + corpus.read_text().splitlines()[0] + "\n")  # same name, new content
    assert key_digest(cache_key(base, paths)) != digest


# --------------------------------------------------------------------------
# Training through Ray Train, with the cache
# --------------------------------------------------------------------------


def small_config(corpus: Path, *overrides: str) -> SGSConfig:
    return config(f"warmstart.corpus={corpus}", "warmstart.epochs=2", "warmstart.learning_rate=1e-2",
                  "warmstart.global_batch_size=4", "warmstart.micro_batch_size=2", "method.num_solver_samples=2",
                  "sampling.solver.max_tokens=24", "sampling.conjecturer.max_tokens=24",
                  "sampling.guide.max_tokens=24", "resources.verifier_workers=1", *overrides)


def test_a_warm_start_trains_once_then_comes_from_the_cache(ray_session, require_rocq, tmp_path, small_corpus,
                                                            paths):
    cfg = small_config(small_corpus)
    root = tmp_path / CACHE_SUBDIR
    # What a run killed mid-training leaves behind: a staging directory, never a finished checkpoint.
    staging = root / f".{key_digest(cache_key(cfg, paths))[:16]}.partial"
    staging.mkdir(parents=True)
    (staging / "config.json").write_text("{half written")
    assert cached_checkpoint(cfg, paths, tmp_path) is None

    first = warm_start(cfg, paths, cache_dir=tmp_path)
    assert first.trained and first.report is None
    assert not staging.exists()
    metrics = first.info["metrics"]
    assert first.info["examples"] == metrics["num_examples"] == 12
    assert metrics["num_steps"] == 2 * 3  # 2 epochs of 12 examples in steps of 4
    weights = AutoModelForCausalLM.from_pretrained(first.checkpoint).state_dict()
    base = AutoModelForCausalLM.from_pretrained(paths.base).state_dict()
    assert any(not weights[name].equal(base[name]) for name in base)
    AutoTokenizer.from_pretrained(first.checkpoint)  # engines load the checkpoint with its tokenizer

    second = warm_start(cfg, paths, cache_dir=tmp_path)
    assert not second.trained
    assert second.checkpoint == first.checkpoint and second.info == first.info  # the same training's record

    # The report is measured once, stored beside the checkpoint and then read back.
    training = [t for t in load_targets(TargetsConfig(source=ROCQ_TARGETS), "rocq") if not t.held_out][:3]
    lines: list[str] = []
    prepared = prepare(cfg, paths, training, cache_dir=tmp_path, log=lines.append)
    report = prepared.report
    assert json.loads((Path(first.checkpoint) / REPORT_FILE).read_text()) == report
    assert report["targets"] == 3 and report["k"] == 2
    for key in ("solver_pass_at_k", "solver_sample_valid_rate", "conjecturer_parse_rate",
                "conjecturer_elaboration_rate"):
        assert 0.0 <= report[key] <= 1.0
    assert any(line.startswith("warm-up: Solver pass@2") for line in lines)
    again = prepare(cfg, paths, training, cache_dir=tmp_path, log=lambda line: None)
    assert again.report == report and not again.trained
    # A run that samples the Conjecturer otherwise measures the report again (and keeps the checkpoint).
    assert report["conjecturer_grammar"] == "statement"
    free = prepare(small_config(small_corpus, "sampling.conjecturer_grammar=null"), paths, training,
                   cache_dir=tmp_path, log=lambda line: None)
    assert free.checkpoint == first.checkpoint and free.report["conjecturer_grammar"] is None

    # Other settings are another checkpoint.
    assert cached_checkpoint(small_config(small_corpus, "warmstart.epochs=1"), paths, tmp_path) is None


def test_runs_started_together_measure_the_report_once(tmp_path, small_corpus, paths, tiny_dir, monkeypatch):
    """Two runs that find the same cached checkpoint without a report (a
    multirun's jobs): the first measures it under the cache's lock, the second
    waits and reads it.  The report itself is a stand-in here (it needs engines
    and a prover; the test above measures a real one)."""
    cfg = small_config(small_corpus)
    digest = key_digest(cache_key(cfg, paths))
    checkpoint = tmp_path / CACHE_SUBDIR / digest[:16]
    shutil.copytree(tiny_dir, checkpoint)  # a finished warm start: weights, tokenizer, info file
    (checkpoint / INFO_FILE).write_text(json.dumps({"digest": digest, "key": cache_key(cfg, paths)}))
    measured = []

    def slow_report(cfg, checkpoint, tokenizer, targets, pool=None):
        measured.append(checkpoint)
        time.sleep(1.0)  # long enough for the other thread to reach the lock
        return {"solver_pass_at_k": 0.5, "solver_sample_valid_rate": 0.25, "k": 2, "targets": 0,
                "conjecturer_parse_rate": 1.0, "conjecturer_elaboration_rate": 1.0, "guide_parse_rate": None,
                "guide_reviews": 0, **_sampled_as(cfg)}

    monkeypatch.setattr(sft, "warmup_report", slow_report)
    with ThreadPoolExecutor(2) as threads:
        results = list(threads.map(lambda _: prepare(cfg, paths, [], cache_dir=tmp_path, log=lambda line: None),
                                   range(2)))
    assert measured == [str(checkpoint)]
    assert results[0].report == results[1].report == json.loads((checkpoint / REPORT_FILE).read_text())


@pytest.mark.slow
@pytest.mark.full  # make test-full; not in CI
def test_the_command_survives_a_kill_mid_training_and_then_uses_its_cache(tmp_path, small_corpus, require_rocq):
    overrides = ["model=tiny", f"warmstart.corpus={small_corpus}", "warmstart.epochs=20", "warmstart.learning_rate=1e-3",
                 "warmstart.global_batch_size=4", "warmstart.micro_batch_size=4", "warmstart.report_targets=2",
                 "method.num_solver_samples=2", "sampling.solver.max_tokens=16", "sampling.conjecturer.max_tokens=16",
                 "sampling.guide.max_tokens=16", "resources.verifier_workers=1",
                 *(f"model.tiny.{key}={value}" for key, value in (("hidden_size", 64), ("intermediate_size", 128),
                                                                  ("num_hidden_layers", 1),
                                                                  ("num_attention_heads", 2),
                                                                  ("num_key_value_heads", 2)))]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "SGS_CACHE_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "sgs.sft", *overrides]
    root = tmp_path / CACHE_SUBDIR
    # The learner makes the staging directory its workers write into once training is posted.
    code = run_until_then_kill(command, lambda: bool(list(root.glob(".*.partial/.staging"))),
                               "training never started", poll=0.1, cwd=REPO, env=env)
    assert code == -signal.SIGKILL
    assert not [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]  # nothing finished

    second = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "(trained," in second.stdout and "warm-up: Solver pass@2" in second.stdout
    finished = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(finished) == 1 and (finished[0] / REPORT_FILE).is_file()
    assert not list(root.glob(".*.partial"))  # the killed run's staging directory is gone
    third = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert third.returncode == 0, third.stderr[-3000:]
    assert "(cached," in third.stdout and "fine-tuning" not in third.stdout


def test_the_command_refuses_a_config_it_would_not_warm_start():
    proc = subprocess.run([sys.executable, "-m", "sgs.sft", "warmstart.mode=never"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "warmstart.mode='never' does not warm-start" in proc.stderr
    assert "use warmstart.mode=always" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "sgs.sft", "warmstart.mode=sometimes"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "warmstart.mode='sometimes' is not one of auto, always, never" in proc.stderr


# --------------------------------------------------------------------------
# Evaluation: scripted outputs, the real verifier pool
# --------------------------------------------------------------------------

HEADER = "Require Import Arith."
EASY = Target("easy", HEADER, "Theorem easy : 2 + 2 = 4.", held_out=True)
FALSE = Target("false", HEADER, "Theorem false : 1 = 2.", held_out=True)
TRAINING = Target("training", HEADER, "Theorem training : True.")


class ScriptedEngine:
    """Stands in for an :class:`~sgs.machinery.engines.EngineGroup`: ``answer(prompt, i)``
    is the text of sample i; each prompt is one chunk, back at the next poll."""

    def __init__(self, answer: Callable[[str, int], str], policy_version: int = 0):
        self.answer = answer
        self.actors = [None]
        self.policy_version = policy_version
        self.calls = 0
        self._done: list[tuple[int, list[list[Sample]]]] = []
        self._next_chunk = 0

    def _samples(self, prompt: str, n: int) -> list[Sample]:
        return [Sample(text=self.answer(prompt, i), token_ids=[1], logprobs=[-0.1], prompt_token_ids=[1],
                       finish_reason="stop", policy_version=self.policy_version, entropy=0.0) for i in range(n)]

    def submit(self, prompts, settings, chunk_size=None):
        self.calls += 1
        submitted = []
        for index, prompt in enumerate(prompts):
            self._done.append((self._next_chunk, [self._samples(prompt, settings.n)]))
            submitted.append((self._next_chunk, [index]))
            self._next_chunk += 1
        return submitted

    def poll(self, timeout=0.0):
        done, self._done = self._done, []
        return done

    def waitables(self):
        return []  # every chunk is ready at once

    @property
    def outstanding(self):
        return len(self._done)

    def generate(self, prompts, settings, chunk_size=None):
        self.calls += 1
        return [self._samples(p, settings.n) for p in prompts]


def solver_answer(prompt: str, index: int) -> str:
    """Two samples per target: a proof that closes ``2 + 2 = 4`` (not ``1 = 2``), then hostile junk."""
    if index == 0:
        return "```coq\nProof.\n  reflexivity.\nQed.\n```"
    return "```coq\nProof.\n  Admitted.\n```" if "easy" in prompt else "\x00 no proof here"


@pytest.fixture(scope="module")
def pool(ray_session, require_rocq):
    pool = VerifierPool(BackendSpec("rocq"), VerifierPoolSettings(num_workers=1, timeout=30))
    yield pool
    pool.shutdown()


@pytest.fixture(scope="module")
def prompter(tiny_dir) -> Prompter:
    return Prompter("rocq", AutoTokenizer.from_pretrained(tiny_dir))


def test_pass_at_k_counts_valid_proofs_per_target(pool, prompter):
    result = solver_pass_at_k(ScriptedEngine(solver_answer), pool, prompter, [EASY, FALSE],
                              SamplingSettings(n=2, seed=0), "rocq")
    assert result.valid == {"easy": 1, "false": 0}
    assert result.pass_at_k == 0.5 and result.sample_valid_rate == 0.25 and result.targets == 2
    assert solver_pass_at_k(ScriptedEngine(solver_answer), pool, prompter, [], SamplingSettings(n=2),
                            "rocq").pass_at_k == 0.0


def test_held_out_pass_at_k_is_measured_once_per_policy_version(tmp_path, pool, prompter):
    targets = [TRAINING, EASY, FALSE]
    engine = ScriptedEngine(solver_answer)
    first = held_out_pass_at_k(tmp_path, engine, pool, prompter, targets, SamplingSettings(n=2, seed=0), "rocq")
    assert first["policy_version"] == 0 and first["targets"] == 2 and first["pass_at_k"] == 0.5
    assert held_out_pass_at_k(tmp_path, engine, pool, prompter, targets, SamplingSettings(n=2, seed=0),
                              "rocq") == first
    assert engine.calls == 1  # the second call read the stored result
    later = ScriptedEngine(lambda prompt, i: "```coq\nProof.\n  reflexivity.\nQed.\n```", policy_version=3)
    assert held_out_pass_at_k(tmp_path, later, pool, prompter, targets, SamplingSettings(n=2, seed=0),
                              "rocq")["sample_valid_rate"] == 0.5
    assert set(json.loads((tmp_path / HELD_OUT_FILE).read_text())) == {"0", "3"}
    assert held_out_pass_at_k(tmp_path, later, pool, prompter, [TRAINING], SamplingSettings(n=2), "rocq") is None


def test_format_rates_of_the_conjecturer_and_the_guide(pool, prompter):
    statements = {"easy": "Theorem c : 1 + 1 = 2.", "false": "Theorem d : 1 + true = 2.", "training": "no block"}
    conjecturer = ScriptedEngine(lambda prompt, i: next(
        f"```coq\n{s}\nAdmitted.\n```" if s.startswith("Theorem") else s
        for name, s in statements.items() if f"Theorem {name} :" in prompt))
    outputs = conjecturer_outputs(conjecturer, pool, prompter, [EASY, FALSE, TRAINING], SamplingSettings(n=5),
                                  "rocq")
    assert outputs.samples == 3 and [t.id for t, _ in outputs.parsed] == ["easy", "false"]
    assert outputs.parse_rate == pytest.approx(2 / 3) and outputs.elaboration_rate == pytest.approx(1 / 3)

    review = ("<begin_relevance_score>4<end_relevance_score>\n<begin_redundancy_score>0<end_redundancy_score>\n"
              "<begin_conclusion_complexity_score>0<end_conclusion_complexity_score>")
    guide = ScriptedEngine(lambda prompt, i: review if "Theorem c :" in prompt else "relevance: high")
    assert guide_parse_rate(guide, prompter, outputs.parsed, SamplingSettings()) == 0.5
    assert guide_parse_rate(guide, prompter, [], SamplingSettings()) is None
