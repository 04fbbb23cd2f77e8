"""The configuration of an SGS run: typed schemas, validation, machine checks.

The schema is a tree of dataclasses rooted at :class:`SGSConfig`.  It is
registered with Hydra's ConfigStore as ``sgs_schema``; ``conf/config.yaml``
puts that schema first in its defaults list, so every YAML file in ``conf/``
is merged into (and type-checked against) these dataclasses.  Config groups:

=============  ==========================================================
group          options (``conf/<group>/<option>.yaml``)
=============  ==========================================================
``model``      ``tiny`` (built locally), ``deepseek_prover_v2_7b``
``prover``     ``rocq`` (coqtop), ``lean`` (Lean 4 REPL)
``resources``  ``local_cpu``, ``gpu_node`` (8 GPUs), ``cluster``
``scale``      ``laptop``, ``paper`` (run length, token budgets, batch size)
``logging``    ``default``
``experiment`` the eight experiments of SPEC §1.5 (``+experiment=NAME``)
=============  ==========================================================

The dataclass defaults are the paper's values (App. C) for the ``standard``
method; the group files choose model, prover, hardware and scale.

Three entry points for the driver:

* :func:`validate` turns a composed ``DictConfig`` into a typed
  :class:`SGSConfig`, or raises :class:`ConfigError` listing every problem
  (value ranges, unknown choices, fields that contradict each other), each
  message naming the key;
* :func:`requirements_problems` checks that *this machine* can run the
  config (GPU, prover binaries, data files) without starting Ray;
* :func:`suggested_overrides` lists the command-line overrides that would
  make a config runnable here.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import math
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from sgs.state.benchmark_names import benchmark_problems

#: Directory holding ``config.yaml`` and the config groups (repository root ``conf/``).
CONFIG_DIR = Path(__file__).resolve().parent.parent / "conf"
#: Name of the primary config inside :data:`CONFIG_DIR`.
CONFIG_NAME = "config"
#: Name under which :class:`SGSConfig` is stored in Hydra's ConfigStore.
SCHEMA_NAME = "sgs_schema"

# Allowed values of the string-valued choice fields.
SOLVER_OBJECTIVES = ("reinforce_half", "reinforce", "cispo", "ei")
CONJECTURER_PROMPTS = ("target_conditioned", "unconditioned")
REWARD_NORMALISATIONS = ("reference", "paper")
LOSS_NORMALISATIONS = ("token_mean", "sequence_mean")
OPTIMIZER_STATES = ("reset", "persist")
LEARNER_STRATEGIES = ("auto", "ddp", "deepspeed")
DTYPES = ("float32", "bfloat16", "float16")
PROVER_BACKENDS = ("lean", "rocq")
PROOF_LANGUAGES = ("lean", "rocq")
ENGINE_BACKENDS = ("transformers", "vllm")
WEIGHT_TRANSFERS = ("checkpoint", "direct")
WANDB_MODES = ("auto", "offline", "online", "disabled")
WARMSTART_MODES = ("auto", "always", "never")
ROLES = ("solver", "conjecturer", "guide")

#: The proof language each prover backend checks.
BACKEND_LANGUAGE = {"lean": "lean", "rocq": "rocq"}

# Target sources are strings in one of three forms:
#   pkg://<package>/<path>  a file shipped inside an installed Python package
#   hf://<owner>/<name>     a data set repository on the Hugging Face hub
#   anything else           a filesystem path (relative to the working directory)
PACKAGE_SCHEME = "pkg://"
HUB_SCHEME = "hf://"
#: The paper's 3,323 Lean 4 + Mathlib targets (SPEC §1.1).
D3K_TARGETS = "hf://LukeBailey181Pub/D_3k"
#: The Rocq target set shipped with the package.
ROCQ_TARGETS = "pkg://sgs/data/rocq_targets.jsonl"
#: Target sources whose language is known without reading them.
KNOWN_TARGET_LANGUAGES = {D3K_TARGETS: "lean", ROCQ_TARGETS: "rocq"}


class ConfigError(ValueError):
    """A config that cannot run; ``problems`` holds one message per issue."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"invalid SGS config ({len(self.problems)} problem(s)):\n{lines}")


# --------------------------------------------------------------------------
# Schema
# --------------------------------------------------------------------------


@dataclass
class TargetsConfig:
    """The target statements the run tries to prove."""

    #: Where the targets come from: ``pkg://package/path`` (a file shipped in a
    #: package), ``hf://owner/name`` (a hub data set) or a filesystem path.
    #: Lean files are a JSON list or JSONL of records with ``id``, ``header``,
    #: ``theorem``; Rocq files use the Rocq target format of ``sgs/data``.
    #: Defaults to the prover's own target set (``prover.default_targets``).
    source: str = "${prover.default_targets}"
    #: Use only the first N targets of the source; null uses all of them.
    limit: int | None = None
    #: Fraction of the targets held out from training for evaluation, chosen
    #: deterministically from the target ids; 0 holds out nothing.
    held_out_fraction: float = 0.0
    #: Target ids always held out for evaluation, on top of the fraction.
    held_out_ids: list[str] = field(default_factory=list)


@dataclass
class MethodConfig:
    """The algorithm: which roles play and how they learn (SPEC §1.2-§1.3).

    The defaults are the ``standard`` SGS method; each experiment file in
    ``conf/experiment/`` changes only the fields it needs.
    """

    #: Solver objective: ``reinforce_half`` (problems with 0 < s <= 0.5),
    #: ``reinforce`` (all correct proofs), ``cispo`` (clipped importance
    #: sampling over whole groups) or ``ei`` (expert iteration on stored proofs).
    solver_objective: str = "reinforce_half"
    #: Conjectures sampled per still-unsolved target each iteration (1 in the
    #: paper); 0 runs the Solver alone with no Conjecturer and no Guide.
    conjectures_per_target: int = 1
    #: Conjecturer prompt: ``target_conditioned`` shows the unsolved target;
    #: ``unconditioned`` asks for a moderately hard theorem from a random area.
    conjecturer_prompt: str = "target_conditioned"
    #: Update the Conjecturer's weights each iteration; false keeps it frozen.
    train_conjecturer: bool = True
    #: Score kept conjectures with the Guide: R = R_guide * (1 - s).  False
    #: uses R = 1 - s.
    use_guide: bool = True
    #: Min-max normalisation of Conjecturer rewards: ``reference`` over the
    #: kept set only (the released code), ``paper`` with the non-kept
    #: conjectures in the batch at reward 0 (the paper's text).
    reward_normalisation: str = "reference"
    #: Loss normaliser: ``token_mean`` divides by all label tokens of the
    #: global batch (the reference); ``sequence_mean`` averages per-sequence
    #: token means (the paper's 1/|y|).
    loss_normalisation: str = "token_mean"
    #: k, the Solver samples per problem (targets and conjectures alike).
    num_solver_samples: int = 8
    #: Verified proofs stored per target; expert iteration samples only
    #: targets that have fewer.
    max_proofs_per_target: int = 16
    #: Expert iteration trains on stored proofs found in this many most
    #: recent iterations.
    ei_replay_iterations: int = 3
    #: Conjectures with 0 < s <= the solve rate at this quantile of the
    #: conjectures with 0 < s < 1 are kept for Conjecturer training (p70).
    conjecture_keep_quantile: float = 0.7
    #: A generation longer than this fraction of its role's ``max_tokens``
    #: gets the soft overlong penalty, down to -1 at ``max_tokens``.
    overlong_fraction: float = 0.8
    #: Give reward 0 to a Solver proof that uses the ``try`` tactic.
    penalize_try: bool = True
    #: Lower bound of CISPO's clipped token ratio pi/pi_old: 1 - eps_low, with
    #: eps_low = 1 as in the paper.
    cispo_ratio_min: float = 0.0
    #: Upper bound of CISPO's clipped token ratio: 1 + eps_high, with
    #: eps_high = 3 as in the paper.
    cispo_ratio_max: float = 4.0
    #: Targets per iteration; null is the full batch (every target).
    batch_size: int | None = None


