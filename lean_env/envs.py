"""Gymnasium environments over the prover backends (SPEC §3.4).

* :class:`WholeProofEnv` — one step per episode: the observation is a problem
  (header and statement), the action is a complete proof body, the reward is 1
  if the prover accepts it and 0 otherwise.  Works with any backend.
* :class:`TacticEnv` — proof search at the tactic level on a backend's proof
  states: ``reset`` gives the goals, ``step(tactic)`` gives the new goals or an
  error; the episode ends, with reward 1, only when the prover reports the
  proof complete (no goals left is not enough on its own).

Both are registered with gymnasium (``lean_env/WholeProof-v0``,
``lean_env/Tactic-v0``) and, by :func:`register_rllib_envs`, with RLlib.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import gymnasium as gym
from gymnasium import spaces

from lean_env.backend import ProverBackend
from lean_env.backends import BackendSpec
from lean_env.verdict import ProofTask

#: every Unicode scalar value except surrogates: statements use ∀, ℕ, ⟨⟩, ...
_CHARSET = frozenset(chr(c) for c in range(1, 0x30000) if not 0xD800 <= c <= 0xDFFF)
MAX_TEXT = 65_536


def text_space(max_length: int = MAX_TEXT) -> spaces.Text:
    """A text space that contains any prover statement or proof."""
    return spaces.Text(max_length=max_length, min_length=0, charset=_CHARSET)


def _problems(problems: Sequence[dict | ProofTask]) -> list[ProofTask]:
    out = []
    for i, p in enumerate(problems):
        if isinstance(p, ProofTask):
            out.append(p)
            continue
        try:
            out.append(ProofTask(id=str(p["id"]), header=p["header"], statement=p["statement"], proof=""))
        except (KeyError, TypeError) as e:
            raise ValueError(f"problem {i} needs the keys id, header, statement: {e}") from e
    if not out:
        raise ValueError("an environment needs at least one problem")
    return out


class _ProverEnv(gym.Env):
    """Shared parts: the problem list, the lazily started backend, ``close``."""

    metadata = {"render_modes": []}

    def __init__(self, problems: Sequence[dict | ProofTask], backend: BackendSpec | ProverBackend,
                 timeout: float) -> None:
        self.problems = _problems(problems)
        self._spec = backend if isinstance(backend, BackendSpec) else None
        self._backend: Optional[ProverBackend] = None if self._spec else backend
        self.timeout = timeout
        self.problem: Optional[ProofTask] = None

    @property
    def backend(self) -> ProverBackend:
        if self._backend is None:
            assert self._spec is not None
            self._backend = self._spec.create()
        return self._backend

    def _pick(self, options: Optional[dict]) -> ProofTask:
        wanted = (options or {}).get("problem_id")
        if wanted is None:
            return self.problems[int(self.np_random.integers(len(self.problems)))]
        for p in self.problems:
            if p.id == str(wanted):
                return p
        raise ValueError(f"no problem with id {wanted!r}")

    def close(self) -> None:
        if self._backend is not None and self._spec is not None:
            self._backend.close()
            self._backend = None


class WholeProofEnv(_ProverEnv):
    """One-step environment: action = proof body, reward = 1 if valid."""

    def __init__(self, problems: Sequence[dict | ProofTask], backend: BackendSpec | ProverBackend,
                 timeout: float = 60.0) -> None:
        super().__init__(problems, backend, timeout)
        self.observation_space = text_space()
        self.action_space = text_space()

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self.problem = self._pick(options)
        return self._observation(), {"id": self.problem.id}

    def _observation(self) -> str:
        assert self.problem is not None
        return (self.problem.header + "\n\n" + self.problem.statement)[:MAX_TEXT]

    def step(self, action: str):
        if self.problem is None:
            raise RuntimeError("call reset() before step()")
        task = ProofTask(id=self.problem.id, header=self.problem.header,
                         statement=self.problem.statement, proof=str(action))
        verdict = self.backend.check_proof(task, self.timeout)
        reward = 1.0 if verdict.valid else 0.0
        info: dict[str, Any] = {"status": verdict.status.value, "reason": verdict.reason,
                                "messages": verdict.messages, "seconds": verdict.seconds}
        return self._observation(), reward, True, False, info


ENV_IDS = {"lean_env/WholeProof-v0": WholeProofEnv}


def register_envs() -> None:
    """Register the environments with gymnasium (idempotent)."""
    for env_id, cls in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=f"{cls.__module__}:{cls.__name__}")


def register_rllib_envs() -> None:
    """Register the environments with RLlib/Tune so an ``EnvRunner`` can build
    them by name from an ``env_config`` dict (``problems``, ``backend``,
    ``backend_options``, ``timeout``)."""
    from ray.tune.registry import register_env

    def factory(cls):
        def make(env_config: dict):
            spec = BackendSpec(env_config["backend"], dict(env_config.get("backend_options", {})))
            return cls(env_config["problems"], spec, timeout=float(env_config.get("timeout", 60.0)))
        return make

    for env_id, cls in ENV_IDS.items():
        register_env(env_id, factory(cls))


register_envs()
