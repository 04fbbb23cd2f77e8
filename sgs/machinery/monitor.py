"""Live numbers of a running phase on the Ray dashboard (``ray.util.metrics``).

The per-iteration metrics (``metrics.jsonl``, wandb) say how an iteration
went once it is over; these gauges say what the run is doing now, updated
while a phase runs (at most every ``min_interval_s``):

=============================  =================================================
gauge                          value
=============================  =================================================
``sgs_iteration``              the running iteration
``sgs_phase``                  1 for the running phase (tag ``phase``), 0 for the others
``sgs_generation_queue``       samples asked of the engines and not yet returned
``sgs_verification_queue``     checks submitted to the verifier pool, not yet answered
``sgs_generations_per_second`` samples returned per second, over the phase so far
``sgs_verifications_per_second`` verdicts per second, over the phase so far
``sgs_system_error_rate``      share of the phase's verdicts that are system errors
``sgs_policy_version``         the weights' version each role serves (tag ``role``)
=============================  =================================================

and, set when an iteration's metrics line is written, its headline numbers:
``sgs_cumulative_solve_rate``, ``sgs_pass_at_k``, ``sgs_generations``,
``sgs_conjectures_kept``, ``sgs_iteration_system_error_rate``,
``sgs_audited`` and ``sgs_audit_disagreements`` (the second opinion on valid
proofs), and ``sgs_verifier_rejected``: the iteration's rejected proofs per
verifier reason (tag ``reason``; a reason that stops occurring drops to 0),
where reward hacking shows as a rising line.

Every gauge also carries the tag ``run`` (the run's name), so several runs
on one cluster stay apart.  Ray exports them to Prometheus (the dashboard's
Metrics tab, or Grafana) from the process that sets them: the driver.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from ray.util.metrics import Gauge

from lean_env.verdict import Status
from sgs.analysis.metrics import REJECTED_PREFIX


class LiveMonitor:
    """The driver's live gauges; the loop reports events, this publishes them."""

    #: metrics.jsonl key -> gauge name (without the ``sgs_`` prefix) of the per-iteration gauges.
    ITERATION_GAUGES = {"cumulative_solve_rate": "cumulative_solve_rate", "pass_at_k": "pass_at_k",
                        "generations": "generations", "conjectures_kept": "conjectures_kept",
                        "system_error_rate": "iteration_system_error_rate", "verifier/audited": "audited",
                        "verifier/audit_disagreements": "audit_disagreements"}

    def __init__(self, run_name: str, phases: tuple[str, ...], *, min_interval_s: float = 2.0):
        self.phases = phases
        self.min_interval_s = min_interval_s
        tags = {"run": run_name}

        def gauge(name: str, description: str, *extra_tags: str) -> Gauge:
            metric = Gauge(name, description=description, tag_keys=("run", *extra_tags))
            metric.set_default_tags(tags)
            return metric

        self._iteration = gauge("sgs_iteration", "The running SGS iteration")
        self._phase = gauge("sgs_phase", "1 for the running SGS phase", "phase")
        self._generation_queue = gauge("sgs_generation_queue", "Samples asked of the engines, not yet returned")
        self._verification_queue = gauge("sgs_verification_queue", "Checks waiting for the verifier pool")
        self._generation_rate = gauge("sgs_generations_per_second", "Samples per second in the running phase")
        self._verification_rate = gauge("sgs_verifications_per_second", "Verdicts per second in the running phase")
        self._system_errors = gauge("sgs_system_error_rate", "Share of system errors among the phase's verdicts")
        self._policy_version = gauge("sgs_policy_version", "Weights version a role serves", "role")
        self._iteration_gauges = {key: gauge(f"sgs_{name}", f"SGS {key} of the latest finished iteration")
                                  for key, name in self.ITERATION_GAUGES.items()}
        self._rejected = gauge("sgs_verifier_rejected",
                               "Proofs the verifier rejected in the latest finished iteration, per reason", "reason")
        self._rejection_reasons: set[str] = set()
        self.generations = self.verifications = self.system_errors = 0
        self.generation_queue = self.verification_queue = 0
        self._phase_started = self._published = time.monotonic()

    def phase_started(self, iteration: int, phase: str, policy_versions: Mapping[str, int]) -> None:
        self._iteration.set(iteration)
        for name in self.phases:
            self._phase.set(1.0 if name == phase else 0.0, tags={"phase": name})
        for role, version in policy_versions.items():
            self._policy_version.set(version, tags={"role": role})
        self.generations = self.verifications = self.system_errors = 0
        self.generation_queue = self.verification_queue = 0
        self._phase_started = time.monotonic()
        self.publish(force=True)

    def sampled(self, count: int, generation_queue: int) -> None:
        self.generations += count
        self.generation_queue = generation_queue
        self.publish()

    def verified(self, status: Status, verification_queue: int) -> None:
        self.verifications += 1
        self.system_errors += status == Status.SYSTEM_ERROR
        self.verification_queue = verification_queue
        self.publish()

    def snapshot(self, now: float | None = None) -> dict[str, float]:
        """The running phase's numbers as the gauges show them."""
        elapsed = max((time.monotonic() if now is None else now) - self._phase_started, 1e-9)
        return {
            "generation_queue": self.generation_queue,
            "verification_queue": self.verification_queue,
            "generations_per_second": self.generations / elapsed,
            "verifications_per_second": self.verifications / elapsed,
            "system_error_rate": self.system_errors / self.verifications if self.verifications else 0.0,
        }

    def publish(self, force: bool = False) -> None:
        """Set the gauges, at most every ``min_interval_s`` unless ``force``."""
        now = time.monotonic()
        if not force and now - self._published < self.min_interval_s:
            return
        self._published = now
        numbers = self.snapshot(now)
        self._generation_queue.set(numbers["generation_queue"])
        self._verification_queue.set(numbers["verification_queue"])
        self._generation_rate.set(numbers["generations_per_second"])
        self._verification_rate.set(numbers["verifications_per_second"])
        self._system_errors.set(numbers["system_error_rate"])

    def iteration_finished(self, metrics: Mapping[str, float | None]) -> None:
        """Show an iteration's headline numbers (its metrics line)."""
        for key, metric in self._iteration_gauges.items():
            if metrics.get(key) is not None:
                metric.set(float(metrics[key]))
        rejected = {key[len(REJECTED_PREFIX) + 1:]: float(value) for key, value in metrics.items()
                    if key.startswith(REJECTED_PREFIX + "/") and value is not None}
        for reason in self._rejection_reasons | rejected.keys():
            self._rejected.set(rejected.get(reason, 0.0), tags={"reason": reason})
        self._rejection_reasons |= rejected.keys()