@dataclass
class RoleSampling:
    """Sampling settings of one role's generation engine."""

    #: Largest number of generated tokens per sample (prompt not included).
    max_tokens: int = 8192
    #: Softmax temperature; 0 is greedy decoding.
    temperature: float = 1.0
    #: Nucleus sampling mass; 1.0 disables top-p filtering.
    top_p: float = 1.0


@dataclass
class SamplingConfig:
    """Generation settings per role."""

    #: The Solver: writes k proofs per problem.
    solver: RoleSampling = field(default_factory=RoleSampling)
    #: The Conjecturer: writes one statement per unsolved target.
    conjecturer: RoleSampling = field(default_factory=RoleSampling)
    #: The Guide: writes a review with three sub-scores.
    guide: RoleSampling = field(default_factory=RoleSampling)
    #: Log-probs of this many most likely tokens are kept per generated
    #: position, for the token-entropy metric (SPEC §1.6); 0 keeps none.
    entropy_top_logprobs: int = 10


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
    optimizer_state: str = "reset"
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
    strategy: str = "auto"
    #: After each update the engines' log-probs of a fixed probe sequence are
    #: compared with the learner's; a mean gap per token (nats) above this
    #: logs a warning: the engines may not serve the weights the learner
    #: wrote (bf16 engines against an fp32 learner differ by ~1e-2).
    probe_logprob_tolerance: float = 0.05


@dataclass
class TinyModelSettings:
    """Architecture and tokenizer of the tiny Llama built by ``sgs.machinery.models.tiny``.

    head_dim = hidden_size / num_attention_heads must be at least 32 for
    vLLM's CPU attention kernels.
    """

    #: Target vocabulary of the byte-level BPE tokenizer, special tokens
    #: included; a small corpus may yield fewer tokens.
    vocab_size: int = 2048
    #: Width of the residual stream.
    hidden_size: int = 128
    #: Width of the MLP's hidden layer.
    intermediate_size: int = 256
    #: Number of transformer blocks.
    num_hidden_layers: int = 2
    #: Query heads per attention layer.
    num_attention_heads: int = 4
    #: Key/value heads (grouped-query attention); must divide the query heads.
    num_key_value_heads: int = 4
    #: Longest sequence (prompt plus generation) the model accepts.  RoPE
    #: positions have no weights, so a long context costs nothing; 16384 fits
    #: the paper's 8192-token generations after a prompt.
    max_position_embeddings: int = 16384
    #: Base of the rotary position embedding.
    rope_theta: float = 10000.0
    #: A BPE merge is learned only from pairs seen at least this often.
    min_token_frequency: int = 2


@dataclass
class ModelConfig:
    """The base model all three roles start from."""

    #: Short label for logs and run names.
    name: str = MISSING
    #: Hugging Face hub id or local directory of the base checkpoint; null
    #: builds the tiny model from ``tiny`` (no download).
    path: str | None = None
    #: Tokenizer hub id or directory; null uses ``path``.
    tokenizer_path: str | None = None
    #: Weights of the Guide, e.g. a checkpoint fine-tuned for the review
    #: format; null uses the base model.
    guide_path: str | None = None
    #: Weight dtype for generation and checkpoints.
    dtype: str = "bfloat16"
    #: The model is too large for CPU inference and training.
    needs_gpu: bool = False
    #: Builder settings when ``path`` is null.
    tiny: TinyModelSettings | None = None
    #: Factor on ``training.learning_rate`` for this model's self-play
    #: updates.  The experiments give the paper's rates, which suit a 7B
    #: model; a far smaller model needs far larger steps (the tiny model: 100).
    learning_rate_scale: float = 1.0


@dataclass
class LeanSettings:
    """How to start the Lean 4 REPL (leanprover-community/repl)."""

    #: Command that starts one REPL process, run in ``project_dir``; the first
    #: word must be an executable on PATH or a path (relative paths are
    #: relative to ``project_dir``).
    repl_command: str = "lake env repl"
    #: Lean project (with Mathlib built) that the REPL runs in.
    project_dir: str = MISSING


@dataclass
class RocqSettings:
    """How to start the Rocq (Coq) checker."""

    #: The ``coqtop`` executable: a name on PATH or a path.
    coqtop: str = "coqtop"


@dataclass
class ProverConfig:
    """The proof checker and the proof language (SPEC §3)."""

    #: Checker process: ``lean`` (Lean 4 REPL) or ``rocq`` (coqtop).
    backend: str = MISSING
    #: Language of statements and proofs; selects prompt templates, output
    #: parsers and the target format.  Must be the backend's language.
    language: str = MISSING
    #: Wall-clock limit for checking one proof, in seconds.
    timeout: float = 200.0
    #: Axioms a valid proof may depend on (Lean: ``#print axioms``); Rocq
    #: proofs must be closed under the global context, so its list is empty.
    allowed_axioms: list[str] = field(default_factory=list)
    #: Share (0 to 1) of the ``valid`` verdicts re-checked through the
    #: backend's independent audit path (Rocq: ``coqc`` + ``coqchk`` in a fresh
    #: sandbox; Lean: ``lake env lean`` + ``#print axioms``).  A disagreement
    #: withholds the proof's reward, is logged to
    #: ``<run_dir>/audit_disagreements.jsonl`` and counted
    #: (``verifier/audit_disagreements``).  The sample is fixed by the proof's
    #: task id, so a resumed run audits the same proofs.
    audit_fraction: float = 0.01
    #: Target set used when ``targets.source`` is not given.
    default_targets: str = MISSING
    #: Warm-start corpus used when ``warmstart.corpus`` is not given; null
    #: when the language ships none.
    default_warmstart_corpus: str | None = None
    #: Lean settings; required when ``backend`` is ``lean``.
    lean: LeanSettings | None = None
    #: Rocq settings; required when ``backend`` is ``rocq``.
    rocq: RocqSettings | None = None


