"""The learner: input checks, the step plan, gradient accumulation, and real
Ray Train runs on a tiny Llama with both strategies (DDP and DeepSpeed ZeRO-2)."""

from __future__ import annotations

import copy
import logging
import math
import os
import shutil
import signal
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
import ray
import torch
from ray._raylet import PlacementGroupID
from ray.exceptions import RayActorError
from ray.train import ControllerError, WorkerGroupError
from ray.train.v2._internal.exceptions import (
    UserExceptionWithTraceback,
    WorkerHealthCheckFailedError,
    WorkerHealthCheckTimeoutError,
)
from ray.util import placement_group_table, remove_placement_group
from ray.util.placement_group import PlacementGroup
from transformers import AutoModelForCausalLM, AutoTokenizer

from sgs.machinery.engines.hf import TransformersEngine
from sgs.machinery.learner import (
    DEEPSPEED_DIR,
    DEEPSPEED_TAG,
    OPTIMIZER_FILE,
    PROBE_FILE,
    STAGING_DIR,
    RayTrainLearner,
    TrainExample,
    TrainJob,
    TorchUpdate,
    TrainSettings,
    plan_steps,
    run_steps,
    train,
    train_models,
    truncate,
)
from sgs.machinery.learner.board import JobBoard
from sgs.machinery.learner.driver import FitThread, lost_workers
from sgs.machinery.learner.settings import PLACEMENT_FILE
from sgs.machinery.models.tiny import TinyModelSettings, build_tiny_model
from sgs.machinery.runtime import own_cluster_runtime_env
from sgs.method.registry import OBJECTIVES, Objective, objective, register

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
    ray.init(address="local", num_cpus=4, logging_level=logging.WARNING, runtime_env=own_cluster_runtime_env())
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
    "example, name, message",
    [
        (TrainExample([5], [], 1.0), "reinforce", "example 0: completion_ids is empty"),
        (TrainExample([5], [10_000], 1.0), "reinforce", r"example 0: completion_ids holds 10000, not a token id"),
        (TrainExample([5], [6], math.nan), "reinforce", "example 0: weight nan is not finite"),
        (TrainExample([5], [6], 1.0, old_logprobs=[0.5]), "reinforce", "finite log-probabilities"),
        (TrainExample([5], [6], 1.0, old_logprobs=[-1.0]), "cispo",
         "objective 'cispo' trains on whole groups and needs a group_id"),
        (TrainExample([5], [6], 1.0, group_id=0), "cispo", "objective 'cispo' needs old_logprobs"),
        (TrainExample([5], [6], 1.0), "ppo", "unknown objective 'ppo'"),
        (TrainExample([5], [6], 1.0), "none", "objective 'none' has no loss: it never trains"),
    ],
)
def test_bad_examples_are_rejected(checkpoint, tmp_path, example, name, message):
    with pytest.raises(ValueError, match=message):
        train([example], base_checkpoint=checkpoint, objective=name, settings=TrainSettings(),
              output_dir=str(tmp_path / "out"), run_name="never-starts")


class SlowTrainer:
    """Test double of a Ray Train trainer whose fit takes ``seconds`` and, like
    Ray Train's, takes over SIGINT when it runs on the main thread."""

    def __init__(self, seconds: float = 0.0, error: BaseException | None = None):
        self.seconds, self.error = seconds, error
        self.on_main_thread = None

    def fit(self) -> str:
        self.on_main_thread = threading.current_thread() is threading.main_thread()
        if self.on_main_thread:
            signal.signal(signal.SIGINT, lambda signum, frame: None)   # what Ray Train does
        time.sleep(self.seconds)
        if self.error is not None:
            raise self.error
        return "result"


def test_fit_runs_off_the_main_thread_and_keeps_its_result_or_error():
    """Ray Train takes SIGINT over only when fit runs on the main thread; it never does here."""
    trainer = SlowTrainer()
    fit = FitThread(trainer)
    fit.join(5.0)
    assert not fit.alive() and fit.outcome == {"result": "result"} and trainer.on_main_thread is False
    fit.raise_error()  # nothing to raise
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    failed = FitThread(SlowTrainer(error=ControllerError(RuntimeError("lost"))))
    failed.join(5.0)
    with pytest.raises(ControllerError):
        failed.raise_error()


