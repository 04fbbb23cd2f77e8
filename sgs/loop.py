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
never counted.  Checkpoints count once the training phase that wrote them is
done; policy version v is the weights after iteration v - 1 (0 = the base).

Ray plumbing (submitting chunks, waiting on them and on verdicts) is kept in
:func:`submit` and :func:`stream`; the phases themselves only decide what to
sample and what to make of the results.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
import zlib
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import asdict, dataclass, replace
from typing import Any

import ray
from tqdm import tqdm

from lean_env.verdict import ProofTask, Status, Verdict
from sgs import metrics as M
from sgs import objectives
from sgs.config import SGSConfig
from sgs.engines import EngineGroup, Sample, SamplingSettings
from sgs.learner import TrainExample, train
from sgs.records import Attempt, Completion, Conjecture, ConjectureScore, Target, prompt_digest
from sgs.rewards import (
    apply_overlong_penalty,
    conjecturer_reward,
    conjecturer_weights,
    guide_batch_rewards,
    keep_conjectures,
    solver_reward,
)
from sgs.roles import canonical_form, conjecture_name, extract_conjecture, extract_guide_scores, extract_proof
from sgs.roles import rename_theorem
from sgs.runtime import Checkpoint, Runtime, sampling_settings, train_settings
from sgs.store import PhaseLog, Store

log = logging.getLogger(__name__)

PHASES = ("conjecture", "prove", "review", "train_solver", "train_conjecturer", "record")
#: The phases that write records (the others only commit a marker).
RECORD_PHASES = frozenset({"conjecture", "prove", "review"})
#: Which role each training phase updates.
TRAINING_PHASES = {"train_solver": "solver", "train_conjecturer": "conjecturer"}
#: The learner's numbers, saved beside the checkpoint they describe.
TRAIN_METRICS_FILE = "sgs_train_metrics.json"
#: Engine calls per engine and phase: more chunks start verification sooner.
CHUNKS_PER_ENGINE = 4

# Why a Conjecturer sample was dropped after its statement was extracted
# (before that, the reason is the extractor's sgs.roles.Failure value).
DUPLICATE_OF_TARGET = "duplicate_of_target"
DUPLICATE_CONJECTURE = "duplicate_conjecture"


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


def batch_targets(targets: Sequence[Target], batch_size: int | None, seed: int, iteration: int) -> list[Target]:
    """The iteration's training targets: all of them, or a seeded subsample of
    ``batch_size`` (kept in source order), the same on every resume."""
    training = [t for t in targets if not t.held_out]
    if batch_size is None or batch_size >= len(training):
        return training
    chosen = set(random.Random(f"{seed}/{iteration}").sample(range(len(training)), batch_size))
    return [t for i, t in enumerate(training) if i in chosen]


def derived_seed(seed: int, iteration: int, phase: str) -> int:
    """A sampling / shuffling seed per run seed, iteration and phase."""
    return zlib.crc32(f"{seed}/{iteration}/{phase}".encode())


def conjecture_id(iteration: int, target_id: str, index: int) -> str:
    return f"it{iteration}/{target_id}/c{index}"


def attempt_id(problem: Problem, index: int) -> str:
    return f"{problem.kind}/{problem.id}/a{index}"


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
    output: str, language: str, target_forms: Set[str], seen: set[str]
) -> tuple[str | None, str | None]:
    """``(statement, None)`` for a well-formed conjecture that is new, or
    ``(None, rejection reason)``.

    New means: not a target and not an earlier conjecture of ``seen``, both up
    to renaming (canonical forms); a new one's form is added to ``seen``.  The
    statement gets a fresh name derived from its form: the model's own name
    could collide with a target's, or flatter the Guide.
    """
    extraction = extract_conjecture(output, language)
    if not extraction.ok:
        return None, extraction.failure.value
    form = canonical_form(extraction.value, language)
    if form in target_forms:
        return None, DUPLICATE_OF_TARGET
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


# --------------------------------------------------------------------------
# Ray plumbing: sampling and streaming
# --------------------------------------------------------------------------


@dataclass
class Request:
    """Samples wanted for one prompt: one record id per sample."""

    prompt: str
    sample_ids: list[str]
    item: Any  # what the samples are for: a Target or a Problem


def submit(engine: EngineGroup, requests: Sequence[Request], settings: SamplingSettings) -> dict:
    """Queue every request on the engine group; returns {chunk ref: its requests}.

    Requests wanting the same number of samples share one call (a resumed
    phase may want fewer than k for a few problems).
    """
    by_count: dict[int, list[Request]] = {}
    for request in requests:
        by_count.setdefault(len(request.sample_ids), []).append(request)
    pending = {}
    for n, group in by_count.items():
        chunk = max(1, math.ceil(len(group) / (len(engine.actors) * CHUNKS_PER_ENGINE)))
        for ref, indices in engine.submit([r.prompt for r in group], replace(settings, n=n), chunk_size=chunk):
            pending[ref] = [group[i] for i in indices]
    return pending


