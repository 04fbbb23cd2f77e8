"""The optimiser and batching of the self-play updates (a part of the schema
in :mod:`sgs.config.schema`, kept in its own module so that each reads in one
sitting), and their checks (:func:`training_problems`; the batch against the
learner workers is checked with the other nodes, in :mod:`sgs.config.validation`)."""

from __future__ import annotations

from dataclasses import dataclass

from sgs.config.checks import Choice, at_least, positive


class OptimizerState(Choice):
    """``training.optimizer_state``."""

    reset = "reset"
    persist = "persist"


class LearnerStrategy(Choice):
    """``training.strategy``."""

    auto = "auto"
    ddp = "ddp"
    deepspeed = "deepspeed"


@dataclass
class TrainingConfig:
    """Optimiser and batching of the Solver and Conjecturer updates (App. C)."""

    #: Constant learning rate of both trained roles.
    learning_rate: float = 3e-6
    #: Sequences per optimiser step, over all learner workers.
    global_batch_size: int = 32
    #: Sequences per forward/backward pass on one learner worker; gradient
    #: accumulation makes up the rest of the global batch.
    micro_batch_size: int = 1
    #: Adam beta1.
    adam_beta1: float = 0.9
    #: Adam beta2.
    adam_beta2: float = 0.95
    #: Adam epsilon.
    adam_epsilon: float = 1e-8
    #: Decoupled weight decay; 0 is plain Adam.
    weight_decay: float = 0.0
    #: Gradients are clipped to this global L2 norm.
    grad_clip_norm: float = 1.0
    #: Passes over each iteration's training set.
    epochs_per_iteration: int = 1
    #: Longest training sequence (prompt plus generation), in tokens; longer
    #: ones are truncated.
    max_seq_len: int = 8192
    #: ``reset`` builds a fresh optimizer every iteration (the reference);
    #: ``persist`` carries the Adam state over to the next iteration.
    optimizer_state: OptimizerState = OptimizerState.reset
    #: Role checkpoints kept in the run directory (the newest ones).
    keep_checkpoints: int = 2
    #: Train in bf16 with fp32 master weights; null follows the model's dtype
    #: (on for ``bfloat16`` models, off otherwise).
    bf16: bool | None = None
    #: Recompute activations in the backward pass to save memory.
    gradient_checkpointing: bool = False
    #: Data parallelism of the learner: ``deepspeed`` (DeepSpeed ZeRO stage 2:
    #: gradients and Adam state partitioned over the learner workers, which a
    #: 7B model on 80 GB GPUs needs), ``ddp`` (torch DDP: every worker holds
    #: all of them) or ``auto``: deepspeed when the learner workers have GPUs,
    #: ddp on CPU (where DeepSpeed only adds start-up time).  Same weights either way.
    strategy: LearnerStrategy = LearnerStrategy.auto
    #: After each update the engines' log-probs of a fixed probe sequence are
    #: compared with the learner's; a mean gap per token (nats) above this
    #: logs a warning: the engines may not serve the weights the learner
    #: wrote (bf16 engines against an fp32 learner differ by ~1e-2).
    probe_logprob_tolerance: float = 0.05


def training_problems(training: TrainingConfig) -> list[str]:
    """Every problem within the ``training`` node, one message per problem, each naming its key."""
    problems: list[str] = []
    positive(problems, "training.learning_rate", training.learning_rate)
    at_least(problems, "training.global_batch_size", training.global_batch_size, 1)
    at_least(problems, "training.micro_batch_size", training.micro_batch_size, 1)
    for key in ("adam_beta1", "adam_beta2"):
        value = getattr(training, key)
        if not 0.0 <= value < 1.0:
            problems.append(f"training.{key}={value!r} must lie in [0, 1)")
    positive(problems, "training.adam_epsilon", training.adam_epsilon)
    at_least(problems, "training.weight_decay", training.weight_decay, 0.0)
    positive(problems, "training.grad_clip_norm", training.grad_clip_norm)
    at_least(problems, "training.epochs_per_iteration", training.epochs_per_iteration, 1)
    at_least(problems, "training.max_seq_len", training.max_seq_len, 1)
    at_least(problems, "training.keep_checkpoints", training.keep_checkpoints, 1)
    positive(problems, "training.probe_logprob_tolerance", training.probe_logprob_tolerance)
    return problems