def test_strategy_auto_means_deepspeed_on_gpus_and_ddp_on_cpu():
    assert TrainSettings().resolved_strategy == "ddp"
    assert TrainSettings(use_gpu=True).resolved_strategy == "deepspeed"
    assert TrainSettings(strategy="deepspeed").resolved_strategy == "deepspeed"
    assert TrainSettings(strategy="ddp", use_gpu=True).resolved_strategy == "ddp"
    with pytest.raises(ValueError, match="TrainSettings.strategy must be one of auto, ddp, deepspeed, got 'fsdp'"):
        TrainSettings(strategy="fsdp")


def test_persisted_deepspeed_state_needs_the_same_number_of_workers(checkpoint, tokenizer, tmp_path):
    base = tmp_path / "base"
    shutil.copytree(checkpoint, base)
    shards = base / DEEPSPEED_DIR / DEEPSPEED_TAG
    shards.mkdir(parents=True)
    (shards / "zero_pp_rank_0_mp_rank_00_optim_states.pt").touch()
    settings = TrainSettings(strategy="deepspeed", optimizer_state="persist", learner_workers=2)
    with pytest.raises(ValueError, match="holds 1 ZeRO-2 optimizer shards but the run has 2 workers"):
        train(make_examples(tokenizer), base_checkpoint=str(base), objective="reinforce", settings=settings,
              output_dir=str(tmp_path / "out"), run_name="never-starts")
    assert not (tmp_path / "out").exists()


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
    settings = TrainSettings(global_batch_size=4, learner_workers=2, seed=3)
    plan = plan_steps(examples, objective("cispo"), settings)
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
    assert plan == plan_steps(examples, objective("cispo"), settings)


def test_an_idle_worker_gets_a_zero_weight_filler(tokenizer):
    examples = make_examples(tokenizer)  # 5 examples, batches of 4: the second step has 1 sequence
    plan = plan_steps(examples, objective("reinforce"), TrainSettings(global_batch_size=4, learner_workers=3, epochs=2, seed=0))
    assert [len(worker) for worker in plan] == [4, 4, 4]  # 2 steps per epoch on every worker
    last = [worker[1] for worker in plan]
    weights = [[s.weight for batch in w.micro_batches for s in batch] for w in last]
    assert weights == [[1.0], [0.0], [0.0]]
    # The first step deals 2, 1, 1 sequences: the short shares are topped up to 2, so every
    # worker joins every gradient collective (ZeRO-2 reduce-scatters after each micro-batch).
    first = [[s.weight for batch in w.micro_batches for s in batch] for w in (worker[0] for worker in plan)]
    assert first == [[1.0, 1.0], [1.0, 0.0], [1.0, 0.0]]
    assert {w.num_sequences for w in last} == {1}
    # Epochs are reshuffled, and the whole run is reproducible from the seed.
    first_epoch = [s.completion_ids for w in plan for batch in w[0].micro_batches for s in batch]
    second_epoch = [s.completion_ids for w in plan for batch in w[2].micro_batches for s in batch]
    assert first_epoch != second_epoch
    assert plan == plan_steps(examples, objective("reinforce"), TrainSettings(global_batch_size=4, learner_workers=3, epochs=2, seed=0))


# --------------------------------------------------------------------------
# Gradient accumulation
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, normalisation",
    [("reinforce", "token_mean"), ("reinforce", "sequence_mean"), ("conjecturer", "token_mean"), ("cispo", "token_mean")],
)
def test_micro_batches_give_the_gradient_of_one_big_batch(checkpoint, tokenizer, name, normalisation):
    weight = 0.5 if name == "conjecturer" else 1.0
    examples = make_examples(tokenizer, weight=weight, group_size=2 if objective(name).whole_groups else None)
    base = AutoModelForCausalLM.from_pretrained(checkpoint)
    updates = []
    for micro_batch_size in (1, 2, 5):
        settings = TrainSettings(
            global_batch_size=5, micro_batch_size=micro_batch_size, loss_normalisation=normalisation, grad_clip_norm=1e9
        )
        [steps] = plan_steps(examples, objective(name), settings)
        model = copy.deepcopy(base)
        # SGD with lr 1 makes the parameter update equal to minus the gradient.
        run_steps(model, TorchUpdate(model, torch.optim.SGD(model.parameters(), lr=1.0), settings.grad_clip_norm), steps,
                  objective(name), settings)
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
        run_steps(model, TorchUpdate(model, torch.optim.SGD(model.parameters(), lr=1.0), settings.grad_clip_norm), steps,
                  objective("cispo"), settings)
        return torch.cat([(p - q).flatten() for p, q in zip(model.parameters(), base.parameters())])

    whole = TrainSettings(global_batch_size=5, grad_clip_norm=1e9)
    [single] = plan_steps(examples, objective("cispo"), whole)
    sharded = replace(whole, learner_workers=num_workers)
    shards = [update(worker_steps, sharded) for worker_steps in plan_steps(examples, objective("cispo"), sharded)]
    torch.testing.assert_close(sum(shards), update(single, whole), atol=1e-6, rtol=1e-4)


