"""Engine faults: lost work is redone, never dropped.

Real engine actors (transformers backend, a tiny random Llama) are killed
with SIGKILL or frozen with SIGSTOP while they hold chunks.  The group must
restart them on its current weights, redo their chunks with the same samples
an undisturbed run gives, stop retrying a chunk that keeps losing its actor,
and leave alone an actor that is merely busy.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from dataclasses import replace

import pytest
import ray

from sgs.machinery.engines import EngineFailure, EngineGroup, EngineGroupSettings, SamplingSettings
from sgs.machinery.engines.actor import CONTROL_GROUP
from sgs.machinery.engines.hf import TransformersEngine
from sgs.machinery.streaming import CHUNKS_PER_ENGINE, Request, stream, submit

PROMPTS = [f"Lemma l{i} : {i} + 0 = {i}.\nProof." for i in range(8)]
SETTINGS = SamplingSettings(n=2, max_tokens=24, seed=5)


@contextlib.contextmanager
def engine_group(checkpoint, max_batch_size=64, **options):
    settings = EngineGroupSettings(num_cpus=0.5, engine_options={"device": "cpu", "max_batch_size": max_batch_size},
                                   **options)
    group = EngineGroup("faults", checkpoint, settings)
    try:
        yield group
    finally:
        group.shutdown()


def process_id(group: EngineGroup, index: int) -> int:
    return ray.get(group.actors[index].process_id.remote())


def drain(group: EngineGroup) -> dict:
    """Poll until every submitted chunk is back; {chunk id: samples}, each id once."""
    chunks = {}
    while group.outstanding:
        for key, samples in group.poll(timeout=1.0):
            assert key not in chunks, f"chunk {key} was handed back twice"
            chunks[key] = samples
    return chunks


def token_ids(samples_per_prompt) -> list[list[list[int]]]:
    return [[sample.token_ids for sample in samples] for samples in samples_per_prompt]


@pytest.mark.slow
def test_a_killed_actor_is_restarted_on_the_current_weights_and_its_chunks_redone(
        ray_session, checkpoint, other_checkpoint):
    """Two deaths in one group of two actors: one dead when new weights are loaded, one that
    dies holding chunks."""
    with engine_group(checkpoint, num_engines=2, heartbeat_interval_s=0.5, heartbeat_timeout_s=30.0) as group:
        # load_weights restarts a dead actor on the new checkpoint.
        killed = process_id(group, 1)
        os.kill(killed, signal.SIGKILL)
        group.load_weights(other_checkpoint, policy_version=1)
        assert group.stats.actor_restarts == 1 and process_id(group, 1) != killed
        assert group.policy_version == 1
        # The restarted actor (it runs the second chunk) samples what an engine on the new checkpoint does.
        remote = group.generate(PROMPTS[:4], SETTINGS, chunk_size=2)
        local = TransformersEngine(other_checkpoint, device="cpu")
        expected = local.generate(PROMPTS[2:4], replace(SETTINGS, seed=SETTINGS.seed + 2))
        assert token_ids(remote[2:4]) == token_ids(expected)
        # Both actors serve the new weights, and keep them through sleep / wake_up.
        probe = (expected[0][0].prompt_token_ids, expected[0][0].token_ids)
        served = group.served_logprobs(*probe)
        assert len(served) == 2
        assert all(logprobs == pytest.approx(local.logprobs_of(*probe), abs=1e-5) for logprobs in served)
        group.sleep()
        group.wake_up()
        assert token_ids(group.generate(PROMPTS[:4], SETTINGS, chunk_size=2)) == token_ids(remote)

        # An actor killed while it holds chunks is restarted on the current weights, its chunks redone.
        undisturbed = group.generate(PROMPTS, SETTINGS, chunk_size=2)
        killed = process_id(group, 0)

        submitted = group.submit(PROMPTS, SETTINGS, chunk_size=2)
        os.kill(killed, signal.SIGKILL)  # actor 0 holds the first and third chunk, neither finished
        chunks = drain(group)

        assert sorted(chunks) == [key for key, _ in submitted]
        redone = [[] for _ in PROMPTS]
        for key, indices in submitted:
            for index, samples in zip(indices, chunks[key]):
                redone[index] = samples
        assert token_ids(redone) == token_ids(undisturbed)
        assert {sample.policy_version for samples in redone for sample in samples} == {1}
        # One restart for each death; only the second held chunks.
        assert (group.stats.actor_restarts, group.stats.chunks_resubmitted, group.stats.hung_actors) == (2, 2, 0)
        # The replacement is a new process under the old name, serving the reloaded weights.
        assert process_id(group, 0) != killed
        assert ray.get(ray.get_actor("engine-faults-0").policy_version.remote()) == 1
        assert group.policy_version == 1


@pytest.mark.slow
def test_a_stopped_actor_misses_its_heartbeat_and_the_loop_still_gets_every_sample(ray_session, checkpoint):
    with engine_group(checkpoint, num_engines=1, heartbeat_interval_s=0.2, heartbeat_timeout_s=3.0) as group:
        # The chunks streaming.submit cuts for one engine, so that the seeds agree.
        undisturbed = group.generate(PROMPTS, SETTINGS, chunk_size=math.ceil(len(PROMPTS) / CHUNKS_PER_ENGINE))
        stopped = process_id(group, 0)
        requests = [Request(prompt=p, sample_ids=[f"{i}/a0", f"{i}/a1"], item=i) for i, p in enumerate(PROMPTS)]
        received = {}
        try:
            pending = submit(group, requests, SETTINGS)
            os.kill(stopped, signal.SIGSTOP)
            stream(pending, lambda request, sample_id, sample: received.setdefault(sample_id, sample))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGKILL)

        assert sorted(received) == sorted(sample_id for r in requests for sample_id in r.sample_ids)
        assert [[received[f"{i}/a{j}"].token_ids for j in range(2)] for i in range(8)] == token_ids(undisturbed)
        assert (group.stats.hung_actors, group.stats.actor_restarts) == (1, 1)
        assert group.stats.chunks_resubmitted == len(pending.requests)
        assert process_id(group, 0) != stopped


@pytest.mark.slow
def test_a_chunk_that_keeps_losing_its_actor_ends_with_an_error_naming_it(ray_session, checkpoint):
    with engine_group(checkpoint, num_engines=1, max_chunk_retries=1) as group:
        [(key, _)] = group.submit(PROMPTS, SamplingSettings(n=4, max_tokens=64, seed=1))
        with pytest.raises(EngineFailure) as failure:
            for _ in range(2):  # the first loss and max_chunk_retries more
                os.kill(process_id(group, 0), signal.SIGKILL)
                restarts = group.stats.actor_restarts
                while group.stats.actor_restarts == restarts:
                    assert group.poll(timeout=1.0) == [], "the chunk came back although its actor was killed"
        message = str(failure.value)
        assert "'faults'" in message and f"chunk {key}" in message and "2 times" in message
        assert message.count("ActorDiedError") == 2
        # The failed chunk is dropped; the group itself has a fresh actor and keeps working.
        assert group.outstanding == 0 and group.stats.actor_restarts == 2
        assert len(group.generate(PROMPTS[:1], SETTINGS)[0]) == 2


@pytest.mark.slow
def test_a_long_generate_with_a_live_heartbeat_is_not_killed(ray_session, checkpoint):
    # Heartbeats every 0.2 s may go unanswered for 1 s; the one chunk below runs
    # far longer: 32 samples of up to 100 tokens decoded one sample at a time
    # (a few seconds here).
    with engine_group(checkpoint, max_batch_size=1, num_engines=1, heartbeat_interval_s=0.2,
                      heartbeat_timeout_s=1.0) as group:
        before = process_id(group, 0)
        prompts = PROMPTS
        results = group.generate(prompts, SamplingSettings(n=4, max_tokens=100, seed=2))
        assert [len(samples) for samples in results] == [4] * len(prompts)
        assert (group.stats.actor_restarts, group.stats.hung_actors) == (0, 0)
        assert process_id(group, 0) == before


@ray.remote(num_cpus=0, concurrency_groups={CONTROL_GROUP: 1})
class LateHeartbeatActor:
    """Test double of EngineActor: its model takes ``load_s`` to load, and its
    heartbeat thread answers ``lag_s`` after its first call does.  A loaded CI
    machine produced this order with real vLLM engines."""

    def __init__(self, load_s: float, lag_s: float) -> None:
        time.sleep(load_s)
        self._lag_s = lag_s

    def policy_version(self) -> int:
        return 0

    @ray.method(concurrency_group=CONTROL_GROUP)
    def heartbeat(self) -> None:
        time.sleep(self._lag_s)


def test_a_restarted_actor_is_not_charged_its_load_time_as_a_missed_heartbeat(ray_session, checkpoint):
    # The pings sent while the new actors load are answered only after the
    # actors' first answers, by then 2 s old against a 1 s heartbeat limit.
    with engine_group(checkpoint, num_engines=2, heartbeat_interval_s=0.2, heartbeat_timeout_s=1.0) as group:
        group._actors._launch = lambda index, in_bundle: LateHeartbeatActor.options(
            scheduling_strategy=in_bundle).remote(load_s=2.0, lag_s=0.3)
        group.rebuild(checkpoint, policy_version=0)
        assert (group.stats.actor_restarts, group.stats.hung_actors) == (2, 0)


def test_colocated_engines_see_only_their_pinned_gpu_also_after_a_restart_and_an_engine_error_is_raised(
        ray_session, checkpoint):
    # No GPU here: what is checked is the pinning itself, which Ray would otherwise reset to "" for
    # actors that reserve no GPU.
    with engine_group(checkpoint, num_engines=2, gpu_ids=[3, 5], heartbeat_interval_s=0.5,
                      heartbeat_timeout_s=30.0) as group:
        # An engine's own error is raised, not mistaken for a lost actor.
        with pytest.raises(ValueError, match="max_model_len"):
            group.generate(["Theorem " * 200], SETTINGS)
        assert group.outstanding == 0 and group.stats.actor_restarts == 0
        assert len(group.generate(PROMPTS[:1], SETTINGS)[0]) == 2

        placed = group.placement()
        assert [p["cuda_visible_devices"] for p in placed] == ["3", "5"]
        assert [p["ray_gpu_ids"] for p in placed] == [[], []]  # pinned outside Ray's GPU accounting
        # A sleeping engine refuses to generate or load (a vLLM engine has nothing on its GPU then).
        group.sleep()
        assert all(p["asleep"] for p in group.placement())
        with pytest.raises(Exception, match="generate on a sleeping engine"):
            group.generate(PROMPTS[:1], SETTINGS)
        group.wake_up()
        os.kill(process_id(group, 1), signal.SIGKILL)
        group.load_weights(checkpoint, policy_version=1)
        assert group.stats.actor_restarts == 1
        after = group.placement()
        assert after[1]["cuda_visible_devices"] == "5" and after[1]["pid"] != placed[1]["pid"]
        assert [p["policy_version"] for p in after] == [1, 1] and not any(p["asleep"] for p in after)
    with pytest.raises(ValueError, match="give 2 ids and num_gpus=0"):
        EngineGroup("solver", checkpoint, EngineGroupSettings(num_engines=2, gpu_ids=[0]))
