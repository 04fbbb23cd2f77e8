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


def test_every_prover_of_the_comparison_is_a_baseline_a_search_or_sampling():
    from sgs.prover.accuracy import PREDICTORS
    from sgs.prover.proof_rate import PROVERS, SamplingProver, SearchProver
    from sgs.prover.baselines import Baseline
    assert set(BASELINES) <= set(PROVERS)
    searches = {name: p for name, p in PROVERS.items() if isinstance(p, SearchProver)}
    assert all(isinstance(p, (Baseline, SearchProver, SamplingProver)) for p in PROVERS.values())
    assert [name for name, p in PROVERS.items() if isinstance(p, SamplingProver)] == ["sample"]
    assert {p.predictor for p in searches.values()} <= set(PREDICTORS)
    assert searches["search-no-finishers"].finishers == () and "sauto" in searches["search"].finishers


def test_a_held_out_theorem_may_not_be_proved_by_itself_or_what_follows_it(tmp_path):
    from sgs.corpus.records import FileRecord, TheoremRecord, shard_path, write_shard
    from sgs.prover.proof_rate import stdlib_test_targets
    from sgs.search.proposers import FixedTactics, RankedProposer, WithoutNames

    def theorem(name, line):
        return TheoremRecord(library="stdlib", file="A/B.v", name=name, line=line, statement=f"Lemma {name} : True.",
                             proof="Proof. exact I. Qed.", ending="Qed", split="test", truth="closed",
                             case={"header": "Require Import Coq.A.B.", "statement": "Lemma sgs_case : True.",
                                   "proof": "Proof. exact I. Qed."})
    write_shard(shard_path(tmp_path, "stdlib", "A/B.v"),
                FileRecord(library="stdlib", file="A/B.v", module="Coq.A.B", split="test", status="ok"),
                [theorem("first", 1), theorem("middle", 5), theorem("last", 9)])
    targets, forbidden = stdlib_test_targets(tmp_path, None)
    assert [t.id for t in targets] == ["A/B.v:first", "A/B.v:middle", "A/B.v:last"]
    assert forbidden["A/B.v:middle"] == {"middle", "last"}          # itself and what follows, not "first"
    proposer = WithoutNames(RankedProposer(FixedTactics(["apply middle.", "rewrite Coq.A.B.last.", "apply first.",
                                                         "lia."])), forbidden["A/B.v:middle"])
    assert [p.tactic for p in proposer.propose("goal", 4)] == ["apply first.", "lia."]
