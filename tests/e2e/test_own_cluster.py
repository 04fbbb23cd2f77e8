"""A run's Ray workers find their own cluster when other Ray clusters run on the
same machine (a second run, a test, a notebook): Ray Train's placement-group
cleaner then neither prints "Found multiple active Ray instances" with its
traceback in every training phase nor asks another cluster about the run
(:func:`sgs.machinery.runtime.own_cluster_runtime_env`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import ray.cloudpickle

from sgs.machinery.runtime import own_cluster_runtime_env
from tests.local_ray_cluster import LocalRayCluster
from tests.paths import REPO


#: One training phase as the product runs it: its config, :func:`start_ray`, and one
#: Ray Train run of the learner on a tiny model.
TRAINING_PHASE = textwrap.dedent("""
    import os
    import sys
    from pathlib import Path

    import ray
    from hydra import compose, initialize_config_dir

    from sgs import config as C
    from sgs.config import to_schema
    from sgs.machinery.learner import TrainExample, train
    from sgs.machinery.models.tiny import TinyModelSettings, build_tiny_model
    from sgs.machinery.runtime import start_ray, train_settings

    out = Path(sys.argv[1])
    with initialize_config_dir(config_dir=str(C.CONFIG_DIR), version_base="1.3"):
        cfg = to_schema(compose(config_name=C.CONFIG_NAME, overrides=["resources.num_cpus=2"]))
    tiny = TinyModelSettings(vocab_size=320, hidden_size=64, intermediate_size=128, num_attention_heads=2,
                             num_key_value_heads=2, max_position_embeddings=128)
    checkpoint = str(build_tiny_model(out / "model", [], tiny, seed=0))
    start_ray(cfg)
    address = ray.remote(num_cpus=0)(lambda: os.environ.get("RAY_ADDRESS")).remote()
    print("a worker's RAY_ADDRESS is its cluster's:", ray.get(address) == ray.get_runtime_context().gcs_address)
    examples = [TrainExample([5, 6, 7], [8 + i, 9, 10], 1.0) for i in range(4)]
    result = train(examples, base_checkpoint=checkpoint, objective="reinforce", settings=train_settings(cfg),
                   output_dir=str(out / "trained"), run_name="own-cluster")
    print("trained in", result.metrics.num_steps, "step(s)", flush=True)
""")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_training_phase_beside_another_ray_cluster_prints_no_traceback(tmp_path):
    with LocalRayCluster() as other:
        other.start_head("--num-cpus=1")
        # No RAY_ADDRESS: the run starts its own cluster.  On a busy machine a raylet may wait
        # longer than Ray's default for its dashboard agent (which then ends the raylet).
        env = {"RAY_agent_register_timeout_ms": "300000", **other.env, "PYTHONUNBUFFERED": "1"}
        run = subprocess.run([sys.executable, "-c", TRAINING_PHASE, str(tmp_path)], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=840)
    said = run.stdout + run.stderr
    assert run.returncode == 0, said[-4000:]
    assert "trained in 1 step(s)" in run.stdout, said[-4000:]
    for sign in ("Found multiple active Ray instances", "Could not find any running Ray instance",
                 "PlacementGroupCleaner", "ray/util/state/"):
        assert sign not in said, around(said, sign)
    # The one traceback a busy machine may still show: Ray Train's controller logs it when its
    # resource request times out, and says that it is harmless then.
    unexplained = [block for block in said.split("Traceback")[1:] if "send_resource_request" not in block[:600]]
    assert not unexplained, around(said, "Traceback")
    assert "a worker's RAY_ADDRESS is its cluster's: True" in run.stdout, run.stdout[-3000:]


def around(text: str, sign: str) -> str:
    """The part of ``text`` around the first ``sign``, for a failure's message."""
    at = text.find(sign)
    return text[max(at - 1500, 0):at + 2500]


def test_every_worker_is_told_its_own_cluster_unless_ray_would_not_run_the_hook(monkeypatch):
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    assert callable(own_cluster_runtime_env()["worker_process_setup_hook"])
    assert callable(own_cluster_runtime_env("10.0.0.1:6379")["worker_process_setup_hook"])
    # Ray Client runs no driver-side hook export; a Ray Job that sets its own hook would clash with ours.
    assert own_cluster_runtime_env("ray://head:10001") is None
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR",
                       json.dumps({"runtime_env": {"worker_process_setup_hook": "their.hook"}}))
    assert own_cluster_runtime_env() is None
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps({"runtime_env": {"env_vars": {"A": "1"}}}))
    assert own_cluster_runtime_env() is not None


def test_the_hook_travels_by_value_and_never_fails_a_worker(tmp_path):
    """A worker runs the hook without importing sgs (torch, transformers...), and a hook
    that raised would end the worker: outside Ray it does nothing and says nothing."""
    hook = tmp_path / "hook.pkl"
    hook.write_bytes(ray.cloudpickle.dumps(own_cluster_runtime_env()["worker_process_setup_hook"]))
    code = ("import os, pickle, sys; hook = pickle.loads(open(sys.argv[1], 'rb').read()); hook(); "
            "print(sorted(m for m in sys.modules if m.startswith('sgs')), os.environ.get('RAY_ADDRESS'))")
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    run = subprocess.run([sys.executable, "-c", code, str(hook)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["[]", "None"], run.stdout + run.stderr[-3000:]
