"""Gymnasium environments over the prover backends (SPEC §3.4).

* :class:`WholeProofEnv` — one step per episode: the observation is a problem
  (header and statement), the action is a complete proof body, the reward is 1
  if the prover accepts it and 0 otherwise.  Works with any backend.
* :class:`TacticEnv` — proof search at the tactic level on a backend's proof
  states: ``reset`` gives the goals, ``step(tactic)`` gives the new goals or an
  error; the episode ends, with reward 1, only when the prover reports the
  proof complete (no goals left is not enough on its own).  The backend is
  the Lean REPL, Rocq, or LeanDojo's ``Dojo`` (``backend="dojo"``, or a
  :class:`lean_env.dojo.DojoBackend`; problems then also carry ``url``,
  ``commit``, ``file_path`` and ``full_name``), with the same observations
  and rewards.

Both are registered with gymnasium (``lean_env/WholeProof-v0``,
``lean_env/Tactic-v0``) and, by :func:`register_rllib_envs`, with RLlib.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from lean_env.backend import ProverBackend
from lean_env.backends import BackendSpec
from lean_env.dojo import DojoBackend, DojoTheorem
from lean_env.verdict import ProofTask

#: every Unicode scalar value except surrogates: statements use ∀, ℕ, ⟨⟩, ...
_CHARSET = frozenset(chr(c) for c in range(1, 0x30000) if not 0xD800 <= c <= 0xDFFF)
MAX_TEXT = 65_536


class ProverText(spaces.Text):
    """A text space containing any prover statement or proof (every Unicode
    character but surrogates), with a short ``repr``."""

    def __init__(self, max_length: int = MAX_TEXT) -> None:
        super().__init__(max_length=max_length, min_length=0, charset=_CHARSET)

    def __repr__(self) -> str:
        return f"ProverText(max_length={self.max_length})"


def text_space(max_length: int = MAX_TEXT) -> ProverText:
    return ProverText(max_length)


class ByteCodec(gym.Wrapper):
    """Byte-level view of a text environment, for learners that need numeric
    spaces (RLlib's default modules): observations become the UTF-8 bytes of
    the text in a fixed-length ``uint8`` vector (zero-padded, cut at
    ``length``), actions a ``MultiDiscrete`` vector of byte values decoded up
    to the first zero byte (invalid UTF-8 is replaced, so the prover sees it
    and rejects it)."""

    def __init__(self, env: gym.Env, obs_length: int = 1024, action_length: int = 256) -> None:
        super().__init__(env)
        self.obs_length = obs_length
        self.observation_space = spaces.Box(0, 255, shape=(obs_length,), dtype=np.uint8)
        self.action_space = spaces.MultiDiscrete([256] * action_length)

    def _encode(self, text: str) -> np.ndarray:
        raw = text.encode("utf-8", "replace")[: self.obs_length]
        out = np.zeros(self.obs_length, dtype=np.uint8)
        out[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        return out

    @staticmethod
    def decode_action(action) -> str:
        raw = bytes(int(b) for b in np.asarray(action).ravel())
        return raw.split(b"\x00", 1)[0].decode("utf-8", "replace")

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return self._encode(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(self.decode_action(action))
        return self._encode(obs), reward, terminated, truncated, info


def _problems(problems: Sequence[dict | ProofTask]) -> list[ProofTask]:
    out = []
    for i, p in enumerate(problems):
        if isinstance(p, ProofTask):
            out.append(p)
            continue
        try:
            # ``theorem`` is the statement's key in Lean target files (D3k, tools/trace_targets.py)
            statement = p["statement"] if "statement" in p else p["theorem"]
            out.append(ProofTask(id=str(p["id"]), header=p["header"], statement=statement, proof=""))
        except (KeyError, TypeError) as e:
            raise ValueError(f"problem {i} needs the keys id, header, statement (or theorem): {e}") from e
    if not out:
        raise ValueError("an environment needs at least one problem")
    return out


class _ProverEnv(gym.Env):
    """Shared parts: the problem list, the lazily started backend, ``close``."""

    metadata = {"render_modes": []}

    def __init__(self, problems: Sequence[dict | ProofTask], backend: BackendSpec | ProverBackend,
                 timeout: float) -> None:
        if isinstance(backend, str):
            raise ValueError(f"backend {backend!r}: {type(self).__name__} takes a BackendSpec or a backend")
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
        self.last_verdict = None

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
        # timings stay out of ``info`` (same action, same info), in ``last_verdict``
        self.last_verdict = verdict
        reward = 1.0 if verdict.valid else 0.0
        info: dict[str, Any] = {"status": verdict.status.value, "reason": verdict.reason,
                                "messages": verdict.messages}
        return self._observation(), reward, True, False, info


@dataclass(frozen=True)
class _Step:
    """One tactic-mode answer, the same for every backend."""

    #: ``progress`` (goals remain), ``completed`` (proof closed and accepted),
    #: ``error`` (tactic refused; state unchanged), ``ended`` (timeout or
    #: infrastructure failure: the proof state is gone)
    kind: str
    goals: str
    messages: tuple[str, ...]
    reason: str


class _LeanTactics:
    """Tactic mode on the Lean REPL's proof states (``proofState`` ids)."""

    def __init__(self, backend, timeout: float) -> None:
        from lean_env.lean import TacticStatus

        self.backend, self.timeout, self._status = backend, timeout, TacticStatus
        self.state = None

    def _convert(self, r) -> _Step:
        S = self._status
        kind = {S.PROGRESS: "progress", S.COMPLETED: "completed", S.ERROR: "error"}.get(r.status, "ended")
        if r.state is not None:
            self.state = r.state
        return _Step(kind, "\n\n".join(r.goals), tuple(r.messages), r.reason)

    def start(self, problem: ProofTask) -> _Step:
        self.state = None
        return self._convert(self.backend.start_proof(problem.header, problem.statement, self.timeout))

    def step(self, tactic: str) -> _Step:
        return self._convert(self.backend.run_tactic(self.state, tactic, self.timeout))

    @staticmethod
    def body(script: list[str]) -> str:
        """The tactic script as the indented body of a ``by`` block."""
        return "\n".join("  " + line for t in script for line in t.splitlines())

    def recheck(self, problem: ProofTask, script: list[str]) -> bool:
        task = ProofTask(problem.id, problem.header, problem.statement, self.body(script))
        return self.backend.check_proof(task, self.timeout).valid


class _DojoTactics(_LeanTactics):
    """Tactic mode on LeanDojo's Dojo: the problem's theorem opened in its
    traced repository; the REPL's answers, so the same conversion."""

    def __init__(self, backend: DojoBackend, timeout: float, theorems: dict[str, DojoTheorem]) -> None:
        super().__init__(backend, timeout)
        self.theorems = theorems

    def start(self, problem: ProofTask) -> _Step:
        self.state = None
        return self._convert(self.backend.start_proof(self.theorems[problem.id], self.timeout))

    def recheck(self, problem: ProofTask, script: list[str]) -> bool:
        return self.backend.check_script(self.theorems[problem.id], self.body(script))


class _RocqTactics:
    """Tactic mode on the Rocq session (one open proof at a time)."""

    def __init__(self, backend, timeout: float) -> None:
        self.backend, self.timeout = backend, timeout

    @staticmethod
    def _convert(r) -> _Step:
        kind = {"goals": "progress", "finished": "completed", "error": "error"}.get(r.kind, "ended")
        reason = r.verdict.reason if r.verdict is not None else ""
        return _Step(kind, r.goals, tuple(r.messages), reason)

    def start(self, problem: ProofTask) -> _Step:
        return self._convert(self.backend.start_proof(problem.header, problem.statement, self.timeout))

    def step(self, tactic: str) -> _Step:
        return self._convert(self.backend.run_tactic(tactic, self.timeout))

    def recheck(self, problem: ProofTask, script: list[str]) -> bool:
        body = "Proof.\n" + "\n".join(script) + "\nQed."
        task = ProofTask(problem.id, problem.header, problem.statement, body)
        return self.backend.check_proof(task, self.timeout).valid


class TacticEnv(_ProverEnv):
    """Tactic-level proof search.

    Observation: the open goals as text.  Action: one tactic.  Reward 1 and the
    end of the episode when the prover reports the proof complete; with
    ``recheck`` the whole tactic script is then checked again as one proof
    (whole-proof mode) before the reward is paid.  A refused tactic leaves the
    state unchanged (reward 0).  A timeout or infrastructure failure ends the
    episode as truncated; ``max_steps`` tactics also truncate it.
    """

    def __init__(self, problems: Sequence[dict | ProofTask],
                 backend: BackendSpec | ProverBackend | DojoBackend | str,
                 timeout: float = 60.0, max_steps: int = 32, recheck: bool = True) -> None:
        if backend == "dojo":
            backend = DojoBackend()
        super().__init__(problems, backend, timeout)
        #: where each problem's theorem lives, for the Dojo backend
        self._theorems: dict[str, DojoTheorem] = {}
        if isinstance(backend, DojoBackend):
            for i, (raw, task) in enumerate(zip(problems, self.problems)):
                record = raw if isinstance(raw, Mapping) else {}
                self._theorems[task.id] = DojoTheorem.from_record(record, f"problem {i} ({task.id})")
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.max_steps = max_steps
        self.recheck = recheck
        self.observation_space = text_space()
        self.action_space = text_space(4096)
        self._tactics = None
        self._script: list[str] = []
        self._goals = ""
        self._over = True

    def _driver(self):
        if self._tactics is None:
            if isinstance(self.backend, DojoBackend):
                self._tactics = _DojoTactics(self.backend, self.timeout, self._theorems)
            else:
                cls = _LeanTactics if self.backend.name == "lean" else _RocqTactics
                self._tactics = cls(self.backend, self.timeout)
        return self._tactics

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self.problem = self._pick(options)
        self._script = []
        first = self._driver().start(self.problem)
        self._goals = first.goals[:MAX_TEXT]
        self._over = first.kind != "progress"
        info = {"id": self.problem.id, "kind": first.kind, "reason": first.reason,
                "messages": list(first.messages)}
        return self._goals, info

    def step(self, action: str):
        if self.problem is None or self._over:
            raise RuntimeError("the episode is over: call reset()")
        tactic = str(action)
        result = self._driver().step(tactic)
        reward, terminated, truncated = 0.0, False, False
        if result.kind in ("progress", "completed"):
            self._script.append(tactic)
            self._goals = result.goals[:MAX_TEXT]
        if result.kind == "completed":
            terminated = True
            reward = 1.0 if not self.recheck or self._recheck() else 0.0
        elif result.kind == "ended":
            truncated = True
        if not terminated and len(self._script) >= self.max_steps:
            truncated = True
        self._over = terminated or truncated
        info = {"kind": result.kind, "reason": result.reason, "messages": list(result.messages),
                "script": list(self._script)}
        return self._goals, reward, terminated, truncated, info

    def _recheck(self) -> bool:
        """Check the tactic script as one whole proof (the final word on validity)."""
        assert self.problem is not None
        return self._driver().recheck(self.problem, self._script)

    def close(self) -> None:
        if isinstance(self._backend, DojoBackend):
            self._backend.close()  # the episode's Dojo (its Lean process); the backend opens another on reset
        super().close()


ENV_IDS = {"lean_env/WholeProof-v0": WholeProofEnv, "lean_env/Tactic-v0": TacticEnv}


def register_envs() -> None:
    """Register the environments with gymnasium (idempotent)."""
    for env_id, cls in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=f"{cls.__module__}:{cls.__name__}")


def register_rllib_envs() -> None:
    """Register the environments with RLlib/Tune so an ``EnvRunner`` can build
    them by name from an ``env_config`` dict: ``problems``, ``backend`` (a
    backend name, or ``"dojo"`` for the tactic environment),
    ``backend_options``, ``timeout``, and ``byte_codec`` (default true: wrap in
    :class:`ByteCodec`, since RLlib's default modules cannot encode text)."""
    from ray.tune.registry import register_env

    def factory(cls):
        def make(env_config: dict):
            backend = env_config["backend"]
            if backend != "dojo":
                backend = BackendSpec(backend, dict(env_config.get("backend_options", {})))
            env = cls(env_config["problems"], backend, timeout=float(env_config.get("timeout", 60.0)))
            return ByteCodec(env) if env_config.get("byte_codec", True) else env
        return make

    for env_id, cls in ENV_IDS.items():
        register_env(env_id, factory(cls))


register_envs()