# --------------------------------------------------------------------------
# Real Ray Train runs, one per strategy with the same settings and examples
# --------------------------------------------------------------------------


def reference_settings(strategy: str, max_seq_len: int) -> TrainSettings:
    """Two workers, 2 epochs of steps of 4 + 1 sequences: the short step leaves worker 1 a filler."""
    return TrainSettings(
        learning_rate=1e-2, global_batch_size=4, learner_workers=2, cpus_per_learner_worker=0.5, epochs=2, max_seq_len=max_seq_len,
        optimizer_state="persist", strategy=strategy,
    )


@pytest.fixture(scope="module")
def reference_examples(tokenizer):
    """The PAIRS examples with a max_seq_len that cuts the longest completion (truncation reaches the workers)."""
    examples = make_examples(tokenizer)
    return examples, max(len(e.prompt_ids) + len(e.completion_ids) for e in examples) - 3


@pytest.fixture(scope="module")
def deepspeed_learner(ray_cluster, tmp_path_factory):
    """The learner of DeepSpeed's reference run, kept for the run that resumes from its optimizer
    state: that one is its next call, as the loop's next iteration is, and needs no start of its own."""
    learner = RayTrainLearner(str(tmp_path_factory.mktemp("deepspeed-state")),
                              name=f"test-learner-deepspeed-{uuid.uuid4().hex[:8]}")
    yield learner
    learner.close()


@pytest.fixture(scope="module")
def reference_run(ray_cluster, checkpoint, reference_examples, deepspeed_learner, tmp_path_factory):
    """``reference_run(strategy)``: the result of one Ray Train run, made on first use (DeepSpeed's
    is the first call of ``deepspeed_learner``, a run of its own all the same)."""
    examples, max_seq_len = reference_examples
    results = {}

    def run(strategy):
        if strategy not in results:
            output_dir = tmp_path_factory.mktemp(strategy) / "solver" / "iter_0001"
            settings = reference_settings(strategy, max_seq_len)
            probe = (examples[0].prompt_ids, examples[0].completion_ids)
            run_name = f"test-learner-{strategy}-{uuid.uuid4().hex[:8]}"
            if strategy == "deepspeed":
                [results[strategy]] = deepspeed_learner(
                    [TrainJob(examples, checkpoint, "reinforce", str(output_dir), settings.seed, probe)],
                    settings=settings, run_name=run_name)
            else:
                results[strategy] = train(examples, base_checkpoint=checkpoint, objective="reinforce",
                                          settings=settings, output_dir=str(output_dir), run_name=run_name,
                                          probe=probe)
        return results[strategy]

    return run


def optimizer_shards(checkpoint_dir) -> list:
    """The ZeRO-2 optimizer shards of a DeepSpeed checkpoint, in rank order."""
    shards = sorted((Path(checkpoint_dir) / DEEPSPEED_DIR / DEEPSPEED_TAG).glob("zero_pp_rank_*_optim_states.pt"))
    return [torch.load(shard, weights_only=False)["optimizer_state_dict"] for shard in shards]


def adam_state(shard) -> dict:
    """The torch AdamW state of one shard: this rank's flat partition of step, exp_avg and exp_avg_sq."""
    return shard["base_optimizer_state"]["state"][0]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "deepspeed"])
