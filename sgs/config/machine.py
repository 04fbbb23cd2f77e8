"""Can this machine run an SGS config?  Checked without starting Ray.

:func:`requirements_problems` lists what is missing (a CUDA GPU, the vLLM
package, the prover's executables and project, the targets file, the
warm-start corpus, local model directories), each message naming the
overrides that would run here; :func:`suggested_overrides` gives those
overrides at once.  Both take a config that
:func:`sgs.config.validation.validate` accepts.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
from pathlib import Path

from omegaconf import DictConfig

from sgs.config.schema import HUB_SCHEME, ProverConfig, SGSConfig, model_location, resolve_source_path
from sgs.config.derived import engine_backend, warmstart_enabled
from sgs.config.validation import to_schema



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
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes") and not _in_hub_cache(source):
            return [
                f"targets.source={source!r} is on the Hugging Face hub but HF_HUB_OFFLINE is set and the local "
                f"hub cache holds no copy; download it and pass the local file as targets.source=/path/to/targets.json"
            ]
        return []
    if not path.is_file():
        return [f"targets file not found: targets.source={source!r} ({path})"]
    return []


def _in_hub_cache(source: str) -> bool:
    """Whether the local Hugging Face hub cache holds a snapshot of the data set ``hf://owner/name``."""
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(source[len(HUB_SCHEME):], repo_type="dataset", local_files_only=True)
    except Exception:  # not cached (LocalEntryNotFoundError), or a name the hub would refuse
        return False
    return True


def missing_model_directory(value: str) -> bool:
    """Whether a model location that looks like a local path (it starts with
    ``/``, ``.`` or ``~``, or exists) is not a directory; anything else is
    taken for a hub id."""
    looks_local = value.startswith(("/", ".", "~")) or os.path.exists(os.path.expanduser(value))
    return looks_local and not Path(value).expanduser().is_dir()


def _model_path_problems(cfg: SGSConfig) -> list[str]:
    problems = []
    for key in ("path", "tokenizer_path", "guide_path"):
        value = getattr(cfg.model, key)
        if value is not None and missing_model_directory(model_location(value)):
            problems.append(f"model directory not found: model.{key}={value!r}")
    return problems


def _cuda_users(cfg: SGSConfig) -> list[str]:
    """What in ``cfg`` asks for a CUDA GPU on this machine, in words (nothing
    when its GPUs are simulated: they compute on the CPU)."""
    users = []
    if cfg.resources.simulated_gpus > 0:
        return users
    if cfg.model.needs_gpu:
        users.append(f"model {cfg.model.name!r} (model.needs_gpu=true)")
    if cfg.resources.gpus_per_engine > 0 or cfg.resources.gpus_per_learner_worker > 0:
        users.append("the placement (resources.gpus_per_engine or resources.gpus_per_learner_worker > 0)")
    elif (cfg.resources.num_gpus or 0) > 0:
        users.append(f"resources.num_gpus={cfg.resources.num_gpus}")
    return users


def _vllm_missing(cfg: SGSConfig) -> bool:
    return engine_backend(cfg.resources) == "vllm" and importlib.util.find_spec("vllm") is None


def suggested_overrides(cfg: DictConfig | SGSConfig) -> list[str]:
    """Command-line overrides that avoid what this machine lacks for ``cfg``.

    For example ``["model=tiny", "prover=rocq", "resources=local_cpu"]`` for
    a paper-setting experiment on a machine with no GPU and no Lean.  Empty
    when the model, prover and placement can all run here (missing data
    files are not fixed by an override and are not considered).
    """
    if isinstance(cfg, DictConfig):
        cfg = to_schema(cfg)
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
        cfg = to_schema(cfg)
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
        lake = shlex.split(prover.lean.lake_command)
        if prover.lean.axiom_check == "process" and (not lake or not _executable_found(lake[0])):
            problems.append(
                f"the Lean axiom checker's lake is not found: prover.lean.lake_command={prover.lean.lake_command!r}; "
                f"install elan (tools/setup_lean.sh) or set prover.lean.axiom_check=repl; {fix}"
            )
    if prover.backend == "rocq" and prover.rocq is not None and not _executable_found(prover.rocq.coqtop):
        problems.append(
            f"coqtop not found: prover.rocq.coqtop={prover.rocq.coqtop!r} is not an executable "
            f"(install Rocq/Coq, e.g. apt-get install coq, or point prover.rocq.coqtop at it)"
        )
    return problems
