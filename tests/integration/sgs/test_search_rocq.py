"""Tactic-level search on real Rocq: targets of sgs/data/rocq_targets.jsonl
solved with a fixed scripted proposer and the finishers, every proof
re-checked as a whole; a forged completion caught by that re-check; a tactic
that times out dropped and the proof brought back."""

from __future__ import annotations

import json

import pytest

from lean_env.rocq.backend import RocqBackend
from lean_env.rocq.config import RocqConfig
from lean_env.verdict import ProofTask, Status
from sgs.search.proposers import FixedTactics, RankedProposer
from sgs.search.provers import Outcome, RocqProver
from sgs.search.settings import SearchSettings
from sgs.search.strategies import search
from tests.paths import REPO

pytestmark = pytest.mark.rocq

#: a learning-free proposer: the same tactics, in this order, at every state
SCRIPT = RankedProposer(FixedTactics(["intros.", "simpl.", "induction n.", "induction l.", "reflexivity.",
                                      "rewrite IHl.", "rewrite IHn.", "split."]))
SETTINGS = SearchSettings(finishers=("lia", "auto", "easy", "congruence"), lemma_seconds=20, tactic_seconds=5)


def target(name: str) -> ProofTask:
    for line in (REPO / "sgs" / "data" / "rocq_targets.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["id"] == name:
            return ProofTask(record["id"], record["header"], record["statement"], "")
    raise KeyError(name)


@pytest.fixture(scope="module")
def backend(coqtop):
    b = RocqBackend(RocqConfig(coqtop=coqtop, timeout=30, axiom_census=False), worker="test")
    yield b
    b.close()


@pytest.mark.parametrize("name, strategy", [
    ("list_app_nil_l", "best_first"),       # a finisher at the root
    ("list_length_app", "best_first"),      # induction, then a finisher and a step on each case
    ("ind_fact_pos", "best_first"),
    ("list_repeat_length", "breadth_first"),
    ("list_length_map", "depth_first"),
])
def test_search_proves_real_targets(backend, name, strategy):
    result = search(target(name), RocqProver(backend), SCRIPT, SETTINGS, strategy=strategy)
    assert result.stop == "completed" and result.proved, (result.stop, result.tactics, result.verdict)
    assert result.proof.startswith("Proof.\n") and result.proof.endswith("\nQed.")
    stats = result.stats
    assert stats.expanded >= 1 and stats.tactics_tried >= len(result.tactics)
    assert stats.recheck_seconds > 0 and stats.other_seconds < 0.2 * stats.seconds


def test_search_backtracks_on_the_linear_prover(backend):
    """Best-first moves between branches: coqtop's states are brought back by replaying paths."""
    result = search(target("list_length_app"), RocqProver(backend), SCRIPT, SETTINGS)
    assert result.proved and result.stats.replayed > 0 and result.stats.repeated > 0


class ForgingProver(RocqProver):
    """A search bug: ``idtac`` reported as completing the proof."""

    def apply(self, handle, tactic, timeout):
        return Outcome("completed") if tactic == "idtac" else super().apply(handle, tactic, timeout)


def test_a_forged_completion_is_caught_by_the_recheck(backend):
    result = search(target("list_length_app"), ForgingProver(backend), SCRIPT,
                    SearchSettings(finishers=("idtac",)))
    assert result.found and not result.proved and result.tactics == ("idtac",)
    assert result.verdict is not None and result.verdict.status is Status.INVALID


def test_a_tactic_that_times_out_is_dropped_and_the_proof_reopened(backend):
    hang = RankedProposer(FixedTactics(["do 1000000000 idtac.", "auto."]))
    result = search(target("list_app_nil_l"), RocqProver(backend), hang,
                    # the lemma's time leaves room for reopening the proof on a loaded machine (CI)
                    SearchSettings(finishers=(), tactic_seconds=1, lemma_seconds=90))
    assert result.proved and result.tactics == ("auto.",) and result.stats.ended == 1
