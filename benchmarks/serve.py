"""Serve benchmark: the prover service under a bounded load, with and without batching.

    RAY_AUTH_MODE=disabled .venv/bin/python benchmarks/serve.py [--clients 8] [--requests 48] [--attempts 8] \\
        [--batch 8] [--endpoint prove|generate] [--checkpoint RUN_DIR_OR_MODEL]

Starts ``python -m sgs.serve`` twice on localhost, one after the other: with
``serve.max_batch_size=--batch`` (the engine runs the calls of concurrent
requests together, Ray Serve's ``@serve.batch``) and with
``serve.max_batch_size=1`` (one engine call per generate step).  Everything
else is the same: the default model (the cached warm start of the tiny
model when ``python -m sgs.sft`` has made one; or ``--checkpoint``), Rocq
with the default verifier workers, the default Solver sampling settings.

Against each server, ``--clients`` threads send ``POST /prove`` requests
until ``--requests`` have been answered: the held-out Rocq targets in order
(``--attempts`` attempts each; a request stops at its first valid proof), the
same list for both servers.  ``--endpoint generate`` sends the same
statements to ``POST /generate`` instead (LeanCopilot's format:
``serve.generate_outputs`` = ``--attempts`` samples, no prover), which
measures the engine alone.  Two warm-up requests come first (not timed).
Prints, per mode, the wall time, requests per second, p50 and p95 latency,
proofs found and attempts checked, and, as its last line,
``serve_batching: <ratio>x`` (requests per second with batching over
without).  Timings on a shared machine are noisy; the sampled proofs differ
between the two servers, so their work differs a little too.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sgs.config import ROCQ_TARGETS, TargetsConfig
from sgs.serve.client import call, wait_until_up
from sgs.state.targets import load_targets

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Load:
    """What one server did under the load."""

    mode: str
    wall: float
    latencies: list[float]
    statuses: list[int]
    found: int
    checked: int

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.wall

    def percentile(self, q: float) -> float:
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[int(q) - 1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_load(url: str, bodies: list[dict], clients: int, mode: str) -> Load:
    """``clients`` threads sending ``bodies`` (each once) until every one is answered."""
    pending = list(reversed(bodies))
    lock = threading.Lock()
    latencies, statuses, found, checked = [], [], [0], [0]

    def client() -> None:
        while True:
            with lock:
                if not pending:
                    return
                body = pending.pop()
            started = time.perf_counter()
            status, answer = call(url, body, timeout=600)
            seconds = time.perf_counter() - started
            with lock:
                latencies.append(seconds)
                statuses.append(status)
                if status == 200 and "found" in answer:
                    found[0] += answer["found"]
                    checked[0] += sum(a["status"] in ("valid", "invalid", "timeout", "system_error")
                                      for a in answer["attempts"])

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Load(mode, time.perf_counter() - started, latencies, statuses, found[0], checked[0])


def measure(mode: str, batch: int, bodies: list[dict], args: argparse.Namespace, log_dir: Path) -> Load:
    """Start a server with ``serve.max_batch_size=batch``, load it, stop it."""
    port = free_port()
    command = [sys.executable, "-m", "sgs.serve", f"serve.port={port}", f"serve.max_batch_size={batch}",
               f"serve.max_ongoing_requests={args.clients}", f"serve.max_queued_requests={2 * args.clients}",
               f"serve.max_attempts={max(args.attempts, 8)}", f"serve.generate_outputs={args.attempts}"]
    if args.checkpoint:
        command.append(f"checkpoint={args.checkpoint}")
    log_path = log_dir / f"serve-batch{batch}.log"
    env = {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled")}
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        health = wait_until_up(url, process)
        print(f"{mode}: {health['model']['description']}; log {log_path}", flush=True)
        endpoint = f"{url}/{args.endpoint}"
        run_load(endpoint, bodies[:2], 2, mode)  # warm-up: first engine step, the header on every prover
        return run_load(endpoint, bodies, args.clients, mode)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=180)
        except subprocess.TimeoutExpired:
            process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--requests", type=int, default=48, help="requests answered per server")
    parser.add_argument("--attempts", type=int, default=8, help="attempts per /prove request")
    parser.add_argument("--batch", type=int, default=8, help="serve.max_batch_size of the batching server")
    parser.add_argument("--endpoint", choices=("prove", "generate"), default="prove",
                        help="prove: sampling and Rocq; generate: the engine alone (LeanCopilot's format)")
    parser.add_argument("--checkpoint", default=None, help="serve.checkpoint (default: the default model)")
    args = parser.parse_args()

    targets = [t for t in load_targets(TargetsConfig(source=ROCQ_TARGETS), "rocq") if t.held_out]
    chosen = (targets * (args.requests // len(targets) + 1))[:args.requests]
    if args.endpoint == "prove":
        bodies = [{"header": t.header, "statement": t.statement, "attempts": args.attempts} for t in chosen]
    else:
        bodies = [{"name": "sgs", "input": t.statement, "prefix": ""} for t in chosen]
    print(f"load: {args.requests} requests of /{args.endpoint} ({args.attempts} samples each), {args.clients} "
          f"clients; load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="sgs-serve-bench-") as tmp:
        results = [measure(f"batching ({args.batch})", args.batch, bodies, args, Path(tmp)),
                   measure("no batching (1)", 1, bodies, args, Path(tmp))]
    print(f"\n{'mode':<18} {'wall s':>7} {'req/s':>7} {'p50 s':>7} {'p95 s':>7} {'found':>6} {'checked':>8}  statuses")
    for load in results:
        counts = {status: load.statuses.count(status) for status in sorted(set(load.statuses))}
        print(f"{load.mode:<18} {load.wall:>7.2f} {load.throughput:>7.2f} {load.percentile(50):>7.2f} "
              f"{load.percentile(95):>7.2f} {load.found:>6} {load.checked:>8}  {counts}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"serve_batching: {results[0].throughput / results[1].throughput:.2f}x")


if __name__ == "__main__":
    main()
