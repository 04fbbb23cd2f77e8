"""One SGS iteration as a sequence of phases (SPEC §1.2, paper Algorithm 1).

====================  ======================================================
phase                 what it does
====================  ======================================================
``conjecture``        the Conjecturer writes ``conjectures_per_target``
                      statements per unsolved training target; malformed
                      ones, duplicates (of a target or of an earlier
                      conjecture, up to renaming) and statements that do not
                      elaborate are rejected, with the reason stored
``prove``             the Solver writes k proofs per training target (expert
                      iteration: per target with too few stored proofs) and
                      per surviving conjecture; each chunk of samples goes to
                      the verifier pool the moment the engine returns it
``review``            solve rates, the p70 selection, Guide reviews of the
                      kept conjectures, Conjecturer rewards and weights
``train_solver``      the objective's selection, one learner run, the Solver
                      engines load the new checkpoint
``train_conjecturer`` the same for the Conjecturer on its weighted conjectures
``record``            the iteration's metrics line (and wandb)
====================  ======================================================

Every phase is committed with ``Store.mark_done``, also when it had nothing to
do: experiments differ only by config values (a Solver-only run has
``conjectures_per_target=0``, so its conjecture phase samples nothing).

Resume.  ``Loop.run`` continues at ``Store.resume_point``.  A phase killed
half-way finds its stored records in ``PhaseLog.recovered`` and does only the
missing work: record ids are derived from (problem, sample index), so a
sample that was stored is never drawn again, and one drawn but not stored was
never counted.  Samples that came back but were not yet stored when the
driver died are in the phase's sample cache (:mod:`sgs.state.sample_cache`) and
are not generated again.  Checkpoints count once the training phase that
wrote them is done; policy version v is the weights after iteration v - 1
(0 = the base).

Overlap.  Proofs are verified while later ones are generated
(:mod:`sgs.machinery.streaming`), and the Guide reviews a conjecture as soon as its
solve rate is final (:class:`EarlyReviews`), during the prove phase.

Weights.  During the training phases the engines may sleep (vLLM sleep mode:
``resources.sleep_engines_during_training``); each new checkpoint reaches its
role's running engines when they wake (or at once), or the learner sends the
weights into them directly (``resources.weight_transfer``), and a fixed probe
sequence's log-probs are compared between learner and engines
(``probe_logprob_gap_*`` in the training metrics; a warning above
``training.probe_logprob_tolerance``).

Ray plumbing lives in :mod:`sgs.machinery.streaming` and :mod:`sgs.machinery.engines`; the
phases themselves only decide what to sample and what to make of the results.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
import zlib
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from tqdm import tqdm

from lean_env.verdict import ProofTask, Status, Verdict
from sgs.analysis import metrics as M
from sgs.method import objectives
from sgs.state.benchmarks import Benchmark
from sgs.config import SGSConfig, engines_sleep_during_training, weight_transfer_backend
from sgs.machinery.engines import EngineGroup, Sample, SamplingSettings
from sgs.analysis.evaluation import SUMMARY_FILE, evaluate_problems, format_table, read_json
from sgs.machinery.learner import TrainExample, train
from sgs.state.records import Attempt, Completion, Conjecture, ConjectureScore, Target, prompt_digest
from sgs.method.rewards import (
    apply_overlong_penalty,
    conjecturer_reward,
    conjecturer_weights,
    guide_batch_rewards,
    keep_conjectures,
    solver_reward,
)
from sgs.machinery.monitor import LiveMonitor
from sgs.method.roles import canonical_form, conjecture_name, extract_conjecture, extract_guide_scores, extract_proof
from sgs.method.roles import rename_theorem
from sgs.machinery.runtime import Checkpoint, Runtime, sampling_settings, train_settings
from sgs.state.sample_cache import SampleCache, sample_key
from sgs.machinery.streaming import Request, stream, submit
from sgs.state.store import PhaseLog, Store
from sgs.state.targets import batch_targets

log = logging.getLogger(__name__)

PHASES = ("conjecture", "prove", "review", "train_solver", "train_conjecturer", "record")
#: The phases that write records (the others only commit a marker).
RECORD_PHASES = frozenset({"conjecture", "prove", "review"})
#: Which role each training phase updates.
TRAINING_PHASES = {"train_solver": "solver", "train_conjecturer": "conjecturer"}
#: Benchmark evaluations during the run (``evaluation.every``), one folder per iteration.
EVALS_DIR = "evals"
#: The learner's numbers, saved beside the checkpoint they describe.
TRAIN_METRICS_FILE = "sgs_train_metrics.json"
#: An iteration whose share of system errors among verifications exceeds this says so loudly (SPEC §1.6).
SYSTEM_ERROR_ALARM = 0.01

# Why a Conjecturer sample was dropped after its statement was extracted
# (before that, the reason is the extractor's sgs.method.roles.Failure value).
DUPLICATE_OF_TARGET = "duplicate_of_target"
DUPLICATE_CONJECTURE = "duplicate_conjecture"
MATCHES_BENCHMARK = "matches_benchmark"  # states an evaluation problem (evaluation.contamination=exclude)


def elaboration_failure(status: Status) -> str:
    """The rejection reason of a statement whose check ended with ``status``."""
    return f"elaboration_{status.value}"


# --------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """Something the Solver attempts: a target or a surviving conjecture."""

    kind: str  # "target" or "conjecture"
    id: str
    header: str
    statement: str


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


def screen_conjecture(
    output: str, language: str, target_forms: Set[str], seen: set[str], excluded_forms: Set[str] = frozenset()
) -> tuple[str | None, str | None]:
    """``(statement, None)`` for a well-formed conjecture that is new, or
    ``(None, rejection reason)``.

    New means: not a target and not an earlier conjecture of ``seen``, both up
    to renaming (canonical forms); a new one's form is added to ``seen``.
    Statements in ``excluded_forms`` (evaluation problems) are rejected.  The
    statement gets a fresh name derived from its form: the model's own name
    could collide with a target's, or flatter the Guide.
    """
    extraction = extract_conjecture(output, language)
    if not extraction.ok:
        return None, extraction.failure.value
    form = canonical_form(extraction.value, language)
    if form in target_forms:
        return None, DUPLICATE_OF_TARGET
    if form in excluded_forms:
        return None, MATCHES_BENCHMARK
    if form in seen:
        return None, DUPLICATE_CONJECTURE
    seen.add(form)
    return rename_theorem(extraction.value, conjecture_name(extraction.value, language), language), None


def solver_rollouts(attempts: Sequence[Attempt]) -> list[objectives.Rollout]:
    """Attempts as the objectives see them (system errors carry no reward)."""
    return [
        objectives.Rollout(
            problem_id=a.problem_id,
            status=M.rollout_status(a),
            reward=None if M.rollout_status(a) == Status.SYSTEM_ERROR.value else a.reward,
        )
        for a in attempts
    ]


def select_solver_samples(attempts: Sequence[Attempt], objective: str) -> list[objectives.Sample]:
    """The on-policy objectives' choice among this iteration's attempts."""
    select = {
        "reinforce": objectives.select_reinforce,
        "reinforce_half": objectives.select_reinforce_half,
        "cispo": objectives.select_cispo,
    }[objective]
    return select(solver_rollouts(attempts))


def in_conjecturer_batch(score: ConjectureScore, rule: str) -> bool:
    """The reference rule trains on the kept conjectures; the paper's rule on
    every attempted one (the others at weight 0, counted by the normaliser)."""
    return score.kept or rule == "paper"


class EarlyReviews:
    """Guide reviews started during the prove phase, each as soon as its
    conjecture's solve rate is final and could earn a reward (0 < s < 1).

    Which conjectures are kept depends on the whole batch's p70, known only
    when proving ends, so this reviews every candidate: the few above the
    p70 are reviewed for nothing, and the Guide's engines work while the
    Solver's do instead of after them.  Each review goes to the review
    phase's sample cache under the key the review phase will look up, so the
    review phase finds it there and generates only what is missing.
    """

    #: Seconds between polls of the Guide engines while proofs stream in.
    COLLECT_INTERVAL_S = 0.5

    def __init__(self, guide: EngineGroup, settings: SamplingSettings, cache: SampleCache,
                 prompt: Callable[[str], str], key: Callable[[str, str], str], samples_per_problem: int):
        self.guide = guide
        self.settings = settings
        self.cache = cache
        self.prompt = prompt
        self.key = key
        self.samples_per_problem = samples_per_problem
        self.tokens = 0
        self._attempts: dict[str, list[Attempt]] = {}
        self._pending: dict[int, str] = {}  # chunk id -> cache key
        self._collected = time.monotonic()

    def add(self, attempt: Attempt) -> None:
        """One finished attempt; a conjecture's last one may start its review."""
        if attempt.problem_kind != "conjecture":
            return
        attempts = self._attempts.setdefault(attempt.problem_id, [])
        attempts.append(attempt)
        if len(attempts) == self.samples_per_problem:
            rate = M.solve_rates(attempts).get(attempt.problem_id)
            if rate is not None and 0.0 < rate < 1.0:
                self._start(attempt.problem_id)
        # Called for every attempt: poll the Guide only now and then (each poll is a Ray call).
        if time.monotonic() - self._collected >= self.COLLECT_INTERVAL_S:
            self.collect()

    def collect(self, timeout: float = 0.0) -> None:
        """Cache the reviews that are back (waiting up to ``timeout`` for the first)."""
        self._collected = time.monotonic()
        if not self._pending:
            return
        for chunk, [[sample]] in self.guide.poll(timeout):
            key = self._pending.pop(chunk)
            self.cache.put(key, sample)
            self.tokens += sample.num_tokens

    def finish(self) -> None:
        """Wait for every review started."""
        while self._pending:
            self.collect(timeout=1.0)

    def close(self) -> None:
        self.cache.close()

    def _start(self, conjecture_id: str) -> None:
        prompt = self.prompt(conjecture_id)
        key = self.key(conjecture_id, prompt)
        if self.cache.get(key, prompt) is not None:
            return  # reviewed before the driver was interrupted
        for chunk, _ in self.guide.submit([prompt], self.settings):
            self._pending[chunk] = key


