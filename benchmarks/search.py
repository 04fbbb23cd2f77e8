"""Search benchmark: where a tactic-level search's time goes, and how fast it expands states.

    RAY_AUTH_MODE=disabled .venv/bin/python benchmarks/search.py [--targets 40] [--lemma-seconds 5]

Best-first searches (``sgs/search``) on the first ``--targets`` shipped Rocq
targets, one Rocq session, side by side in one run with two proposers:

* ``fixed``: the same eight tactics at every state (no model: what the
  prover and the search's own work cost);
* ``model``: the shipped prover (``sgs/data/rocq_prover``) proposing by beam
  search in this process (what a model's calls add).

Both with the finishers ``lia auto easy congruence``.  For each it prints the
targets proved, states expanded per second per core (one search uses one
core), and the split of the search's wall time into prover steps, proposer
calls and everything else; the issue's bound is at most 20% in everything
else.  A third row times bare tactic steps for scale: ``idtac.`` run 200
times on an open proof through the search's prover adapter, and the same
sentence sent to the raw ``coqtop`` session.

The last line, ``search_bound: <ratio>x``, is the share of the ``model``
searches' time spent in the prover and the proposer (1.00x: nothing else;
the goal is at least 0.80x).  Timings on a shared 2-core machine are noisy;
the shares move less than the rates.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lean_env.rocq import RocqBackend, RocqConfig
from lean_env.rocq.session import RocqSession
from lean_env.verdict import ProofTask
from sgs.prover.accuracy import PREDICTORS
from sgs.search.proposers import FixedTactics, RankedProposer
from sgs.search.provers import RocqProver
from sgs.search.settings import SearchSettings
from sgs.search.strategies import search

TARGETS = Path(__file__).resolve().parents[1] / "sgs" / "data" / "rocq_targets.jsonl"
FIXED = ("intros.", "simpl.", "induction n.", "induction l.", "reflexivity.", "rewrite IHl.", "rewrite IHn.",
         "split.")
FINISHERS = ("lia", "auto", "easy", "congruence")
SHIPPED = "pkg://sgs/data/rocq_prover"


def load_targets(count: int) -> list[ProofTask]:
    rows = [json.loads(line) for line in TARGETS.read_text().splitlines() if line.strip()][:count]
    return [ProofTask(id=row["id"], header=row["header"], statement=row["statement"], proof="") for row in rows]


def run_searches(prover: RocqProver, proposer, targets: list[ProofTask], settings: SearchSettings) -> dict:
    totals = {"proved": 0, "expanded": 0, "seconds": 0.0, "prover": 0.0, "proposer": 0.0, "calls": 0}
    for task in targets:
        result = search(task, prover, proposer, settings)
        stats = result.stats
        totals["proved"] += result.proved
        totals["expanded"] += stats.expanded
        totals["seconds"] += stats.seconds
        totals["prover"] += stats.prover_seconds
        totals["proposer"] += stats.proposer_seconds
        totals["calls"] += stats.proposer_calls
    return totals


def bare_steps(prover: RocqProver, task: ProofTask, steps: int) -> tuple[float, float]:
    """Seconds per ``idtac.`` through the adapter (a chain: no replay) and per sentence
    sent to a raw coqtop session of the same configuration."""
    handle = prover.open(task, 60).handle
    started = time.monotonic()
    for _ in range(steps):
        handle = prover.apply(handle, "idtac.", 10).handle
    adapter = (time.monotonic() - started) / steps
    config = RocqConfig()
    session = RocqSession(config.argv([]), env=config.child_env(), limits=config.limits(), name="coqtop-bench")
    try:
        session.wait_ready(time.monotonic() + 60)
        session.run("Goal True.", time.monotonic() + 10)
        started = time.monotonic()
        for _ in range(steps):
            session.run("idtac.", time.monotonic() + 10)
        return adapter, (time.monotonic() - started) / steps
    finally:
        session.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=40)
    parser.add_argument("--lemma-seconds", type=float, default=5.0)
    parser.add_argument("--tactic-seconds", type=float, default=2.0)
    args = parser.parse_args()

    targets = load_targets(args.targets)
    settings = SearchSettings(lemma_seconds=args.lemma_seconds, tactic_seconds=args.tactic_seconds,
                              finishers=FINISHERS)
    backend = RocqBackend(RocqConfig())
    prover = RocqProver(backend)
    proposers = {"fixed": RankedProposer(FixedTactics(FIXED)),
                 "model": RankedProposer(PREDICTORS["model"](Path("."), SHIPPED))}
    rows = {}
    try:
        prover.open(targets[0], 60)   # the session's start and first header are no search's time
        for name, proposer in proposers.items():
            rows[name] = run_searches(prover, proposer, targets, settings)
        adapter, raw = bare_steps(prover, targets[0], 200)
    finally:
        backend.close()

    print(f"best-first on {len(targets)} shipped targets, {args.lemma_seconds:g} s per lemma, finishers "
          f"{' '.join(FINISHERS)}, one Rocq session")
    print(f"{'proposer':<10}{'proved':>8}{'expanded':>10}{'states/s/core':>15}{'prover':>9}{'proposer':>10}"
          f"{'other':>8}{'calls':>7}")
    for name, row in rows.items():
        seconds = row["seconds"] or 1e-9
        other = max(seconds - row["prover"] - row["proposer"], 0.0)
        print(f"{name:<10}{row['proved']:>5}/{len(targets):<2}{row['expanded']:>10}{row['expanded'] / seconds:>15.1f}"
              f"{row['prover'] / seconds:>9.1%}{row['proposer'] / seconds:>10.1%}{other / seconds:>8.1%}"
              f"{row['calls']:>7}")
    print(f"a bare step (idtac.): {adapter * 1000:.1f} ms through the search's prover adapter, "
          f"{raw * 1000:.1f} ms as a raw coqtop sentence")
    model = rows["model"]
    print(f"search_bound: {(model['prover'] + model['proposer']) / (model['seconds'] or 1e-9):.3f}x")


if __name__ == "__main__":
    main()