def test_training_raises_likelihood_and_writes_a_loadable_checkpoint(
    reference_run, reference_examples, checkpoint, tokenizer, strategy
):
    examples, max_seq_len = reference_examples
    trained = [truncate(e, max_seq_len) for e in examples]
    engine = TransformersEngine(checkpoint, device="cpu")
    before = [sum(engine.logprobs_of(e.prompt_ids, e.completion_ids)) for e in trained]

    result = reference_run(strategy)

    output_dir = Path(result.checkpoint_dir)
    assert output_dir.name == "iter_0001"
    files = set(os.listdir(output_dir))
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= files
    assert STAGING_DIR not in files
    if strategy == "ddp":
        assert OPTIMIZER_FILE in files and DEEPSPEED_DIR not in files
        assert "state" in torch.load(output_dir / OPTIMIZER_FILE)
    else:
        assert DEEPSPEED_DIR in files and OPTIMIZER_FILE not in files
        # ZeRO-2 partitions Adam's state: one shard per rank, each with about half of the moments.
        sizes = [adam_state(shard)["exp_avg"].numel() for shard in optimizer_shards(output_dir)]
        num_parameters = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(checkpoint).parameters())
        assert len(sizes) == 2 and sum(sizes) >= num_parameters and max(sizes) < num_parameters
    AutoModelForCausalLM.from_pretrained(output_dir)
    assert AutoTokenizer.from_pretrained(output_dir)("Qed.")["input_ids"] == tokenizer("Qed.")["input_ids"]

    engine.load_weights(result.checkpoint_dir, policy_version=1)
    after = [sum(engine.logprobs_of(e.prompt_ids, e.completion_ids)) for e in trained]
    assert all(a > b + 1.0 for a, b in zip(after, before)), (before, after)
    # The learner's probe log-probs are those of the weights it saved (fp32 both sides here).
    probe = (examples[0].prompt_ids, examples[0].completion_ids)
    assert result.probe_logprobs == pytest.approx(engine.logprobs_of(*probe), abs=1e-4)
    assert PROBE_FILE not in files  # read and removed: the checkpoint is plain Hugging Face

    metrics = result.metrics
    assert metrics.num_examples == 5
    assert metrics.num_steps == 4  # 2 epochs x ceil(5 / 4) steps
    assert metrics.num_truncated == 1
    assert metrics.num_tokens == 2 * sum(len(e.completion_ids) for e in trained)
    assert math.isfinite(metrics.loss) and metrics.loss > 0
    assert metrics.grad_norm > 0 and metrics.tokens_per_second > 0


@pytest.fixture
def toy_objective():
    """An objective registered for a test, in one place: each sequence's mean token
    log-likelihood, weighted, averaged over the step's sequences; it asks for the
    sampler's log-probs and whole groups, so the checks and the plan follow its entry."""
    def loss(batch, settings):
        assert batch.old_logprobs is not None and batch.old_logprobs.shape == batch.logprobs.shape
        lengths = batch.mask.sum(dim=-1).clamp(min=1)
        per_sequence = torch.where(batch.mask.bool(), batch.logprobs, 0.0).sum(dim=-1) / lengths
        return -(batch.weights * per_sequence).sum() / batch.num_sequences

    toy = register(Objective("toy_mean_likelihood", loss, needs_old_logprobs=True, whole_groups=True))
    yield toy
    del OBJECTIVES[toy.name]


def toy_examples(tokenizer) -> list[TrainExample]:
    return [replace(e, weight=1.0) for e in make_examples(tokenizer, group_size=2)]


def test_a_toy_objective_registered_in_one_place_is_checked_and_planned(checkpoint, tokenizer, toy_objective,
                                                                        tmp_path):
    """Its entry decides the checks and the plan; that it trains in Ray Train is checked in
    the kept run's test below, which trains it in the run it already has."""
    examples = toy_examples(tokenizer)
    with pytest.raises(ValueError, match="objective 'toy_mean_likelihood' needs old_logprobs"):
        train([replace(examples[0], old_logprobs=None)], base_checkpoint=checkpoint, objective=toy_objective.name,
              settings=TrainSettings(), output_dir=str(tmp_path / "never"), run_name="never-starts")
    # Whole groups of 2, 2 and 1 in steps of at most 4 sequences: no group is split.
    plan = plan_steps(examples, toy_objective, TrainSettings(global_batch_size=4))
    assert [step.num_groups for step in plan[0]] == [2, 1]


