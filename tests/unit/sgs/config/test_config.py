"""Config composition, validation and machine checks (sgs.config: schema, validation, machine; conf/)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from sgs import config as C
from tests.config_support import compose_cfg

PAPER_EXPERIMENTS = {
    # experiment: (solver objective, conjectures per target, conjecturer prompt,
    #              train conjecturer, use guide, learning rate)   -- SPEC §1.5
    "standard": ("reinforce_half", 1, "target_conditioned", True, True, 3e-6),
    "cispo_sgs": ("cispo", 1, "target_conditioned", True, True, 1e-6),
    "no_guide": ("reinforce_half", 1, "target_conditioned", True, False, 3e-6),
    "frozen_conjecturer": ("reinforce_half", 1, "target_conditioned", False, False, 3e-6),
    "no_problem_conditioning": ("reinforce_half", 1, "unconditioned", True, False, 3e-6),
    "reinforce_half_solver_only": ("reinforce_half", 0, "target_conditioned", False, False, 3e-6),
    "cispo_solver_only": ("cispo", 0, "target_conditioned", False, False, 1e-6),
    "ei_solver_only": ("ei", 0, "target_conditioned", False, False, 3e-6),
    # the paper's third curve of Figure 1: the starting Solver, never trained
    "parallel_sampling": ("none", 0, "target_conditioned", False, False, 3e-6),
}
MODELS = {"tiny": "tiny", "deepseek_prover_v2_7b": "deepseek_prover_v2_7b", "rocq_prover": "rocq_prover"}
PROVERS = ("lean", "rocq")


def method_tuple(cfg) -> tuple:
    m = cfg.method
    return (
        m.solver_objective,
        m.conjectures_per_target,
        m.conjecturer_prompt,
        m.train_conjecturer,
        m.use_guide,
        cfg.training.learning_rate,
    )


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def lean_project(tmp_path, monkeypatch):
    """A directory that looks like a Lean project, an executable fake REPL, and a
    fake ``lake`` on PATH (the axiom checker runs through it)."""
    project = tmp_path / "lean_project"
    project.mkdir()
    (project / "lakefile.lean").write_text("-- test project\n")
    repl = tmp_path / "repl"
    repl.write_text("#!/bin/sh\nexit 0\n")
    repl.chmod(0o755)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "lake").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "bin" / "lake").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return project, repl


# --------------------------------------------------------------------------
# Composition
# --------------------------------------------------------------------------


def test_default_is_standard_method_on_the_shipped_rocq_prover_on_cpu():
    cfg = compose_cfg()
    assert method_tuple(cfg) == PAPER_EXPERIMENTS["standard"]
    assert cfg.experiment == "standard"
    assert cfg.model.name == "rocq_prover" and cfg.model.path == "pkg://sgs/data/rocq_prover"
    assert not cfg.model.needs_gpu and cfg.warmstart.mode == "always"
    assert cfg.prover.backend == "rocq" and cfg.prover.language == "rocq"
    assert cfg.targets.source == C.ROCQ_TARGETS
    assert cfg.resources.ray_address is None and cfg.resources.gpus_per_engine == 0
    assert cfg.sampling.solver.max_tokens < 8192  # laptop scale
    typed = C.validate(cfg)
    assert isinstance(typed, C.SGSConfig)
    assert typed.model.tiny is None   # a shipped checkpoint, nothing to build
    assert typed.run_dir.startswith("runs/") and "$" not in typed.run_dir


def test_paper_hyperparameters_are_the_schema_defaults():
    cfg = compose_cfg()
    assert (cfg.training.adam_beta1, cfg.training.adam_beta2) == (0.9, 0.95)
    assert cfg.training.grad_clip_norm == 1.0
    assert cfg.training.optimizer_state == "reset"
    assert cfg.method.num_solver_samples == 8
    assert cfg.method.max_proofs_per_target == 16
    assert cfg.method.ei_replay_iterations == 3
    assert (cfg.method.cispo_ratio_min, cfg.method.cispo_ratio_max) == (0.0, 4.0)
    assert cfg.method.reward_normalisation == "reference"
    assert cfg.method.loss_normalisation == "token_mean"
    # Deviations from the paper kept as the default (the fidelity=paper config group selects the paper's).
    assert cfg.method.unelaborated_conjectures == "skip"
    assert cfg.method.conjecture_dedup == "canonical"
    assert cfg.method.ei_solved_count == "distinct"
    for role in ("solver", "conjecturer", "guide"):
        assert cfg.sampling[role].temperature == 1.0 and cfg.sampling[role].top_p == 1.0


def test_experiment_files_are_the_eight_of_the_spec_and_parallel_sampling():
    names = {p.stem for p in (C.CONFIG_DIR / "experiment").glob("*.yaml") if not p.stem.startswith("_")}
    assert names == set(PAPER_EXPERIMENTS)


@pytest.mark.parametrize("experiment", sorted(PAPER_EXPERIMENTS))
def test_experiment_alone_is_the_paper_setting(experiment):
    cfg = compose_cfg(f"+experiment={experiment}")
    assert cfg.experiment == experiment
    assert method_tuple(cfg) == PAPER_EXPERIMENTS[experiment]
    assert cfg.model.path == "deepseek-ai/DeepSeek-Prover-V2-7B"
    assert cfg.model.guide_path == "LukeBailey181Pub/dspv2_guide"
    assert cfg.model.needs_gpu and cfg.model.dtype == "bfloat16"
    assert cfg.prover.backend == "lean" and cfg.targets.source == C.D3K_TARGETS
    assert cfg.resources.num_gpus == 8
    assert cfg.sampling.solver.max_tokens == 8192 and cfg.training.max_seq_len == 8192
    assert cfg.training.global_batch_size == 32
    C.validate(cfg)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("prover", PROVERS)
@pytest.mark.parametrize("experiment", sorted(PAPER_EXPERIMENTS))
def test_every_experiment_composes_with_every_model_and_prover(experiment, prover, model):
    cfg = compose_cfg(f"+experiment={experiment}", f"model={model}", f"prover={prover}")
    assert method_tuple(cfg) == PAPER_EXPERIMENTS[experiment]
    assert cfg.model.name == MODELS[model]
    assert cfg.prover.backend == prover and cfg.prover.language == prover
    # The targets follow the prover unless given explicitly.
    assert cfg.targets.source == (C.D3K_TARGETS if prover == "lean" else C.ROCQ_TARGETS)
    typed = C.validate(cfg)
    assert typed.method.solver_objective == PAPER_EXPERIMENTS[experiment][0]


@pytest.mark.parametrize("order", ["overrides_first", "experiment_first"])
def test_command_line_groups_beat_the_experiments_choices(order):
    overrides = ["model=tiny", "prover=rocq", "resources=local_cpu", "scale=laptop"]
    args = overrides + ["+experiment=cispo_sgs"] if order == "overrides_first" else ["+experiment=cispo_sgs"] + overrides
    cfg = compose_cfg(*args)
    assert cfg.model.name == "tiny" and cfg.prover.backend == "rocq"
    assert cfg.resources.num_gpus == 0 and cfg.sampling.solver.max_tokens < 8192
    assert method_tuple(cfg) == PAPER_EXPERIMENTS["cispo_sgs"]
    C.validate(cfg)


@pytest.mark.parametrize("experiment", sorted(PAPER_EXPERIMENTS))
def test_experiment_files_hold_only_differences(experiment):
    text = (C.CONFIG_DIR / "experiment" / f"{experiment}.yaml").read_text()
    assert text.startswith("# @package _global_")
    values = yaml.safe_load(text)
    assert values.pop("defaults") == ["_paper"]
    default = compose_cfg()
    for section, fields in values.items():
        if section == "experiment":
            continue
        for key, value in fields.items():
            assert default[section][key] != value, f"{experiment}: {section}.{key} repeats the default"


def test_explicit_target_source_overrides_the_provers_default(tmp_path):
    cfg = compose_cfg(f"targets.source={tmp_path / 't.jsonl'}", "targets.limit=5")
    assert cfg.targets.source == str(tmp_path / "t.jsonl") and cfg.targets.limit == 5


def test_cluster_takes_the_address_from_ray_address(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    assert C.validate(compose_cfg("resources=cluster")).resources.ray_address == "ray://head:10001"


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["method.solver_objective=foo"],
         "method.solver_objective='foo' is not one of reinforce_half, reinforce, cispo, ei, none"),
        (["method.conjectures_per_target=-1"], "method.conjectures_per_target=-1 must be at least 0"),
        (["method.conjecturer_prompt=random"], "method.conjecturer_prompt='random' is not one of"),
        (["method.reward_normalisation=zscore"], "method.reward_normalisation='zscore' is not one of"),
        (["method.loss_normalisation=sum"], "method.loss_normalisation='sum' is not one of"),
        (["method.unelaborated_conjectures=drop"],
         "method.unelaborated_conjectures='drop' is not one of skip, attempt"),
        (["method.conjecture_dedup=fuzzy"], "method.conjecture_dedup='fuzzy' is not one of canonical, exact"),
        (["method.ei_solved_count=unique"], "method.ei_solved_count='unique' is not one of distinct, all"),
        (["method.num_solver_samples=0"], "method.num_solver_samples=0 must be at least 1"),
        (["method.overlong_fraction=1.0"], "method.overlong_fraction=1.0 must lie strictly between 0 and 1"),
        (["method.cispo_ratio_max=0.5"], "must bracket 1"),
        (["method.conjecture_keep_quantile=0"], "method.conjecture_keep_quantile=0.0 must lie in (0, 1)"),
        (["method.conjecture_keep_quantile=1"], "method.conjecture_keep_quantile=1.0 must lie in (0, 1)"),
        (["method.batch_size=0"], "method.batch_size=0 must be at least 1"),
        (["method.conjectures_per_target=0"], "method.train_conjecturer=true needs conjectures"),
        (["method.conjectures_per_target=0", "method.train_conjecturer=false"], "method.use_guide=true needs conjectures"),
        (["method.train_conjecturer=false"], "a frozen Conjecturer needs no Guide"),
        (["sampling.solver.temperature=-1"], "sampling.solver.temperature=-1.0 must be at least 0"),
        (["sampling.guide.top_p=0"], "sampling.guide.top_p=0.0 must lie in (0, 1]"),
        (["sampling.conjecturer.max_tokens=0"], "sampling.conjecturer.max_tokens=0 must be at least 1"),
        (["sampling.conjecturer_grammar=/no/such/grammar.ebnf"],
         "sampling.conjecturer_grammar='/no/such/grammar.ebnf' is neither null, 'statement'"),
        (["training.learning_rate=0"], "training.learning_rate=0.0 must be positive"),
        (["training.adam_beta2=1.0"], "training.adam_beta2=1.0 must lie in [0, 1)"),
        (["training.optimizer_state=keep"], "training.optimizer_state='keep' is not one of reset, persist"),
        (["training.micro_batch_size=3"], "must be a multiple of training.micro_batch_size * resources.learner_workers = 3"),
        (["model=tiny", "training.max_seq_len=32768"], "model.tiny.max_position_embeddings=16384 is shorter than training.max_seq_len=32768"),
        (["model=tiny", "model.tiny.max_position_embeddings=1024", "sampling.guide.max_tokens=1024"],
         "model.tiny.max_position_embeddings=1024 leaves no room for a prompt before sampling.guide.max_tokens=1024"),
        (["model.dtype=int8"], "model.dtype='int8' is not one of float32, bfloat16, float16"),
        (["model=tiny", "model.tiny.num_attention_heads=8", "model.tiny.num_key_value_heads=8"],
         "head_dim = hidden_size / num_attention_heads = 16 must be at least 32"),
        (["model=tiny", "model.tiny.num_key_value_heads=3"], "model.tiny.num_key_value_heads=3 must divide"),
        (["model=tiny", "model.tiny.vocab_size=200"], "model.tiny.vocab_size=200 must be at least 262"),
        (["model=tiny", "model.tiny=null"], "model.path is null and model.tiny is not set"),
        (["prover.language=lean"], "prover.language='lean' cannot be checked by prover.backend='rocq'"),
        (["prover.backend=isabelle"], "prover.backend='isabelle' is not one of lean, rocq"),
        (["prover.timeout=0"], "prover.timeout=0.0 must be positive"),
        (["prover.audit_fraction=1.5"], "prover.audit_fraction=1.5 must be between 0 and 1"),
        (["prover.rocq.allow_bug_prone_features=[fixpoint]"],
         "prover.rocq.allow_bug_prone_features: unknown ['fixpoint'] (choose from ['fixpoints', 'vm_reduction'])"),
        (["prover.rocq.tactic_libraries=['Require Import Arith. Unset Guard Checking.']"],
         "prover.rocq.tactic_libraries: 'Require Import Arith. Unset Guard Checking.' is not one Require sentence"),
        (["prover=lean", f"targets.source={C.ROCQ_TARGETS}"],
         f"targets.source='{C.ROCQ_TARGETS}' holds rocq statements but prover.language='lean'"),
        (["prover=rocq", f"targets.source={C.D3K_TARGETS}"],
         f"targets.source='{C.D3K_TARGETS}' holds lean statements but prover.language='rocq'"),
        (["targets.source=pkg://"], "targets.source: package source 'pkg://' must look like pkg://<package>/<path>"),
        (["targets.limit=0"], "targets.limit=0 must be at least 1"),
        (["targets.held_out_fraction=1.0"], "targets.held_out_fraction=1.0 must lie in [0, 1)"),
        (["model=deepseek_prover_v2_7b"],
         "needs a GPU but resources.gpus_per_engine=0 and resources.gpus_per_learner_worker=0 places it on CPU"),
        (["resources.engine_backend=sglang"], "resources.engine_backend='sglang' is not one of transformers, vllm"),
        (["resources.verifier_workers=0"], "resources.verifier_workers=0 must be at least 1"),
        (["resources.guide_engines=0"], "resources.guide_engines=0 must be at least 1"),
        (["resources=cluster", "resources.ray_address=auto", "resources.num_gpus=4"],
         "the generation engines need 64 GPUs"),
        (["resources=gpu_node", "resources.gpus_per_engine=1"], "set resources.gpus_per_engine=0"),
        (["resources.engine_placement=EVERYWHERE"], "resources.engine_placement='EVERYWHERE' is not one of PACK"),
        (["resources.engine_heartbeat_timeout_s=2"], "resources.engine_heartbeat_timeout_s=2.0 must exceed"),
        (["resources.weight_transfer=rdma"], "resources.weight_transfer='rdma' is not one of checkpoint, direct"),
        (["resources.weight_transfer=direct"], "resources.weight_transfer=direct needs vLLM engines"),
        (["resources=gpu_node", "resources.weight_transfer=direct"],
         "cannot reach engines colocated with the learner"),
        (["resources.engine_backend=vllm", "resources.weight_transfer=direct",
          "resources.sleep_engines_during_training=true"], "sends weights while the engines would sleep"),
        (["resources.weight_transfer_timeout_s=0"], "resources.weight_transfer_timeout_s=0.0 must be positive"),
        (["resources.learner_start_timeout_s=-5"], "resources.learner_start_timeout_s=-5.0 must be positive"),
        # Hydra reads inf and nan as floats: an endless time limit leaves a hung process for ever
        (["resources.learner_start_timeout_s=inf"],
         "resources.learner_start_timeout_s=inf must be positive and finite"),
        (["prover.timeout=inf"], "prover.timeout=inf must be positive and finite (seconds)"),
        (["training.learning_rate=nan"], "training.learning_rate=nan must be positive and finite"),
        (["resources.engine_heartbeat_timeout_s=inf"], "resources.engine_heartbeat_timeout_s=inf must exceed"),
        (["resources.cpus_per_engine=nan"], "resources.cpus_per_engine=nan must be a finite number, at least 0.0"),
        (["solver.mode=search", "solver.search.tactic_seconds=inf"],
         "solver.search.tactic_seconds=inf must be positive and finite"),
        (["serve.max_timeout_s=inf"], "serve.max_timeout_s=inf must be positive and finite"),
        (["logging.wandb_mode=cloud"], "logging.wandb_mode='cloud' is not one of auto, offline, online, disabled"),
        (["iterations=0"], "iterations=0 must be at least 1"),
        (["targets.lean_repo_dir=/some/checkout"], "targets.lean_repo_dir applies to Lean targets (LeanDojo files) only"),
        (["prover=lean", "targets.lean_repo_dir=' '"], "targets.lean_repo_dir must not be empty"),
        (["warmstart.mode=sometimes"], "warmstart.mode='sometimes' is not one of auto, always, never"),
        (["warmstart.corpus=null", "warmstart.mode=always"], "warmstart.mode='always' needs a corpus"),
        (["warmstart.corpus=hf://a/b"], "the corpus must be a local file or a pkg:// path"),
        (["warmstart.corpus=pkg://"], "warmstart.corpus: package source 'pkg://' must look like"),
        (["warmstart.roles=[solver,critic]"], "warmstart.roles holds 'critic'"),
        (["warmstart.roles=[]"], "warmstart.roles=[] must name at least one role, each once"),
        (["warmstart.roles=[guide,guide]"], "must name at least one role, each once"),
        (["warmstart.epochs=0"], "warmstart.epochs=0 must be at least 1"),
        (["warmstart.learning_rate=0"], "warmstart.learning_rate=0.0 must be positive"),
        (["warmstart.global_batch_size=6", "warmstart.micro_batch_size=4"],
         "warmstart.global_batch_size=6 must be a multiple of warmstart.micro_batch_size"),
        (["warmstart.report_targets=0"], "warmstart.report_targets=0 must be at least 1"),
        (["warmstart.max_examples=0"], "warmstart.max_examples=0 must be at least 1"),
        (["evaluation.k=-1"], "evaluation.k=-1 must be at least 0"),
        (["model.learning_rate_scale=0"], "model.learning_rate_scale=0.0 must be positive and finite"),
        (["resources.engine_gpu_memory_fraction=1.5"], "resources.engine_gpu_memory_fraction=1.5 must be in (0, 1]"),
        (["resources=gpu_node", "resources.gpus_per_learner_worker=0.5"],
         "resources.gpus_per_learner_worker=0.5 must be 0 (CPU) or 1"),
        (["resources=gpu_node", "resources.simulated_gpus=-1"], "resources.simulated_gpus=-1 must be at least 0"),
        (["resources=gpu_node", "resources.simulated_gpus=4"],
         "the learner needs 8 GPUs (resources.gpus_per_learner_worker * resources.learner_workers) but "
         "resources.simulated_gpus=4"),
        (["+experiment=standard", "resources.simulated_gpus=8"], "but model 'deepseek_prover_v2_7b' needs a real GPU"),
        (["resources=gpu_node", "model=tiny", "resources.simulated_gpus=4", "resources.learner_workers=4"],
         "8 colocated vLLM engines on resources.simulated_gpus=4 put 2 on one GPU, each taking 0.9 of its memory"),
        (["resources.simulated_gpus=8"], "resources.simulated_gpus=8 but no actor uses a GPU"),
        (["resources=cluster", "resources.ray_address=auto", "model=tiny", "resources.engine_backend=vllm",
          "resources.weight_transfer=direct", "resources.simulated_gpus=64"], "use resources.weight_transfer=checkpoint"),
    ],
)
def test_validate_names_the_bad_key(overrides, message):
    with pytest.raises(C.ConfigError) as caught:
        # compose_config: a bad choice is refused before Hydra composes (tests/e2e/test_config_choices.py).
        C.validate(C.compose_config(overrides))
    assert any(message in problem for problem in caught.value.problems), caught.value.problems
    assert message in str(caught.value)


@pytest.mark.parametrize(("overrides", "enabled"), [
    ([], True),                                           # the shipped prover: always refreshed
    (["model=tiny"], True),                               # the tiny model knows no format until warm-started
    (["model=tiny", "warmstart.mode=never"], False),
    (["model=tiny", "model.path=/some/checkpoint"], False),   # auto leaves a given checkpoint alone
    (["model=tiny", "model.path=/some/checkpoint", "warmstart.mode=always"], True),
    (["model=tiny", "warmstart.corpus=null"], False),     # auto with no corpus has nothing to train on
    (["prover=lean"], True),                              # the Lean corpus
    (["+experiment=standard"], False),                    # DeepSeek-Prover-V2, a given checkpoint
])
def test_the_warm_start_runs_for_the_default_models_unless_told_otherwise(overrides, enabled):
    assert C.warmstart_enabled(C.validate(compose_cfg(*overrides))) is enabled


@pytest.mark.parametrize(("overrides", "backend", "sleep"), [
    ([], None, False),                                                   # CPU engines load checkpoints
    (["resources.engine_backend=vllm", "resources.weight_transfer=direct"], "gloo", False),
    (["resources=gpu_node"], None, True),                                # colocated: checkpoint, and sleep
    # Engines on GPUs of their own: the learner wants none of their memory, so they stay awake.
    (["resources=cluster", "resources.ray_address=auto"], None, False),
    (["resources=cluster", "resources.ray_address=auto", "resources.weight_transfer=direct"], "nccl", False),
    (["resources=gpu_node", "model=tiny", "resources.simulated_gpus=8"], None, True),
])
def test_weight_transfer_and_sleep_defaults_follow_the_engines(overrides, backend, sleep):
    resources = C.validate(compose_cfg(*overrides)).resources
    assert C.weight_transfer_backend(resources) == backend
    assert C.engines_sleep_during_training(resources) is sleep


def test_vllm_engines_take_the_configured_share_of_their_gpu():
    """Several vLLM engines on one GPU (the GPU suite's loop stage) each need a share below vLLM's 0.9."""
    from sgs.machinery.runtime import engine_options

    shared = C.validate(compose_cfg("resources.engine_backend=vllm", "resources.engine_gpu_memory_fraction=0.2"))
    assert engine_options(shared, 3)["gpu_memory_utilization"] == 0.2
    assert "gpu_memory_utilization" not in engine_options(C.validate(compose_cfg("resources.engine_backend=vllm")), 0)
    # The transformers engine has no such setting.
    assert "gpu_memory_utilization" not in engine_options(
        C.validate(compose_cfg("resources.engine_gpu_memory_fraction=0.2")), 0)


def test_the_warm_start_defaults_to_the_provers_corpus():
    cfg = C.validate(compose_cfg())
    assert cfg.warmstart.corpus == "pkg://sgs/data/warmstart_rocq.jsonl"
    assert C.resolve_source_path(cfg.warmstart.corpus).is_file()
    assert sorted(cfg.warmstart.roles) == ["conjecturer", "guide", "solver"]
    lean = C.validate(compose_cfg("prover=lean")).warmstart.corpus
    assert lean == "pkg://sgs/data/warmstart_lean.jsonl" and C.resolve_source_path(lean).is_file()


def test_a_missing_warm_start_corpus_is_reported_only_when_used(tmp_path):
    missing = tmp_path / "nope.jsonl"
    problems = C.requirements_problems(C.validate(compose_cfg(f"warmstart.corpus={missing}")))
    assert any("warm-start corpus not found" in p and "warmstart.mode=never" in p for p in problems)
    unused = C.validate(compose_cfg(f"warmstart.corpus={missing}", "warmstart.mode=never"))
    assert not any("warm-start corpus" in p for p in C.requirements_problems(unused))


def test_solver_only_run_needs_no_conjecturer_or_guide_engines():
    cfg = compose_cfg("+experiment=ei_solver_only", "resources.conjecturer_engines=0", "resources.guide_engines=0")
    C.validate(cfg)


def test_validate_reports_every_problem_at_once():
    cfg = compose_cfg("method.solver_objective=foo", "iterations=0", "evaluation.k=-1")
    with pytest.raises(C.ConfigError) as caught:
        C.validate(cfg)
    assert len(caught.value.problems) == 3


def test_cluster_without_an_address_says_how_to_give_one(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    problems = C.config_problems(compose_cfg("resources=cluster"))
    assert len(problems) == 1
    assert problems[0].startswith("resources.ray_address ")
    assert "resources.ray_address=auto" in problems[0]


def test_wrong_types_and_unset_values_name_the_key():
    assert C.config_problems(OmegaConf.create({"iterations": "many"}))[0].startswith("iterations is invalid")
    unset = OmegaConf.create({"model": {"name": "???"}})
    assert C.config_problems(unset) == ["model.name is required but was not given"]


def test_validate_accepts_a_typed_config():
    typed = C.validate(compose_cfg())
    assert C.validate(typed) is typed


def test_hydra_node_is_ignored():
    with initialize_config_dir(config_dir=str(C.CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name=C.CONFIG_NAME, return_hydra_config=True)
    assert "hydra" in cfg
    assert C.config_problems(cfg) == []


# --------------------------------------------------------------------------
# Target sources
# --------------------------------------------------------------------------


def test_resolve_source_path_forms(tmp_path):
    assert C.resolve_source_path(C.ROCQ_TARGETS) == Path(C.__file__).parents[1] / "data" / "rocq_targets.jsonl"
    assert C.resolve_source_path(C.D3K_TARGETS) is None
    assert C.resolve_source_path(str(tmp_path / "x.json")) == tmp_path / "x.json"
    assert C.resolve_source_path("~/t.jsonl") == Path.home() / "t.jsonl"
    with pytest.raises(ValueError, match="no package named 'no_such_package_xyz'"):
        C.resolve_source_path("pkg://no_such_package_xyz/data.json")


# --------------------------------------------------------------------------
# Machine requirements
# --------------------------------------------------------------------------


def test_7b_without_gpu_is_reported_with_the_overrides_that_run_here(no_cuda, lean_project):
    project, repl = lean_project
    cfg = compose_cfg("+experiment=standard", f"prover.lean.project_dir={project}",
                      f"prover.lean.repl_command={repl}")
    problems = C.requirements_problems(cfg)
    gpu = [p for p in problems if "no CUDA GPU" in p]
    assert len(gpu) == 1
    assert "model 'deepseek_prover_v2_7b'" in gpu[0]
    assert "to run here use: model=tiny resources=local_cpu" in gpu[0]
    assert C.suggested_overrides(cfg) == ["model=tiny", "resources=local_cpu"]


def test_a_missing_lake_for_the_axiom_checker_is_reported(no_cuda, lean_project):
    project, repl = lean_project
    cfg = compose_cfg("+experiment=standard", "model=tiny", "resources=local_cpu", f"prover.lean.project_dir={project}",
                      f"prover.lean.repl_command={repl}", "prover.lean.lake_command=/no/such/lake")
    [problem] = C.requirements_problems(cfg)
    assert "axiom checker's lake is not found" in problem and "prover.lean.axiom_check=repl" in problem
    cfg.prover.lean.axiom_check = "repl"  # `#print axioms` in the REPL needs no lake
    assert C.requirements_problems(cfg) == []


def test_missing_lean_repl_and_project_are_reported(no_cuda, tmp_path):
    cfg = compose_cfg("+experiment=standard", f"prover.lean.project_dir={tmp_path / 'nowhere'}",
                      "prover.lean.repl_command=/no/such/repl --flag")
    problems = C.requirements_problems(cfg)
    project = [p for p in problems if "Lean project directory not found" in p]
    repl = [p for p in problems if "Lean REPL command not found" in p]
    assert len(project) == 1 and str(tmp_path / "nowhere") in project[0]
    assert len(repl) == 1 and "'/no/such/repl'" in repl[0]
    assert all("prover=rocq" in p for p in project + repl)
    assert C.suggested_overrides(cfg) == ["model=tiny", "prover=rocq", "resources=local_cpu"]


def test_directory_without_lakefile_is_not_a_lean_project(tmp_path):
    cfg = compose_cfg("prover=lean", f"prover.lean.project_dir={tmp_path}")
    assert any("is not a Lean project" in p for p in C.requirements_problems(cfg))


def test_lean_repl_path_relative_to_the_project_is_found(lean_project, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    project, repl = lean_project
    (project / "bin").mkdir()
    repl.rename(project / "bin" / "repl")
    cfg = compose_cfg("prover=lean", f"prover.lean.project_dir={project}", "prover.lean.repl_command=bin/repl")
    assert C.requirements_problems(cfg) == []


def test_runnable_paper_config_has_no_problems(monkeypatch, lean_project):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "vllm" else find_spec(name))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    project, repl = lean_project
    cfg = compose_cfg("+experiment=no_guide", f"prover.lean.project_dir={project}",
                      f"prover.lean.repl_command={repl}")
    assert C.requirements_problems(cfg) == []
    assert C.suggested_overrides(cfg) == []


def test_missing_vllm_is_reported(monkeypatch, lean_project):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "vllm" else find_spec(name))
    project, repl = lean_project
    cfg = compose_cfg("+experiment=standard", f"prover.lean.project_dir={project}",
                      f"prover.lean.repl_command={repl}")
    problems = C.requirements_problems(cfg)
    assert any("the vllm package is not installed" in p for p in problems)
    assert C.suggested_overrides(cfg) == ["resources.engine_backend=transformers"]


def test_missing_coqtop_and_targets_file_are_reported(tmp_path):
    cfg = compose_cfg("prover.rocq.coqtop=/no/such/coqtop", f"targets.source={tmp_path / 'targets.jsonl'}")
    problems = C.requirements_problems(cfg)
    assert any(p.startswith("coqtop not found: prover.rocq.coqtop='/no/such/coqtop'") for p in problems)
    assert any(p.startswith("targets file not found") and "targets.jsonl" in p for p in problems)


def test_present_targets_file_and_coqtop_pass(tmp_path, monkeypatch):
    targets = tmp_path / "targets.jsonl"
    targets.write_text("{}\n")
    coqtop = tmp_path / "coqtop"
    coqtop.write_text("#!/bin/sh\n")
    coqtop.chmod(0o755)
    cfg = compose_cfg(f"prover.rocq.coqtop={coqtop}", f"targets.source={targets}")
    assert C.requirements_problems(cfg) == []


def test_hub_targets_while_offline_are_reported(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = compose_cfg("prover=lean")
    assert any("HF_HUB_OFFLINE" in p and C.D3K_TARGETS in p for p in C.requirements_problems(cfg))


def test_missing_local_model_directory_is_reported(tmp_path):
    cfg = compose_cfg(f"model.path={tmp_path / 'ckpt'}")
    assert f"model directory not found: model.path='{tmp_path / 'ckpt'}'" in C.requirements_problems(cfg)


def test_simulated_gpus_need_no_cuda_and_run_transformers_engines_on_the_cpu(no_cuda):
    cfg = compose_cfg("+experiment=standard", "model=tiny", "prover=rocq", "resources=gpu_node", "scale=laptop",
                      "resources.simulated_gpus=8")
    assert C.requirements_problems(cfg) == [] and C.suggested_overrides(cfg) == []
    resources = C.validate(cfg).resources
    assert resources.engine_backend == "vllm" and C.engine_backend(resources) == "transformers"
    assert C.declared_gpus(resources) == 8
    # Without the switch the same placement asks for real GPUs.
    real = compose_cfg("+experiment=standard", "model=tiny", "prover=rocq", "resources=gpu_node", "scale=laptop")
    assert any("no CUDA GPU" in p for p in C.requirements_problems(real))


def test_remote_cluster_skips_the_local_machine_checks(no_cuda):
    cfg = compose_cfg("+experiment=standard", "resources=cluster", "resources.ray_address=auto")
    problems = C.requirements_problems(cfg)
    assert not any("CUDA" in p or "Lean" in p for p in problems)
    assert C.suggested_overrides(cfg) == []


def test_only_run_dir_carries_the_time_of_day():
    # A resumed run is composed again later: any other value that holds the time would
    # differ from the stored config and be logged as a change on every resume.
    import time as clock

    today = clock.strftime("%Y-%m-%d")
    resolved = OmegaConf.to_container(compose_cfg(), resolve=True)

    def timed(node, path=""):
        for key, value in node.items():
            if isinstance(value, dict):
                yield from timed(value, f"{path}{key}.")
            elif isinstance(value, str) and today in value:
                yield f"{path}{key}"

    assert list(timed(resolved)) == ["run_dir"]
    assert resolved["evaluation"]["output_dir"] is None
