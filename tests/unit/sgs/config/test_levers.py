"""The levers of the long-horizon comparison (conf/lever/, make long-horizon-levers):
each composes on top of the standard setting, validates, names its own experiment,
and changes exactly the keys it says it changes."""

from __future__ import annotations

import re

import pytest
from omegaconf import OmegaConf

from sgs.config import validate
from tests.config_support import compose_cfg
from tests.paths import REPO

#: The make target's overrides, without the multirun's seed and lever lists (the two paths pinned:
#: their defaults carry the time of day).
BASE = ["+experiment=standard", "model=tiny", "prover=rocq", "resources=local_cpu", "scale=laptop", "run_dir=runs/levers",
        "evaluation.output_dir=runs/evaluations"]

#: What each lever changes, beside its experiment name.
CHANGES = {
    "none": {},
    "no_guide": {"method.use_guide": False},
    "two_conjectures": {"method.conjectures_per_target": 2},
    "lr_low": {"model.learning_rate_scale": 33.3},
    "lr_high": {"model.learning_rate_scale": 300},
    "free_grammar": {"sampling.conjecturer_grammar": None},
    "wider_model": {"model.tiny.hidden_size": 256, "model.tiny.intermediate_size": 512,
                    "model.tiny.num_hidden_layers": 4, "model.tiny.num_attention_heads": 8,
                    "model.tiny.num_key_value_heads": 8, "warmstart.epochs": 12, "warmstart.learning_rate": 1.5e-3},
}


def flat(cfg) -> dict:
    def walk(node, prefix=""):
        for key, value in node.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict):
                yield from walk(value, path + ".")
            else:
                yield path, value
    return dict(walk(OmegaConf.to_container(cfg, resolve=True)))


def test_every_lever_file_is_listed_here_and_in_the_make_target():
    files = sorted(p.stem for p in (REPO / "conf" / "lever").glob("*.yaml"))
    assert files == sorted(CHANGES)
    levers = re.search(r"^LEVERS \?= (.+)$", (REPO / "Makefile").read_text(), re.M).group(1).split(",")
    assert sorted(levers) == files


@pytest.mark.parametrize("lever", sorted(CHANGES))
def test_a_lever_changes_only_what_it_says(lever):
    unchanged = flat(compose_cfg(*BASE, "+lever=none"))
    cfg = compose_cfg(*BASE, f"+lever={lever}")
    validate(cfg)
    found = flat(cfg)
    assert found["experiment"] == f"lever_{lever}"
    differences = {key: value for key, value in found.items() if unchanged.get(key) != value and key != "experiment"}
    assert differences == CHANGES[lever]