@pytest.mark.slow
def test_deepspeed_trains_the_same_weights_as_ddp(reference_run, checkpoint):
    """Same initial weights, examples and plan: ZeRO-2 must match DDP step for step.

    Adam's first steps hardly depend on the gradients' scale, so the loss
    scaling (global normalisers, world size, no division by the accumulation
    steps) is checked by the pre-clipping gradient norm, which is exactly
    proportional to it; the weights check the rest.
    """
    ddp, deepspeed = reference_run("ddp"), reference_run("deepspeed")
    assert deepspeed.metrics.grad_norm == pytest.approx(ddp.metrics.grad_norm, rel=1e-5)
    assert deepspeed.metrics.loss == pytest.approx(ddp.metrics.loss, rel=1e-5)
    base = AutoModelForCausalLM.from_pretrained(checkpoint).state_dict()
    ddp_weights = AutoModelForCausalLM.from_pretrained(ddp.checkpoint_dir).state_dict()
    deepspeed_weights = AutoModelForCausalLM.from_pretrained(deepspeed.checkpoint_dir).state_dict()
    assert max((ddp_weights[k] - base[k]).abs().max() for k in base) > 1e-2  # lr 1e-2: the steps moved them
    for name in base:
        torch.testing.assert_close(deepspeed_weights[name], ddp_weights[name], atol=1e-5, rtol=0, msg=name)


@pytest.mark.slow
def test_deepspeed_optimizer_state_carries_over_to_the_next_call(reference_run, reference_examples,
                                                                  deepspeed_learner, tmp_path):
    """The next call reads the optimizer state from the checkpoint (the workers hold no model
    between calls), as the next iteration's does."""
    examples, max_seq_len = reference_examples
    first = reference_run("deepspeed")
    saved = optimizer_shards(first.checkpoint_dir)
    assert [int(adam_state(shard)["step"]) for shard in saved] == [4, 4]

    # Zero weights make every gradient zero, so Adam only decays the moments it restored.
    idle = [replace(example, weight=0.0) for example in examples]
    settings = replace(reference_settings("deepspeed", max_seq_len), epochs=1)
    [second] = deepspeed_learner([TrainJob(idle, first.checkpoint_dir, "reinforce", str(tmp_path / "iter_0002"),
                                           settings.seed)], settings=settings, run_name="resume")
    assert deepspeed_learner.starts == 1
    deepspeed_learner.close()  # nothing else trains in it: its workers' CPUs go back to the cluster

    assert second.metrics.num_steps == 2 and second.metrics.grad_norm == 0.0
    resumed = optimizer_shards(second.checkpoint_dir)
    beta1, beta2 = settings.adam_beta1, settings.adam_beta2
    for old, new in zip(saved, resumed):
        old, new = adam_state(old), adam_state(new)
        assert int(new["step"]) == 6  # counted on from the restored 4; a fresh optimizer would be at 2
        assert old["exp_avg"].abs().max() > 0
        torch.testing.assert_close(new["exp_avg"], old["exp_avg"] * beta1**2, rtol=1e-5, atol=0)
        torch.testing.assert_close(new["exp_avg_sq"], old["exp_avg_sq"] * beta2**2, rtol=1e-5, atol=0)


