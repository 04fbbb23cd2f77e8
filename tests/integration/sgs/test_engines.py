"""Generation engines on a tiny random Llama: samples, log-probs, seeding, stop
handling, weight loading, and the Ray actor group."""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import pytest
import ray
import torch
from transformers import GenerationConfig, LlamaForCausalLM

from sgs import config as C
from sgs.machinery.engines import EngineGroup, EngineGroupSettings, SamplingSettings, build_engine, shares_gpu
from sgs.machinery.engines.base import completion_limit
from sgs.machinery.engines.hf import TransformersEngine
from sgs.machinery.runtime import conjecturer_settings, solver_settings
from tests.config_support import compose_cfg

PROMPTS = ["Theorem add_0_r : forall n : nat, n + 0 = n.\nProof.", "Lemma t : True."]


@pytest.fixture(scope="module")
def engine(checkpoint):
    return TransformersEngine(checkpoint, device="cpu")


@pytest.fixture(scope="module")
def ray_cluster():
    if ray.is_initialized():
        yield
        return
    ray.init(num_cpus=4, include_dashboard=False, logging_level=logging.WARNING)
    yield
    ray.shutdown()


def assert_logprobs_match(engine, sample, temperature=1.0):
    teacher_forced = engine.logprobs_of(sample.prompt_token_ids, sample.token_ids, temperature)
    assert len(teacher_forced) == len(sample.logprobs) == sample.num_tokens
    assert max(abs(a - b) for a, b in zip(teacher_forced, sample.logprobs)) < 1e-4


# --------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"n": 0}, "n"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": -0.5}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"seed": -1}, "seed"),
        ({"max_seq_len": 1}, "max_seq_len"),
    ],
)
def test_sampling_settings_reject_bad_values(bad, field):
    with pytest.raises(ValueError, match=field):
        SamplingSettings(**bad)


# --------------------------------------------------------------------------
# The transformers engine, in process
# --------------------------------------------------------------------------


def test_n_samples_per_prompt_with_consistent_fields(engine):
    results = engine.generate(PROMPTS, SamplingSettings(n=3, max_tokens=12, seed=0))
    assert [len(group) for group in results] == [3, 3]
    for prompt, group in zip(PROMPTS, results):
        for sample in group:
            assert sample.prompt_token_ids == engine.tokenizer(prompt)["input_ids"]
            assert sample.text == engine.tokenizer.decode(sample.token_ids, skip_special_tokens=True)
            assert sample.policy_version == 0
            # A random model almost never says EOS in 12 tokens; either way the fields must agree.
            if sample.finish_reason == "length":
                assert sample.num_tokens == 12
            else:
                assert sample.token_ids[-1] == engine.tokenizer.eos_token_id
            assert all(lp <= 0.0 for lp in sample.logprobs)
            assert 0.0 < sample.entropy <= math.log(10) + 1e-6
            assert_logprobs_match(engine, sample)


def test_tempered_and_nucleus_logprobs_match_a_teacher_forced_pass(engine):
    results = engine.generate(PROMPTS, SamplingSettings(n=2, max_tokens=10, temperature=0.7, top_p=0.5, seed=3))
    for group in results:
        for sample in group:
            assert_logprobs_match(engine, sample, temperature=0.7)


def test_greedy_decoding_takes_the_argmax_and_reports_untempered_logprobs(engine):
    [group] = engine.generate(PROMPTS[:1], SamplingSettings(n=2, max_tokens=8, temperature=0.0))
    assert group[0].token_ids == group[1].token_ids
    sample = group[0]
    assert_logprobs_match(engine, sample, temperature=1.0)
    # Each greedy token is the most likely one given the tokens before it.
    prefix = list(sample.prompt_token_ids)
    for token in sample.token_ids:
        logits = engine.model(input_ids=torch.tensor([prefix])).logits[0, -1]
        assert int(logits.argmax()) == token
        prefix.append(token)


