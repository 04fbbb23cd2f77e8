"""Base models: where the weights of the three roles come from.

``model.path`` names a Hugging Face checkpoint (hub id or directory); when it
is null the tiny model of :mod:`sgs.machinery.models.tiny` is built locally, once per
set of inputs, in a cache directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sgs.config import ModelConfig, model_location
from sgs.machinery.models.tiny import TinyModelSettings, build_fingerprint, build_tiny_model, load_model_and_tokenizer

__all__ = [
    "ModelPaths",
    "TinyModelSettings",
    "build_tiny_model",
    "default_cache_dir",
    "load_model_and_tokenizer",
    "resolve_model_paths",
]


@dataclass(frozen=True)
class ModelPaths:
    """Where each piece of the base model is loaded from (hub id or directory)."""

    #: Weights the Solver and the Conjecturer start from.
    base: str
    #: The tokenizer shared by all roles.
    tokenizer: str
    #: Weights of the (frozen) Guide.
    guide: str


def default_cache_dir() -> Path:
    """Cache for locally built models: ``$SGS_CACHE_DIR``, else ``$XDG_CACHE_HOME/sgs``,
    else ``~/.cache/sgs``."""
    if os.environ.get("SGS_CACHE_DIR"):
        return Path(os.environ["SGS_CACHE_DIR"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "sgs"


def resolve_model_paths(
    model: ModelConfig,
    *,
    seed: int,
    corpus: Iterable[str] = (),
    cache_dir: Path | None = None,
) -> ModelPaths:
    """The base, tokenizer and Guide locations for ``model`` (the ``model`` config node).

    With ``model.path`` set nothing is built or downloaded here.  With
    ``model.path`` null the tiny model is built from ``model.tiny``, ``seed``
    and ``corpus`` (extra tokenizer text) into
    ``<cache_dir>/tiny_models/<fingerprint>``, or found there from an earlier
    build.  Unset ``tokenizer_path`` / ``guide_path`` fall back to the base.
    """
    if model.path is not None:
        base = model_location(model.path)
    else:
        if model.tiny is None:
            raise ValueError("model.path is null and model.tiny is not set: nothing to load or build")
        texts = list(corpus)
        fingerprint = build_fingerprint(texts, model.tiny, seed)
        root = cache_dir if cache_dir is not None else default_cache_dir()
        base = str(build_tiny_model(root / "tiny_models" / fingerprint[:16], texts, model.tiny, seed))
    return ModelPaths(
        base=base,
        tokenizer=model_location(model.tokenizer_path) if model.tokenizer_path else base,
        guide=model_location(model.guide_path) if model.guide_path else base,
    )
