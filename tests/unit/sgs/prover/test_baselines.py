"""The learning-free baselines: their proofs, budgets and the comparison's table (no prover here)."""

from __future__ import annotations

from sgs.prover.baselines import AUTOMATION, BASELINES, HAMMER_TACTICS, baseline_tasks, target_of
from sgs.prover.proof_rate import format_summary, summarize


def test_each_tactic_is_one_whole_proof_on_the_targets_context():
    target = target_of("t", "Require Import Arith.", "Lemma t : 1 = 1.", (("-R", "/b", "P"),))
    tasks = baseline_tasks(target, BASELINES["automation"])
    assert [t.proof for t in tasks[:2]] == ["Proof.\n  easy.\nQed.", "Proof.\n  auto.\nQed."]
    assert {(t.header, t.statement, t.load_path) for t in tasks} == {(target.header, target.statement,
                                                                       target.load_path)}
    assert [t.id for t in tasks] == [f"t#{i}" for i in range(len(AUTOMATION))]


def test_the_budget_is_shared_and_sauto_loads_only_coqhammers_tactics():
    assert BASELINES["automation"].seconds_each(60) == 60 / len(AUTOMATION)
    assert BASELINES["sauto"].seconds_each(60) == 60
    assert BASELINES["sauto"].tactic_libraries == (HAMMER_TACTICS,)
    assert "Hammer." not in HAMMER_TACTICS     # the plugin that runs external provers is not loaded


def test_the_table_counts_targets_and_rates_per_group_and_prover():
    rows = [{"group": "g", "prover": "sauto", "proved": True}, {"group": "g", "prover": "sauto", "proved": False},
            {"group": "g", "prover": "automation", "proved": False},
            {"group": "g", "prover": "automation", "proved": False},
            {"group": "h", "prover": "sauto", "proved": True}]
    table = summarize(rows)
    assert table["g"]["sauto"] == {"targets": 2, "proved": 1, "rate": 0.5}
    assert table["g"]["automation"]["rate"] == 0.0
    assert table["h"]["sauto"]["rate"] == 1.0
    text = format_summary(table, ["sauto", "automation"])
    assert "1 (0.500)" in text and text.splitlines()[2].split()[:2] == ["h", "1"]


def test_every_prover_of_the_comparison_is_a_baseline_or_a_search():
    from sgs.prover.accuracy import PREDICTORS
    from sgs.prover.proof_rate import PROVERS, SearchProver
    from sgs.prover.baselines import Baseline
    assert set(BASELINES) <= set(PROVERS)
    searches = {name: p for name, p in PROVERS.items() if isinstance(p, SearchProver)}
    assert all(isinstance(p, (Baseline, SearchProver)) for p in PROVERS.values())
    assert {p.predictor for p in searches.values()} <= set(PREDICTORS)
    assert searches["search-no-finishers"].finishers == () and "sauto" in searches["search"].finishers
