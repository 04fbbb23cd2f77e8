"""Where a run's actors ended up, as the actors themselves report it.

:class:`PlacementRecord` writes ``<run_dir>/placement.json``: the cluster's
nodes with the resources each declares, then per engine its node, process,
the GPUs Ray assigned it, the GPUs it sees (``CUDA_VISIBLE_DEVICES``: a
colocated engine is pinned there without a Ray GPU) and the device it
computes on; per verifier worker its node and process; per learner run
(the last of each role) every rank's node, GPUs, device, process-group
backend and strategy.  It is what this session's actors said, not what the
config asked for, so it shows a mismatch between the two (on real GPUs or
``resources.simulated_gpus``).  It is written when the actors start and
again at the end of every iteration (an actor lost and restarted may run
elsewhere then); a resumed run rewrites it.

It also appends to ``<run_dir>/engine_sleep.jsonl`` one line each time the
engines are put to sleep for training and woken after it: every engine's
state as it reports it (asleep or not, the policy version it serves), so
the line after a training phase shows the new weights arrived on waking.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ray

from lean_env.pool import VerifierPool
from sgs.machinery.engines import EngineGroup

#: The run directory's record of where the actors run.
PLACEMENT_FILE = "placement.json"
#: The run directory's log of the engines' sleep and wake around training.
ENGINE_SLEEP_FILE = "engine_sleep.jsonl"
#: How long to wait for the verifier workers to say where they are (they may be checking).
VERIFIER_ANSWER_S = 120.0


def cluster_nodes() -> list[dict[str, Any]]:
    """Every node Ray knows, alive or not, with the resources it declares."""
    return [{"node_id": node["NodeID"], "alive": node["Alive"], "address": node["NodeManagerAddress"],
             "resources": node["Resources"]} for node in ray.nodes()]


def engine_placement(engines: Mapping[str, EngineGroup]) -> dict[str, list[dict[str, Any]]]:
    """Each role's engines, by index, as they report themselves."""
    return {role: [{"name": f"engine-{role}-{index}", **answer} for index, answer in enumerate(group.placement())]
            for role, group in engines.items()}


def verifier_placement(pool: VerifierPool) -> list[dict[str, Any]]:
    """Each verifier worker's node and process; a worker that does not answer
    in :data:`VERIFIER_ANSWER_S` is recorded with the error instead."""
    refs = [pool.worker(index).placement.remote() for index in range(pool.num_workers)]
    placed = []
    for index, ref in enumerate(refs):
        try:
            placed.append({"index": index, **ray.get(ref, timeout=VERIFIER_ANSWER_S)})
        except Exception as error:  # a lost worker is the pool's business, not the record's
            placed.append({"index": index, "error": f"{type(error).__name__}: {error}"[:300]})
    return placed


class PlacementRecord:
    """The run directory's ``placement.json`` and ``engine_sleep.jsonl``."""

    def __init__(self, run_dir: Path, simulated_gpus: int) -> None:
        self.path = Path(run_dir) / PLACEMENT_FILE
        self.sleep_log = Path(run_dir) / ENGINE_SLEEP_FILE
        self.record: dict[str, Any] = {"simulated_gpus": simulated_gpus, "nodes": [], "engines": {},
                                       "verifiers": [], "learner": {}}

    def actors(self, engines: Mapping[str, EngineGroup], pool: VerifierPool) -> None:
        """Record the nodes, the engines and the verifier workers."""
        self.record.update(nodes=cluster_nodes(), engines=engine_placement(engines),
                           verifiers=verifier_placement(pool))
        self._write()

    def learner(self, role: str, iteration: int, ranks: list[dict[str, Any]] | None) -> None:
        """Record the ranks of ``role``'s learner run of ``iteration`` (nothing when it did not run)."""
        if ranks is None:
            return
        self.record["learner"][role] = {"iteration": iteration, "world_size": len(ranks), "ranks": ranks}
        self.record["nodes"] = cluster_nodes()
        self._write()

    def engine_states(self, event: str, iteration: int, phase: str, engines: Mapping[str, EngineGroup]) -> None:
        """Append the engines' states after ``event`` ("sleep" or "wake") at ``phase`` of ``iteration``."""
        states = {role: [{key: answer[key] for key in ("asleep", "policy_version", "cuda_visible_devices")}
                         for answer in group.placement()] for role, group in engines.items()}
        line = {"time": time.time(), "event": event, "iteration": iteration, "phase": phase, "engines": states}
        with open(self.sleep_log, "a") as handle:
            handle.write(json.dumps(line) + "\n")

    def _write(self) -> None:
        # Whole or not at all: a reader never sees half a record.
        staging = self.path.with_suffix(".json.tmp")
        staging.write_text(json.dumps(self.record, indent=2) + "\n")
        os.replace(staging, self.path)
