"""The Solver's search mode on a benchmark: ``python -m sgs.evaluate
evaluation.solver_mode=search`` (or ``both``), docs/search.md.

:func:`search_problems` searches every problem on Ray actors
(:func:`sgs.search.workers.search_all`), each with its own prover session, the
model calls of all of them batched through the engine group that samples
whole proofs (:mod:`sgs.search.engine_calls`), and sends every proof a
search found to the verifier pool, as sampled proofs are: the pool's verdict
decides, so a search is held to the same rules as a sample.

:class:`SolverModeResult` is what the command writes in those modes: per
problem which mode proved it (``proved_by``: ``sample``, ``search`` or
null), and in the summary the solve rate by mode and what each mode
generated (sampling: samples and tokens; search: model calls, samples and
tokens).  pass@k is sampling's measure; the search's is the share of the
problems it was run on that it proved within ``seconds_per_target``
(``proved_within_time``): one search per problem, its proof found in time
and accepted by the verifier pool.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import ray

from lean_env.backends import BackendSpec
from lean_env.verdict import ProofTask
from sgs.analysis.evaluation import PROBLEMS_FILE, SUMMARY_FILE, BenchmarkResult, format_table, read_json, write_json
from sgs.search.engine_calls import EnginePump, TacticQueue
from sgs.search.engine_proposer import TacticReader
from sgs.search.settings import SearchSettings
from sgs.search.workers import ENGINE, ProposerSpec, search_all
from sgs.state.records import Target

__all__ = ["SearchedProblem", "SolverModeResult", "search_problems", "result_table", "HELD_OUT_SEARCH_FILE",
           "held_out_search", "held_out_search_line", "held_out_search_summary"]

#: the status of a problem whose search found no proof (it never reached the verifier pool)
NOT_FOUND = "not_found"


@dataclass(frozen=True)
class SearchedProblem:
    """What the search did on one problem."""

    id: str
    #: the verifier pool's verdict on the proof found (the search's own re-check's, when that
    #: refused it), :data:`NOT_FOUND`, or ``system_error`` (the machinery ended the search:
    #: never counted as a failed proof of the model's)
    status: str
    #: why the search stopped (``completed``, ``time``, ``exhausted``, ...; see ``SearchResult.stop``)
    stop: str
    seconds: float
    model_calls: int
    samples: int
    tokens: int
    expanded: int
    proof: Optional[str] = None
    reason: str = ""

    @property
    def proved(self) -> bool:
        return self.status == "valid"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def search_problems(problems: Sequence[Target], *, engine: Any, pool: Any, tokenizer: Any, sampling: Any,
                    settings: SearchSettings, strategy: str, backend: BackendSpec,
                    workers: int) -> tuple[list[SearchedProblem], int]:
    """Search each problem (``settings.lemma_seconds`` each) and re-check what is
    found with ``pool``; ``engine`` is the running engine group, sampled with
    ``sampling`` (its ``n`` is the search's width) on prompts rendered with
    its ``tokenizer`` (loaded) in ``backend``'s language; the searches step
    ``backend``'s prover, and ``pool`` (checking with the same backend) must have no
    other check outstanding.  Results in problem order, and the engine
    batches the model calls went out in (fewer than the calls: batching)."""
    if not problems:
        return [], 0
    queue = TacticQueue.remote()
    pump = EnginePump(engine, queue, sampling, TacticReader(tokenizer, backend.name))
    spec = ProposerSpec(ENGINE, engine=queue)
    results: dict[str, dict] = {}
    by_id = {p.id: p for p in problems}

    def record(task: ProofTask, result: dict) -> None:
        results[task.id] = result
        if result["proved"]:
            problem = by_id[task.id]
            pool.submit(ProofTask(f"search/{problem.id}", problem.header, problem.statement, result["proof"],
                                  load_path=problem.load_path))

    tasks = [ProofTask(p.id, p.header, p.statement, "", load_path=p.load_path) for p in problems]
    try:
        search_all(tasks, settings=settings, proposer=spec, backend=backend, workers=workers,
                   record=record, strategy=strategy, pump=pump)
    finally:
        ray.kill(queue)
    verdicts: dict[str, Any] = {}
    while pool.outstanding:
        for task, verdict in pool.poll(1.0):
            verdicts[task.id.removeprefix("search/")] = verdict
    return [_searched(p.id, results[p.id], verdicts.get(p.id)) for p in problems], pump.chunks


def _searched(problem_id: str, result: dict, verdict: Any) -> SearchedProblem:
    stats, generation = result.get("stats", {}), result.get("generation", {})
    if verdict is not None:
        status, reason = verdict.status.value, verdict.reason
    elif result["stop"] == "system_error" or (result["verdict"] or {}).get("status") == "system_error":
        status, reason = "system_error", (result["verdict"] or {}).get("reason", "")
    elif result["found"] and result["verdict"] is not None:
        # Found, but refused by the search's own re-check: the pool never saw it.
        status, reason = result["verdict"]["status"], result["verdict"]["reason"]
    else:
        status, reason = NOT_FOUND, ""
    return SearchedProblem(problem_id, status, result["stop"], stats.get("seconds", 0.0),
                           generation.get("model_calls", 0), generation.get("samples", 0),
                           generation.get("tokens", 0), stats.get("expanded", 0),
                           result["proof"] if status == "valid" else None, reason)


#: a search-mode run's held-out evaluation, in its run directory: {policy version: summary}
HELD_OUT_SEARCH_FILE = "held_out_search.json"


def held_out_search_summary(searched: Sequence[SearchedProblem], policy_version: int,
                            seconds_per_target: float) -> dict:
    """One search per held-out target: the share proved within the time, over the searches
    the machinery did not end (``system_error`` is never a failed proof, and is counted apart)."""
    statuses = Counter(p.status for p in searched)
    judged = len(searched) - statuses["system_error"]
    return {"policy_version": policy_version, "targets": len(searched), "proved": statuses["valid"],
            "system_errors": statuses["system_error"],
            "proved_within_time": statuses["valid"] / judged if judged else None,
            "seconds_per_target": seconds_per_target, "model_calls": sum(p.model_calls for p in searched),
            "statuses": dict(statuses)}


def held_out_search(run_dir: str | os.PathLike, targets: Sequence[Target], policy_version: int,
                    seconds_per_target: float,
                    search: Callable[[list[Target]], list[SearchedProblem]]) -> Optional[dict]:
    """The held-out ``targets`` searched once each (``search``: :func:`search_problems` bound
    to the run's engines, pool and settings) with the weights at ``policy_version``, kept in
    ``run_dir/held_out_search.json`` under that version: a resumed or repeated call reads
    the stored result.  None when no target is held out."""
    held_out = [t for t in targets if t.held_out]
    if not held_out:
        return None
    path = Path(run_dir) / HELD_OUT_SEARCH_FILE
    stored = read_json(path) or {}
    version = str(policy_version)
    if version not in stored:
        stored[version] = held_out_search_summary(search(held_out), policy_version, seconds_per_target)
        write_json(path, stored)
    return stored[version]


def held_out_search_line(before: Optional[dict], after: dict) -> str:
    """The run summary's line for the held-out searches (:func:`held_out_search`'s results)."""
    def rate(result: dict) -> str:
        shown = "n/a" if result["proved_within_time"] is None else f"{result['proved_within_time']:.3f}"
        errors = f", {result['system_errors']} system error(s)" if result["system_errors"] else ""
        return f"{shown} ({result['proved']} proved, policy version {result['policy_version']}{errors})"

    return (f"held-out proved by one search each ({after['seconds_per_target']:g} s) on {after['targets']} "
            f"targets: {'not measured' if before is None else rate(before)} -> {rate(after)}")


@dataclass(frozen=True)
class SolverModeResult:
    """A benchmark evaluation in ``search`` or ``both`` mode (module docstring)."""

    mode: str
    benchmark: str
    checkpoint: str
    policy_version: Optional[int]
    language: str
    #: every problem's id, in benchmark order
    problem_ids: tuple[str, ...]
    #: the sampling pass (``both``), else None
    sampled: Optional[BenchmarkResult]
    #: the searches, on every problem (``search``) or on those no sample proved (``both``)
    searched: tuple[SearchedProblem, ...]
    seconds_per_target: float
    #: the search's settings and strategy, as run
    search_settings: dict
    search_seconds: float
    #: engine submissions the search's model calls went out in (one batch per engine each)
    engine_batches: int = 0
    wall_seconds: Optional[float] = None

    def proved_by(self) -> dict[str, Optional[str]]:
        sampled = {p.id for p in self.sampled.problems if p.c > 0} if self.sampled is not None else set()
        searched = {p.id for p in self.searched if p.proved}
        return {i: "sample" if i in sampled else "search" if i in searched else None for i in self.problem_ids}

    def solve_rate(self) -> dict[str, float]:
        """Share of all the problems proved by sampling, by the search, and by either."""
        counts = Counter(self.proved_by().values())
        total = len(self.problem_ids)
        return {"sample": counts["sample"] / total, "search": counts["search"] / total,
                "total": (counts["sample"] + counts["search"]) / total}

    def generations(self) -> dict[str, dict[str, int]]:
        out = {"search": {"model_calls": sum(p.model_calls for p in self.searched),
                          "samples": sum(p.samples for p in self.searched),
                          "tokens": sum(p.tokens for p in self.searched)}}
        if self.sampled is not None:
            out["sample"] = {"samples": sum(p.n for p in self.sampled.problems),
                             "tokens": sum(p.tokens for p in self.sampled.problems)}
        return out

    def search_summary(self) -> dict:
        proved = sum(p.proved for p in self.searched)
        return {**self.search_settings, "seconds_per_target": self.seconds_per_target,
                "problems": len(self.searched), "proved": proved,
                "proved_within_time": proved / len(self.searched) if self.searched else None,
                "statuses": dict(Counter(p.status for p in self.searched)), "seconds": self.search_seconds,
                "engine_batches": self.engine_batches}

    def problem_lines(self) -> list[dict]:
        sampled = {line["id"]: line for line in self.sampled.problem_lines()} if self.sampled is not None else {}
        searched = {p.id: p.to_json() for p in self.searched}
        by = self.proved_by()
        return [{**sampled.get(i, {"id": i}), "proved_by": by[i], "search": searched.get(i)}
                for i in self.problem_ids]

    def to_json(self) -> dict:
        head = (self.sampled.to_json() if self.sampled is not None else
                {"benchmark": self.benchmark, "checkpoint": self.checkpoint, "policy_version": self.policy_version,
                 "language": self.language, "problems": len(self.problem_ids)})
        return {**head, "solver_mode": self.mode, "solve_rate": self.solve_rate(),
                "generations": self.generations(), "search": self.search_summary(),
                "wall_seconds": self.wall_seconds}

    def write(self, directory: str | os.PathLike) -> tuple[Path, Path]:
        """``problems.jsonl`` and ``summary.json`` in ``directory``, as a sampling evaluation writes them."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        problems_path, summary_path = directory / PROBLEMS_FILE, directory / SUMMARY_FILE
        tmp = problems_path.with_name(f".{problems_path.name}.{os.getpid()}.tmp")
        tmp.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in self.problem_lines()))
        os.replace(tmp, problems_path)
        write_json(summary_path, self.to_json())
        return problems_path, summary_path