def test_seeded_sampling_is_reproducible(engine):
    settings = SamplingSettings(n=4, max_tokens=10, seed=7)
    first = engine.generate(PROMPTS, settings)
    again = engine.generate(PROMPTS, settings)
    other = engine.generate(PROMPTS, SamplingSettings(n=4, max_tokens=10, seed=8))
    def ids(results):
        return [[s.token_ids for s in group] for group in results]

    assert ids(first) == ids(again)
    assert ids(first) != ids(other)
    # The n samples of one prompt are distinct draws, not copies.
    assert len({tuple(s.token_ids) for s in first[0]}) > 1


def test_left_padding_does_not_change_a_prompts_continuation(engine):
    greedy = SamplingSettings(n=1, max_tokens=8, temperature=0.0)
    short_prompt, long_prompt = "Lemma t : True.", "Theorem mul_comm : forall a b : nat, a * b = b * a."
    [[alone]] = engine.generate([short_prompt], greedy)
    [[padded], _] = engine.generate([short_prompt, long_prompt], greedy)
    assert padded.token_ids == alone.token_ids
    assert max(abs(a - b) for a, b in zip(padded.logprobs, alone.logprobs)) < 1e-4


def test_rows_that_finish_first_leave_the_batch_without_changing_the_others(checkpoint):
    short_prompt, long_prompt = "Lemma t : True.", "Theorem mul_comm : forall a b : nat, a * b = b * a."
    tokens = {p: len(TransformersEngine(checkpoint, device="cpu").tokenizer(p)["input_ids"])
              for p in (short_prompt, long_prompt)}
    # The context limit leaves the long prompt 3 tokens and the short one many more.
    limited = TransformersEngine(checkpoint, device="cpu", max_model_len=tokens[long_prompt] + 3)
    greedy = SamplingSettings(n=1, max_tokens=100, temperature=0.0)
    [[short], [long]] = limited.generate([short_prompt, long_prompt], greedy)
    assert long.num_tokens == 3 < short.num_tokens == tokens[long_prompt] + 3 - tokens[short_prompt]
    [[short_alone]] = limited.generate([short_prompt], greedy)
    assert short.token_ids == short_alone.token_ids
    assert_logprobs_match(limited, short)


def test_generation_stops_on_an_eos_token_and_keeps_it(checkpoint, engine, tmp_path):
    # Make the greedy first token a stop token (via the generation config's EOS list).
    [[probe]] = engine.generate(PROMPTS[:1], SamplingSettings(max_tokens=1, temperature=0.0))
    stop_token = probe.token_ids[0]
    model = LlamaForCausalLM.from_pretrained(checkpoint)
    model.generation_config = GenerationConfig(eos_token_id=[engine.tokenizer.eos_token_id, stop_token])
    model.save_pretrained(tmp_path)
    engine.tokenizer.save_pretrained(tmp_path)
    stopping = TransformersEngine(str(tmp_path), device="cpu")
    [[sample]] = stopping.generate(PROMPTS[:1], SamplingSettings(max_tokens=8, temperature=0.0))
    assert sample.finish_reason == "stop"
    assert sample.token_ids == [stop_token]
    assert sample.text == engine.tokenizer.decode([stop_token], skip_special_tokens=True)


def test_context_limit_cuts_generation_and_rejects_long_prompts(checkpoint):
    limited = TransformersEngine(checkpoint, device="cpu", max_model_len=24)
    prompt_len = len(limited.tokenizer(PROMPTS[1])["input_ids"])
    [[sample]] = limited.generate(PROMPTS[1:], SamplingSettings(max_tokens=100, seed=0))
    assert sample.finish_reason == "length"
    assert sample.num_tokens == 24 - prompt_len
    with pytest.raises(ValueError, match="prompt 0 has .* tokens"):
        limited.generate(["Theorem " * 30], SamplingSettings())


def test_max_seq_len_caps_prompt_plus_completion_and_names_a_prompt_that_fills_it(engine):
    prompt_len = len(engine.tokenizer(PROMPTS[0])["input_ids"])
    capped = SamplingSettings(n=2, max_tokens=100, seed=0, max_seq_len=prompt_len + 5)
    [group] = engine.generate(PROMPTS[:1], capped)
    # A random model almost never says EOS; a sample that does stops earlier.
    for sample in group:
        assert sample.num_tokens <= 5
        assert sample.finish_reason == "stop" or sample.num_tokens == 5
    # Below max_seq_len, max_tokens still rules.
    [[short]] = engine.generate(PROMPTS[:1], replace(capped, n=1, max_tokens=3))
    assert short.num_tokens <= 3
    with pytest.raises(ValueError, match=r"prompt 1 \('Lemma t : True.'\.\.\.\) has .* max_seq_len=6 "
                                         r"\(training.max_seq_len"):
        engine.generate(["Lemma", PROMPTS[1]], SamplingSettings(max_seq_len=6))


