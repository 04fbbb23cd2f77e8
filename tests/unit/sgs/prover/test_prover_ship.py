"""Shipping a trained checkpoint: what is copied, the record, the size bound, and the warm start's cache key."""

from __future__ import annotations

import hashlib
import json

import pytest

from sgs.config import model_location
from sgs.prover import ship as ship_module
from sgs.prover.ship import RECORD, ship
from sgs.sft import base_identity


def _checkpoint(tmp_path, weights: bytes = b"weights"):
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(weights)
    (checkpoint / "config.json").write_text("{}")
    (checkpoint / "optimizer.pt").write_bytes(b"large optimiser state")
    (checkpoint / "progress.json").write_text(json.dumps({"size": "s", "steps": 10}))
    return checkpoint


def test_ship_copies_the_model_not_the_optimiser_and_records_the_weights_hash(tmp_path):
    destination = tmp_path / "pkg" / "rocq_prover"
    record = ship(_checkpoint(tmp_path), destination)
    assert sorted(p.name for p in destination.iterdir()) == ["config.json", "model.safetensors", RECORD]
    assert record["weights_sha256"] == hashlib.sha256(b"weights").hexdigest()
    assert record["training"] == {"size": "s", "steps": 10}
    assert json.loads((destination / RECORD).read_text()) == record


def test_the_warm_start_key_follows_the_weights_not_the_path(tmp_path):
    destination = tmp_path / "rocq_prover"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ship(_checkpoint(tmp_path / "a"), destination)
    first = base_identity(str(destination))
    ship(_checkpoint(tmp_path / "b", b"retrained"), destination)
    assert first.startswith("prover:") and base_identity(str(destination)) != first


def test_weights_over_the_repository_bound_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(ship_module, "MAX_WEIGHT_BYTES", 4)
    with pytest.raises(ValueError, match="over the"):
        ship(_checkpoint(tmp_path), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert ship_module.main([str(tmp_path / "nothing"), str(tmp_path / "out")]) == 2


def test_a_package_model_path_resolves_to_its_directory():
    assert model_location("pkg://sgs/data/rocq_prover").endswith("sgs/data/rocq_prover")
    assert model_location("deepseek-ai/DeepSeek-Prover-V2-7B") == "deepseek-ai/DeepSeek-Prover-V2-7B"
