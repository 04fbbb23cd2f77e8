"""What every phase of an iteration shares: the run's names and seeds, and
:class:`RunContext`, which holds the config, the store, the actors and the
weights, and draws samples for a phase (:meth:`RunContext.draw`)."""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tqdm import tqdm

from lean_env.verdict import ProofTask, Status, Verdict
from sgs.config import SGSConfig
from sgs.loop.journal import RunJournal
from sgs.loop.weights import EngineWeights
from sgs.machinery.engines import Sample, SamplingSettings
from sgs.machinery.models import default_cache_dir
from sgs.machinery.monitor import LiveMonitor
from sgs.machinery.runtime import Runtime
from sgs.machinery.streaming import Request, stream, submit
from sgs.method.roles import STATEMENT_FORMS, canonical_form
from sgs.state.benchmarks import Benchmark
from sgs.state.phase_log import PhaseStats
from sgs.state.records import Completion, prompt_digest
from sgs.state.sample_cache import SampleCache, sample_key, start_samples_path
from sgs.state.store import Store

log = logging.getLogger(__name__)

# Why a Conjecturer sample was dropped after its statement was extracted
# (before that, the reason is the extractor's sgs.method.roles.Failure value).
DUPLICATE_OF_TARGET = "duplicate_of_target"
DUPLICATE_CONJECTURE = "duplicate_conjecture"
MATCHES_BENCHMARK = "matches_benchmark"  # states an evaluation problem (evaluation.contamination=exclude)


@dataclass(frozen=True)
class Problem:
    """Something the Solver attempts: a target or a surviving conjecture."""

    kind: str  # "target" or "conjecture"
    id: str
    header: str
    statement: str
    #: the load path of the target (a conjecture inherits its target's)
    load_path: tuple[tuple[str, str, str], ...] = ()


def derived_seed(seed: int, iteration: int, phase: str) -> int:
    """A sampling / shuffling seed per run seed, iteration and phase."""
    return zlib.crc32(f"{seed}/{iteration}/{phase}".encode())


def conjecture_id(iteration: int, target_id: str, index: int) -> str:
    return f"it{iteration}/{target_id}/c{index}"


def attempt_id(problem: Problem, index: int) -> str:
    return f"{problem.kind}/{problem.id}/a{index}"


def review_sample_id(conjecture_id: str) -> str:
    return f"review/{conjecture_id}"


def to_completion(prompt: str, sample: Sample) -> Completion:
    return Completion(
        prompt_sha256=prompt_digest(prompt),
        text=sample.text,
        token_ids=list(sample.token_ids),
        logprobs=list(sample.logprobs),
        policy_version=sample.policy_version,
        finish_reason=sample.finish_reason,
        entropy=sample.entropy if math.isfinite(sample.entropy) else 0.0,
    )


