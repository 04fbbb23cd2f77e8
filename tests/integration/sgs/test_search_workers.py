"""Searches on Ray actors: results arrive per target, on Rocq and on the Lean REPL stand-in (a test double of
Lean's REPL), and a worker that cannot run is a system error for its targets (never a failed proof), replaced,
with the run going on to the end; so is one that hangs."""

from __future__ import annotations

import shutil
import time

import pytest
import ray

from lean_env.backends import BackendSpec
from lean_env.verdict import ProofTask
from sgs.search import workers
from sgs.search.languages import LEAN_FINISHERS
from sgs.search.settings import SearchSettings
from sgs.search.workers import ProposerSpec, drive_actors, search_all
from tests.unit.lean_env.test_lean_standin import HEADER as LEAN_HEADER
from tests.unit.lean_env.test_lean_standin import standin_command

needs_coqtop = pytest.mark.skipif(shutil.which("coqtop") is None, reason="needs coqtop")

TASKS = [ProofTask(id=f"t{i}", header="Require Import Arith Lia.", statement=f"Theorem t{i} : {i} + 0 = {i}.",
                   proof="") for i in range(3)]


@needs_coqtop
def test_finishers_alone_prove_on_two_actors_and_each_result_is_rechecked(ray_session):
    results = {}
    search_all(TASKS, settings=SearchSettings(width=0, lemma_seconds=20, finishers=("lia",)), proposer=ProposerSpec(),
               backend=BackendSpec("rocq", {}), workers=2,
               record=lambda task, result: results.setdefault(task.id, result))
    assert sorted(results) == ["t0", "t1", "t2"]
    assert all(r["proved"] and r["verdict"]["status"] == "valid" for r in results.values())
    assert all(r["proof"] == "Proof.\n  lia.\nQed." for r in results.values())


def test_lean_searches_run_on_actors_with_leans_finishers(ray_session):
    """The same actors on a Lean REPL: Lean's finishers close what they can, the path is
    re-checked as a ``by`` block, and a false statement is searched in vain."""
    tasks = [ProofTask("odd", LEAN_HEADER, "theorem odd (n : ℕ) (h : n % 2 = 1) : (n + 1) % 2 = 0 := by", ""),
             ProofTask("false", LEAN_HEADER, "theorem false (n : ℕ) : n ≤ 1000 := by", "")]
    lean = BackendSpec("lean", {"repl_command": standin_command(), "spare": False, "axiom_check": "repl",
                                "timeout": 30.0, "header_timeout": 30.0})
    results = {}
    search_all(tasks, settings=SearchSettings(width=0, lemma_seconds=20, finishers=LEAN_FINISHERS),
               proposer=ProposerSpec(), backend=lean, workers=2,
               record=lambda task, result: results.setdefault(task.id, result))
    assert results["odd"]["proved"] and results["odd"]["proof"] == "  omega"
    assert results["odd"]["verdict"]["status"] == "valid"
    assert not results["false"]["found"] and results["false"]["stop"] == "exhausted"


@needs_coqtop
def test_a_worker_that_dies_is_a_system_error_and_the_run_goes_on(ray_session):
    results = {}
    search_all(TASKS, settings=SearchSettings(width=0, lemma_seconds=5), proposer=ProposerSpec(),
               backend=BackendSpec("rocq", {"coqtop": "/nonexistent/coqtop"}), workers=1,
               record=lambda task, result: results.setdefault(task.id, result))
    assert sorted(results) == ["t0", "t1", "t2"]
    for result in results.values():      # its constructor fails: no coqtop there
        assert not result["proved"] and result["stop"] == "system_error"
        assert result["verdict"] == {"status": "system_error", "reason": "search worker died: ActorDiedError"}


@ray.remote
class Stalling:
    """Answers every task at once but ``hang``, on which it sleeps past any bound."""

    def attempt(self, task: ProofTask) -> dict:
        if task.id == "hang":
            time.sleep(3600)
        return {"target": task.id, "proved": True}


class BusyPump:
    """A pump with something ready on every wait (an engine streaming chunks): ``ray.wait`` never times out."""

    def __init__(self) -> None:
        self._ready = ray.put(None)
        self.advanced = 0

    def waitables(self) -> list:
        return [self._ready]

    def advance(self) -> None:
        self.advanced += 1


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy-pump"])
def test_a_hung_call_is_a_system_error_its_actor_replaced_and_the_rest_still_answered(ray_session, monkeypatch,
                                                                                      busy):
    monkeypatch.setattr(workers, "CALL_SLACK_SECONDS", 0.0)
    pump = BusyPump() if busy else None
    started, results = [], {}

    def start():
        started.append(Stalling.remote())
        return started[-1]

    tasks = [ProofTask(id=name, header="", statement="", proof="") for name in ("a", "hang", "b", "c")]
    # A new actor's first call may take start_seconds more: generous, since a Ray actor's process can take
    # over 8 s to start under CI's load (the replacement then looked hung too); the hang is told by the 3 s.
    drive_actors(tasks, start=start, submit=lambda actor, task: actor.attempt.remote(task),
                 seconds=lambda task: 3.0, start_seconds=60.0, workers=1, what="sampling", pump=pump,
                 record=lambda task, result: results.setdefault(task.id, result))
    assert set(results) == {"a", "hang", "b", "c"}
    assert [results[name]["proved"] for name in ("a", "b", "c")] == [True] * 3
    assert results["hang"]["verdict"] == {"status": "system_error",
                                          "reason": "sampling worker hung: no answer within its bound"}
    assert len(started) == 2       # one actor for the hung call's, one in its place
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(started[0].attempt.remote(tasks[0]), timeout=30)
