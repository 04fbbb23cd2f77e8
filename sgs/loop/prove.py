"""The prove phase: the Solver writes k proofs per training target its
objective samples (expert iteration: those with too few stored proofs) and per surviving
conjecture; each chunk of samples goes to the verifier pool the moment the
engine returns it, and the Guide reviews a conjecture as soon as its solve
rate is final (:class:`EarlyReviews`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from lean_env.verdict import ProofTask, Verdict
from sgs.loop.context import Problem, RunContext, attempt_id, review_sample_id, to_completion
from sgs.machinery.engines import EngineGroup, Sample, SamplingSettings
from sgs.machinery.runtime import sampling_settings, solver_settings
from sgs.machinery.streaming import Request
from sgs.method.registry import objective
from sgs.method.rewards import apply_overlong_penalty, solver_reward
from sgs.method.roles import extract_proof
from sgs.state.records import Attempt, Completion, solve_rates
from sgs.state.sample_cache import SampleCache, sample_key
from sgs.state.phase_log import PhaseLog, PhaseStats
from sgs.state.targets import batch_targets


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
            rate = solve_rates(attempts).get(attempt.problem_id)
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


def problems(ctx: RunContext, iteration: int) -> list[Problem]:
    """What the Solver attempts this iteration: training targets, then the
    surviving conjectures (needs the conjecture phase done)."""
    method = ctx.cfg.method
    targets = batch_targets(ctx.store.targets, method.batch_size, ctx.cfg.seed, iteration)
    counts = {t.id: len(ctx.store.solved_registry.proofs(t.id)) for t in targets}
    sample_targets = objective(method.solver_objective).sample_targets
    keep = set(sample_targets([t.id for t in targets], counts, method.max_proofs_per_target))
    targets = [t for t in targets if t.id in keep]
    found = [Problem("target", t.id, t.header, t.statement, t.load_path) for t in targets]
    for c in ctx.store.conjectures(iteration):
        if c.statement is not None:
            target = ctx.store.target(c.target_id)
            found.append(Problem("conjecture", c.id, target.header, c.statement, target.load_path))
    return found


def prove(ctx: RunContext, iteration: int, phase_log: PhaseLog) -> PhaseStats:
    method, sampling, language = ctx.cfg.method, ctx.cfg.sampling.solver, ctx.language
    stored = phase_log.ids("attempt")
    requests = [
        Request(prompt=ctx.rt.prompter.solver(p.header, p.statement),
                sample_ids=[aid for j in range(method.num_solver_samples) if (aid := attempt_id(p, j)) not in stored],
                item=p)
        for p in problems(ctx, iteration)
    ]
    requests = [r for r in requests if r.sample_ids]
    checking: dict[str, tuple[Problem, Completion, str]] = {}
    bar = ctx.bar(iteration, "prove", sum(len(r.sample_ids) for r in requests))

    def keep(aid: str, problem: Problem, completion: Completion, proof: str | None, error: str | None,
             verdict: Verdict | None, reward: float) -> None:
        attempt = Attempt(id=aid, iteration=iteration, problem_id=problem.id, problem_kind=problem.kind,
                          completion=completion, proof=proof, extraction_error=error, verdict=verdict, reward=reward)
        phase_log.append(attempt)
        bar.update()
        if early is not None:
            early.add(attempt)

    def on_sample(request: Request, aid: str, sample: Sample) -> None:
        problem, completion = request.item, to_completion(request.prompt, sample)
        extraction = extract_proof(sample.text, language)
        if not extraction.ok:
            # No proof: reward 0, still subject to the overlong penalty.
            reward = apply_overlong_penalty(0.0, sample.num_tokens, sampling.max_tokens, method.overlong_fraction)
            return keep(aid, problem, completion, None, extraction.failure.value, None, reward)
        checking[aid] = (problem, completion, extraction.value)
        ctx.rt.pool.submit(ProofTask(id=aid, header=problem.header, statement=problem.statement,
                                     proof=extraction.value, load_path=problem.load_path))

    def on_verdict(task: ProofTask, verdict: Verdict) -> None:
        problem, completion, proof = checking.pop(task.id)
        reward = solver_reward(verdict.status.value, proof, completion.num_tokens, sampling.max_tokens, language,
                               penalize_try=method.penalize_try, overlong_threshold=method.overlong_fraction)
        # A system error has no reward (None); it is stored as 0 and the
        # objectives drop it by its status.
        keep(task.id, problem, completion, proof, None, verdict, 0.0 if reward is None else reward)

    early = early_reviews(ctx, iteration, phase_log) if method.use_guide else None

    def draw() -> PhaseStats:
        if not requests:
            return PhaseStats()
        settings = solver_settings(ctx.cfg, seed=ctx.seed(iteration, "prove"))
        # The base weights' samples on the targets are shared between runs:
        # experiments with one seed start from the same samples (paired comparisons).
        starts = ctx.start_samples(iteration)
        shared = (starts, lambda request: request.item.kind == "target") if starts is not None else None
        return ctx.draw(iteration, "prove", "solver", requests, settings, on_sample, on_verdict, shared)

    drawn = with_early_reviews(early, draw)
    bar.close()
    return drawn


def with_early_reviews(early: EarlyReviews | None, work: Callable[[], PhaseStats]) -> PhaseStats:
    """What ``work()`` drew, then the reviews it started (``early``, if any) awaited and
    added; the reviews' cache closed whatever happens."""
    try:
        drawn = work()
        if early is not None:
            early.finish()
            drawn += PhaseStats(tokens=early.tokens)
        return drawn
    finally:
        if early is not None:
            early.close()


def early_reviews(ctx: RunContext, iteration: int, phase_log: PhaseLog,
                  attempts_per_problem: int | None = None) -> EarlyReviews:
    """Guide reviews that start during the prove phase (see :class:`EarlyReviews`), each once its
    conjecture has ``attempts_per_problem`` attempts (default: ``method.num_solver_samples``)."""
    guide = ctx.rt.engines["guide"]
    settings = sampling_settings(ctx.cfg.sampling.guide, n=1, seed=ctx.seed(iteration, "review"))
    cache = SampleCache(ctx.store.sample_cache_path(iteration, "review"), ctx.rt.prompter.token_ids)
    conjectures = {c.id: c for c in ctx.store.conjectures(iteration) if c.statement is not None}

    def prompt(conjecture_id: str) -> str:
        conjecture = conjectures[conjecture_id]
        return ctx.rt.prompter.guide(ctx.store.target(conjecture.target_id), conjecture.statement)

    def key(conjecture_id: str, text: str) -> str:
        return sample_key(text, settings, ctx.weights.current["guide"].version, review_sample_id(conjecture_id))

    early = EarlyReviews(guide, settings, cache, prompt, key,
                         attempts_per_problem or ctx.cfg.method.num_solver_samples)
    for record in phase_log.recovered:
        if isinstance(record, Attempt):
            early.add(record)
    return early