@pytest.mark.slow
def test_one_run_trains_several_models_and_starts_again_from_the_base_checkpoints_when_it_loses_its_workers(
        reference_run, reference_examples, checkpoint, tmp_path, caplog):
    """The loop's iteration: several models in one Ray Train run (the workers start once).  A job
    without examples starts nothing and keeps its base; the model trained second gets exactly the
    weights of a run of its own, so nothing of the first (its seed, optimizer, memory) reaches it.
    Ray then loses the run's workers (their placement group is removed, as when their node goes)
    after that job has reported and while a long fourth one trains: the run starts again from the
    base checkpoints, once, and every job gets what an undisturbed run gives it."""
    examples, max_seq_len = reference_examples
    settings = reference_settings("ddp", max_seq_len)
    probe = (examples[0].prompt_ids, examples[0].completion_ids)
    run_name = f"test-learner-lost-{uuid.uuid4().hex[:8]}"
    jobs = [
        TrainJob(examples, checkpoint, "ei", str(tmp_path / "first"), seed=settings.seed + 1),
        TrainJob([], checkpoint, "reinforce", str(tmp_path / "idle"), seed=settings.seed),
        TrainJob(examples, checkpoint, "reinforce", str(tmp_path / "second"), seed=settings.seed, probe=probe),
        # 20 times the examples: long enough to be cut off in the middle
        TrainJob(examples * 20, checkpoint, "ei", str(tmp_path / "long"), seed=settings.seed + 1),
    ]
    # Rank 0 writes the placement file last, after the weights.
    second_reported = tmp_path / "second" / STAGING_DIR / PLACEMENT_FILE
    earlier = set(placement_group_table())  # other tests' groups on a shared cluster are left alone
    removed: list[str] = []

    def lose_the_workers() -> None:
        deadline = time.monotonic() + 300
        while not second_reported.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        for group_id, entry in placement_group_table().items():
            if entry["state"] == "CREATED" and group_id not in earlier:
                remove_placement_group(PlacementGroup(PlacementGroupID.from_hex(group_id)))
                removed.append(group_id)

    loser = threading.Thread(target=lose_the_workers, daemon=True)
    loser.start()
    with caplog.at_level(logging.WARNING, logger="sgs.machinery.learner.driver"):
        first, idle, second, long = train_models(jobs, settings=settings, run_name=run_name)
    loser.join()

    assert len(removed) == 1, "the second job's checkpoint never appeared"
    [restart] = [record.getMessage() for record in caplog.records if "lost its workers" in record.getMessage()]
    assert "restart 1 of at most 2" in restart and first.restarts == second.restarts == long.restarts == 1
    alone = reference_run("ddp")  # the second job's arguments, in a run of its own
    assert (idle.checkpoint_dir, idle.metrics.num_steps) == (checkpoint, 0) and not (tmp_path / "idle").exists()
    assert second.checkpoint_dir == str(tmp_path / "second") and first.checkpoint_dir == str(tmp_path / "first")
    assert second.metrics == replace(alone.metrics, train_seconds=second.metrics.train_seconds,
                                     tokens_per_second=second.metrics.tokens_per_second)
    assert second.probe_logprobs == pytest.approx(alone.probe_logprobs, abs=1e-6) and first.probe_logprobs is None
    base = AutoModelForCausalLM.from_pretrained(checkpoint).state_dict()
    weights = {name: AutoModelForCausalLM.from_pretrained(result.checkpoint_dir).state_dict()
               for name, result in (("first", first), ("second", second), ("long", long), ("alone", alone))}
    for name in base:
        torch.testing.assert_close(weights["second"][name], weights["alone"][name], atol=1e-6, rtol=0, msg=name)
    assert max((weights["first"][k] - base[k]).abs().max() for k in base) > 1e-2
    assert max((weights["first"][k] - weights["second"][k]).abs().max() for k in base) > 1e-3
    for result in (first, second):
        assert {"config.json", "model.safetensors", "tokenizer.json", OPTIMIZER_FILE} <= set(
            os.listdir(result.checkpoint_dir))
        assert [rank["rank"] for rank in result.placement] == [0, 1]
    assert long.metrics.num_steps == 2 * 25  # 2 epochs of 100 examples in steps of 4
    assert max((weights["long"][k] - base[k]).abs().max() for k in base) > 1e-2
    for name in ("first", "second", "long"):
        assert not (tmp_path / name / STAGING_DIR).exists()


def test_lost_workers_are_told_apart_from_errors_of_the_training_code():
    """Only a run whose workers Ray lost is started again; one whose training code raised is not."""
    actor_died = RayActorError()
    assert lost_workers(ControllerError(actor_died))  # lost while the training function was launched
    assert not lost_workers(ControllerError(ValueError("bad scaling config")))
    assert lost_workers(WorkerGroupError("lost", {0: WorkerHealthCheckFailedError("dead", actor_died),
                                                  1: WorkerHealthCheckTimeoutError("hung")}))
    raised = UserExceptionWithTraceback(RuntimeError("CUDA out of memory"), traceback_str="...")
    assert not lost_workers(WorkerGroupError("raised", {0: raised, 1: WorkerHealthCheckFailedError("dead", actor_died)}))
    assert not lost_workers(WorkerGroupError("nothing", {}))


