"""The supervision the verifier pool and the engine groups share
(:mod:`lean_env.supervised`), on a real Ray cluster with trivial actors, and
the settings and protocol both pools declare."""

from __future__ import annotations

import uuid

import pytest
import ray
from ray.exceptions import ActorAlreadyExistsError, RayActorError
from ray.util import placement_group_table

from lean_env.pool import VerifierPool, VerifierPoolSettings
from lean_env.streaming_pool import StreamingPool
from lean_env.supervised import SupervisedActors
from sgs.machinery.engines import EngineGroup, EngineGroupSettings


@ray.remote(num_cpus=0)
class Where:
    """A trivial actor that says which placement group holds it."""

    def group(self) -> str:
        return ray.get_runtime_context().get_placement_group_id()


def launch_where(index: int, in_bundle) -> ray.actor.ActorHandle:
    return Where.options(num_cpus=0.01, scheduling_strategy=in_bundle).remote()  # the whole bundle


def test_actors_start_in_their_own_bundle_and_a_replacement_takes_it_over(ray_session):
    actors = SupervisedActors("test actors", launch_where, count=2, bundle={"CPU": 0.01})
    try:
        assert len(actors) == 2 and placement_group_table(actors.placement_group)["state"] == "CREATED"
        first = [actors.start(index) for index in range(2)]
        group_id = actors.placement_group.id.hex()
        assert ray.get([actor.group.remote() for actor in first]) == [group_id, group_id]
        # Until an actor answered, the loading limit applies; then the steady one.
        assert actors.deadline_s(1, steady_s=5, loading_s=60) == 60
        actors.mark_answered(1)
        assert actors.deadline_s(1, steady_s=5, loading_s=60) == 5 and actors.answered(1)

        # Each bundle holds exactly one actor, so the replacement can only
        # start in the bundle its predecessor left.
        second = actors.replace(1)
        assert ray.get(second.group.remote(), timeout=30) == group_id and not actors.answered(1)
        assert actors.handles == [first[0], second]
        with pytest.raises(RayActorError):
            ray.get(first[1].group.remote(), timeout=30)
    finally:
        group = actors.placement_group
        actors.shutdown()
    assert actors.placement_group is None and actors.handles == []
    assert placement_group_table(group)["state"] == "REMOVED"
    with pytest.raises(RuntimeError, match="slot 0 of the test actors has no actor"):
        actors.handle(0)


def test_a_named_actor_is_replaced_under_its_own_name_however_fast(ray_session):
    """Engines are named (``engine-solver-0``); ``ray.kill`` returns before the name is free, and
    a replacement started at once was refused with ActorAlreadyExistsError in a loaded test run.
    Replaced back to back, every replacement starts, under the same name.  (The race shows only
    under load; the retry itself is tested below with a name freed late and one never freed.)"""
    name = f"test-named-{uuid.uuid4().hex[:8]}"

    def launch_named(index: int, in_bundle) -> ray.actor.ActorHandle:
        return Where.options(name=f"{name}-{index}", num_cpus=0.01, scheduling_strategy=in_bundle).remote()

    actors = SupervisedActors("named test actors", launch_named, count=1, bundle={"CPU": 0.01})
    try:
        actors.start(0)
        for _ in range(10):
            replacement = actors.replace(0)
            assert ray.get(replacement.group.remote(), timeout=30) == actors.placement_group.id.hex()
        assert ray.get_actor(f"{name}-0")._actor_id == replacement._actor_id
    finally:
        actors.shutdown()


@pytest.mark.parametrize("refusals, freed", [(3, True), (10**6, False)])
def test_a_replacement_waits_for_its_name_within_a_bound(ray_session, refusals, freed):
    """A name freed after three refusals: the replacement starts; one never freed: it gives up
    at the bound with Ray's error."""
    calls = []

    def launch(index: int, in_bundle) -> ray.actor.ActorHandle:
        calls.append(index)
        if len(calls) <= refusals:
            raise ActorAlreadyExistsError("The name x is already taken")
        return launch_where(index, in_bundle)

    actors = SupervisedActors("test actors", launch, count=1, bundle={"CPU": 0.01})
    try:
        if freed:
            started = actors.replace(0, name_release_timeout_s=30)
            assert len(calls) == refusals + 1 and actors.handles == [started]
        else:
            with pytest.raises(ActorAlreadyExistsError):
                actors.replace(0, name_release_timeout_s=0.3)
            assert len(calls) > 1   # tried again while the bound lasted
    finally:
        actors.shutdown()


def test_slots_the_cluster_cannot_hold_are_refused_by_name_and_nothing_is_left_reserved(ray_session):
    before = {group_id for group_id, group in placement_group_table().items() if group["state"] == "CREATED"}
    too_many = ray.cluster_resources()["CPU"] + 1
    with pytest.raises(RuntimeError, match=r"could not reserve 1 x \{'CPU': .*\} for the test actors within "
                                           r"1 s; the cluster has .* in total"):
        SupervisedActors("test actors", launch_where, count=1, bundle={"CPU": too_many}, start_timeout_s=1)
    after = {group_id for group_id, group in placement_group_table().items() if group["state"] == "CREATED"}
    assert after <= before


def test_both_pools_offer_the_streaming_protocol():
    members = {name for name in vars(StreamingPool) if not name.startswith("_")}
    assert members == {"outstanding", "poll", "waitables"}
    for pool in (VerifierPool, EngineGroup):
        assert all(hasattr(pool, member) for member in members), pool


@pytest.mark.parametrize("settings, problem", [
    (dict(num_workers=0), "num_workers"),
    (dict(timeout=0), "timeout"),
    (dict(pipeline_depth=0), "pipeline_depth"),
    (dict(audit_timeout=-1), "audit_timeout"),
])
def test_verifier_pool_settings_refuse_bad_values(settings, problem):
    with pytest.raises(ValueError, match=problem):
        VerifierPoolSettings(**settings)


def test_verifier_pool_settings_derive_the_bundle_and_the_audit_timeout():
    settings = VerifierPoolSettings(timeout=7, cpus_per_worker=0.5, memory_per_worker=2**30,
                                    bundle_resources={"verifier_node": 0.001})
    assert settings.bundle() == {"CPU": 0.5, "verifier_node": 0.001, "memory": 2**30}
    assert settings.audit_timeout_s == 21
    assert VerifierPoolSettings(audit_timeout=4).audit_timeout_s == 4


@pytest.mark.parametrize("settings, problem", [
    (dict(num_engines=0), "num_engines"),
    (dict(backend="tensorrt"), "unknown engine_backend 'tensorrt'"),
    (dict(num_cpus=0, num_gpus=0), "some resources"),
    (dict(heartbeat_interval_s=10, heartbeat_timeout_s=5), "heartbeat_interval_s < heartbeat_timeout_s"),
    (dict(max_chunk_retries=-1), "max_chunk_retries"),
    (dict(num_engines=2, gpu_ids=[0]), "gpu_ids pins each of the 2 engines"),
])
def test_engine_group_settings_refuse_bad_values(settings, problem):
    with pytest.raises(ValueError, match=problem):
        EngineGroupSettings(**settings)


def test_engine_group_settings_derive_the_bundle():
    assert EngineGroupSettings(num_cpus=2).bundle() == {"CPU": 2}
    assert EngineGroupSettings(num_cpus=1, num_gpus=0.5).bundle() == {"CPU": 1, "GPU": 0.5}