@pytest.mark.parametrize(
    "max_tokens, prompt_len, max_model_len, max_seq_len, limit",
    [
        (100, 10, 1000, None, 100),   # max_tokens rules
        (100, 10, 50, None, 40),      # the engine's context
        (100, 10, 1000, 60, 50),      # the learner's max_seq_len
        (100, 10, 30, 60, 20),        # whichever is shorter
        (20, 10, 1000, 60, 20),
    ],
)
def test_completion_limit_is_the_tightest_of_the_three(max_tokens, prompt_len, max_model_len, max_seq_len, limit):
    settings = SamplingSettings(max_tokens=max_tokens, max_seq_len=max_seq_len)
    assert completion_limit(prompt_len, settings, max_model_len) == limit


@pytest.mark.parametrize("experiment, solver_cap, conjecturer_cap", [
    ("standard", 1024, 1024),
    ("frozen_conjecturer", 1024, None),   # its samples are never trained on
    ("parallel_sampling", 1024, None),    # an untrained Solver samples as a trained one does
])
def test_the_loops_samples_are_capped_at_max_seq_len_for_the_solver_and_the_roles_the_learner_trains(
        experiment, solver_cap, conjecturer_cap):
    cfg = C.validate(compose_cfg(f"+experiment={experiment}", "model=tiny", "prover=rocq", "resources=local_cpu",
                                 "scale=laptop"))
    assert cfg.training.max_seq_len == 1024
    assert solver_settings(cfg, seed=0).max_seq_len == solver_cap
    assert conjecturer_settings(cfg, seed=0).max_seq_len == conjecturer_cap
    # Every experiment's Solver samples under the same settings: with one seed they share
    # their iteration-0 samples (the start cache keys a sample by its settings).
    rl = C.validate(compose_cfg("+experiment=reinforce_half_solver_only", "model=tiny", "prover=rocq",
                                "resources=local_cpu", "scale=laptop"))
    assert solver_settings(cfg, seed=7) == solver_settings(rl, seed=7)


def test_bad_prompts_and_backends_are_rejected(engine, checkpoint):
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        engine.generate(["Lemma t : True.", ""], SamplingSettings())
    assert engine.generate([], SamplingSettings()) == []
    with pytest.raises(ValueError, match="unknown engine_backend 'sglang'"):
        build_engine("sglang", checkpoint)


def test_load_weights_changes_outputs_and_bumps_the_version(checkpoint, other_checkpoint):
    swapping = TransformersEngine(checkpoint, device="cpu")
    greedy = SamplingSettings(max_tokens=6, temperature=0.0)
    [[before]] = swapping.generate(PROMPTS[:1], greedy)
    swapping.load_weights(other_checkpoint, policy_version=1)
    assert swapping.policy_version == 1
    [[after]] = swapping.generate(PROMPTS[:1], greedy)
    assert after.policy_version == 1
    assert after.logprobs != before.logprobs
    assert swapping.logprobs_of(before.prompt_token_ids, before.token_ids) != before.logprobs
    with pytest.raises(ValueError, match="policy_version"):
        swapping.load_weights(other_checkpoint, policy_version=-1)


# --------------------------------------------------------------------------
# Ray actors
# --------------------------------------------------------------------------


