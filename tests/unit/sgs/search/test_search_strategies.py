"""The search strategies on a fake prover whose states are a small graph
(tests/unit/sgs/search/graph_prover.py), with hand-checked expectations."""

from __future__ import annotations

import math

import pytest

from lean_env.verdict import ProofTask
from sgs.search.proposers import FixedTactics, RankedProposer
from sgs.search.settings import SearchSettings
from sgs.search.strategies import STRATEGIES, search
from tests.unit.sgs.search.graph_prover import ENDED, QED, GraphProver, TableProposer

PROBLEM = ProofTask(id="p", header="", statement="Theorem p : True.", proof="")
NO_FINISHERS = SearchSettings(finishers=())

# root -t1(-0.1)-> A -t3(-0.1)-> C -q-> QED: likely, three steps
# root -t2(-3.0)-> B -q-> QED: unlikely, two steps
TWO_ROADS = {"root": {"t1": "A", "t2": "B"}, "A": {"t3": "C"}, "B": {"q": QED}, "C": {"q": QED}}
TWO_ROADS_TABLE = {"root": [("t1", -0.1), ("t2", -3.0)], "A": [("t3", -0.1)], "B": [("q", -0.5)],
                   "C": [("q", -0.5)]}


def run(graph, table, settings=NO_FINISHERS, strategy="best_first", **prover_options):
    prover = GraphProver(graph, **prover_options)
    proposer = TableProposer(table)
    return search(PROBLEM, prover, proposer, settings, strategy=strategy), prover, proposer


def test_best_first_finds_the_most_likely_path():
    result, prover, _ = run(TWO_ROADS, TWO_ROADS_TABLE)
    assert result.stop == "completed" and result.tactics == ("t1", "t3", "q")
    assert prover.expanded_states() == ["root", "A", "C"]        # B (-3.0) was never expanded
    assert result.proved and result.proof == "t1 t3 q" and prover.checked[0].proof == "t1 t3 q"


def test_breadth_first_takes_the_shallowest_path():
    result, prover, _ = run(TWO_ROADS, TWO_ROADS_TABLE, strategy="breadth_first")
    assert result.tactics == ("t2", "q") and prover.expanded_states() == ["root", "A", "B"]


def test_depth_first_follows_the_best_tactic_down_first():
    # root -a-> X -b-> Y (dead end); root -c-> Z -q-> QED
    graph = {"root": {"a": "X", "c": "Z"}, "X": {"b": "Y"}, "Z": {"q": QED}}
    table = {"root": [("a", -0.1), ("c", -0.2)], "X": [("b", -0.1)], "Y": [("stuck", 0.0)], "Z": [("q", 0.0)]}
    result, prover, _ = run(graph, table, strategy="depth_first")
    assert prover.expanded_states() == ["root", "X", "Y", "Z"] and result.tactics == ("c", "q")


def test_a_custom_score_orders_the_search():
    deeper_first = lambda node: node.depth                      # noqa: E731 - a score is any callable
    prover, proposer = GraphProver(TWO_ROADS), TableProposer(TWO_ROADS_TABLE)
    result = search(PROBLEM, prover, proposer, NO_FINISHERS, score=deeper_first)
    assert result.tactics in {("t1", "t3", "q"), ("t2", "q")} and prover.expanded_states()[:2] == ["root", "A"]


def test_repeated_and_unchanged_states_are_pruned_and_failures_dropped():
    # A2 shows the same goals as A: one state; "idle" leaves the goals as they were;
    # "bad" is not a step; "slow" times out; "back" returns to the root
    graph = {"root": {"t1": "A", "t2": "A2", "idle": "root", "slow": ENDED}, "A": {"back": "root"}}
    table = {"root": [("t1", -0.1), ("t2", -0.2), ("idle", -0.3), ("bad", -0.4), ("slow", -0.5)],
             "A": [("back", -0.1)]}
    result, prover, _ = run(graph, table, goals={"A2": "A"})
    stats = result.stats
    assert result.stop == "exhausted" and not result.found and result.verdict is None
    assert (stats.repeated, stats.unchanged, stats.errors, stats.ended) == (2, 1, 1, 1)
    assert prover.expanded_states() == ["root", "A"] and stats.expanded == 2 and stats.tactics_tried == 6


def test_the_same_tactic_is_tried_once_per_state():
    graph = {"root": {"lia.": "A"}}
    table = {"root": [("lia.", -0.1), ("lia", -0.2), ("lia  .", -0.3)]}
    result, prover, _ = run(graph, table, SearchSettings(finishers=("lia",)))
    assert [tactic for state, tactic, _ in prover.calls if state == "root"] == ["lia"]


def test_finishers_run_first_at_every_state_and_cost_nothing():
    # "fin" completes from B only; it is tried before the proposer is asked anywhere
    graph = {"root": {"t1": "A", "t2": "B", "auto": "A"}, "B": {"fin": QED}}
    table = {"root": [("t1", -0.1), ("t2", -5.0)], "A": [], "B": []}
    settings = SearchSettings(finishers=("fin", "auto"))
    result, prover, proposer = run(graph, table, settings)
    assert [t for s, t, _ in prover.calls if s == "root"][:2] == ["fin", "auto"]
    assert result.tactics == ("t2", "fin") and proposer.asked == ["root", "A"]
    assert result.stats.proposer_calls == 2 and result.stats.repeated == 1   # t1 reaches A, found by auto


