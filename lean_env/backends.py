"""Choosing a prover backend by name: the picklable recipe a Ray worker uses
to build its own backend instance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lean_env.backend import ProverBackend

BACKENDS = ("lean", "rocq")


@dataclass(frozen=True)
class BackendSpec:
    """Which backend to build and with which settings.

    ``options`` are the fields of the backend's config dataclass
    (:class:`lean_env.lean.LeanConfig` or :class:`lean_env.rocq.RocqConfig`).
    """

    name: str
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in BACKENDS:
            raise ValueError(f"unknown prover backend {self.name!r}; choose one of {', '.join(BACKENDS)}")

    def check(self) -> None:
        """Build the backend's config and the command line of its prover process
        (for Rocq also ask ``coqtop -v``, which every worker does first; Lean's
        REPL starts nothing until it is given a header); raises ``ValueError``
        (``LeanConfigError``, ``RocqConfigError``, ``TypeError`` for an unknown
        option) naming the problem.  Drivers call this before starting workers,
        so that a bad setting is one clear error rather than every worker dying."""
        if self.name == "rocq":
            from lean_env.rocq import RocqConfig

            config = RocqConfig(**self.options)
            config.argv()
            config.probe_version()
        else:
            from lean_env.lean import LeanConfig

            LeanConfig(**self.options).argv()

    def create(self) -> ProverBackend:
        if self.name == "rocq":
            from lean_env.rocq import RocqBackend, RocqConfig

            return RocqBackend(RocqConfig(**self.options))
        from lean_env.lean import LeanBackend, LeanConfig

        return LeanBackend(LeanConfig(**self.options))