class RunContext:
    """The run as the phases see it."""

    def __init__(self, cfg: SGSConfig, store: Store, runtime: Runtime, weights: EngineWeights,
                 monitor: LiveMonitor, *, run_name: str, benchmark: Benchmark | None,
                 journal: RunJournal | None = None):
        self.cfg = cfg
        self.store = store
        self.rt = runtime
        self.weights = weights
        self.monitor = monitor
        self.run_name = run_name
        self.benchmark = benchmark
        self.language = cfg.prover.language
        self.journal = journal if journal is not None else RunJournal()
        """What the record phase reports beyond the records: phase stats, fault counts."""
        form = STATEMENT_FORMS[cfg.method.conjecture_dedup]
        self.target_forms = {form(t.statement, self.language) for t in store.targets}
        # Up to renaming whatever method.conjecture_dedup says: no renamed copy of one reaches training.
        self.held_out_forms = frozenset(canonical_form(t.statement, self.language)
                                        for t in store.targets if t.held_out)
        self.benchmark_forms = frozenset(canonical_form(p.statement, self.language)
                                         for p in (benchmark.problems if benchmark is not None else ()))
        self.excluded_forms = self.benchmark_forms if cfg.evaluation.contamination == "exclude" else frozenset()

    def seed(self, iteration: int, phase: str) -> int:
        return derived_seed(self.cfg.seed, iteration, phase)

    def bar(self, iteration: int, phase: str, total: int) -> tqdm:
        return tqdm(total=total, desc=f"iter {iteration} {phase}", unit="sample", leave=False,
                    disable=not self.cfg.logging.progress_bars)

    def draw(
        self,
        iteration: int,
        phase: str,
        role: str,
        requests: Sequence[Request],
        settings: SamplingSettings,
        on_sample: Callable[[Request, str, Sample], None],
        on_verdict: Callable[[ProofTask, Verdict], None] | None = None,
        shared: tuple[SampleCache, Callable[[Request], bool]] | None = None,
    ) -> PhaseStats:
        """Every sample the requests want, handed to ``on_sample``: first those
        in the phase's sample cache (a resumed phase), then the rest streamed
        from ``role``'s engines, each cached the moment it returns; with
        ``on_verdict``, until every check ``on_sample`` submitted is answered.

        ``shared``: a cache that outlives the run (:meth:`start_samples`) and
        the requests it covers; for those, a sample the phase's cache lacks is
        looked up there before it is drawn, and a drawn one is added to it.
        Returns the tokens drawn and the verdicts received."""
        cache = SampleCache(self.store.sample_cache_path(iteration, phase), self.rt.prompter.token_ids)
        shared_cache, covers = shared if shared is not None else (None, lambda request: False)
        version = self.weights.current[role].version
        waiting = 0  # samples asked of the engines and not yet returned
        tokens = verifications = 0

        def key(request: Request, sample_id: str) -> str:
            return sample_key(request.prompt, settings, version, sample_id)

        def lookup(request: Request, sample_id: str) -> tuple[Sample | None, bool]:
            """(the cached sample or None, whether it came from the shared cache)."""
            sample = cache.get(key(request, sample_id), request.prompt)
            if sample is None and covers(request):
                sample = shared_cache.get(key(request, sample_id), request.prompt)
                return sample, sample is not None
            return sample, False

        def on_drawn(request: Request, sample_id: str, sample: Sample) -> None:
            nonlocal waiting, tokens
            cache.put(key(request, sample_id), sample)
            if covers(request):
                shared_cache.put(key(request, sample_id), sample)
            tokens += sample.num_tokens
            waiting -= 1
            self.monitor.sampled(1, waiting)
            on_sample(request, sample_id, sample)

        def on_checked(task: ProofTask, verdict: Verdict) -> None:
            nonlocal verifications
            verifications += 1
            self.monitor.verified(verdict.status, self.rt.pool.outstanding)
            on_verdict(task, verdict)

        try:
            fresh = []
            from_shared = 0
            for request in requests:
                missing = []
                for sample_id in request.sample_ids:
                    sample, shared_hit = lookup(request, sample_id)
                    if sample is None:
                        missing.append(sample_id)
                    else:
                        from_shared += shared_hit
                        on_sample(request, sample_id, sample)
                if missing:
                    fresh.append(replace(request, sample_ids=missing))
            if from_shared:
                log.info("iteration %d %s: took %d samples of the base weights from the shared start cache %s "
                         "(an earlier run with the same seed drew them)", iteration, phase, from_shared,
                         shared_cache.path)
            reused = sum(len(r.sample_ids) for r in requests) - sum(len(r.sample_ids) for r in fresh) - from_shared
            if reused:
                # Expected in every review phase (the Guide's early reviews); in the
                # other phases only after an interrupted run.
                log.info("iteration %d %s: reused %d cached samples (early Guide reviews, or samples an "
                         "interrupted run drew but did not store)", iteration, phase, reused)
            waiting = sum(len(request.sample_ids) for request in fresh)
            checks = (self.rt.pool, on_checked) if on_verdict is not None else (None, None)
            stream(submit(self.rt.engines[role], fresh, settings), on_drawn, *checks)
        finally:
            cache.close()
            if shared_cache is not None:
                shared_cache.close()
        return PhaseStats(tokens=tokens, verifications=verifications)

    def start_samples(self, iteration: int) -> SampleCache | None:
        """The shared cache of the Solver's iteration-0 samples, all of the base weights
        (``sampling.share_start_samples``); None for any later iteration.  Only the start
        is shared: a method that keeps the base weights (parallel sampling) would
        otherwise add every iteration's samples to a file each run reads whole."""
        if not self.cfg.sampling.share_start_samples or iteration != 0:
            return None
        weights = self.weights.current["solver"]
        path = start_samples_path(default_cache_dir(), weights.path, self.cfg.resources.engine_backend)
        return SampleCache(path, self.rt.prompter.token_ids)


def elaboration_failure(status: Status) -> str:
    """The rejection reason of a statement whose check ended with ``status``."""
    return f"elaboration_{status.value}"