def stream(
    pending: dict,
    on_sample: Callable[[Request, str, Sample], None],
    pool: Any = None,
    on_verdict: Callable[[ProofTask, Verdict], None] | None = None,
) -> None:
    """Hand each sample to ``on_sample`` as its chunk returns, and each verdict
    to ``on_verdict`` as the pool answers, until every chunk is back and every
    check ``on_sample`` submitted is answered.  Generation and verification
    overlap: the pool checks one chunk while the engines write the next."""
    while pending or (pool is not None and pool.outstanding):
        checking = pool is not None and pool.outstanding > 0
        if pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=0.05 if checking else 1.0)
            for ref in done:
                for request, samples in zip(pending.pop(ref), ray.get(ref)):
                    for sample_id, sample in zip(request.sample_ids, samples):
                        on_sample(request, sample_id, sample)
        if pool is not None and pool.outstanding:
            for task, verdict in pool.poll(timeout=0.0 if pending else 1.0):
                on_verdict(task, verdict)


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
        on_metrics: Callable[[dict], None] = lambda metrics: None,
    ):
        """``weights``: what the Solver and Conjecturer engines were started on
        (:func:`current_weights`); ``on_metrics`` receives each metrics line."""
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
        if phase in RECORD_PHASES:
            getattr(self, phase)(iteration, self.store.begin_phase(iteration, phase))
        else:
            getattr(self, phase)(iteration)
        seconds = time.perf_counter() - start
        self._stats[iteration, phase] = M.PhaseStats(seconds, self._tokens, self._verifications)
        self.seconds[phase] += seconds
        self.store.mark_done(iteration, phase)
        if phase in TRAINING_PHASES:
            # Only now: until the phase is done, an older checkpoint is the one a resume loads.
            self.store.prune_checkpoints(TRAINING_PHASES[phase], self.cfg.training.keep_checkpoints)

    def _bar(self, iteration: int, phase: str, total: int) -> tqdm:
        return tqdm(total=total, desc=f"iter {iteration} {phase}", unit="sample", leave=False,
                    disable=not self.cfg.logging.progress_bars)

    def _seed(self, iteration: int, phase: str) -> int:
        return derived_seed(self.cfg.seed, iteration, phase)

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
            self._tokens += sample.num_tokens
            target, completion = request.item, to_completion(request.prompt, sample)
            statement, rejection = screen_conjecture(sample.text, self.language, self._target_forms, seen)
            if rejection is not None:
                return keep(cid, target, completion, None, rejection)
            checking[cid] = (target, completion, statement)
            self.rt.pool.submit_statement(ProofTask(id=cid, header=target.header, statement=statement, proof=""))

        def on_verdict(task: ProofTask, verdict: Verdict) -> None:
            self._verifications += 1
            target, completion, statement = checking.pop(task.id)
            if verdict.valid:
                keep(task.id, target, completion, statement, None)
            else:
                keep(task.id, target, completion, None, elaboration_failure(verdict.status))

        if requests:
            settings = sampling_settings(self.cfg.sampling.conjecturer, n=1, seed=self._seed(iteration, "conjecture"))
            stream(submit(self.rt.engines["conjecturer"], requests, settings), on_sample, self.rt.pool, on_verdict)
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
            phase_log.append(Attempt(id=aid, iteration=iteration, problem_id=problem.id, problem_kind=problem.kind,
                                     completion=completion, proof=proof, extraction_error=error, verdict=verdict,
                                     reward=reward))
            bar.update()

        def on_sample(request: Request, aid: str, sample: Sample) -> None:
            self._tokens += sample.num_tokens
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
            self._verifications += 1
            problem, completion, proof = checking.pop(task.id)
            reward = solver_reward(verdict.status.value, proof, completion.num_tokens, sampling.max_tokens,
                                   self.language, penalize_try=method.penalize_try,
                                   overlong_threshold=method.overlong_fraction)
            # A system error has no reward (None); it is stored as 0 and the
            # objectives drop it by its status.
            keep(task.id, problem, completion, proof, None, verdict, 0.0 if reward is None else reward)

        if requests:
            settings = sampling_settings(sampling, n=1, seed=self._seed(iteration, "prove"))
            stream(submit(self.rt.engines["solver"], requests, settings), on_sample, self.rt.pool, on_verdict)
        bar.close()

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
        prompts = [self.rt.prompter.guide(self.store.target(c.target_id), c.statement) for c in conjectures]
        settings = sampling_settings(self.cfg.sampling.guide, n=1, seed=self._seed(iteration, "review"))
        samples = self.rt.engines["guide"].generate(prompts, settings)
        self._tokens += sum(s[0].num_tokens for s in samples)
        return [s[0].text for s in samples]

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
        result = train(examples, base_checkpoint=self.weights[role].path, objective=objective, settings=settings,
                       output_dir=str(output), run_name=f"{self.run_name}-{role}-{iteration:04d}")
        (output / TRAIN_METRICS_FILE).write_text(json.dumps(asdict(result.metrics)))
        self.weights[role] = Checkpoint(result.checkpoint_dir, iteration + 1)
        self.rt.engines[role].load_weights(result.checkpoint_dir, iteration + 1)

    def _training_numbers(self, iteration: int) -> dict[str, dict]:
        numbers = {}
        for role in TRAINING_PHASES.values():
            path = self.store.checkpoint_dir(role, iteration) / TRAIN_METRICS_FILE
            if path.is_file():
                numbers[role] = json.loads(path.read_text())
        return numbers

    # -- record --------------------------------------------------------------

    def record(self, iteration: int) -> None:
        registry = self.store.solved_registry
        metrics = M.iteration_metrics(
            iteration=iteration,
            attempts=self.store.attempts(iteration),
            conjectures=self.store.conjectures(iteration),
            scores=list(self.store.conjecture_scores(iteration).values()),
            training_ids=[t.id for t in self.store.targets if not t.held_out],
            k=self.cfg.method.num_solver_samples,
            language=self.language,
            generations=self.store.generations(through_iteration=iteration),
            cumulative_solve_rate=registry.cumulative_solve_rate(through_iteration=iteration),
            phases={phase: stats for (i, phase), stats in self._stats.items() if i == iteration},
            training=self._training_numbers(iteration),
        )
        self.store.append_metrics(metrics)
        self.on_metrics(metrics)
        log.info("iteration %d: cumulative solve rate %.3f, pass@k %.3f, %d generations", iteration,
                 metrics["cumulative_solve_rate"], metrics["pass_at_k"], metrics["generations"])
