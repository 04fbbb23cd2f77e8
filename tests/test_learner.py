"""The learner: input checks, the step plan, gradient accumulation, and one
real Ray Train run on a tiny Llama."""

from __future__ import annotations

import copy
import logging
import math
import os
import uuid
from dataclasses import replace

import pytest
import ray
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from sgs.engines.hf import TransformersEngine
from sgs.learner import (
    OPTIMIZER_FILE,
    STAGING_DIR,
    TrainExample,
    TrainSettings,
    plan_steps,
    run_steps,
    train,
    truncate,
)
from sgs.models.tiny import TinyModelSettings, build_tiny_model

TINY = TinyModelSettings(
    vocab_size=320, hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=2,
    max_position_embeddings=256,
)
PAIRS = [
    ("Theorem add_0_r : forall n : nat, n + 0 = n.\n", "Proof. intros n. induction n; simpl; auto. Qed."),
    ("Lemma and_comm : forall P Q : Prop, P /\\ Q -> Q /\\ P.\n", "Proof. intros P Q [HP HQ]. split; assumption. Qed."),
    ("Theorem mul_two (m : nat) : 2 * m = m + m.\n", "Proof. lia. Qed."),
    ("Lemma t : True.\n", "Proof. exact I. Qed."),
    ("Example two : 2 + 2 = 4.\n", "Proof. reflexivity. Qed."),
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", [], TINY, seed=0))


@pytest.fixture(scope="module")
def tokenizer(checkpoint):
    return AutoTokenizer.from_pretrained(checkpoint)


@pytest.fixture(scope="module")
def ray_cluster():
    if ray.is_initialized():
        yield
        return
    ray.init(num_cpus=4, logging_level=logging.WARNING)
    yield
    ray.shutdown()


def make_examples(tokenizer, weight=1.0, group_size=None):
    """One example per PAIRS entry; with group_size, CISPO fields too (fake sampler log-probs)."""
    examples = []
    for index, (prompt, completion) in enumerate(PAIRS):
        prompt_ids = tokenizer(prompt)["input_ids"]
        completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        extra = {}
        if group_size is not None:
            extra = {"old_logprobs": [-5.0 - 0.1 * t for t in range(len(completion_ids))], "group_id": index // group_size}
        # Mixed signs, so that sign handling matters in the comparisons below.
        w = weight if group_size is None else (1.0 if index % 2 else -1.0)
        examples.append(TrainExample(prompt_ids, completion_ids, w, **extra))
    return examples


# --------------------------------------------------------------------------
# Input checks (no Ray run starts)
# --------------------------------------------------------------------------


def test_mismatched_old_logprobs_are_rejected_with_the_example_index(checkpoint, tokenizer, tmp_path):
    examples = make_examples(tokenizer, group_size=2)
    examples[1] = TrainExample(
        examples[1].prompt_ids, examples[1].completion_ids, 1.0, examples[1].old_logprobs[:-1], group_id=0
    )
    with pytest.raises(ValueError, match=r"example 1: old_logprobs has \d+ entries but completion_ids has \d+ tokens"):
        train(examples, base_checkpoint=checkpoint, objective="cispo", settings=TrainSettings(),
              output_dir=str(tmp_path / "out"), run_name="never-starts")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "example, objective, message",
    [
        (TrainExample([5], [], 1.0), "reinforce", "example 0: completion_ids is empty"),
        (TrainExample([5], [10_000], 1.0), "reinforce", r"example 0: completion_ids holds 10000, not a token id"),
        (TrainExample([5], [6], math.nan), "reinforce", "example 0: weight nan is not finite"),
        (TrainExample([5], [6], 1.0, old_logprobs=[0.5]), "reinforce", "finite log-probabilities"),
        (TrainExample([5], [6], 1.0, old_logprobs=[-1.0]), "cispo", "CISPO needs a group_id"),
        (TrainExample([5], [6], 1.0, group_id=0), "cispo", "CISPO needs old_logprobs"),
        (TrainExample([5], [6], 1.0), "ppo", "unknown objective 'ppo'"),
    ],
)
def test_bad_examples_are_rejected(checkpoint, tmp_path, example, objective, message):
    with pytest.raises(ValueError, match=message):
        train([example], base_checkpoint=checkpoint, objective=objective, settings=TrainSettings(),
              output_dir=str(tmp_path / "out"), run_name="never-starts")


def test_output_dir_must_not_be_the_base_checkpoint(checkpoint, tokenizer):
    with pytest.raises(ValueError, match="is the base checkpoint"):
        train(make_examples(tokenizer), base_checkpoint=checkpoint, objective="reinforce",
              settings=TrainSettings(), output_dir=checkpoint, run_name="never-starts")


def test_no_examples_means_no_run_and_the_base_checkpoint_back(checkpoint, tmp_path):
    result = train([], base_checkpoint=checkpoint, objective="reinforce_half", settings=TrainSettings(),
                   output_dir=str(tmp_path / "out"), run_name="never-starts")
    assert result.checkpoint_dir == checkpoint
    assert (result.metrics.num_steps, result.metrics.num_examples, result.metrics.num_tokens) == (0, 0, 0)
    assert not (tmp_path / "out").exists()


def test_truncation_cuts_the_completion_end():
    example = TrainExample([1, 2, 3], [4, 5, 6, 7], 1.0, old_logprobs=[-1.0, -2.0, -3.0, -4.0])
    cut = truncate(example, max_seq_len=5)
    assert (cut.completion_ids, cut.old_logprobs) == ([4, 5], [-1.0, -2.0])
    assert truncate(example, max_seq_len=7) is example
    with pytest.raises(ValueError, match="example 3: its prompt has 3 tokens"):
        truncate(example, max_seq_len=3, index=3)


# --------------------------------------------------------------------------
# The step plan
# --------------------------------------------------------------------------


def test_cispo_steps_hold_whole_groups_with_global_normalisers(tokenizer):
    examples = make_examples(tokenizer, group_size=2)  # groups {0,1}, {2,3}, {4}
    settings = TrainSettings(global_batch_size=4, num_workers=2, seed=3)
    plan = plan_steps(examples, "cispo", settings)
    assert len(plan) == 2 and len(plan[0]) == len(plan[1])
    by_ids = {tuple(e.completion_ids): e for e in examples}
    seen = []
    for step in zip(*plan):
        sequences = [s for worker_step in step for batch in worker_step.micro_batches for s in batch if s.weight != 0.0]
        groups = {by_ids[tuple(s.completion_ids)].group_id for s in sequences}
        # Every member of every group in the step is in the step.
        assert sorted(by_ids[tuple(s.completion_ids)].group_id for s in sequences) == sorted(
            e.group_id for e in examples if e.group_id in groups
        )
        assert {w.num_tokens for w in step} == {sum(len(s.completion_ids) for s in sequences)}
        assert {w.num_groups for w in step} == {len(groups)}
        for s in sequences:
            assert s.group_num_tokens == sum(len(t.completion_ids) for t in sequences if t.group == s.group)
        seen += [tuple(s.completion_ids) for s in sequences]
    assert sorted(seen) == sorted(tuple(e.completion_ids) for e in examples)
    assert plan == plan_steps(examples, "cispo", settings)


def test_an_idle_worker_gets_a_zero_weight_filler(tokenizer):
    examples = make_examples(tokenizer)  # 5 examples, batches of 4: the second step has 1 sequence
    plan = plan_steps(examples, "reinforce", TrainSettings(global_batch_size=4, num_workers=3, epochs=2, seed=0))
    assert [len(worker) for worker in plan] == [4, 4, 4]  # 2 steps per epoch on every worker
    last = [worker[1] for worker in plan]
    weights = [[s.weight for batch in w.micro_batches for s in batch] for w in last]
    assert weights == [[1.0], [0.0], [0.0]]
    assert {w.num_sequences for w in last} == {1}
    # Epochs are reshuffled, and the whole run is reproducible from the seed.
    first_epoch = [s.completion_ids for w in plan for batch in w[0].micro_batches for s in batch]
    second_epoch = [s.completion_ids for w in plan for batch in w[2].micro_batches for s in batch]
    assert first_epoch != second_epoch
    assert plan == plan_steps(examples, "reinforce", TrainSettings(global_batch_size=4, num_workers=3, epochs=2, seed=0))


# --------------------------------------------------------------------------
# Gradient accumulation
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "objective, normalisation",
    [("reinforce", "token_mean"), ("reinforce", "sequence_mean"), ("conjecturer", "token_mean"), ("cispo", "token_mean")],
)
def test_micro_batches_give_the_gradient_of_one_big_batch(checkpoint, tokenizer, objective, normalisation):
    weight = 0.5 if objective == "conjecturer" else 1.0
    examples = make_examples(tokenizer, weight=weight, group_size=2 if objective == "cispo" else None)
    base = AutoModelForCausalLM.from_pretrained(checkpoint)
    updates = []
    for micro_batch_size in (1, 2, 5):
        settings = TrainSettings(
            global_batch_size=5, micro_batch_size=micro_batch_size, loss_normalisation=normalisation, grad_clip=1e9
        )
        [steps] = plan_steps(examples, objective, settings)
        model = copy.deepcopy(base)
        # SGD with lr 1 makes the parameter update equal to minus the gradient.
        run_steps(model, torch.optim.SGD(model.parameters(), lr=1.0), steps, objective, settings)
        updates.append(torch.cat([(p - q).flatten() for p, q in zip(model.parameters(), base.parameters())]))
    assert updates[0].abs().max() > 0
    for other in updates[1:]:
        torch.testing.assert_close(other, updates[0], atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("num_workers", [2, 7])  # 7 > 5 sequences: two workers train only a filler
def test_worker_shards_sum_to_the_whole_batch_gradient(checkpoint, tokenizer, num_workers):
    """What DDP sums over ranks (world size x its mean) equals the single-worker gradient."""
    examples = make_examples(tokenizer, group_size=2)
    base = AutoModelForCausalLM.from_pretrained(checkpoint)

    def update(steps, settings):
        model = copy.deepcopy(base)
        run_steps(model, torch.optim.SGD(model.parameters(), lr=1.0), steps, "cispo", settings)
        return torch.cat([(p - q).flatten() for p, q in zip(model.parameters(), base.parameters())])

    whole = TrainSettings(global_batch_size=5, grad_clip=1e9)
    [single] = plan_steps(examples, "cispo", whole)
    sharded = replace(whole, num_workers=num_workers)
    shards = [update(worker_steps, sharded) for worker_steps in plan_steps(examples, "cispo", sharded)]
    torch.testing.assert_close(sum(shards), update(single, whole), atol=1e-6, rtol=1e-4)


# --------------------------------------------------------------------------
# One real Ray Train run
# --------------------------------------------------------------------------


@pytest.mark.slow
def test_training_raises_likelihood_and_writes_a_loadable_checkpoint(ray_cluster, checkpoint, tokenizer, tmp_path):
    examples = make_examples(tokenizer)
    # Cut the longest completion, to check truncation reaches the workers and the metrics.
    max_seq_len = max(len(e.prompt_ids) + len(e.completion_ids) for e in examples) - 3
    trained = [truncate(e, max_seq_len) for e in examples]
    engine = TransformersEngine(checkpoint, device="cpu")
    before = [sum(engine.logprobs_of(e.prompt_ids, e.completion_ids)) for e in trained]

    settings = TrainSettings(
        lr=1e-2, global_batch_size=4, num_workers=2, cpus_per_worker=0.5, epochs=2, max_seq_len=max_seq_len,
        optimizer_state="persist",
    )
    output_dir = tmp_path / "solver" / "iter_0001"
    result = train(examples, base_checkpoint=checkpoint, objective="reinforce", settings=settings,
                   output_dir=str(output_dir), run_name=f"test-learner-{uuid.uuid4().hex[:8]}")

    assert result.checkpoint_dir == str(output_dir)
    files = set(os.listdir(output_dir))
    assert {"config.json", "model.safetensors", "tokenizer.json", OPTIMIZER_FILE} <= files
    assert STAGING_DIR not in files
    assert "state" in torch.load(output_dir / OPTIMIZER_FILE)
    AutoModelForCausalLM.from_pretrained(output_dir)
    assert AutoTokenizer.from_pretrained(output_dir)("Qed.")["input_ids"] == tokenizer("Qed.")["input_ids"]

    engine.load_weights(result.checkpoint_dir, policy_version=1)
    after = [sum(engine.logprobs_of(e.prompt_ids, e.completion_ids)) for e in trained]
    assert all(a > b + 1.0 for a, b in zip(after, before)), (before, after)

    metrics = result.metrics
    assert metrics.num_examples == 5
    assert metrics.num_steps == 4  # 2 epochs x ceil(5 / 4) steps
    assert metrics.num_truncated == 1
    assert metrics.num_tokens == 2 * sum(len(e.completion_ids) for e in trained)
    assert math.isfinite(metrics.loss) and metrics.loss > 0
    assert metrics.grad_norm > 0 and metrics.tokens_per_second > 0
