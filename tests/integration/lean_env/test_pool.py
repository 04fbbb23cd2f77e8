"""The Ray verifier pool with real Rocq workers: streaming, deduplication,
caching, hedging, losing no verdict when provers or workers are killed, and
the audit (second opinion) of valid verdicts.  Its rules that need no pool:
``tests/unit/lean_env/test_pool_rules.py``."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace

import pytest
import ray

from lean_env.backends import BackendSpec
from lean_env.cache import VerdictCache
from lean_env.pool import VerifierPool, VerifierPoolSettings
from lean_env.verdict import ProofTask, Status
from tests.pool_doubles import DisagreeingAuditSpec, NoAuditSpec

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
    """Two Rocq workers on half a CPU each, an in-memory cache, no audit (tests of the audit set
    ``audit_fraction``), no hedging: on a loaded machine a check can outlast ``hedge_after`` and
    be dispatched twice, and these tests count dispatches (hedging has a test of its own)."""
    settings = VerifierPoolSettings(num_workers=2, timeout=20, cpus_per_worker=0.5, audit_fraction=0.0, hedge=False)
    p = VerifierPool(BackendSpec("rocq"), settings, cache=VerdictCache())
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
    pool = VerifierPool(BackendSpec("rocq"), VerifierPoolSettings(num_workers=2, timeout=3, cpus_per_worker=0.5,
                                                                  hedge=True, hedge_after=0.5, audit_fraction=0.0))
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


def test_a_hung_worker_is_replaced_and_its_checks_redone(ray_session, require_rocq):
    # timeout leaves a loaded machine room for a lia check; the watchdog fires 2 s after it, plus
    # start_timeout on a worker's first check (these are frozen before answering any)
    pool = VerifierPool(BackendSpec("rocq"), VerifierPoolSettings(num_workers=2, timeout=6, cpus_per_worker=0.5,
                                                                  hang_grace=2, start_timeout=5, audit_fraction=0.0))
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


def test_a_replacement_slow_to_start_is_not_taken_for_hung(ray_session, require_rocq, tmp_path):
    """A new worker's first check, which starts its prover, gets
    ``start_timeout`` beyond ``timeout + hang_grace``: a replacement whose
    start-up outlasts those (a Lean worker loading Mathlib) must not be killed
    again and again until its checks give up as ``system_error``."""
    slow_marker = tmp_path / "slow"
    coqtop = tmp_path / "coqtop"
    coqtop.write_text(f"#!/bin/sh\n[ -e {slow_marker} ] && sleep 6\nexec {require_rocq} \"$@\"\n")
    coqtop.chmod(0o755)
    settings = VerifierPoolSettings(num_workers=1, timeout=4, hang_grace=1, cpus_per_worker=0.5, hedge=False,
                                    audit_fraction=0.0)
    pool = VerifierPool(BackendSpec("rocq", {"coqtop": str(coqtop)}), settings)
    try:
        slow_marker.touch()  # every prover started from now on takes 6 s, past the 5 s limit
        os.kill(ray.get(pool.worker(0).process_ids.remote())["actor"], signal.SIGKILL)
        verdicts = pool.verify([lia_task(750 + i) for i in range(3)])
        assert [v.status for v in verdicts] == [Status.VALID] * 3
        assert pool.stats.workers_restarted == 1
    finally:
        pool.shutdown()


def test_workers_live_in_one_placement_group_that_replacements_reuse(ray_session, require_rocq):
    pool = VerifierPool(BackendSpec("rocq"), VerifierPoolSettings(num_workers=2, timeout=10, cpus_per_worker=0.5,
                                                                  audit_fraction=0.0))
    try:
        group_ids = {ray.get(pool.worker(w).placement_group_id.remote()) for w in range(2)}
        assert group_ids == {pool._actors.placement_group.id.hex()}
        os.kill(ray.get(pool.worker(0).process_ids.remote())["actor"], signal.SIGKILL)
        assert all(v.status is Status.VALID for v in pool.verify([lia_task(700 + i) for i in range(4)]))
        assert pool.stats.workers_restarted == 1
        assert ray.get(pool.worker(0).placement_group_id.remote()) == pool._actors.placement_group.id.hex()
    finally:
        pool.shutdown()


def test_a_pool_the_cluster_cannot_hold_says_so(ray_session):
    too_many = ray.cluster_resources()["CPU"] + 1
    with pytest.raises(RuntimeError, match="could not reserve 1 x .* for the verifier workers"):
        VerifierPool(BackendSpec("rocq"), VerifierPoolSettings(num_workers=1, timeout=5, cpus_per_worker=too_many,
                                                               start_timeout=1))


# -- the audit ------------------------------------------------------------------

def test_every_valid_verdict_is_audited_and_agrees(pool):
    pool.settings = replace(pool.settings, audit_fraction=1.0)
    tasks = [lia_task(800 + i, valid=i != 2) for i in range(4)]
    verdicts = pool.verify(tasks)
    assert [(v.status, v.audit) for v in verdicts] == [
        (Status.VALID, "agree"), (Status.VALID, "agree"), (Status.INVALID, ""), (Status.VALID, "agree")]
    assert pool.stats.audited == 3 and pool.stats.audit_disagreements == 0 and pool.stats.audit_inconclusive == 0
    assert pool.stats.rejected == {"prover_error": 1}
    # the cache keeps the audit: the same proofs again are neither checked nor audited again
    dispatched = pool.stats.dispatched
    again = pool.verify([lia_task(800), lia_task(802, valid=False)])
    assert [(v.cached, v.audit) for v in again] == [(True, "agree"), (True, "")]
    assert pool.stats.dispatched == dispatched and pool.stats.audited == 3
    assert pool.stats.rejected == {"prover_error": 2}


def test_a_cached_verdict_from_before_the_audit_is_audited(pool):
    [unaudited] = pool.verify([lia_task(900)])
    assert unaudited.audit == ""
    pool.settings = replace(pool.settings, audit_fraction=1.0)
    [audited] = pool.verify([lia_task(900)])
    assert (audited.status, audited.cached, audited.audit) == (Status.VALID, True, "agree")
    assert pool.stats.audited == 1


def test_an_audit_past_its_time_limit_is_inconclusive_and_the_proof_stays_valid(pool):
    pool.settings = replace(pool.settings, audit_fraction=1.0,
                            audit_timeout=0.001)   # real coqc cannot even start in that time
    [verdict] = pool.verify([lia_task(920)])
    assert (verdict.status, verdict.audit) == (Status.VALID, "inconclusive")
    assert verdict.messages[-1] == "audit inconclusive: audit_timeout"
    assert pool.stats.audit_inconclusive == 1 and pool.stats.rejected == {}


def test_a_disagreement_withholds_the_reward_and_is_logged(ray_session, require_rocq, tmp_path):
    log_path = tmp_path / "audit.jsonl"
    settings = VerifierPoolSettings(num_workers=1, timeout=20, cpus_per_worker=0.5, audit_fraction=1.0,
                                    audit_log=str(log_path))
    pool = VerifierPool(DisagreeingAuditSpec("rocq"), settings, cache=VerdictCache())
    try:
        task = lia_task(950)
        copy = ProofTask(id="copy", header=task.header, statement=task.statement, proof=task.proof)
        verdicts = pool.verify([task, copy, lia_task(951, valid=False)])
    finally:
        pool.shutdown()
    assert [(v.status, v.reason, v.audit) for v in verdicts[:2]] == [
        (Status.INVALID, "audit_disagreement", "disagree")] * 2
    assert verdicts[2].reason == "prover_error" and verdicts[2].audit == ""
    assert pool.stats.audited == 1 and pool.stats.audit_disagreements == 1
    assert pool.stats.as_dict()["rejected/audit_disagreement"] == 2
    [line] = log_path.read_text().splitlines()
    record = json.loads(line)
    assert record["task"] == {"id": "t950", "header": task.header, "statement": task.statement, "proof": task.proof,
                              "load_path": []}
    assert record["first"]["status"] == "valid" and record["audit"]["reason"] == "audit_test_double_disagrees"
    assert record["time"].endswith("+00:00")


def test_a_backend_without_an_audit_path_is_inconclusive(ray_session, require_rocq):
    pool = VerifierPool(NoAuditSpec("rocq"), VerifierPoolSettings(num_workers=1, timeout=20, cpus_per_worker=0.5,
                                                                  audit_fraction=1.0))
    try:
        [verdict] = pool.verify([lia_task(960)])
    finally:
        pool.shutdown()
    assert (verdict.status, verdict.audit) == (Status.VALID, "inconclusive")
    assert "audit_unavailable" in verdict.messages[-1]
    assert pool.stats.audit_inconclusive == 1 and pool.stats.audited == 1
