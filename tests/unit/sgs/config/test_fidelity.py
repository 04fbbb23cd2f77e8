"""The fidelity switch (conf/fidelity/) and its table (docs/fidelity.md):
``fidelity=paper`` selects every paper behaviour the table names, and every
setting the table names exists in the config schema."""

from __future__ import annotations

import re

import pytest
import yaml
from omegaconf import OmegaConf

from sgs import config as C
from sgs.loop import conjecture as conjecture_phase
from sgs.loop.train import in_conjecturer_batch
from sgs.machinery.runtime import conjecturer_settings, train_settings
from sgs.method.rewards import normalise_conjecturer_rewards
from sgs.method.roles import STATEMENT_FORMS, exact_form
from sgs.state.records import ConjectureScore
from sgs.state.solved import PROOF_KEYS
from tests.config_support import compose_cfg
from tests.paths import REPO

TABLE = REPO / "docs" / "fidelity.md"
PAPER_FILE = C.CONFIG_DIR / "fidelity" / "paper.yaml"
#: A setting in the table's last column: `dotted.key=value`.
SETTING = re.compile(r"`([a-z_][a-z0-9_.]*)=([^`]*)`")


def table_settings() -> dict[str, str]:
    """``key: value`` for every setting the last column of the table's rows names."""
    settings: dict[str, str] = {}
    for line in TABLE.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) < 6 or set(cells[0]) <= {"-"} or cells[0] == "Element":
            continue
        for key, value in SETTING.findall(cells[-1]):
            assert settings.get(key, value) == value, f"the table names two values for {key}"
            settings[key] = value
    return settings


def paper_file_settings() -> dict[str, object]:
    """The dotted keys and values ``conf/fidelity/paper.yaml`` sets."""
    def flatten(node: dict, prefix: str = "") -> dict[str, object]:
        flat: dict[str, object] = {}
        for key, value in node.items():
            flat.update(flatten(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
        return flat

    return flatten(yaml.safe_load(PAPER_FILE.read_text()))


def test_every_setting_the_table_names_exists_in_the_schema():
    settings = table_settings()
    assert len(settings) >= 7
    schema = OmegaConf.structured(C.SGSConfig)
    for key in settings:
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(schema, parent) if parent else schema
        assert node is not None and leaf in node, f"docs/fidelity.md names {key}, which sgs/config/schema.py lacks"


def test_the_paper_switch_sets_exactly_the_tables_settings():
    table = table_settings()
    paper = paper_file_settings()
    assert set(paper) == set(table)
    cfg = C.validate(compose_cfg("fidelity=paper"))
    for key, value in table.items():
        assert OmegaConf.select(OmegaConf.structured(cfg), key) == yaml.safe_load(value), key


def test_the_default_keeps_the_current_behaviour_and_the_paper_switch_changes_each():
    fixed = ("run_dir=runs/x", "evaluation.output_dir=runs/y")  # not the time of day
    default, paper = C.validate(compose_cfg(*fixed)), C.validate(compose_cfg(*fixed, "fidelity=paper"))
    assert default == C.validate(compose_cfg(*fixed, "fidelity=default"))
    for key in table_settings():
        assert OmegaConf.select(OmegaConf.structured(default), key) != OmegaConf.select(
            OmegaConf.structured(paper), key), f"fidelity=paper does not change {key}"


@pytest.mark.parametrize("experiment", ["standard", "ei_solver_only"])
def test_the_paper_switch_composes_with_the_papers_setting(experiment):
    cfg = compose_cfg(f"+experiment={experiment}", "fidelity=paper")
    assert cfg.model.name == "deepseek_prover_v2_7b" and cfg.training.max_seq_len == 8192
    assert cfg.method.loss_normalisation == "sequence_mean"


def test_each_behaviour_fidelity_paper_selects():
    cfg = C.validate(compose_cfg("fidelity=paper"))
    method = cfg.method
    # App. G.5: min-max over the whole batch, the non-kept conjectures at reward 0, all trained on.
    assert normalise_conjecturer_rewards([None, 0.5, 1.0], method.reward_normalisation) == [0.0, 0.5, 1.0]
    unkept = ConjectureScore(conjecture_id="c", solve_rate=1.0, kept=False, relevance=None, redundancy=None,
                             complexity=None, guide_output=None, guide_parse_error=None, r_guide=None,
                             reward=0.0, weight=0.0)
    assert in_conjecturer_batch(unkept, method.reward_normalisation)
    # App. G.1 eq. (4): the learner averages per-sequence token means.
    assert train_settings(cfg).loss_normalisation == "sequence_mean"
    # Algorithm 1: no elaboration check before the Solver attempts a conjecture.
    assert conjecture_phase.ELABORATION_CHECK[method.unelaborated_conjectures] is False
    # Duplicates compared as text, the name included.
    assert STATEMENT_FORMS[method.conjecture_dedup] is exact_form
    # App. G.4: every verified attempt counts towards a target's 16, repeats included.
    assert PROOF_KEYS[method.ei_solved_count] is not PROOF_KEYS["distinct"]
    # §3.1: the Conjecturer samples free text, also at laptop scale.
    assert compose_cfg().sampling.conjecturer_grammar == "statement"
    assert conjecturer_settings(cfg, seed=0).grammar is None
    # No conjecture is excluded for stating a benchmark problem (it is counted).
    assert cfg.evaluation.contamination == "flag"
