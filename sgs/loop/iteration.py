"""One SGS iteration as a sequence of phases (SPEC §1.2, paper Algorithm 1),
each in its own module:

======================  ======================================================
phase                   what it does
======================  ======================================================
``conjecture``          the Conjecturer writes statements per unsolved target
                        (:mod:`sgs.loop.conjecture`)
``prove``               the Solver writes k proofs per target and surviving
                        conjecture, checked as they stream in; the Guide
                        reviews early (:mod:`sgs.loop.prove`; in search mode
                        searches instead, :mod:`sgs.loop.search_prove`)
``review``              solve rates, the p70 selection, Guide reviews,
                        Conjecturer rewards and weights (:mod:`sgs.loop.review`)
``train``               one learner run training the Solver and the
                        Conjecturer (:mod:`sgs.loop.train`)
``record``              the metrics line (:mod:`sgs.loop.record`)
======================  ======================================================

Every phase is one function, ``step(ctx, iteration, log) -> PhaseStats``
(``log``: the phase's record log, for the phases that write records), and is
committed with ``Store.mark_done``, also when it had nothing to do: experiments differ only by config values (a Solver-only run has
``conjectures_per_target=0``, so its conjecture phase samples nothing).

Resume.  :meth:`Loop.run` continues at ``Store.resume_point``.  A phase killed
half-way finds its stored records in ``PhaseLog.recovered`` and does only the
missing work: record ids are derived from (problem, sample index), so a
sample that was stored is never drawn again, and one drawn but not stored was
never counted.  Samples that came back but were not yet stored when the
driver died are in the phase's sample cache (:mod:`sgs.state.sample_cache`)
and are not generated again.  Checkpoints count once the training phase that
wrote them is done; policy version v is the weights after iteration v - 1
(0 = the base).

What the phases share (the config, the store, the actors, drawing samples)
is :class:`sgs.loop.context.RunContext`; which weights the engines serve,
their sleep around training and new weights reaching them is
:class:`sgs.loop.weights.EngineWeights`.  Ray plumbing lives in
:mod:`sgs.machinery`; the phases only decide what to sample and what to make
of the results.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace

from sgs.config import SGSConfig
from sgs.loop.conjecture import conjecture
from sgs.loop.context import RunContext
from sgs.loop.journal import MetricsCallback, RunJournal
from sgs.loop.phases import PHASES, RECORD_PHASES, TRAINING_PHASE
from sgs.loop.record import record
from sgs.loop.review import review
from sgs.loop.solver_modes import prove_phase, training_phase
from sgs.loop.stopping import stop_reason
from sgs.loop.weights import TRAINED_ROLES, EngineWeights
from sgs.machinery.monitor import LiveMonitor
from sgs.machinery.runtime import Checkpoint, Runtime
from sgs.state.benchmarks import Benchmark
from sgs.state.store import Store

#: Each phase: ``step(ctx, iteration, log) -> PhaseStats``; ``log`` is the
#: phase's record log for the phases that write records, else None.
PHASE_STEPS = {"conjecture": conjecture, "prove": prove_phase, "review": review, TRAINING_PHASE: training_phase,
               "record": record}


class Loop:
    """Runs iterations as phases against one store and one set of actors."""

    def __init__(
        self,
        cfg: SGSConfig,
        store: Store,
        runtime: Runtime,
        weights: Mapping[str, Checkpoint],
        *,
        run_name: str,
        benchmark: Benchmark | None = None,
        on_metrics: MetricsCallback | None = None,
    ):
        """``weights``: what the Solver and Conjecturer engines were started on
        (:func:`sgs.loop.weights.current_weights`); ``benchmark``: the evaluation
        problems (checked for contamination, evaluated every ``evaluation.every``
        iterations); ``on_metrics`` receives each metrics line with its sample
        tables and histogram values (:class:`sgs.analysis.metrics.MetricsCallback.log`)."""
        self.cfg = cfg
        self.store = store
        self.monitor = LiveMonitor(run_name, PHASES)
        """Live gauges on the Ray dashboard."""
        recorded = store.metrics()
        # A session that finds finished phases is a resume.
        journal = RunJournal(recorded[-1] if recorded else None,
                             resumed=store.resume_point(PHASES) != (0, PHASES[0]), on_metrics=on_metrics)
        self.ctx = RunContext(cfg, store, runtime, EngineWeights(cfg, store, runtime, weights), self.monitor,
                              run_name=run_name, benchmark=benchmark, journal=journal)
        self.seconds = {phase: 0.0 for phase in PHASES}
        """Wall time per phase over this process's run (for the summary)."""

    def run(self) -> str:
        """Run from the resume point until the run is finished (``iterations``
        done, or ``stop``'s rule met at the start of an iteration); why it is."""
        iteration, phase = self.store.resume_point(PHASES)
        while True:
            if phase == PHASES[0]:
                finished = stop_reason(self.cfg, self.store.metrics())
                if finished:
                    return finished
            for name in PHASES[PHASES.index(phase):]:
                self.run_phase(iteration, name)
            iteration, phase = iteration + 1, PHASES[0]

    def run_phase(self, iteration: int, phase: str) -> None:
        """Run one phase and commit it."""
        ctx = self.ctx
        start = time.perf_counter()
        self.monitor.phase_started(iteration, phase, ctx.weights.versions())
        if phase == TRAINING_PHASE:
            ctx.weights.sleep(iteration, phase)
        else:
            ctx.weights.wake(iteration, phase)
        log = self.store.begin_phase(iteration, phase) if phase in RECORD_PHASES else None
        stats = PHASE_STEPS[phase](ctx, iteration, log)
        seconds = time.perf_counter() - start
        ctx.journal.phase_finished(iteration, phase, replace(stats, seconds=seconds))
        self.seconds[phase] += seconds
        self.store.mark_done(iteration, phase)
        # Committed: the phase's records now hold everything its cached samples gave.
        self.store.sample_cache_path(iteration, phase).unlink(missing_ok=True)
        if phase == TRAINING_PHASE:
            # Only now: until the phase is done, an older checkpoint is the one a resume loads.
            for role in TRAINED_ROLES:
                self.store.prune_checkpoints(role, self.cfg.training.keep_checkpoints)