@dataclass
class ResourcesConfig:
    """Hardware: the Ray cluster and how actors are placed on it (SPEC §2.2)."""

    #: Ray cluster to join (``auto``, ``ray://host:10001``); null starts a
    #: local cluster in the driver.
    ray_address: str | None = None
    #: CPUs the local cluster may use; null uses all of them.
    num_cpus: int | None = None
    #: GPUs the local cluster may use; null uses all of them.
    num_gpus: int | None = None
    #: Generation engine implementation: ``transformers`` or ``vllm``.
    engine_backend: str = "transformers"
    #: Generation engine actors serving the Solver.
    solver_engines: int = 1
    #: Generation engine actors serving the Conjecturer.
    conjecturer_engines: int = 1
    #: Generation engine actors serving the Guide.
    guide_engines: int = 1
    #: CPUs reserved per generation engine.
    cpus_per_engine: float = 1.0
    #: GPUs reserved per generation engine (fractions share a GPU); 0 runs
    #: the engines on CPU.
    gpus_per_engine: float = 0.0
    #: Verifier actors in the pool, each driving one prover process.
    verifier_workers: int = 2
    #: CPUs reserved per verifier actor.
    cpus_per_verifier: float = 1.0
    #: Ray Train workers (data-parallel ranks) per training run.
    learner_workers: int = 1
    #: CPUs reserved per learner worker.
    cpus_per_learner_worker: float = 1.0
    #: GPUs per learner worker; 0 trains on CPU (DDP with gloo).
    gpus_per_learner_worker: float = 0.0
    #: Engines release accelerator memory during the training phases and
    #: take the new weights when they wake (vLLM sleep mode); null: when the
    #: engines have GPUs and load checkpoints (``weight_transfer``).  Without
    #: sleep mode (CPUs) it changes nothing.
    sleep_engines_during_training: bool | None = None
    #: vLLM sleep level: 1 keeps the weights in host memory, 2 drops them
    #: (they are reloaded from the new checkpoint on waking; less host memory).
    engine_sleep_level: int = 1
    #: An engine actor with work in flight that leaves its heartbeat (a
    #: thread of its own, answered during generation) unanswered this long is
    #: declared hung, killed and restarted, and its chunks are redone.
    engine_heartbeat_timeout_s: float = 60.0
    #: The same limit for a restarted engine's first answer, which comes once
    #: it has loaded its model (a 7B model from disk takes minutes).
    engine_restart_timeout_s: float = 900.0
    #: One GPU node shared by engines and learner: the engines then reserve
    #: no Ray GPU (the learner's ranks hold them all while training) and are
    #: pinned round-robin to the node's GPUs through CUDA_VISIBLE_DEVICES;
    #: they sleep during training so the learner has the memory.
    #: ``gpus_per_engine`` must then be 0.
    colocate_engines_with_learner: bool = False
    #: How trained weights reach the running engines: ``checkpoint`` (each
    #: engine reloads the learner's checkpoint in place) or ``direct`` (the
    #: learner's rank 0 broadcasts them into the engines over a process group,
    #: vLLM engines only: gloo for CPU engines, NCCL for GPU engines; not with
    #: colocated or sleeping engines).  The checkpoint is written either way;
    #: when a direct transfer fails, the role's engines are restarted on it.
    #: Direct pays off where reading the checkpoint is slow (a network file
    #: system, 7B weights over NVLink); on one machine the page cache makes
    #: the reload faster (``benchmarks/weight_transfer.py``).
    weight_transfer: str = "checkpoint"
    #: How long a direct transfer waits for a peer (the rendezvous, each broadcast).
    weight_transfer_timeout_s: float = 300.0
    #: Strategy of each role's engine placement group: ``PACK`` (few nodes),
    #: ``SPREAD`` (over the GPU nodes of a cluster), ``STRICT_PACK`` (one
    #: node) or ``STRICT_SPREAD`` (one engine per node).
    engine_placement: str = "PACK"
    #: Strategy of the verifier pool's placement group (same choices).
    verifier_placement: str = "PACK"
    #: A custom Ray resource that marks the nodes verifier workers may use
    #: (each worker asks for 0.001 of it); start CPU nodes with
    #: ``ray start --resources='{"<name>": 1}'``.  Null: any node.
    verifier_node_resource: str | None = None
    #: Strategy of the learner's placement group (Ray Train's): ``STRICT_PACK``
    #: keeps every data-parallel rank on one node (fast all-reduce).
    learner_placement: str = "PACK"


@dataclass
class WarmstartConfig:
    """Supervised fine-tuning of the base model before self-play (:mod:`sgs.sft`).

    The base model is trained on a corpus of (prompt, completion) pairs for
    the three roles (:mod:`sgs.state.warmstart`) through the same Ray Train learner
    as the self-play updates, with the plain NLL objective (every weight 1).
    The result is cached by corpus content, base model and these settings,
    so only the first run pays for it.  The optimiser's betas, epsilon,
    weight decay, clip norm and ``max_seq_len`` are those of ``training``.
    """

    #: ``auto`` warm-starts the locally built tiny model (``model.path``
    #: null), which knows no output format until then, and leaves a given
    #: checkpoint alone; ``always`` warm-starts any base model; ``never``
    #: starts self-play from the base model as it is.
    mode: str = "auto"
    #: The corpus: ``pkg://package/path`` or a filesystem path, in the format
    #: of :mod:`sgs.state.warmstart`.  Defaults to the prover's own corpus
    #: (``prover.default_warmstart_corpus``); null means none, so ``auto``
    #: skips the warm start.
    corpus: str | None = "${prover.default_warmstart_corpus}"
    #: The roles whose corpus lines are trained on; a Guide-only corpus run
    #: (``[guide]``) is how the paper makes its Guide follow the review format.
    roles: list[str] = field(default_factory=lambda: list(ROLES))
    #: Passes over the corpus.
    epochs: int = 1
    #: Constant learning rate (as given: ``model.learning_rate_scale`` applies
    #: to the self-play updates only).
    learning_rate: float = 1e-5
    #: Sequences per optimiser step, over all learner workers.
    global_batch_size: int = 32
    #: Sequences per forward/backward pass on one learner worker.
    micro_batch_size: int = 1
    #: Training targets the warm-up report samples (see :mod:`sgs.sft`), a
    #: seeded subsample of the run's training targets; null samples all of them.
    report_targets: int | None = None


