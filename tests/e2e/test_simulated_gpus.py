"""The GPU placements rehearsed on CPUs: ``resources=gpu_node`` and
``resources=cluster`` with ``resources.simulated_gpus`` (logical GPUs that
Ray reserves, assigns and pins exactly as real ones; the models compute on
the CPU).

Each test runs ``python -m sgs`` as a subprocess, at the loop tests' small
size (:func:`tests.e2e.test_loop.warm_run`: the session's shared warm start,
one iteration), and checks what the actors themselves reported in
``<run_dir>/placement.json`` and ``<run_dir>/engine_sleep.jsonl`` against
docs/scaling.md "Three placements".  The counts are the placements' own, scaled down
to fit two cores: ``gpu_node`` with 4 GPUs (2 Solver, 1 Conjecturer, 1
Guide engine, 4 learner ranks) instead of 8 (4 + 2 + 2, 8 ranks); the
cluster with one engine per role.  The cluster test starts a real
multi-node Ray cluster on this machine (:mod:`tests.local_ray_cluster`:
``ray start`` per node, GPU nodes declaring logical GPUs, a CPU node
declaring ``verifier_node``), loses a node in the middle of the prove
phase, and stops exactly that cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray
import yaml

from sgs import config as C
from sgs.loop.weights import TRAIN_METRICS_FILE
from sgs.machinery.placement import ENGINE_SLEEP_FILE, PLACEMENT_FILE
from sgs.machinery.runtime import pinned_gpus
from sgs.state.store import Store
from tests.local_ray_cluster import LocalRayCluster, default_address_file_names
from tests.config_support import NO_DASHBOARD, compose_cfg
from tests.e2e.test_loop import warm_run  # noqa: F401  (warm_run is a fixture used here)
from tests.paths import REPO


def small(warm_run: list[str]) -> list[str]:
    """The loop tests' small run, placed by the caller's ``resources`` group instead."""
    return [override for override in warm_run if not override.startswith("resources")]


def sgs_command(*overrides: str) -> list[str]:
    return [sys.executable, "-m", "sgs", "+experiment=standard", *overrides, "iterations=1",
            "logging.wandb_mode=disabled", NO_DASHBOARD]


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def start_cluster_run(tmp_path: Path, cluster: LocalRayCluster, warm_run: list[str], gpus: int,
                      *overrides: str) -> subprocess.Popen:
    """``python -m sgs`` on ``cluster`` (``gpus`` logical GPUs over its nodes) at the loop tests'
    small size with one engine per role, two verifiers and two learner ranks; its output goes to
    ``tmp_path/stdout`` and ``tmp_path/stderr`` (a pipe nobody reads while the test waits would
    fill and stall the run)."""
    command = sgs_command(
        *small(warm_run), "resources=cluster", f"resources.ray_address={cluster.address}",
        f"resources.simulated_gpus={gpus}", "resources.solver_engines=1", "resources.conjecturer_engines=1",
        "resources.guide_engines=1", "resources.cpus_per_engine=1", "resources.verifier_workers=2",
        "resources.learner_workers=2", "resources.cpus_per_learner_worker=1", *overrides)
    with open(tmp_path / "stdout", "w") as out, open(tmp_path / "stderr", "w") as err:
        return subprocess.Popen(command, cwd=REPO, env=cluster.env, stdout=out, stderr=err)


def test_colocated_engines_are_pinned_to_the_gpu_ids_ray_gives_the_learner(monkeypatch):
    """On a node shared through CUDA_VISIBLE_DEVICES (a scheduler's "4,5,6,7"), Ray's GPU ids are
    those, and the colocated engines must be pinned to them, not to 0-3."""
    cfg = C.validate(compose_cfg("resources=gpu_node", "resources.num_gpus=4", "resources.solver_engines=2",
                                 "resources.conjecturer_engines=1", "resources.guide_engines=1",
                                 "resources.learner_workers=4"))
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"GPU": 4.0})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    assert pinned_gpus(cfg) == {"solver": ["4", "5"], "conjecturer": ["6"], "guide": ["7"]}
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert pinned_gpus(cfg) == {"solver": ["0", "1"], "conjecturer": ["2"], "guide": ["3"]}


@pytest.mark.slow
def test_gpu_node_rehearsed_on_simulated_gpus(tmp_path, warm_run):  # noqa: F811
    run_dir = tmp_path / "run"
    proc = subprocess.run(sgs_command(
        *small(warm_run), "resources=gpu_node", "resources.simulated_gpus=4", "resources.solver_engines=2",
        "resources.conjecturer_engines=1", "resources.guide_engines=1", "resources.learner_workers=4",
        "resources.verifier_workers=2",
        # REINFORCE (every valid proof): under REINFORCE-1/2 whether the learner runs at all is the
        # tiny warm Solver's luck (no target in 0 < s <= 1/2, no training).
        "method.solver_objective=reinforce", f"run_dir={run_dir}"), cwd=REPO, capture_output=True, text=True,
        timeout=900,
        # Read now: warm_run has put the session's SGS_CACHE_DIR into the environment.
        env={**os.environ, "RAY_AUTH_MODE": "disabled", "WANDB_SILENT": "true"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "cumulative solve rate on the 6 training targets:" in proc.stdout

    placed = read_json(run_dir / PLACEMENT_FILE)
    assert placed["simulated_gpus"] == 4
    (node,) = placed["nodes"]
    assert node["resources"]["GPU"] == 4
    # Engines: pinned one per GPU in role order, outside Ray's GPU accounting, computing on the CPU.
    engines = placed["engines"]
    assert {role: [e["cuda_visible_devices"] for e in group] for role, group in engines.items()} == {
        "solver": ["0", "1"], "conjecturer": ["2"], "guide": ["3"]}
    every_engine = [e for group in engines.values() for e in group]
    assert all(e["ray_gpu_ids"] == [] and e["device"] == "cpu" and e["node_id"] == node["node_id"]
               for e in every_engine)
    assert len(placed["verifiers"]) == 2 and all(v["node_id"] == node["node_id"] for v in placed["verifiers"])

    # The Solver trained (the warm Solver solves some targets sometimes), so the learner ran:
    # 4 ranks, each holding one of the node's Ray GPUs and seeing all of them, DeepSpeed over gloo.
    learner = placed["learner"]["solver"]
    assert learner["iteration"] == 0 and learner["world_size"] == 4
    ranks = sorted(learner["ranks"], key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    assert sorted(gpu for r in ranks for gpu in r["ray_gpu_ids"]) == ["0", "1", "2", "3"]
    assert all(len(r["ray_gpu_ids"]) == 1 and r["cuda_visible_devices"] == "0,1,2,3" for r in ranks)
    assert {(r["device"], r["backend"], r["strategy"], r["node_id"]) for r in ranks} == {
        ("cpu", "gloo", "deepspeed", node["node_id"])}

    # Asleep for the training phase, awake again for the record phase on the new weights.
    log = read_jsonl(run_dir / ENGINE_SLEEP_FILE)
    assert [(line["event"], line["iteration"], line["phase"]) for line in log] == [
        ("sleep", 0, "train"), ("wake", 0, "record")]
    asleep, awake = log
    assert all(e["asleep"] and e["policy_version"] == 0 for group in asleep["engines"].values() for e in group)
    assert not any(e["asleep"] for group in awake["engines"].values() for e in group)
    conjecturer_trained = (run_dir / "checkpoints" / "conjecturer" / "iter_0000").is_dir()
    assert {role: [e["policy_version"] for e in group] for role, group in awake["engines"].items()} == {
        "solver": [1, 1], "conjecturer": [int(conjecturer_trained)], "guide": [0]}
    assert [e["cuda_visible_devices"] for e in awake["engines"]["solver"]] == ["0", "1"]
    # ...and they serve what the learner wrote (both fp32 on the CPU: the probe's gap is rounding).
    numbers = read_json(run_dir / "checkpoints" / "solver" / "iter_0000" / TRAIN_METRICS_FILE)
    assert numbers["probe_logprob_gap_mean"] < 1e-4


@pytest.mark.slow
@pytest.mark.full  # make test-full; not in CI
@pytest.mark.timeout(1800)
def test_cluster_of_simulated_gpu_nodes_places_by_node_and_survives_losing_one(tmp_path, warm_run):  # noqa: F811
    run_dir = tmp_path / "run"
    with LocalRayCluster() as cluster:
        address = cluster.start_head("--num-cpus=2", "--num-gpus=0")
        cluster.add_node("gpu-a", "--num-cpus=6", "--num-gpus=5")
        cluster.add_node("gpu-b", "--num-cpus=6", "--num-gpus=5")
        cluster.add_node("cpu", "--num-cpus=3", "--num-gpus=0", '--resources={"verifier_node": 1}')
        names = {node["NodeID"]: cluster.name_of(node) for node in cluster.wait_for(4)}

        # The cluster captures nobody else: no RAY_ADDRESS here, no address in /tmp/ray, and a plain
        # ray.init() (what lean_env's command line and the test fixtures call) starts its own cluster.
        assert "RAY_ADDRESS" not in os.environ and not default_address_file_names(address)
        plain = subprocess.run([sys.executable, "-c", "import json, ray; ray.init(num_cpus=1, include_dashboard=False, "
                                "logging_level='ERROR'); print(json.dumps(ray.cluster_resources()))"],
                               env=cluster.env, capture_output=True, text=True, timeout=300)
        assert plain.returncode == 0, plain.stderr[-2000:]
        seen = json.loads(plain.stdout.strip().splitlines()[-1])
        assert "verifier_node" not in seen and seen.get("GPU", 0) == 0

        run = start_cluster_run(tmp_path, cluster, warm_run, 10, f"run_dir={run_dir}")
        try:
            # As the prove phase starts, lose the node that runs the Solver's engine.
            started = run_dir / "iter_0000" / "phase_conjecture.done"
            deadline = time.monotonic() + 900
            while not started.exists() and run.poll() is None:
                assert time.monotonic() < deadline, "the run never reached the prove phase"
                time.sleep(0.05)
            before = read_json(run_dir / PLACEMENT_FILE)
            lost = names[before["engines"]["solver"][0]["node_id"]]
            cluster.kill(lost)
            run.wait(timeout=900)
        finally:
            run.kill()
            run.wait()
        assert run.returncode == 0, (tmp_path / "stderr").read_text()[-3000:]
        assert "cumulative solve rate on the 6 training targets:" in (tmp_path / "stdout").read_text()

        # Verifiers ran only on the node that declares verifier_node, engines only on GPU nodes.
        assert {names[v["node_id"]] for v in before["verifiers"]} == {"cpu"}
        assert {names[e["node_id"]] for group in before["engines"].values() for e in group} <= {"gpu-a", "gpu-b"}
        assert all(len(e["ray_gpu_ids"]) == 1 and e["device"] == "cpu"
                   for group in before["engines"].values() for e in group)
        # The lost engine was restarted, on the GPU node left, and its work redone: every problem has its k attempts.
        metrics = read_jsonl(run_dir / "metrics.jsonl")
        assert [m["iteration"] for m in metrics] == [0] and metrics[0]["faults/engine_restarts/solver"] >= 1
        survivor = ({"gpu-a", "gpu-b"} - {lost}).pop()
        after = read_json(run_dir / PLACEMENT_FILE)
        assert [names[e["node_id"]] for e in after["engines"]["solver"]] == [survivor]
        assert {n["node_id"]: n["alive"] for n in after["nodes"]}[before["engines"]["solver"][0]["node_id"]] is False
        store = Store.open(run_dir, None, yaml.safe_load((run_dir / "config.yaml").read_text()))
        try:
            attempts = store.attempts(0)
            assert {t.id for t in store.targets if not t.held_out} <= {a.problem_id for a in attempts}
            assert all(sum(a.problem_id == b.problem_id for a in attempts) == 4 for b in attempts)
            assert len({a.id for a in attempts}) == len(attempts)
        finally:
            store.close()
        # The learner's ranks, packed on one node (STRICT_PACK): the GPU node left.
        learner = after["learner"]["solver"]
        assert learner["world_size"] == 2 and {names[r["node_id"]] for r in learner["ranks"]} == {survivor}
    assert not cluster.leftover_pids(), "processes of the test's cluster outlived it"


@pytest.mark.slow
@pytest.mark.full  # make test-full; not in CI
@pytest.mark.timeout(1800)
def test_cluster_losing_the_learners_node_mid_training_trains_again_on_another(tmp_path, warm_run):  # noqa: F811
    """Three GPU nodes of 4 GPUs for three one-GPU engines and a learner of two ranks packed on one
    node (STRICT_PACK).  When the learner's node dies while the Solver trains (30 epochs, so that
    it still does when Ray Train has said it started), the training run starts again on another
    GPU node and the iteration completes, with the restart counted."""
    run_dir = tmp_path / "run"
    with LocalRayCluster() as cluster:
        cluster.start_head("--num-cpus=2", "--num-gpus=0")
        for name in ("gpu-a", "gpu-b", "gpu-c"):
            cluster.add_node(name, "--num-cpus=6", "--num-gpus=4")
        cluster.add_node("cpu", "--num-cpus=3", "--num-gpus=0", '--resources={"verifier_node": 1}')
        names = {node["NodeID"]: cluster.name_of(node) for node in cluster.wait_for(5)}

        def said() -> str:
            return (tmp_path / "stdout").read_text() + (tmp_path / "stderr").read_text()

        run = start_cluster_run(tmp_path, cluster, warm_run, 12, "training.epochs_per_iteration=30",
                                f"run_dir={run_dir}")
        try:
            # Ray Train's controller says so once the training function runs on the workers.
            deadline = time.monotonic() + 900
            while "Started training worker group" not in said() and run.poll() is None:
                assert time.monotonic() < deadline, "training never started"
                time.sleep(0.05)
            lost = cluster.node_running("ray::RayTrainWorker")
            assert lost in ("gpu-a", "gpu-b", "gpu-c"), lost
            cluster.kill(lost)
            run.wait(timeout=900)
        finally:
            run.kill()
            run.wait()
        assert run.returncode == 0, said()[-3000:]
        assert "lost its workers" in said() and "restart 1 of at most 2" in said()
        metrics = read_jsonl(run_dir / "metrics.jsonl")
        assert [m["iteration"] for m in metrics] == [0] and metrics[0]["faults/learner_restarts"] == 1
        # The ranks of the run that finished: packed on one GPU node, not the lost one.
        learner = read_json(run_dir / PLACEMENT_FILE)["learner"]["solver"]
        [node] = {names[r["node_id"]] for r in learner["ranks"]}
        assert learner["world_size"] == 2 and node in {"gpu-a", "gpu-b", "gpu-c"} - {lost}
    assert not cluster.leftover_pids(), "processes of the test's cluster outlived it"
