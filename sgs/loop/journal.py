"""What the record phase reports that the run's records do not hold: what
each phase this process ran did (:class:`~sgs.state.phase_log.PhaseStats`),
the run's fault totals, and where each metrics line goes.

The loop fills it as phases finish; the record phase reads it.  Fault counts
are the run's totals: earlier sessions' counts, as of the last recorded
iteration, plus this process's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sgs.state.phase_log import PhaseStats

#: Receives each metrics line with its sample tables and histogram values.
MetricsCallback = Callable[[dict, dict, dict], None]


def _no_sink(metrics: dict, tables: dict, histograms: dict) -> None:
    """The default sink: the metrics line is in ``metrics.jsonl`` already."""


class RunJournal:
    """This process's view of the run beyond its records."""

    def __init__(self, earlier_metrics: Mapping[str, Any] | None = None, *, resumed: bool = False,
                 on_metrics: MetricsCallback | None = None):
        """``earlier_metrics``: the last metrics line already recorded (its
        ``faults/...`` totals carry over); ``resumed``: this process continues
        a run an earlier one started."""
        self.on_metrics = on_metrics or _no_sink
        self.resumed = resumed
        self.learner_restarts = 0
        """Training runs started again after Ray lost their workers, in this process."""
        self._earlier_faults = {key: value for key, value in (earlier_metrics or {}).items()
                                if key.startswith("faults/")}
        self._phases: dict[tuple[int, str], PhaseStats] = {}

    def phase_finished(self, iteration: int, phase: str, stats: PhaseStats) -> None:
        self._phases[iteration, phase] = stats

    def phases(self, iteration: int) -> dict[str, PhaseStats]:
        """The stats of ``iteration``'s phases this process ran."""
        return {name: stats for (i, name), stats in self._phases.items() if i == iteration}

    def fault_counts(self, runtime: Any) -> dict[str, int]:
        """Actors lost, work redone and driver resumes over the whole run so
        far (earlier sessions counted up to their last recorded iteration)."""
        counts = {"faults/verifier_restarts": runtime.pool.stats.workers_restarted,
                  "faults/verifier_requeued": runtime.pool.stats.requeued,
                  "faults/learner_restarts": self.learner_restarts,
                  "faults/driver_resumes": int(self.resumed)}
        for role, group in runtime.engines.items():
            counts[f"faults/engine_restarts/{role}"] = group.stats.actor_restarts
            counts[f"faults/engine_hung/{role}"] = group.stats.hung_actors
            counts[f"faults/chunks_resubmitted/{role}"] = group.stats.chunks_resubmitted
        return {key: count + self._earlier_faults.get(key, 0) for key, count in counts.items()}