@dataclass
class EvaluationConfig:
    """Solver evaluation (:mod:`sgs.evaluate`): on the held-out targets at the
    start and end of a run, and pass@k on a benchmark (``python -m sgs.evaluate``,
    or every ``every`` iterations of a run)."""

    #: Proofs sampled per held-out target for the run's start/end pass@k
    #: (with the Solver's sampling settings); 0 skips that evaluation.
    k: int = 8
    #: The benchmark: ``minif2f-test`` or ``proofnet-test`` (Lean 4, from the
    #: Hugging Face hub), ``rocq-held-out`` (the held-out Rocq targets),
    #: ``jsonl:PATH`` or a path (problems ``{"id", "statement", "header"?}``);
    #: see :mod:`sgs.state.benchmarks`.  Null is the prover's own: ``rocq-held-out``
    #: for Rocq, ``minif2f-test`` for Lean.
    benchmark: str | None = None
    #: A local copy of a named benchmark's data (JSONL, JSON or Parquet, in
    #: the hub's layout), for machines that cannot reach the hub; null
    #: downloads it.
    benchmark_file: str | None = None
    #: Evaluate only the first N problems of the benchmark; null uses all.
    limit: int | None = None
    #: The k of each reported pass@k.
    ks: list[int] = field(default_factory=lambda: [1, 8, 32])
    #: n, the proofs sampled per problem; pass@k is the unbiased estimate
    #: from n samples, so n must be at least the largest k.
    samples_per_problem: int = 32
    #: The Solver weights to evaluate: a Hugging Face checkpoint directory or
    #: hub id.  Null evaluates the run's base model, warm-started as
    #: ``python -m sgs`` would start it.
    checkpoint: str | None = None
    #: Where ``python -m sgs.evaluate`` writes ``problems.jsonl`` and ``summary.json``.
    output_dir: str = "runs/evaluations/${now:%Y-%m-%d_%H-%M-%S}"
    #: Coverage of the bootstrap confidence interval of each pass@k.
    confidence: float = 0.95
    #: Evaluate the Solver on the benchmark every N iterations of a run; 0 never does.
    every: int = 0
    #: Conjectures that state a benchmark problem (when ``benchmark`` is set
    #: or ``every`` > 0), up to whitespace and bound-variable names:
    #: ``exclude`` rejects them (reason ``matches_benchmark``: never attempted,
    #: never trained on), ``flag`` lets them through; both count them
    #: (``conjectures_matching_benchmark``).  Conjectures equal to a target,
    #: held-out ones included, are always rejected.
    contamination: str = "exclude"


@dataclass
class LoggingConfig:
    """Where metrics go (SPEC §2.2, monitoring)."""

    #: wandb mode: ``auto`` (online when a key is configured in
    #: ``WANDB_API_KEY``, else offline), ``offline`` (local files only, to
    #: ``wandb sync`` later), ``online`` or ``disabled``.
    wandb_mode: str = "auto"
    #: wandb project name.
    wandb_project: str = "sgs"
    #: wandb entity (team or user); null uses the account's default.
    wandb_entity: str | None = None
    #: Show a progress bar per phase on the driver.
    progress_bars: bool = True


@dataclass
class SGSConfig:
    """One SGS run."""

    #: Directory of this run's state (config, records, checkpoints, metrics);
    #: re-running with the same directory resumes.  In a multirun sweep each
    #: job writes to ``<run_dir>/<job number>`` (see :func:`validate`).
    run_dir: str = "runs/${now:%Y-%m-%d_%H-%M-%S}"
    #: Number of iterations to run (counting ones finished before a resume).
    iterations: int = 500
    #: Seed for sampling, batching, data splits and the tiny model's weights.
    seed: int = 0
    #: Name of the experiment; set by each file in ``conf/experiment/``.
    experiment: str = "standard"
    #: The target statements.
    targets: TargetsConfig = field(default_factory=TargetsConfig)
    #: The algorithm.
    method: MethodConfig = field(default_factory=MethodConfig)
    #: Generation settings per role.
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    #: Optimiser and batching.
    training: TrainingConfig = field(default_factory=TrainingConfig)
    #: Supervised warm start of the base model before self-play.
    warmstart: WarmstartConfig = field(default_factory=WarmstartConfig)
    #: Held-out evaluation at the start and end of the run.
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    #: The base model (group ``model``).
    model: ModelConfig = field(default_factory=ModelConfig)
    #: The proof checker (group ``prover``).
    prover: ProverConfig = field(default_factory=ProverConfig)
    #: Hardware and actor placement (group ``resources``).
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    #: Metrics output (group ``logging``).
    logging: LoggingConfig = field(default_factory=LoggingConfig)


def register_configs() -> None:
    """Store :class:`SGSConfig` in Hydra's ConfigStore as ``sgs_schema``.

    Called on import of this module; calling it again is harmless.
    """
    ConfigStore.instance().store(name=SCHEMA_NAME, node=SGSConfig)


register_configs()


# --------------------------------------------------------------------------
# Target sources
# --------------------------------------------------------------------------


def resolve_source_path(source: str) -> Path | None:
    """The local file behind a target source, or None for a hub source.

    ``pkg://sgs/data/x.jsonl`` becomes the file ``data/x.jsonl`` inside the
    installed ``sgs`` package; a plain string becomes a path (``~`` expanded).
    The file need not exist.
    """
    if source.startswith(HUB_SCHEME):
        return None
    if source.startswith(PACKAGE_SCHEME):
        package, _, relative = source[len(PACKAGE_SCHEME):].partition("/")
        if not package or not relative:
            raise ValueError(f"package source {source!r} must look like pkg://<package>/<path>")
        try:
            root = importlib.resources.files(package)
        except ModuleNotFoundError as error:
            raise ValueError(f"package source {source!r}: no package named {package!r}") from error
        return Path(str(root.joinpath(relative)))
    return Path(source).expanduser()


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------


#: Seconds between heartbeats of an engine actor with work in flight.
ENGINE_HEARTBEAT_INTERVAL_S = 5.0
#: What a run does with conjectures that state a benchmark problem.
CONTAMINATION_MODES = ("exclude", "flag")
#: Ray placement group strategies.
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


def _choice(problems: list[str], key: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        problems.append(f"{key}={value!r} is not one of {', '.join(map(str, choices))}")


def _at_least(problems: list[str], key: str, value: float | None, low: float) -> None:
    if value is not None and value < low:
        problems.append(f"{key}={value!r} must be at least {low}")


def _fraction(problems: list[str], key: str, value: float) -> None:
    """``value`` must lie in (0, 1]."""
    if not 0.0 < value <= 1.0:
        problems.append(f"{key}={value!r} must lie in (0, 1]")


#: Extra advice for keys that are commonly left unset.
_KEY_HINTS = {
    "resources.ray_address": (
        "resources=cluster joins an existing Ray cluster: set RAY_ADDRESS or give "
        "resources.ray_address=auto or resources.ray_address=ray://HOST:10001"
    ),
}


def _key_problem(key: str, problem: str) -> str:
    hint = _KEY_HINTS.get(key)
    return f"{key} {problem}" + (f"; {hint}" if hint else "")


def _to_schema(cfg: DictConfig) -> SGSConfig:
    """Resolve a composed config into an :class:`SGSConfig` instance.

    Raises :class:`ConfigError` naming the key of every mandatory value left
    unset (``???``), or of a value that has the wrong type or cannot be
    resolved.  Hydra's own ``hydra`` node, if present, is ignored.
    """
    if "hydra" in cfg:
        cfg = OmegaConf.masked_copy(cfg, [key for key in cfg.keys() if key != "hydra"])
    try:
        missing = sorted(OmegaConf.missing_keys(cfg))
        if missing:
            raise ConfigError([_key_problem(key, "is required but was not given") for key in missing])
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(SGSConfig), cfg))
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None) or "config"
        reason = str(error).splitlines()[0]
        raise ConfigError([_key_problem(key, f"is invalid: {reason}")]) from error


