"""The protocol of a pool of Ray actors that work streams through: the
verifier pool (:class:`lean_env.pool.VerifierPool`) and an engine group
(:class:`sgs.machinery.engines.EngineGroup`) both offer it, and
:mod:`sgs.machinery.streaming` relies on nothing else.

Work goes in with the pool's own ``submit`` (its arguments differ: a proof
to check, prompts to sample); what is done comes back from :meth:`poll`, and
the caller may wait on both pools at once through :meth:`waitables`.  Lost
actors are the pool's business: a poll never returns a loss, only results.
Test doubles that answer from tables satisfy it too (they return no
waitables, and the caller then polls).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class StreamingPool(Protocol):
    """Results of submitted work as they become ready."""

    @property
    def outstanding(self) -> int:
        """Work submitted and not yet handed back by :meth:`poll`."""

    def poll(self, timeout: float = 0.0) -> list[Any]:
        """The results ready now, waiting up to ``timeout`` seconds for the
        first; each is handed back once."""

    def waitables(self) -> list[Any]:
        """Ray object refs whose readiness means a :meth:`poll` would return
        something (empty when the pool cannot say: then poll)."""
