"""The gymnasium environments: whole-proof and tactic-level, on real Rocq and
(tactic mode) on the Lean REPL test double; gymnasium's checker; RLlib."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from lean_env.backends import BackendSpec
from lean_env.envs import ByteCodec, TacticEnv, WholeProofEnv, register_rllib_envs

HEADER = "Require Import Arith Lia."
PROBLEMS = [
    {"id": "add0", "header": HEADER, "statement": "Theorem add0 : forall n : nat, n + 0 = n."},
    {"id": "and_comm'", "header": HEADER, "statement": "Theorem and_comm' : forall P Q : Prop, P /\\ Q -> Q /\\ P."},
]


@pytest.fixture
def whole(require_rocq):
    env = WholeProofEnv(PROBLEMS, BackendSpec("rocq"), timeout=20)
    yield env
    env.close()


@pytest.fixture
def tactic(require_rocq):
    env = TacticEnv(PROBLEMS, BackendSpec("rocq"), timeout=20, max_steps=4)
    yield env
    env.close()


def test_whole_proof_rewards(whole):
    obs, info = whole.reset(options={"problem_id": "add0"})
    assert "n + 0 = n" in obs and info["id"] == "add0"
    _, reward, terminated, truncated, info = whole.step("Proof. intros. lia. Qed.")
    assert (reward, terminated, truncated, info["status"]) == (1.0, True, False, "valid")
    whole.reset(options={"problem_id": "add0"})
    _, reward, _, _, info = whole.step("Proof. Admitted.")
    assert reward == 0.0 and info["status"] == "invalid"


def test_whole_proof_passes_the_gymnasium_checker(whole):
    check_env(whole, skip_render_check=True)


def test_tactic_env_steps_to_completion(tactic):
    goals, info = tactic.reset(options={"problem_id": "and_comm'"})
    assert "P /\\ Q -> Q /\\ P" in goals and info["kind"] == "progress"
    goals, reward, terminated, _, info = tactic.step("intros P Q [HP HQ].")
    assert info["kind"] == "progress" and reward == 0.0 and not terminated and "HP" in goals
    _, reward, terminated, _, info = tactic.step("no_such_tactic.")
    assert info["kind"] == "error" and reward == 0.0 and not terminated
    _, reward, terminated, truncated, info = tactic.step("split; assumption.")
    assert (info["kind"], reward, terminated, truncated) == ("completed", 1.0, True, False)
    assert info["script"] == ["intros P Q [HP HQ].", "split; assumption."]
    with pytest.raises(RuntimeError, match="reset"):
        tactic.step("idtac.")


def test_tactic_env_truncates_after_max_steps(tactic):
    tactic.reset(options={"problem_id": "add0"})
    for _ in range(4):
        _, _, terminated, truncated, _ = tactic.step("idtac.")
    assert truncated and not terminated


def test_tactic_env_passes_the_gymnasium_checker(tactic):
    check_env(tactic, skip_render_check=True)


def test_tactic_env_on_lean_repl_proof_states():
    from tests.lean.lean_support import FIXTURES, replay_command

    if not FIXTURES.is_dir():
        pytest.skip("shared/fixtures is not beside the checkout")
    spec = BackendSpec("lean", {"repl_command": replay_command("mathlib/exact"), "spare": False,
                                "axiom_check": "repl", "timeout": 30.0, "header_timeout": 30.0})
    # recheck=False: the replay double only knows the recorded tactic-mode
    # requests, not the whole-proof re-check.
    env = TacticEnv([{"id": "test", "header": "import Mathlib", "statement": "theorem test : 0 < 1 := by"}],
                    spec, timeout=30, recheck=False)
    try:
        goals, _ = env.reset()
        assert goals == "⊢ 0 < 1"
        _, reward, terminated, _, info = env.step("exact?")
        assert (reward, terminated, info["kind"]) == (1.0, True, "completed")
    finally:
        env.close()


def test_tactic_env_with_the_lean_stand_in_rechecks_the_whole_script():
    """The Lean REPL stand-in (a test double that judges any proof by its rule)
    drives a whole episode, including the whole-proof re-check the replay cannot answer."""
    from tests.unit.lean_env.test_lean_standin import HEADER, standin_command

    spec = BackendSpec("lean", {"repl_command": standin_command(), "spare": False, "axiom_check": "repl",
                                "timeout": 30.0, "header_timeout": 30.0})
    env = TacticEnv([{"id": "t", "header": HEADER, "statement": "theorem t : ∀ n : ℕ, n + 2 > n := by"}],
                    spec, timeout=30)
    try:
        goals, _ = env.reset()
        assert goals == "⊢ ∀ n : ℕ, n + 2 > n"
        goals, reward, terminated, _, info = env.step("intro n")
        assert (goals, reward, terminated) == ("n : ℕ\n⊢ n + 2 > n", 0.0, False)
        assert env.step("ring")[1:3] == (0.0, False)          # refused: the state is unchanged
        _, reward, terminated, _, info = env.step("omega")
        assert (reward, terminated, info["kind"]) == (1.0, True, "completed")
    finally:
        env.close()


def test_byte_codec_roundtrip():
    assert ByteCodec.decode_action(np.array([104, 105, 0, 120])) == "hi"
    assert ByteCodec.decode_action(np.array([255, 0])) == "\ufffd"


def test_bad_problems_are_refused():
    with pytest.raises(ValueError, match="at least one problem"):
        WholeProofEnv([], BackendSpec("rocq"))
    with pytest.raises(ValueError, match="id, header, statement"):
        WholeProofEnv([{"id": "x"}], BackendSpec("rocq"))


@pytest.mark.slow
def test_rllib_env_runner_samples_episodes(require_rocq, ray_session):
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    register_rllib_envs()
    config = (PPOConfig()
              .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
              .environment("lean_env/WholeProof-v0",
                           env_config={"problems": PROBLEMS, "backend": "rocq", "timeout": 20})
              .env_runners(num_env_runners=0, num_envs_per_env_runner=1))
    runner = SingleAgentEnvRunner(config=config)
    try:
        episodes = runner.sample(num_episodes=2, random_actions=True)
        assert len(episodes) == 2
        assert all(e.get_return() == 0.0 for e in episodes)  # random bytes never prove anything
    finally:
        runner.stop()


def test_gymnasium_registration():
    assert "lean_env/WholeProof-v0" in gym.registry and "lean_env/Tactic-v0" in gym.registry
