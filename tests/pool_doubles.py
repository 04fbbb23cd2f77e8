"""Test doubles for the verifier pool's audit, built on the real Rocq backend
(the first check is real; only the second opinion is replaced).  They live in
a module of their own so that Ray workers can import them by name."""

from __future__ import annotations

from lean_env.backend import ProverBackend
from lean_env.backends import BackendSpec
from lean_env.rocq import RocqBackend, RocqConfig
from lean_env.verdict import ProofTask, Status, Verdict


class DisagreeingAuditBackend(RocqBackend):
    """Test double: a real Rocq backend whose audit rejects every proof, to
    exercise the pool's handling of a disagreement."""

    def audit(self, task: ProofTask, timeout: float) -> Verdict:
        return Verdict(Status.INVALID, reason="audit_test_double_disagrees", messages=["the double always objects"])


class NoAuditBackend(RocqBackend):
    """Test double: a real Rocq backend with no audit path (the interface's
    default, as for a backend that has not implemented one)."""

    def audit(self, task: ProofTask, timeout: float) -> Verdict:
        return ProverBackend.audit(self, task, timeout)


class DisagreeingAuditSpec(BackendSpec):
    """Builds :class:`DisagreeingAuditBackend` on each worker."""

    def create(self) -> ProverBackend:
        return DisagreeingAuditBackend(RocqConfig(**self.options))


class NoAuditSpec(BackendSpec):
    """Builds :class:`NoAuditBackend` on each worker."""

    def create(self) -> ProverBackend:
        return NoAuditBackend(RocqConfig(**self.options))