def test_restarts_must_be_a_count():
    with pytest.raises(ValueError, match="learner_restarts must be a non-negative integer, got -1"):
        TrainSettings(learner_restarts=-1)


def test_jobs_of_one_run_must_write_to_different_directories(checkpoint, tokenizer, tmp_path):
    examples = make_examples(tokenizer)[:1]
    jobs = [TrainJob(examples, checkpoint, "ei", str(tmp_path / "same"), seed=0)] * 2
    with pytest.raises(ValueError, match="same output_dir"):
        train_models(jobs, settings=TrainSettings(), run_name="never-started")


# --------------------------------------------------------------------------
# The learner that outlives a call: one Ray Train run for a whole self-play run
# --------------------------------------------------------------------------


def test_the_job_board_hands_each_batch_to_every_rank_and_collects_the_metrics(ray_cluster):
    board = JobBoard.remote()
    assert ray.get(board.next_batch.remote(0, 0.1)) is None  # nothing posted: the wait ends by its timeout
    number = ray.get(board.post.remote([{"job": 0}, {"job": 2}]))
    assert ray.get([board.next_batch.remote(0, 1.0)] * 2) == [(number, [{"job": 0}, {"job": 2}])] * 2
    assert ray.get(board.next_batch.remote(number, 0.1)) is None  # a rank that has it waits for the next
    ray.get(board.finish.remote(number, 0, {"loss": 1.0}))
    ray.get(board.finish.remote(number - 1, 2, {"loss": 9.0}))  # an earlier batch's: ignored
    assert ray.get(board.finished.remote(number, 2, 0.1)) == {0: {"loss": 1.0}}  # not all finished yet
    waiting = board.finished.remote(number, 2, 30.0)
    ray.get(board.finish.remote(number, 2, {"loss": 2.0}))
    assert ray.get(waiting, timeout=10) == {0: {"loss": 1.0}, 2: {"loss": 2.0}}
    ray.get(board.close.remote())
    assert ray.get(board.next_batch.remote(number, 1.0)) == (number, None)  # closed: the ranks return
    ray.kill(board)


@pytest.fixture
def exploding_objective():
    """An objective whose loss raises, as a training bug would."""
    def loss(batch, settings):
        raise RuntimeError("the loss exploded")

    exploding = register(Objective("test_exploding", loss))
    yield exploding
    del OBJECTIVES[exploding.name]


