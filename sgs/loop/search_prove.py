"""The prove phase in search mode (``solver.mode=search``; docs/search.md, "In self-play").

The Solver attempts the same problems as in sample mode (:func:`sgs.loop.prove.problems`:
the training targets its objective samples, then the surviving conjectures),
``solver.attempts`` searches each.  The searches run as
``python -m sgs.evaluate``'s do (:func:`sgs.search.workers.search_all`: one Ray
actor and one Rocq session per search, the run's prover settings, tactics
sampled at the Solver's temperature through the run's own Solver engines by
an :class:`~sgs.search.engine_calls.EnginePump`), ``solver.seconds_per_attempt``
each.  A proof a search found and its own re-check accepted goes to the run's
verifier pool like a sampled proof, and the pool's verdict is the attempt's:
the reward, the solve rate and the solved registry read only that.  A found
proof the search's re-check refused keeps that verdict (it never earns a
reward); a search the machinery ended is a ``system_error`` (no reward, left
out of solve rates), and one that found nothing is a failed attempt.

Each attempt is stored as it ends: its :class:`~sgs.loop.search_steps.SearchRecord`
line first, then the attempt; a killed phase redoes only the searches whose
attempts were not stored.  The Guide's early reviews start as in sample mode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import ray

from lean_env.verdict import ProofTask, Status, Verdict
from sgs.config import RoleSampling, SGSConfig, attempt_expansions
from sgs.config.evaluation import SolverSearchConfig
from sgs.loop.context import Problem, RunContext, attempt_id
from sgs.loop.prove import early_reviews, problems, with_early_reviews
from sgs.loop.search_steps import search_record, searches_path
from sgs.machinery.engines import SamplingSettings
from sgs.machinery.runtime import backend_spec
from sgs.method.rewards import solver_reward
from sgs.search.engine_calls import EnginePump, TacticQueue
from sgs.search.engine_proposer import TacticReader
from sgs.search.languages import finishers_for
from sgs.search.settings import SearchSettings
from sgs.search.workers import ENGINE, ProposerSpec, search_all
from sgs.state.files import append_line, cut_torn_tail
from sgs.state.phase_log import PhaseLog, PhaseStats
from sgs.state.records import Attempt, Completion, prompt_digest

__all__ = ["NOT_FOUND", "prove_by_search", "search_attempt", "search_settings", "search_verdict", "tactic_sampling"]

#: An attempt whose search found no proof (its ``extraction_error``, followed by why the search stopped).
NOT_FOUND = "search_not_found"


def search_settings(search: SolverSearchConfig, language: str, seconds: float, recheck_seconds: float,
                    expansions: int | None = None) -> SearchSettings:
    """One search of the ``search`` node in ``language``, ``seconds`` long (a tactic never
    longer), expanding at most ``expansions`` states (None: as many as the time allows);
    the node's finishers, or the language's own when it names none."""
    return SearchSettings(width=search.width, max_depth=search.max_depth, lemma_seconds=seconds,
                          tactic_seconds=min(search.tactic_seconds, seconds),
                          finishers=finishers_for(search.finishers, language),
                          recheck_seconds=recheck_seconds,
                          **({"max_expansions": expansions} if expansions is not None else {}))


def tactic_sampling(search: SolverSearchConfig, solver: RoleSampling) -> SamplingSettings:
    """One model call of the search: ``width`` tactics at the Solver's temperature and top-p,
    fresh randomness per call (so two searches of one problem differ)."""
    return SamplingSettings(n=max(search.width, 1), max_tokens=search.tactic_max_tokens,
                            temperature=solver.temperature, top_p=solver.top_p)


def search_verdict(result: Mapping[str, Any]) -> Verdict | None:
    """The verdict of a search the verifier pool did not check: ``system_error`` when the
    machinery ended it, the search's own re-check's when that refused the path it found,
    None when it found nothing."""
    verdict = result.get("verdict") or {}
    if result["stop"] == "system_error" or verdict.get("status") == Status.SYSTEM_ERROR.value:
        return Verdict(Status.SYSTEM_ERROR, verdict.get("reason", "") or "search_system_error")
    if result.get("found") and verdict:
        return Verdict(Status(verdict["status"]), verdict.get("reason", ""))
    return None


def search_attempt(aid: str, iteration: int, problem: Problem, prompt: str, policy_version: int,
                   result: Mapping[str, Any], verdict: Verdict | None, cfg: SGSConfig) -> Attempt:
    """The attempt record of one search: its proof (empty when the search's re-check refused
    it, or the machinery ended the search) with ``verdict``, or none when nothing was found.
    The completion holds the proof's text only: a search's tokens are its model calls'
    (its :class:`~sgs.loop.search_steps.SearchRecord`), none of them a sample of ``prompt``."""
    proof = (result.get("proof") or "") if verdict is not None else None
    completion = Completion(prompt_sha256=prompt_digest(prompt), text=proof or "", token_ids=[], logprobs=[],
                            policy_version=policy_version, finish_reason=f"search:{result['stop']}", entropy=0.0)
    if verdict is None:
        return Attempt(id=aid, iteration=iteration, problem_id=problem.id, problem_kind=problem.kind,
                       completion=completion, proof=None, extraction_error=f"{NOT_FOUND}:{result['stop']}",
                       verdict=None, reward=0.0)
    method = cfg.method
    reward = solver_reward(verdict.status.value, proof, 0, cfg.sampling.solver.max_tokens, cfg.prover.language,
                           penalize_try=method.penalize_try, overlong_threshold=method.overlong_fraction)
    return Attempt(id=aid, iteration=iteration, problem_id=problem.id, problem_kind=problem.kind,
                   completion=completion, proof=proof, extraction_error=None, verdict=verdict,
                   reward=0.0 if reward is None else reward)


class SearchAttempts:
    """The searches' results in, the pool's verdicts in, each attempt stored as it ends."""

    def __init__(self, ctx: RunContext, iteration: int, phase_log: PhaseLog, todo: Mapping[str, Problem],
                 on_attempt: Callable[[Attempt], None]) -> None:
        self.ctx, self.iteration, self.phase_log, self.todo = ctx, iteration, phase_log, todo
        self.on_attempt = on_attempt
        self.path = searches_path(ctx.store.run_dir, iteration)
        if self.path.exists():
            cut_torn_tail(self.path)  # a line a killed run was writing
        self.version = ctx.weights.current["solver"].version
        #: attempt id -> the search whose proof the pool is checking
        self.checking: dict[str, Mapping[str, Any]] = {}
        self.tokens = self.verifications = 0

    def searched(self, task: ProofTask, result: Mapping[str, Any]) -> None:
        """``search_all``'s callback: one search ended."""
        if result["proved"]:
            problem = self.todo[task.id]
            self.checking[task.id] = result
            self.ctx.rt.pool.submit(ProofTask(task.id, problem.header, problem.statement, result["proof"],
                                              load_path=problem.load_path))
        else:
            self.keep(task.id, result, search_verdict(result), pool_checked=False)
        self.collect(0.0)

    def collect(self, timeout: float) -> None:
        """Store the attempts whose verdicts are back (waiting up to ``timeout`` for the first)."""
        if not self.checking:
            return
        pool = self.ctx.rt.pool
        for task, verdict in pool.poll(timeout):
            self.verifications += 1
            self.ctx.monitor.verified(verdict.status, pool.outstanding)
            self.keep(task.id, self.checking.pop(task.id), verdict, pool_checked=True)

    def finish(self) -> None:
        while self.checking:
            self.collect(1.0)

    def keep(self, aid: str, result: Mapping[str, Any], verdict: Verdict | None, *, pool_checked: bool) -> None:
        problem = self.todo[aid]
        status = verdict.status.value if verdict is not None else NOT_FOUND
        record = search_record(aid, problem.id, result, status, pool_checked)
        append_line(self.path, record.to_json())
        prompt = self.ctx.rt.prompter.solver(problem.header, problem.statement)
        attempt = search_attempt(aid, self.iteration, problem, prompt, self.version, result, verdict, self.ctx.cfg)
        self.phase_log.append(attempt)
        self.tokens += record.tokens
        self.on_attempt(attempt)


