"""The Ray verifier pool with real Rocq workers: streaming, deduplication,
caching, hedging, and losing no verdict when provers or workers are killed."""

from __future__ import annotations

import os
import signal

import pytest
import ray

from lean_env.backends import BackendSpec
from lean_env.cache import VerdictCache
from lean_env.pool import VerifierPool
from lean_env.verdict import ProofTask, Status

pytestmark = [pytest.mark.rocq]

HEADER = "Require Import Arith Lia."


def lia_task(i: int, valid: bool = True) -> ProofTask:
    """A distinct arithmetic theorem; ``valid=False`` gives a false one."""
    rhs = f"{i} + n" if valid else f"{i + 1} + n"
    return ProofTask(id=f"t{i}", header=HEADER,
                     statement=f"Theorem t{i} : forall n : nat, n + {i} = {rhs}.",
                     proof="Proof. intros. lia. Qed.")


# A proof whose tactic never terminates (an unbounded Ltac recursion).
SLOW = ProofTask(id="slow", header=HEADER, statement="Theorem slow : True.",
                 proof="Proof. let rec f n := f (S n) in f 0. Qed.")


@pytest.fixture
def pool(ray_session, require_rocq):
    p = VerifierPool(BackendSpec("rocq"), num_workers=2, timeout=20, cpus_per_worker=0.5,
                     cache=VerdictCache())
    yield p
    p.shutdown()


def test_batch_verdicts_in_order(pool):
    tasks = [lia_task(i, valid=i % 3 != 0) for i in range(9)]
    verdicts = pool.verify(tasks)
    assert [v.status for v in verdicts] == [Status.INVALID if i % 3 == 0 else Status.VALID for i in range(9)]
    assert all(v.worker.startswith("verifier-") for v in verdicts)
    assert all(v.seconds > 0 for v in verdicts)
    assert pool.stats.verdicts["valid"] == 6 and pool.stats.verdicts["invalid"] == 3


def test_streaming_each_task_exactly_once(pool):
    tasks = [lia_task(100 + i) for i in range(12)]
    for t in tasks:
        pool.submit(t)
    seen = [task.id for task, verdict in pool.results()]
    assert sorted(seen) == sorted(t.id for t in tasks)
    assert pool.outstanding == 0


def test_duplicates_checked_once_and_cached(pool):
    t = lia_task(200)
    copies = [ProofTask(id=f"copy{i}", header=t.header, statement=t.statement, proof=t.proof) for i in range(3)]
    verdicts = pool.verify(copies)
    assert all(v.status is Status.VALID for v in verdicts)
    assert pool.stats.duplicates == 2
    assert pool.stats.dispatched == 1
    again = pool.verify([lia_task(200)])
    assert again[0].cached and again[0].status is Status.VALID
    assert pool.stats.cache_hits == 1


def test_idle_worker_hedges_the_oldest_running_check(ray_session, require_rocq):
    pool = VerifierPool(BackendSpec("rocq"), num_workers=2, timeout=3, cpus_per_worker=0.5, hedge=True,
                         hedge_after=0.5)
    try:
        [verdict] = pool.verify([SLOW])
        assert verdict.status is Status.TIMEOUT
        assert pool.stats.hedged == 1
    finally:
        pool.shutdown()


def test_killed_prover_process_loses_no_verdict(pool):
    tasks = [lia_task(300 + i, valid=i % 2 == 0) for i in range(30)]
    for t in tasks:
        pool.submit(t)
    results = pool.poll(timeout=30)
    assert results, "no verdict arrived"
    for w in range(pool.num_workers):
        for pid in ray.get(pool.worker(w).process_ids.remote())["prover"]:
            os.kill(pid, signal.SIGKILL)
    results += list(pool.results())
    by_id = {task.id: v for task, v in results}
    assert len(results) == 30 and len(by_id) == 30
    for i, t in enumerate(tasks):
        assert by_id[t.id].status is (Status.VALID if i % 2 == 0 else Status.INVALID), by_id[t.id]


def test_killed_worker_actor_is_replaced_and_work_requeued(pool):
    tasks = [lia_task(400 + i) for i in range(20)]
    for t in tasks:
        pool.submit(t)
    actor_pid = ray.get(pool.worker(0).process_ids.remote())["actor"]
    os.kill(actor_pid, signal.SIGKILL)
    results = list(pool.results())
    assert sorted(t.id for t, _ in results) == sorted(t.id for t in tasks)
    assert all(v.status is Status.VALID for _, v in results)
    assert pool.stats.workers_restarted >= 1


def test_statement_checks(pool):
    ok = ProofTask(id="s1", header=HEADER, statement="Theorem s1 : forall n : nat, n <= n * n + 1.", proof="")
    bad = ProofTask(id="s2", header=HEADER, statement="Theorem s2 : forall n : nat, n <= undefined_thing.", proof="")
    for t in (ok, bad):
        pool.submit_statement(t)
    verdicts = {t.id: v for t, v in pool.results()}
    assert verdicts["s1"].status is Status.VALID
    assert verdicts["s2"].status is Status.INVALID


def test_rejects_bad_arguments(ray_session):
    with pytest.raises(ValueError, match="num_workers"):
        VerifierPool(BackendSpec("rocq"), num_workers=0, timeout=5)
    with pytest.raises(ValueError, match="unknown prover backend"):
        BackendSpec("isabelle")


def test_a_hung_worker_is_replaced_and_its_checks_redone(ray_session, require_rocq):
    pool = VerifierPool(BackendSpec("rocq"), num_workers=2, timeout=2, cpus_per_worker=0.5, hang_grace=2)
    try:
        frozen = [ray.get(pool.worker(w).process_ids.remote())["actor"] for w in range(2)]
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)  # alive but silent: only the watchdog can notice
        tasks = [lia_task(500 + i) for i in range(4)]
        verdicts = pool.verify(tasks)
        assert all(v.status is Status.VALID for v in verdicts)
        assert pool.stats.workers_restarted >= 2 and pool.stats.requeued >= 2
    finally:
        pool.shutdown()


def test_workers_live_in_one_placement_group_that_replacements_reuse(ray_session, require_rocq):
    pool = VerifierPool(BackendSpec("rocq"), num_workers=2, timeout=10, cpus_per_worker=0.5)
    try:
        group_ids = {ray.get(pool.worker(w).placement_group_id.remote()) for w in range(2)}
        assert group_ids == {pool._placement_group.id.hex()}
        os.kill(ray.get(pool.worker(0).process_ids.remote())["actor"], signal.SIGKILL)
        assert all(v.status is Status.VALID for v in pool.verify([lia_task(700 + i) for i in range(4)]))
        assert pool.stats.workers_restarted == 1
        assert ray.get(pool.worker(0).placement_group_id.remote()) == pool._placement_group.id.hex()
    finally:
        pool.shutdown()


def test_a_pool_the_cluster_cannot_hold_says_so(ray_session):
    too_many = ray.cluster_resources()["CPU"] + 1
    with pytest.raises(RuntimeError, match="could not reserve 1 x .* for the verifier workers"):
        VerifierPool(BackendSpec("rocq"), num_workers=1, timeout=5, cpus_per_worker=too_many, start_timeout=1)