# --------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------


def current_weights(store: Store, role: str, base: str) -> Checkpoint:
    """The newest checkpoint of ``role`` whose training phase is done, else ``base`` (version 0)."""
    phase = next(p for p, r in TRAINING_PHASES.items() if r == role)
    done = [i for i in store.checkpoint_iterations(role) if store.phase_done(i, phase)]
    if not done:
        return Checkpoint(base, 0)
    return Checkpoint(str(store.checkpoint_dir(role, done[-1])), done[-1] + 1)


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
        on_metrics: Callable[[dict, dict, dict], None] = lambda metrics, tables, histograms: None,
    ):
        """``weights``: what the Solver and Conjecturer engines were started on
        (:func:`current_weights`); ``benchmark``: the evaluation problems
        (checked for contamination, evaluated every ``evaluation.every``
        iterations); ``on_metrics`` receives each metrics line
        with its sample tables and histogram values (:class:`sgs.analysis.metrics.MetricsSink.log`)."""
        self.cfg = cfg
        self.store = store
        self.rt = runtime
        self.weights = dict(weights)
        self.run_name = run_name
        self.on_metrics = on_metrics
        self.language = cfg.prover.language
        self.seconds = {phase: 0.0 for phase in PHASES}
        """Wall time per phase over this process's run (for the summary)."""
        self._stats: dict[tuple[int, str], M.PhaseStats] = {}
        # Work of the running phase, counted by its callbacks.
        self._tokens = self._verifications = 0
        self._target_forms = {canonical_form(t.statement, self.language) for t in store.targets}
        self.benchmark = benchmark
        self._benchmark_forms = frozenset(canonical_form(p.statement, self.language)
                                          for p in (benchmark.problems if benchmark is not None else ()))
        self._excluded_forms = self._benchmark_forms if cfg.evaluation.contamination == "exclude" else frozenset()
        resources = cfg.resources
        self._sleep_during_training = engines_sleep_during_training(resources)
        self._transfer_backend = weight_transfer_backend(resources)
        self._engines_asleep = False
        # Newly trained weights not yet confirmed on the engines (trained while they
        # slept, or sent directly): checkpoint, the learner's probe log-probs, and
        # whether the learner sent them (True), failed to (False) or did not try (None).
        self._unloaded: dict[str, tuple[Checkpoint, list[float] | None, bool | None]] = {}
        self.monitor = LiveMonitor(run_name, PHASES)
        """Live gauges on the Ray dashboard."""
        # Fault counts are the run's totals: earlier sessions' counts, as of the last
        # recorded iteration, plus this session's; a session that finds finished
        # phases is a resume.
        recorded = store.metrics()
        self._earlier_faults = {key: value for key, value in (recorded[-1] if recorded else {}).items()
                                if key.startswith("faults/")}
        self._resumed = store.resume_point(PHASES) != (0, PHASES[0])

    # -- driving -------------------------------------------------------------

    def run(self) -> None:
        """Run until ``cfg.iterations`` iterations are done, from the resume point."""
        iteration, phase = self.store.resume_point(PHASES)
        while iteration < self.cfg.iterations:
            for name in PHASES[PHASES.index(phase):]:
                self.run_phase(iteration, name)
            iteration, phase = iteration + 1, PHASES[0]

    def run_phase(self, iteration: int, phase: str) -> None:
        """Run one phase and commit it."""
        start = time.perf_counter()
        self._tokens = self._verifications = 0
        self.monitor.phase_started(iteration, phase, {role: w.version for role, w in self.weights.items()})
        if phase in TRAINING_PHASES:
            self._sleep_engines()
        else:
            self._wake_engines()
        if phase in RECORD_PHASES:
            getattr(self, phase)(iteration, self.store.begin_phase(iteration, phase))
        else:
            getattr(self, phase)(iteration)
        seconds = time.perf_counter() - start
        self._stats[iteration, phase] = M.PhaseStats(seconds, self._tokens, self._verifications)
        self.seconds[phase] += seconds
        self.store.mark_done(iteration, phase)
        # Committed: the phase's records now hold everything its cached samples gave.
        self.store.sample_cache_path(iteration, phase).unlink(missing_ok=True)
        if phase in TRAINING_PHASES:
            # Only now: until the phase is done, an older checkpoint is the one a resume loads.
            self.store.prune_checkpoints(TRAINING_PHASES[phase], self.cfg.training.keep_checkpoints)

    def _bar(self, iteration: int, phase: str, total: int) -> tqdm:
        return tqdm(total=total, desc=f"iter {iteration} {phase}", unit="sample", leave=False,
                    disable=not self.cfg.logging.progress_bars)

    def _seed(self, iteration: int, phase: str) -> int:
        return derived_seed(self.cfg.seed, iteration, phase)

    def _draw(
        self,
        iteration: int,
        phase: str,
        role: str,
        requests: Sequence[Request],
        settings: SamplingSettings,
        on_sample: Callable[[Request, str, Sample], None],
        on_verdict: Callable[[ProofTask, Verdict], None] | None = None,
    ) -> None:
        """Every sample the requests want, handed to ``on_sample``: first those
        in the phase's sample cache (a resumed phase), then the rest streamed
        from ``role``'s engines, each cached the moment it returns; with
        ``on_verdict``, until every check ``on_sample`` submitted is answered."""
        cache = SampleCache(self.store.sample_cache_path(iteration, phase), self.rt.prompter.token_ids)
        version = self.weights[role].version
        waiting = 0  # samples asked of the engines and not yet returned

        def key(request: Request, sample_id: str) -> str:
            return sample_key(request.prompt, settings, version, sample_id)

        def on_drawn(request: Request, sample_id: str, sample: Sample) -> None:
            nonlocal waiting
            cache.put(key(request, sample_id), sample)
            self._tokens += sample.num_tokens
            waiting -= 1
            self.monitor.sampled(1, waiting)
            on_sample(request, sample_id, sample)

        def on_checked(task: ProofTask, verdict: Verdict) -> None:
            self._verifications += 1
            self.monitor.verified(verdict.status, self.rt.pool.outstanding)
            on_verdict(task, verdict)

        try:
            fresh = []
            for request in requests:
                missing = []
                for sample_id in request.sample_ids:
                    sample = cache.get(key(request, sample_id), request.prompt)
                    if sample is None:
                        missing.append(sample_id)
                    else:
                        on_sample(request, sample_id, sample)
                if missing:
                    fresh.append(replace(request, sample_ids=missing))
            reused = sum(len(r.sample_ids) for r in requests) - sum(len(r.sample_ids) for r in fresh)
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

    # -- conjecture ----------------------------------------------------------

    def conjecture(self, iteration: int, phase_log: PhaseLog) -> None:
        method = self.cfg.method
        solved = self.store.solved_registry
        unsolved = [t for t in batch_targets(self.store.targets, method.batch_size, self.cfg.seed, iteration)
                    if not solved.is_solved(t.id, through_iteration=iteration - 1)]
        stored = phase_log.ids("conjecture")
        seen = {canonical_form(c.statement, self.language) for c in phase_log.recovered
                if isinstance(c, Conjecture) and c.statement is not None}
        conditioned = method.conjecturer_prompt == "target_conditioned"
        requests = [
            Request(prompt=self.rt.prompter.conjecturer(t if conditioned else None),
                    sample_ids=[cid for j in range(method.conjectures_per_target)
                                if (cid := conjecture_id(iteration, t.id, j)) not in stored],
                    item=t)
            for t in unsolved
        ]
        requests = [r for r in requests if r.sample_ids]
        checking: dict[str, tuple[Target, Completion, str]] = {}
        bar = self._bar(iteration, "conjecture", sum(len(r.sample_ids) for r in requests))

        def keep(cid: str, target: Target, completion: Completion, statement: str | None, error: str | None) -> None:
            phase_log.append(Conjecture(id=cid, iteration=iteration, target_id=target.id, completion=completion,
                                        statement=statement, extraction_error=error))
            bar.update()

        def on_sample(request: Request, cid: str, sample: Sample) -> None:
            target, completion = request.item, to_completion(request.prompt, sample)
            statement, rejection = screen_conjecture(sample.text, self.language, self._target_forms, seen,
                                                     self._excluded_forms)
            if rejection is not None:
                return keep(cid, target, completion, None, rejection)
            checking[cid] = (target, completion, statement)
            self.rt.pool.submit_statement(ProofTask(id=cid, header=target.header, statement=statement, proof=""))

        def on_verdict(task: ProofTask, verdict: Verdict) -> None:
            target, completion, statement = checking.pop(task.id)
            if verdict.valid:
                keep(task.id, target, completion, statement, None)
            else:
                keep(task.id, target, completion, None, elaboration_failure(verdict.status))

        if requests:
            settings = sampling_settings(self.cfg.sampling.conjecturer, n=1, seed=self._seed(iteration, "conjecture"))
            self._draw(iteration, "conjecture", "conjecturer", requests, settings, on_sample, on_verdict)
        bar.close()

    # -- prove ---------------------------------------------------------------

    def problems(self, iteration: int) -> list[Problem]:
        """What the Solver attempts this iteration: training targets, then the
        surviving conjectures (needs the conjecture phase done)."""
        method = self.cfg.method
        targets = batch_targets(self.store.targets, method.batch_size, self.cfg.seed, iteration)
        if method.solver_objective == "ei":
            # Expert iteration samples only targets that still lack stored proofs.
            counts = {t.id: len(self.store.solved_registry.proofs(t.id)) for t in targets}
            keep = set(objectives.expert_iteration_targets([t.id for t in targets], counts,
                                                           method.max_proofs_per_target))
            targets = [t for t in targets if t.id in keep]
        problems = [Problem("target", t.id, t.header, t.statement) for t in targets]
        for c in self.store.conjectures(iteration):
            if c.statement is not None:
                problems.append(Problem("conjecture", c.id, self.store.target(c.target_id).header, c.statement))
        return problems

    def prove(self, iteration: int, phase_log: PhaseLog) -> None:
        method, sampling = self.cfg.method, self.cfg.sampling.solver
        stored = phase_log.ids("attempt")
        requests = [
            Request(prompt=self.rt.prompter.solver(p.header, p.statement),
                    sample_ids=[aid for j in range(method.num_solver_samples)
                                if (aid := attempt_id(p, j)) not in stored],
                    item=p)
            for p in self.problems(iteration)
        ]
        requests = [r for r in requests if r.sample_ids]
        checking: dict[str, tuple[Problem, Completion, str]] = {}
        bar = self._bar(iteration, "prove", sum(len(r.sample_ids) for r in requests))

        def keep(aid: str, problem: Problem, completion: Completion, proof: str | None, error: str | None,
                 verdict: Verdict | None, reward: float) -> None:
            attempt = Attempt(id=aid, iteration=iteration, problem_id=problem.id, problem_kind=problem.kind,
                              completion=completion, proof=proof, extraction_error=error, verdict=verdict,
                              reward=reward)
            phase_log.append(attempt)
            bar.update()
            if early is not None:
                early.add(attempt)

        def on_sample(request: Request, aid: str, sample: Sample) -> None:
            problem, completion = request.item, to_completion(request.prompt, sample)
            extraction = extract_proof(sample.text, self.language)
            if not extraction.ok:
                # No proof: reward 0, still subject to the overlong penalty.
                reward = apply_overlong_penalty(0.0, sample.num_tokens, sampling.max_tokens, method.overlong_fraction)
                return keep(aid, problem, completion, None, extraction.failure.value, None, reward)
            checking[aid] = (problem, completion, extraction.value)
            self.rt.pool.submit(ProofTask(id=aid, header=problem.header, statement=problem.statement,
                                          proof=extraction.value))

        def on_verdict(task: ProofTask, verdict: Verdict) -> None:
            problem, completion, proof = checking.pop(task.id)
            reward = solver_reward(verdict.status.value, proof, completion.num_tokens, sampling.max_tokens,
                                   self.language, penalize_try=method.penalize_try,
                                   overlong_threshold=method.overlong_fraction)
            # A system error has no reward (None); it is stored as 0 and the
            # objectives drop it by its status.
            keep(task.id, problem, completion, proof, None, verdict, 0.0 if reward is None else reward)

        early = self._early_reviews(iteration, phase_log) if method.use_guide else None
        try:
            if requests:
                settings = sampling_settings(sampling, n=1, seed=self._seed(iteration, "prove"))
                self._draw(iteration, "prove", "solver", requests, settings, on_sample, on_verdict)
            if early is not None:
                early.finish()
                self._tokens += early.tokens
        finally:
            if early is not None:
                early.close()
        bar.close()

    def _early_reviews(self, iteration: int, phase_log: PhaseLog) -> EarlyReviews:
        """Guide reviews that start during the prove phase (see :class:`EarlyReviews`)."""
        guide = self.rt.engines["guide"]
        settings = sampling_settings(self.cfg.sampling.guide, n=1, seed=self._seed(iteration, "review"))
        cache = SampleCache(self.store.sample_cache_path(iteration, "review"), self.rt.prompter.token_ids)
        conjectures = {c.id: c for c in self.store.conjectures(iteration) if c.statement is not None}

        def prompt(conjecture_id: str) -> str:
            conjecture = conjectures[conjecture_id]
            return self.rt.prompter.guide(self.store.target(conjecture.target_id), conjecture.statement)

        def key(conjecture_id: str, text: str) -> str:
            return sample_key(text, settings, self.weights["guide"].version, review_sample_id(conjecture_id))

        early = EarlyReviews(guide, settings, cache, prompt, key, self.cfg.method.num_solver_samples)
        for record in phase_log.recovered:
            if isinstance(record, Attempt):
                early.add(record)
        return early

    # -- review --------------------------------------------------------------

    def review(self, iteration: int, phase_log: PhaseLog) -> None:
        method = self.cfg.method
        conjectures = [c for c in self.store.conjectures(iteration) if c.statement is not None]
        stored = phase_log.ids("conjecture_score")
        if all(c.id in stored for c in conjectures):
            return
        rates = M.solve_rates(self.store.attempts(iteration))
        rate = [rates.get(c.id) for c in conjectures]
        kept = keep_conjectures(rate, method.conjecture_keep_quantile)

        reviewed = [c for c, k in zip(conjectures, kept) if k] if method.use_guide else []
        outputs = self._guide(iteration, reviewed)
        extractions = [extract_guide_scores(text) for text in outputs]
        guide = guide_batch_rewards([e.value if e.ok else None for e in extractions])
        review = {c.id: (text, e, r) for c, text, e, r in zip(reviewed, outputs, extractions, guide.rewards)}

        rewards = [conjecturer_reward(r, review[c.id][2] if method.use_guide else None) if k else None
                   for c, r, k in zip(conjectures, rate, kept)]
        weights = conjecturer_weights(rewards, [c.completion.num_tokens for c in conjectures],
                                      self.cfg.sampling.conjecturer.max_tokens, method.reward_normalisation,
                                      method.overlong_fraction)
        for c, r, k, reward, weight in zip(conjectures, rate, kept, rewards, weights):
            if c.id in stored:
                continue  # a resumed phase: this score was written before the kill
            text, extraction, r_guide = review.get(c.id, (None, None, None))
            scores = extraction.value if extraction is not None and extraction.ok else None
            phase_log.append(ConjectureScore(
                conjecture_id=c.id,
                # No real verdict at all (only system errors): s is unknown and nothing selects it.
                solve_rate=0.0 if r is None else r,
                kept=k,
                relevance=None if scores is None else int(scores.relevance),
                redundancy=None if scores is None else int(scores.redundancy),
                complexity=None if scores is None else int(scores.complexity),
                guide_output=text,
                guide_parse_error=None if extraction is None or extraction.ok else extraction.failure.value,
                r_guide=r_guide,
                reward=0.0 if reward is None else reward,
                weight=0.0 if weight is None else weight,
            ))

    def _guide(self, iteration: int, conjectures: Sequence[Conjecture]) -> list[str]:
        """The Guide's review of each conjecture.  Seeded, so a resumed review
        phase reproduces the reviews of the scores it already stored."""
        if not conjectures:
            return []
        requests = [Request(prompt=self.rt.prompter.guide(self.store.target(c.target_id), c.statement),
                            sample_ids=[review_sample_id(c.id)], item=c) for c in conjectures]
        settings = sampling_settings(self.cfg.sampling.guide, n=1, seed=self._seed(iteration, "review"))
        outputs: dict[str, str] = {}

        def on_sample(request: Request, sample_id: str, sample: Sample) -> None:
            outputs[request.item.id] = sample.text

        self._draw(iteration, "review", "guide", requests, settings, on_sample)
        return [outputs[c.id] for c in conjectures]

    # -- training ------------------------------------------------------------

    def train_solver(self, iteration: int) -> None:
        objective = self.cfg.method.solver_objective
        if objective == "ei":
            chosen = self._expert_iteration_samples(iteration)
        else:
            attempts = self.store.attempts(iteration)
            chosen = [(attempts[s.index], s.weight) for s in select_solver_samples(attempts, objective)]
        conjectures = {c.id: c for c in self.store.conjectures(iteration)}
        examples = []
        for attempt, weight in chosen:
            if attempt.problem_kind == "target":
                target = self.store.target(attempt.problem_id)
                header, statement = target.header, target.statement
            else:
                conjecture = conjectures[attempt.problem_id]
                header, statement = self.store.target(conjecture.target_id).header, conjecture.statement
            prompt = self._checked_prompt(self.rt.prompter.solver(header, statement), attempt.completion)
            examples.append(TrainExample(
                prompt_ids=self.rt.prompter.token_ids(prompt),
                completion_ids=attempt.completion.token_ids,
                weight=weight,
                old_logprobs=attempt.completion.logprobs if objective == "cispo" else None,
                group_id=attempt.problem_id,
            ))
        self._train(iteration, "solver", examples, objective)

    def _expert_iteration_samples(self, iteration: int) -> list[tuple[Attempt, float]]:
        """Stored proofs of the last ``ei_replay_iterations`` iterations, with their attempts."""
        window = self.cfg.method.ei_replay_iterations
        stored = self.store.solved_registry.recent_proofs(since_iteration=iteration - window + 1)
        records = [objectives.StoredProof(problem_id=p.target_id, proof=p.proof, iteration=p.iteration,
                                          reward=p.reward) for p in stored]
        samples = objectives.select_expert_iteration(records, iteration, window)
        attempts = {a.id: a for i in sorted({p.iteration for p in stored}) for a in self.store.attempts(i)}
        return [(attempts[stored[s.index].attempt_id], s.weight) for s in samples]

    def train_conjecturer(self, iteration: int) -> None:
        method = self.cfg.method
        if not method.train_conjecturer:
            return
        conjectures = {c.id: c for c in self.store.conjectures(iteration)}
        conditioned = method.conjecturer_prompt == "target_conditioned"
        examples = []
        for score in self.store.conjecture_scores(iteration).values():
            if not in_conjecturer_batch(score, method.reward_normalisation):
                continue
            conjecture = conjectures[score.conjecture_id]
            target = self.store.target(conjecture.target_id)
            prompt = self._checked_prompt(self.rt.prompter.conjecturer(target if conditioned else None),
                                          conjecture.completion)
            examples.append(TrainExample(prompt_ids=self.rt.prompter.token_ids(prompt),
                                         completion_ids=conjecture.completion.token_ids, weight=score.weight))
        if not any(e.weight != 0.0 for e in examples):
            examples = []  # nothing earned a reward: no gradient to take
        self._train(iteration, "conjecturer", examples, "conjecturer")

    def _checked_prompt(self, prompt: str, completion: Completion) -> str:
        """``prompt`` if it is the one the sample was drawn from; training on
        another prompt (templates edited mid-run) would be silently wrong."""
        if prompt_digest(prompt) != completion.prompt_sha256:
            raise RuntimeError("a re-rendered prompt differs from the one the sample was drawn from; "
                               "were the prompt templates or the tokenizer changed during the run?")
        return prompt

    def _train(self, iteration: int, role: str, examples: list[TrainExample], objective: str) -> None:
        """One learner run from the role's current weights; the role's engines then serve the result."""
        if not examples:
            return
        output = self.store.checkpoint_dir(role, iteration)
        settings = replace(train_settings(self.cfg), seed=self._seed(iteration, f"train_{role}"))
        target = None
        if self._transfer_backend is not None and not self._engines_asleep:
            target = self.rt.engines[role].weight_target(iteration + 1, self._transfer_backend,
                                                         self.cfg.resources.weight_transfer_timeout_s)
        result = train(examples, base_checkpoint=self.weights[role].path, objective=objective, settings=settings,
                       output_dir=str(output), run_name=f"{self.run_name}-{role}-{iteration:04d}",
                       probe=self._probe_sequence, weight_target=target)
        numbers = {**asdict(result.metrics), "weights_sent_directly": float(result.weights_sent),
                   "weight_transfer_seconds": result.weight_transfer_seconds}
        (output / TRAIN_METRICS_FILE).write_text(json.dumps(numbers))
        self.weights[role] = Checkpoint(result.checkpoint_dir, iteration + 1)
        if target is not None and not result.weights_sent:
            log.warning("the learner could not send the %s weights to the engines directly (%s); restarting the "
                        "engines on the checkpoint", role, result.weight_transfer_error)
        self._unloaded[role] = (self.weights[role], result.probe_logprobs,
                                None if target is None else result.weights_sent)
        if not self._engines_asleep:
            self._load_new_weights()

    @functools.cached_property
    def _probe_sequence(self) -> tuple[list[int], list[int]]:
        """A fixed (prompt, completion) pair, the same at every update: the
        Solver prompt of the first training target, completed by its statement."""
        target = min((t for t in self.store.targets if not t.held_out), key=lambda t: t.id)
        prompt = self.rt.prompter.solver(target.header, target.statement)
        completion = self.rt.prompter.tokenizer(target.statement, add_special_tokens=False)["input_ids"]
        return self.rt.prompter.token_ids(prompt), completion

    def _load_new_weights(self) -> None:
        """Give each newly trained checkpoint to its role's engines (a reload;
        nothing more when the learner sent the weights directly; fresh engines
        when that failed), then check on the probe that they compute what the
        learner computed."""
        tolerance = self.cfg.training.probe_logprob_tolerance
        for role, (checkpoint, learner_logprobs, sent) in list(self._unloaded.items()):
            engines = self.rt.engines[role]
            start = time.perf_counter()
            if sent:
                engines.adopt_weights(checkpoint.path, checkpoint.version)
            elif sent is None:
                engines.load_weights(checkpoint.path, checkpoint.version)
            else:
                engines.rebuild(checkpoint.path, checkpoint.version)
            numbers = {"weight_load_seconds": time.perf_counter() - start}
            del self._unloaded[role]
            if learner_logprobs is not None:
                gaps = [M.logprob_gap(learner_logprobs, served)
                        for served in engines.served_logprobs(*self._probe_sequence)]
                mean_gap, max_gap = max(g[0] for g in gaps), max(g[1] for g in gaps)
                numbers.update(probe_logprob_gap_mean=mean_gap, probe_logprob_gap_max=max_gap)
            metrics_file = Path(checkpoint.path) / TRAIN_METRICS_FILE
            metrics_file.write_text(json.dumps({**json.loads(metrics_file.read_text()), **numbers}))
            if learner_logprobs is not None and mean_gap > tolerance:
                log.warning("the %s engines' log-probs of the probe differ from the learner's by %.3g nats per "
                            "token on average (max %.3g; tolerance training.probe_logprob_tolerance=%g): the "
                            "engines may not serve the weights of %s", role, mean_gap, max_gap, tolerance,
                            checkpoint.path)

    # -- engine memory around training ----------------------------------------

    def _sleep_engines(self) -> None:
        """Free the engines' accelerator memory for the learner (when configured)."""
        if self._sleep_during_training and not self._engines_asleep:
            for group in self.rt.engines.values():
                group.sleep(self.cfg.resources.engine_sleep_level)
            self._engines_asleep = True

    def _wake_engines(self) -> None:
        """Wake the engines and give them the weights trained while they slept."""
        if self._engines_asleep:
            for group in self.rt.engines.values():
                group.wake_up()
            self._engines_asleep = False
        if self._unloaded:
            self._load_new_weights()

    def _training_numbers(self, iteration: int) -> dict[str, dict]:
        numbers = {}
        for role in TRAINING_PHASES.values():
            path = self.store.checkpoint_dir(role, iteration) / TRAIN_METRICS_FILE
            if path.is_file():
                numbers[role] = json.loads(path.read_text())
        return numbers

    # -- record --------------------------------------------------------------

    def _periodic_evaluation(self, iteration: int) -> dict[str, float]:
        """pass@k on the benchmark every ``evaluation.every`` iterations, of
        the weights the Solver serves after ``iteration``'s update; results in
        ``evals/iter_NNNN/`` (a resumed record phase reads them back)."""
        evaluation = self.cfg.evaluation
        if self.benchmark is None or evaluation.every <= 0 or (iteration + 1) % evaluation.every:
            return {}
        directory = self.store.run_dir / EVALS_DIR / f"iter_{iteration:04d}"
        summary = read_json(directory / SUMMARY_FILE)
        solver = self.weights["solver"]
        if summary is None or summary.get("policy_version") != solver.version:
            settings = sampling_settings(self.cfg.sampling.solver, n=evaluation.samples_per_problem,
                                         seed=derived_seed(self.cfg.seed, iteration, "evaluate"))
            result = evaluate_problems(self.rt.engines["solver"], self.rt.pool, self.rt.prompter,
                                       self.benchmark.problems, ks=evaluation.ks, settings=settings,
                                       language=self.language, benchmark=self.benchmark.name,
                                       checkpoint=solver.path, confidence=evaluation.confidence)
            result.write(directory)
            summary = result.to_json()
            log.info("iteration %d: %s", iteration, format_table(result))
        numbers = {}
        for k, estimate in summary["pass_at_k"].items():
            numbers[f"eval/pass@{k}"] = estimate["pass_at_k"]
            numbers[f"eval/pass@{k}_ci_low"] = estimate["ci_low"]
            numbers[f"eval/pass@{k}_ci_high"] = estimate["ci_high"]
        return numbers

    def _fault_counts(self) -> dict[str, int]:
        """Actors lost, work redone and driver resumes over the whole run so far
        (earlier sessions counted up to their last recorded iteration)."""
        counts = {"faults/verifier_restarts": self.rt.pool.stats.workers_restarted,
                  "faults/verifier_requeued": self.rt.pool.stats.requeued,
                  "faults/driver_resumes": int(self._resumed)}
        for role, group in self.rt.engines.items():
            counts[f"faults/engine_restarts/{role}"] = group.stats.actor_restarts
            counts[f"faults/engine_hung/{role}"] = group.stats.hung_actors
            counts[f"faults/chunks_resubmitted/{role}"] = group.stats.chunks_resubmitted
        return {key: count + self._earlier_faults.get(key, 0) for key, count in counts.items()}

    def _benchmark_matches(self, conjectures: Sequence[Conjecture]) -> int:
        """Conjectures that state a benchmark problem, excluded or let through."""
        if not self._benchmark_forms:
            return 0
        return sum(c.extraction_error == MATCHES_BENCHMARK
                   or (c.statement is not None and canonical_form(c.statement, self.language) in self._benchmark_forms)
                   for c in conjectures)

    def _flag_best_checkpoints(self, iteration: int) -> None:
        """The weights after ``iteration`` set the best cumulative solve rate so
        far: keep them (pruning spares the best) under ``checkpoints/<role>/best``."""
        for phase, role in TRAINING_PHASES.items():
            if self.store.phase_done(iteration, phase) and self.store.checkpoint_dir(role, iteration).is_dir():
                self.store.set_best_checkpoint(role, iteration)

    def record(self, iteration: int) -> None:
        registry = self.store.solved_registry
        # Read once: a paper-sized iteration holds ~39,000 records.
        attempts, conjectures = self.store.attempts(iteration), self.store.conjectures(iteration)
        scores = self.store.conjecture_scores(iteration)
        metrics = M.iteration_metrics(
            iteration=iteration,
            attempts=attempts,
            conjectures=conjectures,
            scores=list(scores.values()),
            training_ids=[t.id for t in self.store.targets if not t.held_out],
            k=self.cfg.method.num_solver_samples,
            language=self.language,
            generations=self.store.generations(through_iteration=iteration),
            cumulative_solve_rate=registry.cumulative_solve_rate(through_iteration=iteration),
            phases={phase: stats for (i, phase), stats in self._stats.items() if i == iteration},
            training=self._training_numbers(iteration),
        )
        metrics["conjectures_matching_benchmark"] = self._benchmark_matches(conjectures)
        metrics.update(self._fault_counts())
        metrics.update(self._periodic_evaluation(iteration))
        best_so_far = max((m["cumulative_solve_rate"] for m in self.store.metrics()), default=None)
        self.store.append_metrics(metrics)
        if best_so_far is None or metrics["cumulative_solve_rate"] > best_so_far:
            self._flag_best_checkpoints(iteration)
        if metrics["system_error_rate"] > SYSTEM_ERROR_ALARM:
            log.warning("!!! iteration %d: %.1f%% of verifications ended in a system error (prover crashes, lost "
                        "workers), above the %.0f%% the results can be trusted with; their samples carry no "
                        "reward. See verification/system_error in metrics.jsonl and the verifier logs.",
                        iteration, 100 * metrics["system_error_rate"], 100 * SYSTEM_ERROR_ALARM)
        tables = M.sample_tables(iteration, conjectures, scores, attempts,
                                 {t.id: t.statement for t in self.store.targets})
        self.monitor.iteration_finished(metrics)
        self.on_metrics(metrics, tables, M.sample_histograms(attempts, list(scores.values())))
        log.info("iteration %d: cumulative solve rate %.3f, pass@k %.3f, %d generations", iteration,
                 metrics["cumulative_solve_rate"], metrics["pass_at_k"], metrics["generations"])
