"""Searches on Ray actors: results arrive per target, and a worker that cannot run is a system error for its
targets (never a failed proof), replaced, with the run going on to the end."""

from __future__ import annotations

import shutil

import pytest

from lean_env.verdict import ProofTask
from sgs.search.settings import SearchSettings
from sgs.search.workers import ProposerSpec, search_all

pytestmark = pytest.mark.skipif(shutil.which("coqtop") is None, reason="needs coqtop")

TASKS = [ProofTask(id=f"t{i}", header="Require Import Arith Lia.", statement=f"Theorem t{i} : {i} + 0 = {i}.",
                   proof="") for i in range(3)]


def test_finishers_alone_prove_on_two_actors_and_each_result_is_rechecked(ray_session):
    results = {}
    search_all(TASKS, settings=SearchSettings(width=0, lemma_seconds=20, finishers=("lia",)), proposer=ProposerSpec(),
               rocq_options={}, workers=2, record=lambda task, result: results.setdefault(task.id, result))
    assert sorted(results) == ["t0", "t1", "t2"]
    assert all(r["proved"] and r["verdict"]["status"] == "valid" for r in results.values())
    assert all(r["proof"] == "Proof.\n  lia.\nQed." for r in results.values())


def test_a_worker_that_dies_is_a_system_error_and_the_run_goes_on(ray_session):
    results = {}
    search_all(TASKS, settings=SearchSettings(width=0, lemma_seconds=5), proposer=ProposerSpec(),
               rocq_options={"coqtop": "/nonexistent/coqtop"}, workers=1,
               record=lambda task, result: results.setdefault(task.id, result))
    assert sorted(results) == ["t0", "t1", "t2"]
    for result in results.values():      # its constructor fails: no coqtop there
        assert not result["proved"] and result["stop"] == "system_error"
        assert result["verdict"] == {"status": "system_error", "reason": "search worker died: ActorDiedError"}
