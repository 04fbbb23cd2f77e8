"""Targets from the Hugging Face hub (``targets.source=hf://LukeBailey181Pub/D_3k``,
the Lean default), read through the same code as a download, with the
download replaced by a local hub cache (:mod:`tests.hub_support`): the D3k
file as the paper's code ships it, and the Parquet layout ``datasets`` writes."""

from __future__ import annotations

import json

import huggingface_hub.constants  # a submodule: not loaded by the package import alone
import pytest

from sgs.config import D3K_TARGETS, TargetsConfig, requirements_problems
from sgs.state.targets import TargetError, load_targets
from tests.hub_support import D3K_FILE, D3K_REPO, d3k_rows, hub_cache, parquet_bytes
from tests.config_support import compose_cfg

pytestmark = pytest.mark.skipif(not D3K_FILE.is_file(), reason=f"the D3k targets are not at {D3K_FILE}")


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    """Point huggingface_hub at an empty cache under ``tmp_path``, offline."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def test_d3k_from_the_hub_equals_the_local_file(offline_cache):
    hub_cache(offline_cache, D3K_REPO, {"D_3k_prover_dataset.json": D3K_FILE.read_bytes()})
    from_hub = load_targets(TargetsConfig(source=D3K_TARGETS, limit=40), "lean")
    local = load_targets(TargetsConfig(source=str(D3K_FILE), limit=40), "lean")
    assert from_hub == local and len(from_hub) == 40
    assert all(t.statement.endswith(":= by") and t.header.startswith("import Mathlib") for t in from_hub)


def test_d3k_as_parquet_shards_of_the_train_split(offline_cache, tmp_path):
    rows = [{k: r[k] for k in ("id", "header", "theorem", "tag", "source")} for r in d3k_rows(30)]
    hub_cache(offline_cache, D3K_REPO, {
        "data/train-00000-of-00002.parquet": parquet_bytes(rows[:20], tmp_path / "a.parquet"),
        "data/train-00001-of-00002.parquet": parquet_bytes(rows[20:], tmp_path / "b.parquet"),
        "README.md": b"---\nconfigs: ...\n---\n"})
    targets = load_targets(TargetsConfig(source=D3K_TARGETS), "lean")
    assert [t.id for t in targets] == [r["id"] for r in rows]
    assert targets == load_targets(TargetsConfig(source=str(D3K_FILE), limit=30), "lean")


def test_an_ambiguous_hub_layout_names_its_files(offline_cache):
    rows = json.dumps(d3k_rows(2)).encode()
    hub_cache(offline_cache, D3K_REPO, {"a.json": rows, "b.json": rows})
    with pytest.raises(TargetError, match=r"expected one JSON\(L\) file .* found a.json, b.json"):
        load_targets(TargetsConfig(source=D3K_TARGETS), "lean")


def test_offline_hub_targets_pass_the_machine_check_only_when_cached(offline_cache):
    cfg = compose_cfg("prover=lean")
    assert any("HF_HUB_OFFLINE" in p and D3K_TARGETS in p for p in requirements_problems(cfg))
    hub_cache(offline_cache, D3K_REPO, {"D_3k_prover_dataset.json": D3K_FILE.read_bytes()})
    assert not any("targets.source" in p for p in requirements_problems(cfg))