@pytest.mark.slow
def test_one_run_serves_every_call_until_its_placement_changes_or_its_code_raises_and_ctrl_c_stops_it(
        reference_run, reference_examples, checkpoint, tokenizer, toy_objective, exploding_objective, tmp_path,
        caplog):
    """The loop's learner, call after call in one RayTrainLearner (each Ray Train run it starts
    costs seconds of CPU before it trains anything):

    * its workers start once and train call after call; a job trained in a later call gets
      exactly the weights of a run of its own (nothing of the earlier calls reaches it);
    * other placement settings start a new run;
    * an error of the training code is raised, never retried, and the next call starts a new run;
    * an objective registered in one place (the toy one) trains in the run there is;
    * a Ctrl-C while the learner trains raises KeyboardInterrupt in the driver (Ray Train never
      took SIGINT over) before the job is done, and closing the interrupted learner does not wait
      for its run to finish the job (which then fails on the closed board);
    * closing empties its state."""
    examples, max_seq_len = reference_examples
    settings = reference_settings("ddp", max_seq_len)
    one_worker = replace(settings, learner_workers=1)
    probe = (examples[0].prompt_ids, examples[0].completion_ids)
    plain = make_examples(tokenizer)
    # Same placement as one_worker (one worker of 0.5 CPU): only an error may start a new run for these.
    raising = TrainSettings(learner_workers=1, cpus_per_learner_worker=0.5, global_batch_size=5)
    toy_settings = TrainSettings(learning_rate=1e-2, global_batch_size=4, max_seq_len=256, learner_workers=1,
                                 cpus_per_learner_worker=0.5)
    engine = TransformersEngine(checkpoint, device="cpu")
    toy = toy_examples(tokenizer)
    toy_before = [sum(engine.logprobs_of(e.prompt_ids, e.completion_ids)) for e in toy]
    staging = tmp_path / "long" / STAGING_DIR

    def interrupt_once_posted() -> None:
        deadline = time.monotonic() + 120
        while not staging.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the driver is waiting on the run now
        os.kill(os.getpid(), signal.SIGINT)

    interrupter = threading.Thread(target=interrupt_once_posted, daemon=True)
    # Relative, as the default run directory (runs/<time>) makes it: Ray Train refuses a relative storage path.
    learner = RayTrainLearner(os.path.relpath(tmp_path / "state"), name=f"test-learner-kept-{uuid.uuid4().hex[:8]}")
    try:
        [earlier] = learner([TrainJob(examples, checkpoint, "ei", str(tmp_path / "earlier"), seed=settings.seed + 1)],
                            settings=settings, run_name="call-1")
        [later] = learner([TrainJob(examples, checkpoint, "reinforce", str(tmp_path / "later"), seed=settings.seed,
                                    probe=probe)], settings=settings, run_name="call-2")
        assert learner.starts == 1 and earlier.restarts == later.restarts == 0
        [alone_placed] = learner([TrainJob(examples, checkpoint, "ei", str(tmp_path / "one-worker"), seed=0)],
                                 settings=one_worker, run_name="call-3")
        assert learner.starts == 2 and [rank["rank"] for rank in alone_placed.placement] == [0]

        with caplog.at_level(logging.WARNING, logger="sgs.machinery.learner.driver"):
            with pytest.raises(WorkerGroupError, match="the loss exploded"):
                learner([TrainJob(plain, checkpoint, exploding_objective.name, str(tmp_path / "bad"), seed=0)],
                        settings=raising, run_name="bad")
        assert not any("lost its workers" in record.getMessage() for record in caplog.records)  # never retried
        assert learner.starts == 2  # the bad call ran in the run call-3 started
        [good] = learner([TrainJob(plain, checkpoint, "ei", str(tmp_path / "good"), seed=0)], settings=raising,
                         run_name="good")
        assert learner.starts == 3 and good.metrics.num_steps == 1

        [toy_result] = learner([TrainJob(toy, checkpoint, toy_objective.name, str(tmp_path / "toy"),
                                         seed=toy_settings.seed)], settings=toy_settings, run_name="toy")
        assert learner.starts == 3

        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            learner([TrainJob(examples * 40, checkpoint, "ei", str(tmp_path / "long"), seed=0)], settings=one_worker,
                    run_name="long")
    finally:
        learner.close()
    interrupter.join()
    assert not (staging / PLACEMENT_FILE).exists()  # the job was not done, before or after closing
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # still the driver's own
    assert not (tmp_path / "state").exists()

    alone = reference_run("ddp")  # the later job's arguments, in a run of its own
    assert later.metrics == replace(alone.metrics, train_seconds=later.metrics.train_seconds,
                                    tokens_per_second=later.metrics.tokens_per_second)
    assert later.probe_logprobs == pytest.approx(alone.probe_logprobs, abs=1e-6)
    weights = {name: AutoModelForCausalLM.from_pretrained(result.checkpoint_dir).state_dict()
               for name, result in (("earlier", earlier), ("later", later), ("alone", alone))}
    for name in weights["alone"]:
        torch.testing.assert_close(weights["later"][name], weights["alone"][name], atol=1e-6, rtol=0, msg=name)
    assert max((weights["earlier"][k] - weights["later"][k]).abs().max() for k in weights["alone"]) > 1e-3
    for result in (earlier, later):
        assert {"config.json", "model.safetensors", "tokenizer.json", OPTIMIZER_FILE} <= set(
            os.listdir(result.checkpoint_dir))
        assert not (Path(result.checkpoint_dir) / STAGING_DIR).exists()
    AutoModelForCausalLM.from_pretrained(good.checkpoint_dir)

    assert toy_result.metrics.num_steps == 2 and math.isfinite(toy_result.metrics.loss) and toy_result.metrics.loss > 0
    engine.load_weights(toy_result.checkpoint_dir, policy_version=1)
    toy_after = [sum(engine.logprobs_of(e.prompt_ids, e.completion_ids)) for e in toy]
    assert sum(toy_after) > sum(toy_before) + 1.0, (toy_before, toy_after)