def result_table(result: BenchmarkResult | SolverModeResult) -> str:
    """What the command prints: pass@k when it sampled, the search's figures when it searched."""
    if isinstance(result, BenchmarkResult):
        return format_table(result)
    lines = [format_table(result.sampled)] if result.sampled is not None else [
        f"== {result.benchmark}: {len(result.problem_ids)} problems =="]
    search, rates, generated = result.search_summary(), result.solve_rate(), result.generations()
    lines.append(f"search ({search['strategy']}, {result.seconds_per_target:g} s per target) on "
                 f"{search['problems']} problems: proved {search['proved']} "
                 f"({', '.join(f'{s} {n}' for s, n in sorted(search['statuses'].items()))}); {search['seconds']:.1f} s")
    lines.append(f"solved: {rates['total']:.3f} of {len(result.problem_ids)} problems "
                 f"(sampling {rates['sample']:.3f}, search {rates['search']:.3f})")
    lines.append(f"search generated: {generated['search']['model_calls']} model calls "
                 f"(in {result.engine_batches} engine batches), {generated['search']['samples']} samples, "
                 f"{generated['search']['tokens']} tokens")
    if result.sampled is None:
        lines.append(f"checkpoint: {result.checkpoint}" + ("" if result.wall_seconds is None
                                                             else f"; {result.wall_seconds:.0f} s in all"))
    return "\n".join(lines)

