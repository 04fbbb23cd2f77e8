"""Verifier benchmark: the pooled persistent Rocq sessions against one `coqc`
process per proof, on the same 200 proofs with the same parallelism.

    RAY_AUTH_MODE=disabled .venv/bin/python benchmarks/verifier.py [--proofs 200] [--workers 2]

Prints a table and, as its last line, ``verifier_speedup: <ratio>x`` (coqc wall
time over pool wall time, both with ``--workers`` checks in flight).  Also
reports the pool with 1 and 2 workers, the per-proof overhead the pool adds
over calling a backend directly, and peak memory per worker.  The compared
pool runs audit nothing (``audit_fraction=0``), as ``coqc`` does: an audit
is a second opinion on top of the check, three more Rocq processes on one
proof in a hundred by default, and a batch waits for its slowest audited
proof.  Its cost is a row of its own (the runs' default share).  Timings on a
shared 2-core machine are noisy: compare the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import ray

from lean_env.backends import BackendSpec
from lean_env.pool import VerifierPool, VerifierPoolSettings
from lean_env.rocq import RocqBackend, RocqConfig
from lean_env.verdict import ProofTask, Status
from sgs.config.schema import ProverConfig

#: the share of valid proofs a run audits (``prover.audit_fraction``'s default)
RUN_AUDIT_FRACTION = ProverConfig.audit_fraction

TARGETS = Path(__file__).resolve().parents[1] / "sgs" / "data" / "rocq_targets.jsonl"


def make_tasks(count: int) -> list[ProofTask]:
    """``count`` checks drawn from the shipped Rocq targets: three in four with
    the target's reference proof (valid), one in four with the proof of the
    next target (almost always invalid), so both outcomes are timed."""
    rows = [json.loads(line) for line in TARGETS.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["proof"]]
    tasks = []
    for i in range(count):
        row = rows[i % len(rows)]
        proof = rows[(i + 1) % len(rows)]["proof"] if i % 4 == 3 else row["proof"]
        tasks.append(ProofTask(id=f"{row['id']}#{i}", header=row["header"], statement=row["statement"],
                               proof=proof))
    return tasks


def coqc_check(task: ProofTask, workdir: Path) -> bool:
    path = workdir / f"check_{abs(hash(task.id))}.v"
    path.write_text(f"{task.header}\n{task.statement}\n{task.proof}\n")
    return subprocess.run(["coqc", "-q", str(path)], cwd=workdir, capture_output=True).returncode == 0


def run_coqc(tasks: list[ProofTask], workers: int) -> tuple[float, list[bool]]:
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(workers) as ex:
        start = time.perf_counter()
        results = list(ex.map(lambda t: coqc_check(t, Path(tmp)), tasks))
        return time.perf_counter() - start, results


def run_pool(tasks: list[ProofTask], workers: int, audit_fraction: float = 0.0
             ) -> tuple[float, list[bool], dict, int]:
    pool = VerifierPool(BackendSpec("rocq"), VerifierPoolSettings(
        num_workers=workers, timeout=60, cpus_per_worker=2 / workers, hedge=False, audit_fraction=audit_fraction))
    peak = _PeakRss(pool)
    try:
        # Steady state, as in a run, where workers live for days: every worker
        # loads the header once before the clock starts (the direct calls below
        # are warmed the same way).  Two distinct trivial checks per worker
        # reach every worker, since the pool fills idle workers first.
        header = tasks[0].header
        pool.verify([ProofTask(id=f"warm{i}", header=header, statement=f"Lemma warm{i} : True.",
                               proof="Proof. exact I. Qed.") for i in range(2 * workers)])
        start = time.perf_counter()
        verdicts = pool.verify(tasks)
        elapsed = time.perf_counter() - start
        return elapsed, [v.status is Status.VALID for v in verdicts], pool.stats.as_dict(), peak.stop()
    finally:
        pool.shutdown()


class _PeakRss:
    """Samples the resident memory of each worker (actor + prover) in the background."""

    def __init__(self, pool: VerifierPool) -> None:
        self.pids = [ray.get(pool.worker(w).process_ids.remote()) for w in range(pool.num_workers)]
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for ids in self.pids:
                total = 0
                for pid in [ids["actor"], *ids["prover"]]:
                    try:
                        total += psutil.Process(pid).memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
            time.sleep(0.05)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def warm_census(tasks: list[ProofTask]) -> str:
    """Take (or load from its cache) the axiom census of the tasks' header, so
    the timed runs measure steady state rather than the one-off census."""
    backend = RocqBackend(RocqConfig())
    try:
        backend.check_proof(tasks[0], 60)
        if backend.census is None:
            return "off (coqchk unusable): every valid proof runs Print Assumptions"
        backend.census.wait(900)
        backend.check_proof(tasks[0], 60)
        before = backend.assumption_checks
        backend.check_proof(tasks[0], 60)
        clean = backend.assumption_checks == before
        return "clean: valid proofs skip Print Assumptions" if clean else "not clean: Print Assumptions per proof"
    finally:
        backend.close()


def run_direct(tasks: list[ProofTask]) -> float:
    backend = RocqBackend(RocqConfig())
    try:
        backend.check_proof(tasks[0], 60)  # warm the header
        start = time.perf_counter()
        for t in tasks:
            backend.check_proof(t, 60)
        return time.perf_counter() - start
    finally:
        backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proofs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    tasks = make_tasks(args.proofs)

    census = warm_census(tasks)
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    try:
        coqc_s, coqc_ok = run_coqc(tasks, args.workers)
        pool_s, pool_ok, stats, peak = run_pool(tasks, args.workers)
        pool1_s, _, _, peak1 = run_pool(tasks, 1)
        audited_s, _, audited_stats, _ = run_pool(tasks, args.workers, audit_fraction=RUN_AUDIT_FRACTION)
        direct_s = run_direct(tasks)
    finally:
        ray.shutdown()

    n = len(tasks)
    agree = sum(a == b for a, b in zip(coqc_ok, pool_ok))
    rows = [
        ("coqc, one process per proof", args.workers, coqc_s),
        ("pool of persistent coqtop sessions", args.workers, pool_s),
        ("pool of persistent coqtop sessions", 1, pool1_s),
        (f"pool, {RUN_AUDIT_FRACTION:.0%} of valid proofs audited", args.workers, audited_s),
        ("one coqtop session, direct calls", 1, direct_s),
    ]
    print(f"{'method':<38} {'workers':>7} {'seconds':>9} {'proofs/s':>9} {'ms/proof':>9}")
    for name, w, s in rows:
        print(f"{name:<38} {w:>7} {s:>9.2f} {n / s:>9.1f} {1000 * s / n:>9.1f}")
    print(f"\nverdicts: {sum(pool_ok)} valid / {n - sum(pool_ok)} invalid; pool and coqc agree on {agree}/{n}")
    print(f"pool overhead over direct calls (1 worker): {1000 * (pool1_s - direct_s) / n:+.1f} ms/proof")
    print(f"peak memory per worker (actor + coqtop): {peak / 2**20:.0f} MiB with {args.workers} workers, "
          f"{peak1 / 2**20:.0f} MiB with 1")
    print(f"axiom census of the header: {census}")
    print(f"pool stats: dispatched {stats['dispatched']}, restarts {stats['workers_restarted']}; "
          f"with the audit: {audited_stats['audited']} audited")
    print(f"verifier_speedup: {coqc_s / pool_s:.1f}x")


if __name__ == "__main__":
    sys.exit(main())
