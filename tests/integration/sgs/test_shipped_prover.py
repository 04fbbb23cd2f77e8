"""The general Rocq prover that ships in sgs/data/rocq_prover: within the size bound, its record true, loadable
through the product's path and answering tactics."""

from __future__ import annotations

import json
from pathlib import Path

from sgs.config import model_location
from sgs.prover.model_tactics import ModelTactics
from sgs.prover.ship import MAX_WEIGHT_BYTES, RECORD, weights_sha256

SHIPPED = "pkg://sgs/data/rocq_prover"


def test_the_shipped_weights_are_those_recorded_and_within_the_bound():
    directory = model_location(SHIPPED)
    record = json.loads((Path(directory) / RECORD).read_text())
    assert record["weights_sha256"] == weights_sha256(directory)
    assert (Path(directory) / "model.safetensors").stat().st_size <= MAX_WEIGHT_BYTES
    assert record["training"]["held_out_loss"] > 0 and record["training"]["steps"] > 0


def test_it_proposes_distinct_tactic_sentences_for_a_real_state():
    predictor = ModelTactics(model_location(SHIPPED))
    tactics = predictor.predict("n : nat\n============================\nn + 0 = n", 5)
    assert 1 <= len(tactics) <= 5 and len(set(tactics)) == len(tactics)
    assert all(t.endswith(".") for t in tactics)