def run_searches(ctx: RunContext, todo: Mapping[str, Problem], attempts: SearchAttempts,
                 budgets: Mapping[str, int | None]) -> int:
    """Search every attempt of ``todo`` through the Solver's engines, each expanding at most
    its ``budgets`` states; the engine batches the model calls went out in."""
    cfg, solver = ctx.cfg, ctx.cfg.solver
    backend = backend_spec(cfg.prover)
    queue = TacticQueue.remote()
    pump = EnginePump(ctx.rt.engines["solver"], queue, tactic_sampling(solver.search, cfg.sampling.solver),
                      TacticReader(ctx.rt.prompter.tokenizer, backend.name))
    tasks = [ProofTask(aid, p.header, p.statement, "", load_path=p.load_path) for aid, p in todo.items()]
    try:
        settings = {budget: search_settings(solver.search, backend.name, solver.seconds_per_attempt,
                                            cfg.prover.timeout, budget)
                    for budget in set(budgets.values())}
        search_all(tasks, settings=lambda task: settings[budgets[task.id]],
                   proposer=ProposerSpec(ENGINE, engine=queue), backend=backend,
                   workers=solver.search.workers, record=attempts.searched, strategy=str(solver.search.strategy),
                   pump=pump)
    finally:
        ray.kill(queue)
    attempts.finish()
    return pump.chunks


def prove_by_search(ctx: RunContext, iteration: int, phase_log: PhaseLog) -> PhaseStats:
    """The prove phase of ``solver.mode=search`` (module docstring)."""
    solver = ctx.cfg.solver
    stored = phase_log.ids("attempt")
    todo, budgets = {}, {}
    for problem in problems(ctx, iteration):
        for j in range(solver.attempts):
            if (aid := attempt_id(problem, j)) not in stored:
                todo[aid], budgets[aid] = problem, attempt_expansions(solver, j)
    bar = ctx.bar(iteration, "prove", len(todo))
    early = early_reviews(ctx, iteration, phase_log, solver.attempts) if ctx.cfg.method.use_guide else None

    def on_attempt(attempt: Attempt) -> None:
        bar.update()
        if early is not None:
            early.add(attempt)

    attempts = SearchAttempts(ctx, iteration, phase_log, todo, on_attempt)

    def search() -> PhaseStats:
        if todo:
            run_searches(ctx, todo, attempts, budgets)
        return PhaseStats(tokens=attempts.tokens, verifications=attempts.verifications)

    drawn = with_early_reviews(early, search)
    bar.close()
    return drawn
