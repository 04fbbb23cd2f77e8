"""A learner whose workers Ray cannot place stops with an error naming what
it asked for and what the cluster has free, instead of waiting for ever:
Ray Train alone retries an unplaceable worker group without end (a test run
here waited nine minutes for its pytest timeout, 2026-11-30)."""

from __future__ import annotations

import time
import uuid

import pytest
import ray

from sgs.machinery.learner import RayTrainLearner, TrainJob, TrainSettings
from sgs.machinery.learner.board import JobBoard
from sgs.machinery.learner.driver import LearnerNotPlaced
from tests.integration.sgs.test_learner import (  # noqa: F401  (fixtures)
    checkpoint,
    make_examples,
    ray_cluster,
    tokenizer,
)


@ray.remote(num_cpus=1)
class CpuHolder:
    """Holds one of the cluster's CPUs while it lives."""

    def ready(self) -> bool:
        return True


def test_the_board_tells_whether_a_worker_has_taken_a_batch(ray_cluster):  # noqa: F811
    board = JobBoard.remote()
    number = ray.get(board.post.remote([{"job": 0}]))
    assert not ray.get(board.taken.remote(number))
    assert ray.get(board.next_batch.remote(0, 1.0)) == (number, [{"job": 0}])
    assert ray.get(board.taken.remote(number))
    ray.kill(board)


@pytest.mark.slow
def test_a_learner_ray_cannot_place_stops_naming_what_it_asked_and_what_is_free(  # noqa: F811
        ray_cluster, checkpoint, tokenizer, tmp_path):
    total = ray.cluster_resources()["CPU"]
    holders = [CpuHolder.remote() for _ in range(int(ray.available_resources().get("CPU", 0)))]
    ray.get([holder.ready.remote() for holder in holders])
    learner = RayTrainLearner(str(tmp_path / "state"), name=f"test-unplaced-{uuid.uuid4().hex[:8]}")
    job = TrainJob(make_examples(tokenizer)[:1], checkpoint, "ei", str(tmp_path / "iter_0000"), seed=0)
    try:
        with pytest.raises(LearnerNotPlaced) as raised:
            learner([job], settings=TrainSettings(learner_start_timeout_s=5), run_name="unplaced")
    finally:
        learner.close()
        for holder in holders:
            ray.kill(holder)
    message = str(raised.value)
    assert "1 Ray Train worker(s), each asking 1 CPU, 0 GPU, did not start within" in message
    assert "resources.learner_start_timeout_s=5)" in message and f"free of {total:g} CPU, 0 GPU" in message
    assert not (tmp_path / "iter_0000" / "config.json").exists()  # nothing trained, nothing written as trained
    # Ray Train's controller places the worker once the CPUs are free; the worker finds the board
    # gone and the run ends, giving the CPU back (checked so that no later test of this cluster waits).
    deadline = time.monotonic() + 180
    while ray.available_resources().get("CPU", 0) < total and time.monotonic() < deadline:
        time.sleep(1)
    assert ray.available_resources().get("CPU", 0) == total