def _check_method(problems: list[str], method: MethodConfig) -> None:
    _choice(problems, "method.solver_objective", method.solver_objective, SOLVER_OBJECTIVES)
    _choice(problems, "method.conjecturer_prompt", method.conjecturer_prompt, CONJECTURER_PROMPTS)
    _choice(problems, "method.reward_normalisation", method.reward_normalisation, REWARD_NORMALISATIONS)
    _choice(problems, "method.loss_normalisation", method.loss_normalisation, LOSS_NORMALISATIONS)
    _at_least(problems, "method.conjectures_per_target", method.conjectures_per_target, 0)
    _at_least(problems, "method.num_solver_samples", method.num_solver_samples, 1)
    _at_least(problems, "method.max_proofs_per_target", method.max_proofs_per_target, 1)
    _at_least(problems, "method.ei_replay_iterations", method.ei_replay_iterations, 1)
    _at_least(problems, "method.batch_size", method.batch_size, 1)
    # sgs.method.rewards.keep_threshold indexes the sorted rates at floor(q * n): q = 1 is past the end.
    if not 0.0 < method.conjecture_keep_quantile < 1.0:
        problems.append(f"method.conjecture_keep_quantile={method.conjecture_keep_quantile!r} must lie in (0, 1)")
    # rewards.overlong_penalty needs room between the threshold and max_tokens.
    if not 0.0 < method.overlong_fraction < 1.0:
        problems.append(f"method.overlong_fraction={method.overlong_fraction!r} must lie strictly between 0 and 1")
    _at_least(problems, "method.cispo_ratio_min", method.cispo_ratio_min, 0.0)
    if not method.cispo_ratio_min <= 1.0 <= method.cispo_ratio_max:
        problems.append(
            f"method.cispo_ratio_min={method.cispo_ratio_min!r} and method.cispo_ratio_max="
            f"{method.cispo_ratio_max!r} must bracket 1 (the ratio range is [1 - eps_low, 1 + eps_high])"
        )
    if method.conjectures_per_target == 0:
        if method.train_conjecturer:
            problems.append(
                "method.train_conjecturer=true needs conjectures: method.conjectures_per_target is 0 "
                "(a Solver-only run); set method.train_conjecturer=false"
            )
        if method.use_guide:
            problems.append(
                "method.use_guide=true needs conjectures to score: method.conjectures_per_target is 0 "
                "(a Solver-only run); set method.use_guide=false"
            )
    elif method.use_guide and not method.train_conjecturer:
        problems.append(
            "method.use_guide=true with method.train_conjecturer=false: Guide scores only feed the "
            "Conjecturer's reward, so a frozen Conjecturer needs no Guide; set method.use_guide=false"
        )


def _check_sampling(problems: list[str], sampling: SamplingConfig) -> None:
    for role in ("solver", "conjecturer", "guide"):
        settings: RoleSampling = getattr(sampling, role)
        _at_least(problems, f"sampling.{role}.max_tokens", settings.max_tokens, 1)
        _at_least(problems, f"sampling.{role}.temperature", settings.temperature, 0.0)
        _fraction(problems, f"sampling.{role}.top_p", settings.top_p)
    _at_least(problems, "sampling.entropy_top_logprobs", sampling.entropy_top_logprobs, 0)


def _check_training(problems: list[str], training: TrainingConfig, cfg: SGSConfig) -> None:
    if not training.learning_rate > 0:
        problems.append(f"training.learning_rate={training.learning_rate!r} must be positive")
    _at_least(problems, "training.global_batch_size", training.global_batch_size, 1)
    _at_least(problems, "training.micro_batch_size", training.micro_batch_size, 1)
    for key in ("adam_beta1", "adam_beta2"):
        value = getattr(training, key)
        if not 0.0 <= value < 1.0:
            problems.append(f"training.{key}={value!r} must lie in [0, 1)")
    if not training.adam_epsilon > 0:
        problems.append(f"training.adam_epsilon={training.adam_epsilon!r} must be positive")
    _at_least(problems, "training.weight_decay", training.weight_decay, 0.0)
    if not training.grad_clip_norm > 0:
        problems.append(f"training.grad_clip_norm={training.grad_clip_norm!r} must be positive")
    _at_least(problems, "training.epochs_per_iteration", training.epochs_per_iteration, 1)
    _at_least(problems, "training.max_seq_len", training.max_seq_len, 1)
    _choice(problems, "training.optimizer_state", training.optimizer_state, OPTIMIZER_STATES)
    _choice(problems, "training.strategy", training.strategy, LEARNER_STRATEGIES)
    _at_least(problems, "training.keep_checkpoints", training.keep_checkpoints, 1)
    if not training.probe_logprob_tolerance > 0:
        problems.append(f"training.probe_logprob_tolerance={training.probe_logprob_tolerance!r} must be positive")

    per_step = training.micro_batch_size * cfg.resources.learner_workers
    if per_step >= 1 and training.global_batch_size >= 1 and training.global_batch_size % per_step:
        problems.append(
            f"training.global_batch_size={training.global_batch_size} must be a multiple of "
            f"training.micro_batch_size * resources.learner_workers = {per_step}"
        )
    k = cfg.method.num_solver_samples
    if cfg.method.solver_objective == "cispo" and k >= 1 and training.global_batch_size % k:
        problems.append(
            f"training.global_batch_size={training.global_batch_size} must be a multiple of "
            f"method.num_solver_samples={k} for CISPO, whose batches hold whole groups"
        )


def _check_model(problems: list[str], model: ModelConfig, cfg: SGSConfig) -> None:
    if not model.name:
        problems.append("model.name must not be empty")
    _choice(problems, "model.dtype", model.dtype, DTYPES)
    if model.path is None and model.tiny is None:
        problems.append("model.path is null and model.tiny is not set: give a checkpoint path or tiny-model settings")
    if model.path is None and model.needs_gpu:
        problems.append("model.needs_gpu=true but model.path is null: the locally built tiny model runs on CPU")
    if not (model.learning_rate_scale > 0 and math.isfinite(model.learning_rate_scale)):
        problems.append(f"model.learning_rate_scale={model.learning_rate_scale!r} must be positive and finite")
    if model.dtype == "float16" and cfg.training.bf16:
        problems.append("training.bf16=true contradicts model.dtype='float16'; use model.dtype=bfloat16 or float32")
    tiny = model.tiny
    if tiny is None:
        return
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "min_token_frequency"):
        _at_least(problems, f"model.tiny.{key}", getattr(tiny, key), 1)
    if not tiny.rope_theta > 0:
        problems.append(f"model.tiny.rope_theta={tiny.rope_theta!r} must be positive")
    # The 256 byte symbols plus the 6 special tokens of sgs.machinery.models.tiny.
    _at_least(problems, "model.tiny.vocab_size", tiny.vocab_size, 262)
    if tiny.num_attention_heads >= 1 and tiny.num_key_value_heads >= 1:
        if tiny.hidden_size % tiny.num_attention_heads:
            problems.append(
                f"model.tiny.hidden_size={tiny.hidden_size} must be divisible by "
                f"model.tiny.num_attention_heads={tiny.num_attention_heads}"
            )
        elif tiny.hidden_size // tiny.num_attention_heads < 32:
            problems.append(
                f"model.tiny head_dim = hidden_size / num_attention_heads = "
                f"{tiny.hidden_size // tiny.num_attention_heads} must be at least 32 (vLLM CPU attention)"
            )
        if tiny.num_attention_heads % tiny.num_key_value_heads:
            problems.append(
                f"model.tiny.num_key_value_heads={tiny.num_key_value_heads} must divide "
                f"model.tiny.num_attention_heads={tiny.num_attention_heads}"
            )
    if model.path is None:
        if tiny.max_position_embeddings < cfg.training.max_seq_len:
            problems.append(
                f"model.tiny.max_position_embeddings={tiny.max_position_embeddings} is shorter than "
                f"training.max_seq_len={cfg.training.max_seq_len}"
            )
        for role in ("solver", "conjecturer", "guide"):
            max_tokens = getattr(cfg.sampling, role).max_tokens
            if tiny.max_position_embeddings <= max_tokens:
                problems.append(
                    f"model.tiny.max_position_embeddings={tiny.max_position_embeddings} leaves no room for a "
                    f"prompt before sampling.{role}.max_tokens={max_tokens} generated tokens"
                )


