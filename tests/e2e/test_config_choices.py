"""The config's choice fields as Enums (sgs.config.checks.Choice, sgs.config.choices):
OmegaConf checks them, every bad one is named at once (on the command line
of ``python -m sgs`` too), and they read, compare and are saved as their
plain strings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from sgs import config as C
from sgs.config.choices import sweep_jobs
from sgs.state.records import Target
from sgs.state.store import Store, StoreError
from tests.paths import REPO


#: Every choice field of the config, with its allowed values.
CHOICES = {
    "method.conjecturer_prompt": ("target_conditioned", "unconditioned"),
    "method.reward_normalisation": ("reference", "paper"),
    "method.loss_normalisation": ("token_mean", "sequence_mean"),
    "method.unelaborated_conjectures": ("skip", "attempt"),
    "method.conjecture_dedup": ("canonical", "exact"),
    "method.ei_solved_count": ("distinct", "all"),
    "training.optimizer_state": ("reset", "persist"),
    "training.strategy": ("auto", "ddp", "deepspeed"),
    "warmstart.mode": ("auto", "always", "never"),
    "evaluation.contamination": ("exclude", "flag"),
    "evaluation.solver_mode": ("sample", "search", "both"),
    "evaluation.search.strategy": ("best_first", "breadth_first", "depth_first"),
    "solver.mode": ("sample", "search"),
    "solver.search.strategy": ("best_first", "breadth_first", "depth_first"),
    "model.dtype": ("float32", "bfloat16", "float16"),
    "prover.backend": ("lean", "rocq"),
    "prover.language": ("lean", "rocq"),
    "resources.engine_backend": ("transformers", "vllm"),
    "resources.weight_transfer": ("checkpoint", "direct"),
    "resources.engine_placement": ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"),
    "resources.verifier_placement": ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"),
    "resources.learner_placement": ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"),
    "logging.wandb_mode": ("auto", "offline", "online", "disabled"),
}
TARGETS = [Target(id="t_add", header="Require Import Arith.", statement="Theorem t_add : forall n : nat, n + 0 = n.")]


def sgs(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "WANDB_SILENT": "true"}
    return subprocess.run([sys.executable, "-m", "sgs", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


def select(node, key: str):
    """The value at a dotted key of a typed config or of a plain dict."""
    for name in key.split("."):
        node = node[name] if isinstance(node, dict) else getattr(node, name)
    return node


# --------------------------------------------------------------------------
# The Enums
# --------------------------------------------------------------------------


def test_the_choice_fields_are_enums_of_their_allowed_values_each_named_as_its_value():
    fields = C.choice_fields()
    assert {key: tuple(enum) for key, enum in fields.items()} == CHOICES
    for enum in fields.values():
        # OmegaConf turns a string into a member by name; dicts keyed by the plain strings find members by it.
        assert all(member.name == member.value for member in enum)
    # The objectives are an open registry (sgs.method.registry): a string, checked there.
    assert "method.solver_objective" not in fields


def test_a_member_reads_compares_and_serialises_as_its_string():
    cfg = C.validate(C.compose_config(["resources.engine_backend=vllm", "model.dtype=float32"]))
    backend = cfg.resources.engine_backend
    assert backend is C.EngineBackend.vllm and backend == "vllm" and isinstance(backend, str)
    assert f"{backend}" == str(backend) == "vllm" and repr(backend) == "'vllm'"
    assert json.dumps({"backend": backend}) == '{"backend": "vllm"}'
    assert {"vllm": "found"}[backend] == "found" and backend in ("transformers", "vllm")
    assert f"model.dtype={cfg.model.dtype!r}" == "model.dtype='float32'"


def test_omegaconf_refuses_a_bad_choice_and_names_the_allowed_values():
    node = OmegaConf.structured(C.SGSConfig)
    node.resources.engine_placement = "STRICT_SPREAD"
    assert node.resources.engine_placement is C.PlacementStrategy.STRICT_SPREAD
    with pytest.raises(ValidationError, match=r"Invalid value 'int8', expected one of \[float32, bfloat16, float16\]"):
        node.model.dtype = "int8"


# --------------------------------------------------------------------------
# Every bad choice at once
# --------------------------------------------------------------------------


def test_override_problems_names_every_bad_choice_and_nothing_else():
    problems = C.override_problems([
        "model.dtype=int8", "training.strategy=fsdp", "iterations=0", "model=tiny", "+experiment=standard",
        "resources.engine_placement=PACK,EVERYWHERE",  # a sweep: each value is checked
        "resources.verifier_placement=${resources.engine_placement}",  # OmegaConf checks what it resolves to
        "~evaluation.contamination", "model.dtype=[",  # a deletion; what Hydra cannot parse is Hydra's to name
    ])
    assert problems == [
        "model.dtype='int8' is not one of float32, bfloat16, float16",
        "training.strategy='fsdp' is not one of auto, ddp, deepspeed",
        "resources.engine_placement='EVERYWHERE' is not one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD",
    ]


def test_override_problems_names_every_option_no_config_group_has():
    problems = C.override_problems([
        "+experiment=standrad", "model=huge,tiny", "+lever=none", "scale=laptop",
        "+experiment=_paper",  # a shared piece of the experiments: valid, though not offered
        "model.name=huge",  # a field, not the group
    ])
    experiments = ", ".join(sorted(p.stem for p in (REPO / "conf" / "experiment").glob("[!_]*.yaml")))
    assert problems == [f"experiment='standrad' is not one of {experiments}",
                        "model='huge' is not one of deepseek_prover_v2_7b, rocq_prover, tiny"]
    # Another config directory on Hydra's search path may hold the option.
    assert C.override_problems(["+experiment=mine", "hydra.searchpath=[file:///elsewhere]"]) == []


def test_a_users_config_directory_adds_its_options_to_the_groups(tmp_path):
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text("# @package _global_\nexperiment: mine\n")
    assert C.override_problems(["+experiment=mine"], config_dir=str(tmp_path)) == []
    (problem,) = C.override_problems(["+experiment=minee"], config_dir=str(tmp_path))
    assert problem.startswith("experiment='minee' is not one of") and ", mine, " in problem


def test_compose_config_refuses_every_bad_choice_before_composing():
    with pytest.raises(C.ConfigError) as caught:
        C.compose_config(["method.loss_normalisation=sum", "logging.wandb_mode=cloud", "iterations=2"])
    assert caught.value.problems == ["method.loss_normalisation='sum' is not one of token_mean, sequence_mean",
                                     "logging.wandb_mode='cloud' is not one of auto, offline, online, disabled"]
    # The prover service's primary config has the same fields.
    with pytest.raises(C.ConfigError, match="resources.engine_backend='sglang' is not one of transformers, vllm"):
        C.compose_config(["resources.engine_backend=sglang"], config_name="serve")


def test_an_untyped_config_has_every_bad_choice_named():
    raw = OmegaConf.create({"model": {"dtype": "int8"}, "logging": {"wandb_mode": "cloud"}, "iterations": 3})
    assert C.config_problems(raw) == ["model.dtype='int8' is not one of float32, bfloat16, float16",
                                      "logging.wandb_mode='cloud' is not one of auto, offline, online, disabled"]


def test_a_config_built_in_python_has_its_choices_checked_and_takes_plain_strings():
    cfg = C.validate(C.compose_config())
    cfg.resources.engine_backend = "transformers"  # a plain string equal to a member passes
    assert C.config_problems(cfg) == []
    cfg.method.conjecture_dedup = "fuzzy"
    assert C.config_problems(cfg) == ["method.conjecture_dedup='fuzzy' is not one of canonical, exact"]


# --------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------


def test_a_bad_choice_on_the_command_line_exits_2_naming_key_value_and_allowed_values(tmp_path):
    proc = sgs("model.dtype=int8", f"run_dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr
    assert "model.dtype='int8' is not one of float32, bfloat16, float16" in proc.stderr
    assert "Traceback" not in proc.stderr and "Error merging override" not in proc.stderr
    assert not (tmp_path / "run").exists()


def test_every_bad_choice_on_the_command_line_is_named_at_once(tmp_path):
    proc = sgs("resources.engine_backend=sglang", "training.optimizer_state=keep", "iterations=1",
               f"run_dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr
    assert "invalid SGS config (2 problem(s))" in proc.stderr
    assert "resources.engine_backend='sglang' is not one of transformers, vllm" in proc.stderr
    assert "training.optimizer_state='keep' is not one of reset, persist" in proc.stderr


def test_a_mistyped_experiment_and_model_exit_2_naming_both(tmp_path):
    proc = sgs("-m", "+experiment=standard,standrad", "model=huge", f"run_dir={tmp_path / 'sweep'}")
    assert proc.returncode == 2, proc.stderr
    assert "experiment='standrad' is not one of cispo_sgs," in proc.stderr
    assert "model='huge' is not one of deepseek_prover_v2_7b, rocq_prover, tiny" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "sweep").exists()


def test_a_bad_choice_in_a_sweep_stops_the_sweep_before_any_job(tmp_path):
    proc = sgs("-m", "method.conjecture_dedup=canonical,fuzzy", f"run_dir={tmp_path / 'sweep'}")
    assert proc.returncode == 2, proc.stderr
    assert "method.conjecture_dedup='fuzzy' is not one of canonical, exact" in proc.stderr
    assert not (tmp_path / "sweep").exists()


def test_an_experiment_of_the_users_own_config_directory_is_not_refused(tmp_path):
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - standard\nexperiment: mine\nmethod:\n  conjecture_dedup: fuzzy\n")
    proc = sgs("--config-dir", str(tmp_path / "conf"), "+experiment=mine", f"run_dir={tmp_path / 'run'}")
    # the option is found; the file's own bad value is what stops it, named as every config problem is
    assert proc.returncode == 2, proc.stderr
    assert "experiment='mine' is not one of" not in proc.stderr
    assert "  - method.conjecture_dedup: In 'experiment/mine'" in proc.stderr and "'fuzzy'" in proc.stderr
    assert "Traceback" not in proc.stderr and "HYDRA_FULL_ERROR" not in proc.stderr
    assert not (tmp_path / "run").exists()


def test_what_hydra_refuses_while_composing_exits_2_naming_the_key(tmp_path):
    proc = sgs("-m", "iterations=2,two", "no_such_key=1", f"run_dir={tmp_path / 'sweep'}")
    assert proc.returncode == 2, proc.stderr
    assert "  - iterations: Error merging override iterations=two" in proc.stderr
    assert "could not be converted to Integer" in proc.stderr
    assert "HYDRA_FULL_ERROR" not in proc.stderr and not (tmp_path / "sweep").exists()
    proc = sgs("--config-dir", str(tmp_path / "nowhere"), f"run_dir={tmp_path / 'run'}")
    assert proc.returncode == 2 and "--config-dir" in proc.stderr and "is not a directory" in proc.stderr


def test_a_sweep_is_composed_once_per_value_not_per_combination():
    jobs = sweep_jobs(["+experiment=standard,no_guide", "seed=range(0,3)", "model=tiny"])
    assert jobs == [["+experiment=standard", "seed=0", "model=tiny"], ["+experiment=no_guide", "seed=0", "model=tiny"],
                    ["+experiment=standard", "seed=1", "model=tiny"], ["+experiment=standard", "seed=2", "model=tiny"]]
    assert sweep_jobs(["training.learning_rate=interval(0,1)"]) is None  # an optimising sweeper's: left to Hydra
    assert C.composition_problems(["iterations=2"]) == []
    (problem,) = C.composition_problems(["iterations=2,x", "seed=0,1"])
    assert problem.startswith("iterations: Error merging override iterations=x")


def test_compose_config_names_what_hydra_refuses():
    with pytest.raises(C.ConfigError) as caught:
        C.compose_config(["iterations=two"])
    (problem,) = caught.value.problems
    assert problem.startswith("iterations: ") and "could not be converted to Integer" in problem
    assert "object_type" not in problem


# --------------------------------------------------------------------------
# The run directory
# --------------------------------------------------------------------------


def test_the_saved_config_holds_plain_strings_and_resumes(tmp_path):
    run_dir = tmp_path / "run"
    cfg = C.validate(C.compose_config(["method.conjecture_dedup=exact", "resources.learner_placement=STRICT_PACK"]))
    Store.open(run_dir, TARGETS, asdict(cfg)).close()
    text = (run_dir / "config.yaml").read_text()
    assert "!!python" not in text
    saved = yaml.safe_load(text)
    for key in CHOICES:
        assert type(select(saved, key)) is str and select(saved, key) == select(cfg, key).value, key
    assert saved["method"]["conjecture_dedup"] == "exact" and saved["resources"]["learner_placement"] == "STRICT_PACK"

    # The same config resumes with no change recorded; a changed choice is refused naming it.
    with Store.open(run_dir, None, asdict(cfg)) as store:
        assert store.config == saved
    assert not (run_dir / "config_changes.jsonl").exists()
    cfg.method.conjecture_dedup = C.ConjectureDedup.canonical
    with pytest.raises(StoreError, match="method.conjecture_dedup: 'exact' -> 'canonical'"):
        Store.open(run_dir, None, asdict(cfg))
    # A choice that may change on resume is recorded, as a plain string.
    cfg.method.conjecture_dedup = C.ConjectureDedup.exact
    cfg.logging.wandb_mode = C.WandbMode.disabled
    Store.open(run_dir, None, asdict(cfg)).close()
    change = json.loads((run_dir / "config_changes.jsonl").read_text())
    assert change["changed"] == ["logging.wandb_mode"] and change["config"]["logging"]["wandb_mode"] == "disabled"


def test_multirun_jobs_get_distinct_run_dirs(tmp_path):
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(f"""
        import hydra
        from sgs import config as C

        @hydra.main(version_base="1.3", config_path={str(C.CONFIG_DIR)!r}, config_name="config")
        def main(cfg):
            print("RUN_DIR", C.validate(cfg).run_dir)

        main()
    """))
    result = subprocess.run(
        [sys.executable, str(app), "-m", f"run_dir={tmp_path / 'sweep'}",
         "+experiment=no_guide,ei_solver_only", "model=tiny", "prover=rocq", "resources=local_cpu"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(C.CONFIG_DIR.parent)},
    )
    assert result.returncode == 0, result.stderr
    run_dirs = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("RUN_DIR")]
    assert run_dirs == [str(tmp_path / "sweep" / "0"), str(tmp_path / "sweep" / "1")]
    assert all((Path(d) / ".hydra" / "config.yaml").is_file() for d in run_dirs)