def test_engine_group_streams_chunks_and_broadcasts_weights(ray_cluster, checkpoint, other_checkpoint, engine):
    group = EngineGroup("solver", checkpoint, EngineGroupSettings(num_engines=2, num_cpus=0.5,
                                                                  engine_options={"device": "cpu"}))
    try:
        # Actors are findable by role name, e.g. from the dashboard or another driver.
        assert [ray.get(ray.get_actor(f"engine-solver-{i}").policy_version.remote()) for i in range(2)] == [0, 0]
        prompts = [f"Lemma l{i} : True." for i in range(5)]
        settings = SamplingSettings(n=2, max_tokens=6, seed=11)

        submitted = group.submit(prompts, settings, chunk_size=2)
        assert [indices for _, indices in submitted] == [[0, 1], [2, 3], [4]]
        assert group.outstanding == 3
        streamed = {}
        pending = dict(submitted)
        while group.outstanding:
            for key, chunk in group.poll(timeout=1.0):
                for index, samples in zip(pending.pop(key), chunk):
                    streamed[index] = samples
        assert not pending and sorted(streamed) == list(range(5))
        assert all(len(samples) == 2 for samples in streamed.values())

        # Blocking form: prompt order, reproducible, and each chunk equals a local engine given the chunk's seed.
        results = group.generate(prompts, settings, chunk_size=2)
        assert [[s.token_ids for s in results[i]] for i in range(5)] == [
            [s.token_ids for s in streamed[i]] for i in range(5)
        ]
        local = engine.generate(prompts[2:4], SamplingSettings(n=2, max_tokens=6, seed=11 + 2))
        assert [[s.token_ids for s in g] for g in local] == [[s.token_ids for s in g] for g in results[2:4]]

        group.load_weights(other_checkpoint, policy_version=1)
        assert group.policy_version == 1
        after = group.generate(prompts, settings, chunk_size=2)
        assert {s.policy_version for g in after for s in g} == {1}
    finally:
        group.shutdown()


def test_groups_started_without_waiting_load_at_once_and_report_a_failed_load(ray_cluster, checkpoint,
                                                                              other_checkpoint, tmp_path):
    # How the loop starts its roles: every group's actors are created first, then waited for.
    on_cpu = EngineGroupSettings(num_cpus=0.5, engine_options={"device": "cpu"})
    solver = EngineGroup("solver", checkpoint, on_cpu, wait=False)
    guide = EngineGroup("guide", other_checkpoint,
                        EngineGroupSettings(num_cpus=0.5, engine_options={"device": "cpu", "policy_version": 3}),
                        wait=False)
    missing = tmp_path / "no-such-checkpoint"
    broken = EngineGroup("broken", str(missing), on_cpu, wait=False)
    try:
        for group in (solver, guide):
            group.wait_until_loaded()
        assert (solver.policy_version, guide.policy_version) == (0, 3)
        settings = SamplingSettings(n=1, max_tokens=4, seed=5)
        assert len(solver.generate(["Lemma a : True."], settings)[0]) == 1
        # A group whose model cannot load fails when it is waited for, naming the path, and holds nothing after.
        with pytest.raises(Exception, match="no-such-checkpoint"):
            broken.wait_until_loaded()
        assert broken.actors == []
    finally:
        for group in (solver, guide, broken):
            group.shutdown()


@pytest.mark.parametrize("gpu_ids, num_gpus, shared", [
    (None, 0, False), (None, 1, False), (None, 2, False),  # CPU engines; whole GPUs of their own
    (None, 0.5, True),                                     # Ray may put two halves on one GPU
    (["0", "1", "2"], 0, False), (["0", "1", "0"], 0, True),
])
def test_engines_share_a_gpu_when_pinned_to_one_id_or_reserving_fractions(gpu_ids, num_gpus, shared):
    assert shares_gpu(gpu_ids, num_gpus) is shared


def test_engines_pinned_to_one_gpu_load_one_after_another(ray_cluster, tmp_path):
    # Each actor is waited for before the next is created, even with wait=False: a load that fails
    # raises while the group is built (not later, in wait_until_loaded) and leaves no actor behind.
    missing = str(tmp_path / "no-such-checkpoint")
    with pytest.raises(Exception, match="no-such-checkpoint"):
        EngineGroup("shared", missing, EngineGroupSettings(num_engines=2, num_cpus=0.5, gpu_ids=["0", "0"],
                                                           engine_options={"device": "cpu"}), wait=False)
    assert not any(name.startswith("engine-shared-") for name in _named_actors())


def _named_actors() -> list[str]:
    """Names of the live named actors of the test cluster."""
    return [entry["name"] for entry in ray.util.list_named_actors(all_namespaces=True)]