def _check_prover(problems: list[str], prover: ProverConfig) -> None:
    _choice(problems, "prover.backend", prover.backend, PROVER_BACKENDS)
    _choice(problems, "prover.language", prover.language, PROOF_LANGUAGES)
    expected = BACKEND_LANGUAGE.get(prover.backend)
    if expected is not None and prover.language in PROOF_LANGUAGES and prover.language != expected:
        problems.append(
            f"prover.language={prover.language!r} cannot be checked by prover.backend={prover.backend!r}, "
            f"which checks {expected}"
        )
    if not prover.timeout > 0:
        problems.append(f"prover.timeout={prover.timeout!r} must be positive (seconds)")
    if not 0 <= prover.audit_fraction <= 1:
        problems.append(f"prover.audit_fraction={prover.audit_fraction!r} must be between 0 and 1")
    if prover.backend == "lean" and prover.lean is None:
        problems.append("prover.backend='lean' needs prover.lean settings (use prover=lean)")
    if prover.backend == "rocq" and prover.rocq is None:
        problems.append("prover.backend='rocq' needs prover.rocq settings (use prover=rocq)")


def _check_targets(problems: list[str], targets: TargetsConfig, prover: ProverConfig) -> None:
    if not targets.source:
        problems.append("targets.source must not be empty")
    else:
        try:
            resolve_source_path(targets.source)
        except ValueError as error:
            problems.append(f"targets.source: {error}")
        language = KNOWN_TARGET_LANGUAGES.get(targets.source)
        if language is not None and prover.language in PROOF_LANGUAGES and language != prover.language:
            problems.append(
                f"targets.source={targets.source!r} holds {language} statements but prover.language="
                f"{prover.language!r}; use prover={language}, or leave targets.source unset to use the "
                f"prover's own targets ({prover.default_targets})"
            )
    _at_least(problems, "targets.limit", targets.limit, 1)
    if not 0.0 <= targets.held_out_fraction < 1.0:
        problems.append(f"targets.held_out_fraction={targets.held_out_fraction!r} must lie in [0, 1)")


def _check_resources(problems: list[str], resources: ResourcesConfig, cfg: SGSConfig) -> None:
    _choice(problems, "resources.engine_backend", resources.engine_backend, ENGINE_BACKENDS)
    if resources.ray_address is not None and not resources.ray_address.strip():
        problems.append("resources.ray_address must not be empty; use null to start a local cluster")
    _at_least(problems, "resources.num_cpus", resources.num_cpus, 1)
    _at_least(problems, "resources.num_gpus", resources.num_gpus, 0)
    _at_least(problems, "resources.solver_engines", resources.solver_engines, 1)
    if cfg.method.conjectures_per_target > 0:
        _at_least(problems, "resources.conjecturer_engines", resources.conjecturer_engines, 1)
    if cfg.method.use_guide:
        _at_least(problems, "resources.guide_engines", resources.guide_engines, 1)
    _at_least(problems, "resources.verifier_workers", resources.verifier_workers, 1)
    _at_least(problems, "resources.learner_workers", resources.learner_workers, 1)
    for key in ("cpus_per_engine", "gpus_per_engine", "cpus_per_verifier",
                "cpus_per_learner_worker", "gpus_per_learner_worker"):
        _at_least(problems, f"resources.{key}", getattr(resources, key), 0.0)

    _choice(problems, "resources.engine_sleep_level", resources.engine_sleep_level, (1, 2))
    for key in ("engine_heartbeat_timeout_s", "engine_restart_timeout_s"):
        if not getattr(resources, key) > ENGINE_HEARTBEAT_INTERVAL_S:
            problems.append(f"resources.{key}={getattr(resources, key)!r} must exceed the heartbeat interval "
                            f"({ENGINE_HEARTBEAT_INTERVAL_S:g} s)")
    if resources.colocate_engines_with_learner and resources.gpus_per_engine > 0:
        problems.append("resources.colocate_engines_with_learner=true pins engines to GPUs outside Ray's "
                        "accounting (the learner holds the GPUs); set resources.gpus_per_engine=0")
    _choice(problems, "resources.weight_transfer", resources.weight_transfer, WEIGHT_TRANSFERS)
    if resources.weight_transfer == "direct":
        if resources.engine_backend != "vllm":
            problems.append("resources.weight_transfer=direct needs vLLM engines (resources.engine_backend=vllm); "
                            "the transformers engines load checkpoints")
        if resources.colocate_engines_with_learner:
            problems.append("resources.weight_transfer=direct cannot reach engines colocated with the learner "
                            "(NCCL needs a GPU per rank and the learner's rank 0 shares GPU 0); use checkpoint")
        if resources.sleep_engines_during_training:
            problems.append("resources.weight_transfer=direct sends weights while the engines would sleep; set "
                            "resources.sleep_engines_during_training=false or weight_transfer=checkpoint")
    if not resources.weight_transfer_timeout_s > 0:
        problems.append(f"resources.weight_transfer_timeout_s={resources.weight_transfer_timeout_s!r} must be positive")
    for key in ("engine_placement", "verifier_placement", "learner_placement"):
        _choice(problems, f"resources.{key}", getattr(resources, key), PLACEMENT_STRATEGIES)

    on_cpu = [f"resources.{key}=0" for key in ("gpus_per_engine", "gpus_per_learner_worker")
              if getattr(resources, key) <= 0
              and not (key == "gpus_per_engine" and resources.colocate_engines_with_learner)]
    if cfg.model.needs_gpu and on_cpu:
        problems.append(
            f"model {cfg.model.name!r} needs a GPU but {' and '.join(on_cpu)} places it on CPU; "
            f"use resources=gpu_node or resources=cluster, or a CPU model (model=tiny)"
        )
    if resources.num_gpus is not None:
        engine_gpus = resources.gpus_per_engine * _active_engines(resources, cfg.method)
        if engine_gpus > resources.num_gpus:
            problems.append(
                f"the generation engines need {engine_gpus:g} GPUs (resources.gpus_per_engine times the "
                f"engines of the active roles) but resources.num_gpus={resources.num_gpus}"
            )
        learner_gpus = resources.gpus_per_learner_worker * resources.learner_workers
        if learner_gpus > resources.num_gpus:
            problems.append(
                f"the learner needs {learner_gpus:g} GPUs (resources.gpus_per_learner_worker * "
                f"resources.learner_workers) but resources.num_gpus={resources.num_gpus}"
            )


