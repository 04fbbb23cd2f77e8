"""Which Solver weights the service loads: ``serve.checkpoint`` resolved.

* a run directory (it holds ``config.yaml``): read with
  :class:`sgs.state.run_reader.RunReader` (no lock, nothing written, so a
  run may still be training in it): the Solver checkpoint flagged ``best``,
  else the newest one whose training phase is done.  The run must have been
  trained with the prover the service checks with;
* a Hugging Face checkpoint directory (it holds ``config.json``) or a hub id:
  loaded as it is, its tokenizer from ``model.tokenizer_path`` or itself;
* null: the default model of ``python -m sgs``: the tiny model, built here,
  and its warm start when the warm-start cache holds one
  (:func:`sgs.sft.default_weights`; nothing is trained here).

Any other value is a :class:`WeightsError` naming the problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sgs import sft
from sgs.config import SGSConfig, missing_model_directory, warmstart_enabled
from sgs.loop.phases import TRAINING_PHASE
from sgs.machinery.runtime import model_paths
from sgs.state.files import StoreError
from sgs.state.run_reader import RunReader, is_created_run

#: The role whose checkpoints the service serves.
ROLE = "solver"


class WeightsError(ValueError):
    """``serve.checkpoint`` names nothing the service can load."""


@dataclass(frozen=True)
class ServedWeights:
    """What the engines load, and how to describe it."""

    checkpoint: str
    """Hugging Face checkpoint directory or hub id."""
    tokenizer: str
    """Where the tokenizer comes from (the prompts are tokenised with it)."""
    source: str
    """``run``, ``checkpoint`` or ``default``."""
    policy_version: int
    """The run's policy version of a run's checkpoint (iteration + 1); 0 otherwise."""
    description: str
    """One line for people: what is served and why."""


def served_weights(cfg: SGSConfig) -> ServedWeights:
    """``serve.checkpoint`` resolved (module docstring)."""
    given = cfg.serve.checkpoint
    if given is None:
        paths = model_paths(cfg)
        checkpoint, tokenizer = sft.default_weights(cfg, paths, train=False)
        if checkpoint == paths.base:
            state = "no warm start in the cache (python -m sgs.sft makes one)" if warmstart_enabled(cfg) \
                else "not warm-started"
            return ServedWeights(checkpoint, tokenizer, "default", 0, f"the {cfg.model.name} model, {state}")
        return ServedWeights(checkpoint, tokenizer, "default", 0, f"the {cfg.model.name} model's cached warm start")
    if missing_model_directory(given):
        raise WeightsError(f"serve.checkpoint={given!r}: no such directory")
    local = Path(given).expanduser()
    if is_created_run(local):
        return _run_weights(cfg, local)
    if local.is_dir() and not (local / "config.json").is_file():
        raise WeightsError(f"serve.checkpoint={given!r} is neither a run directory (no config.yaml) nor a "
                           "Hugging Face checkpoint (no config.json)")
    return ServedWeights(given, cfg.model.tokenizer_path or given, "checkpoint", 0, f"the checkpoint {given}")


def _run_weights(cfg: SGSConfig, run_dir: Path) -> ServedWeights:
    reader = RunReader(run_dir, strict=True)
    try:
        trained_with = (reader.config().get("prover") or {}).get("backend")
        best = reader.best_checkpoint(ROLE)
        done = {(marker.iteration, marker.phase) for marker in reader.markers()}
    except StoreError as error:
        raise WeightsError(f"serve.checkpoint={str(run_dir)!r}: {error}") from None
    if trained_with != cfg.prover.backend:
        raise WeightsError(f"the run {run_dir} was trained with prover={trained_with}; serve it with "
                           f"prover={trained_with} (this config has prover={cfg.prover.backend})")
    if best is not None and reader.checkpoint_dir(ROLE, best).is_dir():
        iteration, which = best, "best"
    else:
        finished = [i for i in reader.checkpoint_iterations(ROLE) if (i, TRAINING_PHASE) in done]
        if not finished:
            raise WeightsError(f"the run {run_dir} has no finished Solver checkpoint yet "
                               f"(checkpoints/{ROLE}/ holds none whose training phase is done)")
        iteration, which = finished[-1], "newest"
    path, version = reader.checkpoint_dir(ROLE, iteration), iteration + 1
    return ServedWeights(str(path), str(path), "run", version,
                         f"the {which} Solver checkpoint of the run {run_dir} ({path.name}, policy version {version})")
