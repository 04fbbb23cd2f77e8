"""One worker of the verifier pool (:mod:`lean_env.pool`): a Ray actor that
owns one :class:`~lean_env.backend.ProverBackend` (a prover process plus its
spare) and checks one task at a time, a proof, a statement or an audit.
"""

from __future__ import annotations

import os

import ray

from lean_env.backends import BackendSpec
from lean_env.verdict import ProofTask, Status, Verdict

#: The kinds of check a worker runs.
PROOF = "proof"
STATEMENT = "statement"
AUDIT = "audit"


@ray.remote(max_restarts=0, max_task_retries=0)
class VerifierWorker:
    """A Ray actor owning one prover backend; checks one task at a time."""

    def __init__(self, spec: BackendSpec, worker_name: str) -> None:
        self.name = worker_name
        self.backend = spec.create()

    def ready(self) -> str:
        """Returns the backend version once the prover has started."""
        return self.backend.version

    def check(self, kind: str, task: ProofTask, timeout: float) -> Verdict:
        if kind == STATEMENT:
            # only a task with a load path passes one: backends without the notion keep their signature
            extra = {"load_path": task.load_path} if task.load_path else {}
            verdict = self.backend.check_statement(task.header, task.statement, timeout, **extra)
        elif kind == AUDIT:
            try:
                verdict = self.backend.audit(task, timeout)
            except NotImplementedError as e:
                verdict = Verdict(Status.SYSTEM_ERROR, reason="audit_unavailable", messages=[str(e)])
        else:
            verdict = self.backend.check_proof(task, timeout)
        verdict.worker = self.name
        return verdict

    def process_ids(self) -> dict[str, object]:
        """This actor's pid and its prover's pids (used by fault-injection tests)."""
        return {"actor": os.getpid(), "prover": self.backend.prover_pids()}

    def placement(self) -> dict[str, object]:
        """The node this actor runs on and its pid (for the run's placement record)."""
        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def placement_group_id(self) -> str | None:
        """Hex id of the placement group this actor was scheduled in (for tests and diagnostics)."""
        group = ray.get_runtime_context().get_placement_group_id()
        return group if group is None else str(group)

    def shutdown(self) -> None:
        self.backend.close()