def _active_engines(resources: ResourcesConfig, method: MethodConfig) -> int:
    """Engine actors of the roles this method uses."""
    engines = resources.solver_engines
    if method.conjectures_per_target > 0:
        engines += resources.conjecturer_engines
    if method.use_guide:
        engines += resources.guide_engines
    return engines


def _engines_on_gpu(resources: ResourcesConfig) -> bool:
    return resources.gpus_per_engine > 0 or resources.colocate_engines_with_learner


def weight_transfer_backend(resources: ResourcesConfig) -> str | None:
    """The transport trained weights take into the engines ("gloo" between
    CPU processes, "nccl" between GPUs), or None: the engines load checkpoints."""
    if resources.weight_transfer != "direct":
        return None
    return "nccl" if _engines_on_gpu(resources) else "gloo"


def engines_sleep_during_training(resources: ResourcesConfig) -> bool:
    """``resources.sleep_engines_during_training``, its default resolved: GPU
    engines sleep unless the learner sends them weights directly."""
    if resources.sleep_engines_during_training is not None:
        return resources.sleep_engines_during_training
    return _engines_on_gpu(resources) and weight_transfer_backend(resources) is None


def config_problems(cfg: DictConfig | SGSConfig) -> list[str]:
    """Every problem with a config's values, one message per problem.

    Each message names the offending key(s).  An empty list means the config
    is consistent (it does not mean this machine can run it: see
    :func:`requirements_problems`).
    """
    if isinstance(cfg, DictConfig):
        try:
            cfg = _to_schema(cfg)
        except ConfigError as error:
            return error.problems
    problems: list[str] = []
    if not cfg.run_dir:
        problems.append("run_dir must not be empty")
    _at_least(problems, "iterations", cfg.iterations, 1)
    if not cfg.experiment:
        problems.append("experiment must not be empty")
    _check_targets(problems, cfg.targets, cfg.prover)
    _check_method(problems, cfg.method)
    _check_sampling(problems, cfg.sampling)
    _check_training(problems, cfg.training, cfg)
    _check_model(problems, cfg.model, cfg)
    _check_prover(problems, cfg.prover)
    _check_resources(problems, cfg.resources, cfg)
    _check_warmstart(problems, cfg.warmstart, cfg)
    _check_evaluation(problems, cfg.evaluation, cfg.prover)
    _choice(problems, "logging.wandb_mode", cfg.logging.wandb_mode, WANDB_MODES)
    return problems


def _check_evaluation(problems: list[str], evaluation: EvaluationConfig, prover: ProverConfig) -> None:
    _at_least(problems, "evaluation.k", evaluation.k, 0)
    _choice(problems, "evaluation.contamination", evaluation.contamination, CONTAMINATION_MODES)
    problems.extend(benchmark_problems(evaluation.benchmark, evaluation.benchmark_file, prover.language))
    _at_least(problems, "evaluation.limit", evaluation.limit, 1)
    bad_ks = [k for k in evaluation.ks if k < 1]
    if not evaluation.ks or bad_ks:
        problems.append(f"evaluation.ks={list(evaluation.ks)!r} must list at least one k, each at least 1")
    elif len(set(evaluation.ks)) != len(evaluation.ks):
        problems.append(f"evaluation.ks={list(evaluation.ks)!r} lists a k twice")
    elif evaluation.samples_per_problem < max(evaluation.ks):
        problems.append(
            f"evaluation.samples_per_problem={evaluation.samples_per_problem} must be at least the largest k "
            f"of evaluation.ks ({max(evaluation.ks)}): the unbiased pass@k needs n >= k samples per problem"
        )
    _at_least(problems, "evaluation.samples_per_problem", evaluation.samples_per_problem, 1)
    if evaluation.checkpoint is not None and not evaluation.checkpoint.strip():
        problems.append("evaluation.checkpoint must not be empty; use null for the run's base model")
    if not evaluation.output_dir.strip():
        problems.append("evaluation.output_dir must not be empty")
    if not 0.0 < evaluation.confidence < 1.0:
        problems.append(f"evaluation.confidence={evaluation.confidence!r} must lie strictly between 0 and 1")
    _at_least(problems, "evaluation.every", evaluation.every, 0)


def warmstart_enabled(cfg: SGSConfig) -> bool:
    """Whether the run fine-tunes its base model on the warm-start corpus
    first (``warmstart.mode``: ``always``, or ``auto`` for the tiny model
    when there is a corpus)."""
    ws = cfg.warmstart
    if ws.mode == "always":
        return True
    return ws.mode == "auto" and cfg.model.path is None and ws.corpus is not None


def _check_warmstart(problems: list[str], ws: WarmstartConfig, cfg: SGSConfig) -> None:
    _choice(problems, "warmstart.mode", ws.mode, WARMSTART_MODES)
    if ws.mode == "always" and ws.corpus is None:
        problems.append(
            f"warmstart.mode='always' needs a corpus, but warmstart.corpus is null (prover {cfg.prover.backend!r} "
            "ships none); give warmstart.corpus=/path/to/corpus.jsonl or set warmstart.mode=never"
        )
    if ws.corpus is not None:
        if not ws.corpus.strip():
            problems.append("warmstart.corpus must not be empty; use null for no corpus")
        elif ws.corpus.startswith(HUB_SCHEME):
            problems.append(f"warmstart.corpus={ws.corpus!r}: the corpus must be a local file or a pkg:// path")
        else:
            try:
                resolve_source_path(ws.corpus)
            except ValueError as error:
                problems.append(f"warmstart.corpus: {error}")
    unknown = [role for role in ws.roles if role not in ROLES]
    if unknown:
        problems.append(f"warmstart.roles holds {', '.join(map(repr, unknown))}; roles are {', '.join(ROLES)}")
    if not ws.roles or len(set(ws.roles)) != len(ws.roles):
        problems.append(f"warmstart.roles={list(ws.roles)!r} must name at least one role, each once")
    _at_least(problems, "warmstart.epochs", ws.epochs, 1)
    if not ws.learning_rate > 0:
        problems.append(f"warmstart.learning_rate={ws.learning_rate!r} must be positive")
    _at_least(problems, "warmstart.global_batch_size", ws.global_batch_size, 1)
    _at_least(problems, "warmstart.micro_batch_size", ws.micro_batch_size, 1)
    per_step = ws.micro_batch_size * cfg.resources.learner_workers
    if per_step >= 1 and ws.global_batch_size >= 1 and ws.global_batch_size % per_step:
        problems.append(
            f"warmstart.global_batch_size={ws.global_batch_size} must be a multiple of "
            f"warmstart.micro_batch_size * resources.learner_workers = {per_step}"
        )
    _at_least(problems, "warmstart.report_targets", ws.report_targets, 1)


