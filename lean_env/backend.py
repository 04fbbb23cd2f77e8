"""The interface every prover backend implements.

A backend instance owns one prover process (plus, optionally, a warm spare)
and checks one task at a time; parallelism comes from running many instances
in the Ray verifier pool (``lean_env.pool``).
"""

from __future__ import annotations

import abc

from lean_env.verdict import ProofTask, Verdict


class ProverBackend(abc.ABC):
    """A single-threaded prover session.

    Implementations must never raise on bad *input*: hostile or garbled proof
    text becomes an ``invalid`` verdict, a hung prover a ``timeout`` verdict
    and a crashed prover a ``system_error`` verdict (after one retry on a fresh
    process).  They may raise on bad *configuration* (binary not found).
    """

    #: short name used in configs and on the command line ("lean", "rocq")
    name: str = ""

    @property
    @abc.abstractmethod
    def version(self) -> str:
        """Prover and checker version; part of every verdict-cache key."""

    @abc.abstractmethod
    def check_proof(self, task: ProofTask, timeout: float) -> Verdict:
        """Check ``task.proof`` as a proof of exactly ``task.statement``."""

    @abc.abstractmethod
    def check_statement(self, header: str, statement: str, timeout: float) -> Verdict:
        """Check that an untrusted ``statement`` is one well-formed theorem
        statement that elaborates under ``header`` with a placeholder proof
        (``sorry`` / ``Admitted``).  ``valid`` means it does."""

    def audit(self, task: ProofTask, timeout: float) -> Verdict:
        """A second opinion on a proof :meth:`check_proof` called ``valid``.

        Re-checks ``task`` through a path that shares as little as possible
        with the interactive session: the whole file compiled from scratch by
        the prover's batch compiler in a fresh sandbox, then its axioms listed
        by an independent tool (Rocq: ``coqc`` + ``coqchk``; Lean:
        ``lean -o`` + the trusted axiom checker).  Returns ``valid`` when that
        path accepts the proof too, and otherwise a verdict whose ``reason``
        says what it objected to.  Like ``check_proof``, never raises on bad
        input.
        """
        raise NotImplementedError(f"the {self.name} backend has no audit path")

    def prover_pids(self) -> list[int]:
        """Process ids of the live prover processes (for monitoring and for
        fault-injection tests); empty when none is running."""
        return []

    @abc.abstractmethod
    def close(self) -> None:
        """Kill every process this backend started.  Idempotent."""

    def __enter__(self) -> "ProverBackend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