def test_the_expansion_budget_is_respected():
    chain = {f"s{i}": {"next": f"s{i + 1}"} for i in range(100)}
    chain["root"] = {"next": "s0"}
    table = {f"s{i}": [("next", -0.1)] for i in range(100)} | {"root": [("next", -0.1)]}
    result, _, _ = run(chain, table, SearchSettings(finishers=(), max_expansions=5))
    assert result.stop == "expansions" and result.stats.expanded == 5


def test_no_state_deeper_than_max_depth_is_expanded():
    chain = {"root": {"next": "s1"}} | {f"s{i}": {"next": f"s{i + 1}"} for i in range(1, 100)}
    table = {"root": [("next", 0.0)]} | {f"s{i}": [("next", 0.0)] for i in range(100)}
    result, prover, _ = run(chain, table, SearchSettings(finishers=(), max_depth=3))
    assert result.stop == "exhausted" and prover.expanded_states() == ["root", "s1", "s2"]


def test_the_frontier_stays_within_its_bound():
    # a root with 10 children, each with 10 children of its own
    graph = {"root": {f"c{i}": f"c{i}" for i in range(10)}}
    graph |= {f"c{i}": {f"g{j}": f"c{i}g{j}" for j in range(10)} for i in range(10)}
    table = {"root": [(f"c{i}", -0.1 * i) for i in range(10)]}
    table |= {f"c{i}": [(f"g{j}", -0.1 * j) for j in range(10)] for i in range(10)}
    result, prover, _ = run(graph, table, SearchSettings(finishers=(), width=10, max_frontier=4))
    stats = result.stats
    assert stats.frontier_peak <= 4 and stats.dropped > 0 and result.stop == "exhausted"
    # the cut keeps the best four: after c0's expansion c0g0, c1, c0g1 and c2 (c3 loses to the
    # older c2 and the better grandchildren); the grandchildren have no tactics of their own
    assert prover.expanded_states() == ["root", "c0", "c1", "c2"]


def test_the_time_limits_are_respected():
    chain = {"root": {"next": "s1"}} | {f"s{i}": {"next": f"s{i + 1}"} for i in range(1, 1000)}
    table = {"root": [("next", 0.0)]} | {f"s{i}": [("next", 0.0)] for i in range(1000)}
    settings = SearchSettings(finishers=(), tactic_seconds=0.5, lemma_seconds=0.2, max_depth=1000)
    result, prover, _ = run(chain, table, settings, seconds_per_tactic=0.02)
    assert result.stop == "time" and 0.2 <= result.stats.seconds < 0.5
    assert all(timeout <= 0.2 for _, _, timeout in prover.calls)   # a tactic never gets more than is left
    assert all(timeout <= 0.5 for _, _, timeout in prover.calls)


def test_a_completion_the_recheck_refuses_is_no_proof():
    result, prover, _ = run(TWO_ROADS, TWO_ROADS_TABLE, valid=False)
    assert result.found and not result.proved and result.verdict is not None
    assert result.verdict.reason == "prover_error" and result.tactics == ("t1", "t3", "q")


def test_time_is_split_between_proposer_prover_and_the_rest():
    prover = GraphProver(TWO_ROADS, seconds_per_tactic=0.01)
    proposer = TableProposer(TWO_ROADS_TABLE, seconds=0.02)
    stats = search(PROBLEM, prover, proposer, NO_FINISHERS).stats
    assert stats.proposer_calls == 3 and stats.tactics_tried == 4
    assert stats.proposer_seconds >= 0.06 and stats.prover_seconds >= 0.04
    assert stats.other_seconds < 0.2 * stats.seconds
    assert math.isclose(stats.seconds, stats.proposer_seconds + stats.prover_seconds + stats.other_seconds)
    assert stats.as_dict()["expanded_per_second"] == pytest.approx(stats.expanded / stats.seconds)


def test_every_strategy_is_registered_and_unknown_ones_are_refused():
    assert set(STRATEGIES) == {"best_first", "breadth_first", "depth_first"}
    with pytest.raises(ValueError, match="unknown search strategy"):
        search(PROBLEM, GraphProver({}), TableProposer({}), strategy="mcts")


def test_settings_are_checked():
    with pytest.raises(ValueError, match="max_depth"):
        SearchSettings(max_depth=0)
    with pytest.raises(ValueError, match="lemma_seconds"):
        SearchSettings(lemma_seconds=0)
    assert SearchSettings(width=0).width == 0                       # the finishers alone


def test_a_ranked_predictor_scores_by_rank():
    proposals = RankedProposer(FixedTactics(["a.", "b.", "c."])).propose("goal", 2)
    assert [(p.tactic, p.logprob) for p in proposals] == [("a.", 0.0), ("b.", -math.log(2))]