def _hydra_job_dir() -> str | None:
    """Output directory of the current Hydra multirun job, if there is one."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN or OmegaConf.is_missing(hydra_cfg.runtime, "output_dir"):
        return None
    return hydra_cfg.runtime.output_dir


def validate(cfg: DictConfig | SGSConfig) -> SGSConfig:
    """Check a composed config and return it as a typed :class:`SGSConfig`.

    Raises :class:`ConfigError` listing every problem found by
    :func:`config_problems`.  Inside a Hydra multirun job the returned
    ``run_dir`` is that job's own directory (``<run_dir>/<job number>``,
    Hydra's ``runtime.output_dir``), so the jobs of a sweep never share state.
    """
    problems = config_problems(cfg)
    if problems:
        raise ConfigError(problems)
    typed = _to_schema(cfg) if isinstance(cfg, DictConfig) else cfg
    job_dir = _hydra_job_dir()
    if job_dir is not None:
        typed.run_dir = job_dir
    return typed


# --------------------------------------------------------------------------
# Can this machine run it?
# --------------------------------------------------------------------------


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _executable_found(command: str, cwd: Path | None = None) -> bool:
    """Whether a command name or path names an executable file."""
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(command).expanduser()
        if not path.is_absolute() and cwd is not None:
            path = cwd / path
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(command) is not None


def _warmstart_problems(cfg: SGSConfig) -> list[str]:
    if not warmstart_enabled(cfg):
        return []
    path = resolve_source_path(cfg.warmstart.corpus)
    if not path.is_file():
        return [f"warm-start corpus not found: warmstart.corpus={cfg.warmstart.corpus!r} ({path}); "
                "give another file, or skip the warm start with warmstart.mode=never"]
    return []


def _target_problems(cfg: SGSConfig) -> list[str]:
    source = cfg.targets.source
    path = resolve_source_path(source)
    if path is None:
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
            return [
                f"targets.source={source!r} is on the Hugging Face hub but HF_HUB_OFFLINE is set; "
                f"download it and pass the local file as targets.source=/path/to/targets.json"
            ]
        return []
    if not path.is_file():
        return [f"targets file not found: targets.source={source!r} ({path})"]
    return []


def _model_path_problems(cfg: SGSConfig) -> list[str]:
    problems = []
    for key in ("path", "tokenizer_path", "guide_path"):
        value = getattr(cfg.model, key)
        if value is None:
            continue
        looks_local = value.startswith(("/", ".", "~")) or os.path.exists(os.path.expanduser(value))
        if looks_local and not Path(value).expanduser().is_dir():
            problems.append(f"model directory not found: model.{key}={value!r}")
    return problems


def _cuda_users(cfg: SGSConfig) -> list[str]:
    """What in ``cfg`` asks for a CUDA GPU on this machine, in words."""
    users = []
    if cfg.model.needs_gpu:
        users.append(f"model {cfg.model.name!r} (model.needs_gpu=true)")
    if cfg.resources.gpus_per_engine > 0 or cfg.resources.gpus_per_learner_worker > 0:
        users.append("the placement (resources.gpus_per_engine or resources.gpus_per_learner_worker > 0)")
    elif (cfg.resources.num_gpus or 0) > 0:
        users.append(f"resources.num_gpus={cfg.resources.num_gpus}")
    return users


def _vllm_missing(cfg: SGSConfig) -> bool:
    return cfg.resources.engine_backend == "vllm" and importlib.util.find_spec("vllm") is None


def suggested_overrides(cfg: DictConfig | SGSConfig) -> list[str]:
    """Command-line overrides that avoid what this machine lacks for ``cfg``.

    For example ``["model=tiny", "prover=rocq", "resources=local_cpu"]`` for
    a paper-setting experiment on a machine with no GPU and no Lean.  Empty
    when the model, prover and placement can all run here (missing data
    files are not fixed by an override and are not considered).
    """
    if isinstance(cfg, DictConfig):
        cfg = _to_schema(cfg)
    if cfg.resources.ray_address is not None:
        return []
    overrides = []
    no_cuda = bool(_cuda_users(cfg)) and not _cuda_available()
    if no_cuda and cfg.model.needs_gpu:
        overrides.append("model=tiny")
    if cfg.prover.backend == "lean" and _prover_problems(cfg.prover):
        overrides.append("prover=rocq")
    if no_cuda:
        overrides.append("resources=local_cpu")
    elif _vllm_missing(cfg):
        overrides.append("resources.engine_backend=transformers")
    return overrides


def requirements_problems(cfg: DictConfig | SGSConfig) -> list[str]:
    """What this machine lacks to run ``cfg``, checked without starting Ray.

    Checks a CUDA GPU where the model or the placement needs one, the vLLM
    package for the vLLM engine backend, the prover's executables and
    project, the targets file, the warm-start corpus (when the warm start
    runs) and local model directories.  Each message
    names what is missing and, where an override avoids it, the overrides
    that would run here; :func:`suggested_overrides` gives them all at once.  When ``resources.ray_address`` names an existing
    cluster, GPUs and provers live on its nodes, so only the driver's files
    are checked.  Call it on a config that :func:`validate` accepts.
    """
    if isinstance(cfg, DictConfig):
        cfg = _to_schema(cfg)
    problems: list[str] = []
    if cfg.resources.ray_address is None:
        users = _cuda_users(cfg)
        if users and not _cuda_available():
            problems.append(
                f"no CUDA GPU on this machine (torch.cuda.is_available() is False) but {' and '.join(users)} "
                f"needs one; to run here use: {'model=tiny ' if cfg.model.needs_gpu else ''}resources=local_cpu"
            )
        if _vllm_missing(cfg):
            problems.append(
                "resources.engine_backend='vllm' but the vllm package is not installed "
                "(pip install 'sgs[gpu]' or 'sgs[cpu]'); to run here use: resources.engine_backend=transformers"
            )
        problems.extend(_prover_problems(cfg.prover))
    problems.extend(_target_problems(cfg))
    problems.extend(_warmstart_problems(cfg))
    problems.extend(_model_path_problems(cfg))
    return problems


def _prover_problems(prover: ProverConfig) -> list[str]:
    problems = []
    if prover.backend == "lean" and prover.lean is not None:
        fix = "to check proofs with Rocq here use: prover=rocq"
        project = Path(prover.lean.project_dir).expanduser()
        if not project.is_dir():
            problems.append(
                f"Lean project directory not found: prover.lean.project_dir={prover.lean.project_dir!r}; {fix}"
            )
        elif not any((project / name).exists() for name in ("lakefile.lean", "lakefile.toml", "lean-toolchain")):
            problems.append(
                f"prover.lean.project_dir={prover.lean.project_dir!r} is not a Lean project "
                f"(no lakefile.lean, lakefile.toml or lean-toolchain); {fix}"
            )
        words = shlex.split(prover.lean.repl_command)
        if not words:
            problems.append(f"prover.lean.repl_command is empty; {fix}")
        elif not _executable_found(words[0], project if project.is_dir() else None):
            problems.append(
                f"Lean REPL command not found: {words[0]!r} from prover.lean.repl_command="
                f"{prover.lean.repl_command!r} is not an executable on PATH; {fix}"
            )
    if prover.backend == "rocq" and prover.rocq is not None and not _executable_found(prover.rocq.coqtop):
        problems.append(
            f"coqtop not found: prover.rocq.coqtop={prover.rocq.coqtop!r} is not an executable "
            f"(install Rocq/Coq, e.g. apt-get install coq, or point prover.rocq.coqtop at it)"
        )
    return problems
