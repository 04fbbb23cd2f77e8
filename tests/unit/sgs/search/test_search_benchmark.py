"""What ``python -m sgs.evaluate`` writes in its search and both modes, and a
search-mode run's held-out searches (:mod:`sgs.search.benchmark`), from
hand-made sampling and search results."""

from __future__ import annotations

import json

import pytest

from lean_env.verdict import Status, Verdict
from sgs.analysis.evaluation import SAMPLE_STATUSES, BenchmarkResult, ProblemResult
from sgs.machinery.engines import SamplingSettings
from sgs.search.benchmark import (HELD_OUT_SEARCH_FILE, NOT_FOUND, SearchedProblem, SolverModeResult, _searched,
                                  held_out_search, held_out_search_line, result_table)
from sgs.state.records import Target


def statuses(valid: int, invalid: int) -> dict[str, int]:
    return {**{s: 0 for s in SAMPLE_STATUSES}, "valid": valid, "invalid": invalid}


def worker_result(stop: str, proof: str | None = None, verdict: dict | None = None, calls: int = 0) -> dict:
    """A :meth:`SearchWorker.search` answer."""
    return {"proved": proof is not None, "found": stop == "completed", "stop": stop, "proof": proof,
            "verdict": verdict, "stats": {"seconds": 1.5, "expanded": 3},
            "generation": {"model_calls": calls, "samples": 4 * calls, "tokens": 20 * calls}}


def test_both_modes_say_who_proved_what_and_what_each_generated(tmp_path):
    sampled = BenchmarkResult("bench", "ckpt", 0, "rocq", (1, 4), 0.95, SamplingSettings(n=4, seed=0),
                              (ProblemResult("a", statuses(1, 3), tokens=40), ProblemResult("b", statuses(0, 4), 50),
                               ProblemResult("c", statuses(0, 4), 60), ProblemResult("d", statuses(0, 4), 70)),
                              seconds=2.0)
    valid = Verdict(Status.VALID, "ok", (), 0.3)
    searched = (
        _searched("b", worker_result("completed", "Proof.\n  lia.\nQed.", {"status": "valid", "reason": "ok"}, 2),
                  valid),
        _searched("c", worker_result("time", calls=5), None),
        _searched("d", worker_result("system_error", verdict={"status": "system_error", "reason": "worker died"}),
                  None),
    )
    result = SolverModeResult("both", "bench", "ckpt", 0, "rocq", ("a", "b", "c", "d"), sampled, searched, 10.0,
                              {"strategy": "best_first", "width": 4}, search_seconds=12.0, engine_batches=5)
    assert result.proved_by() == {"a": "sample", "b": "search", "c": None, "d": None}
    assert result.solve_rate() == {"sample": 0.25, "search": 0.25, "total": 0.5}
    assert result.generations() == {"search": {"model_calls": 7, "samples": 28, "tokens": 140},
                                    "sample": {"samples": 16, "tokens": 220}}
    problems_path, summary_path = result.write(tmp_path)
    lines = {line["id"]: line for line in map(json.loads, problems_path.read_text().splitlines())}
    assert lines["a"]["search"] is None and lines["a"]["c"] == 1 and lines["a"]["tokens"] == 40
    assert lines["b"]["search"]["status"] == "valid" and lines["b"]["search"]["proof"] == "Proof.\n  lia.\nQed."
    assert (lines["c"]["search"]["status"], lines["c"]["search"]["stop"]) == ("not_found", "time")
    assert (lines["d"]["search"]["status"], lines["d"]["search"]["reason"]) == ("system_error", "worker died")
    summary = json.loads(summary_path.read_text())
    assert summary["pass_at_k"]["1"]["pass_at_k"] == pytest.approx(0.25 / 4)  # sampling's pass@k is still there
    assert summary["solver_mode"] == "both" and summary["tokens"] == 220
    # The search ran on the three problems sampling left, and proved one of them in time.
    assert summary["search"] == {"strategy": "best_first", "width": 4, "seconds_per_target": 10.0, "problems": 3,
                                 "proved": 1, "proved_within_time": pytest.approx(1 / 3),
                                 "statuses": {"valid": 1, "not_found": 1, "system_error": 1}, "seconds": 12.0,
                                 "engine_batches": 5}
    table = result_table(result)
    assert "search (best_first, 10 s per target) on 3 problems: proved 1" in table
    assert "solved: 0.500 of 4 problems (sampling 0.250, search 0.250)" in table
    assert "search generated: 7 model calls (in 5 engine batches), 28 samples, 140 tokens" in table


def test_a_proof_the_searchs_own_recheck_refused_is_not_proved():
    found = worker_result("completed", None, {"status": "invalid", "reason": "prover_error"}, 1)
    problem = _searched("x", found, None)
    assert (problem.status, problem.reason, problem.proved, problem.proof) == ("invalid", "prover_error", False, None)


def searched(problem_id: str, status: str, calls: int = 2) -> SearchedProblem:
    return SearchedProblem(problem_id, status, "completed" if status == "valid" else "time", 1.0, calls, 4 * calls,
                           20 * calls, 3)


def test_held_out_searches_are_measured_once_per_policy_version_and_a_system_error_is_not_a_failure(tmp_path):
    targets = [Target(id=name, header="", statement=f"Theorem {name} : True.", held_out=name != "train")
               for name in ("train", "h1", "h2", "h3")]
    runs = []

    def search(held_out):
        runs.append([t.id for t in held_out])
        return [searched("h1", "valid"), searched("h2", NOT_FOUND), searched("h3", "system_error", calls=0)]

    first = held_out_search(tmp_path, targets, 0, 6.0, search)
    assert runs == [["h1", "h2", "h3"]]             # the held-out targets only
    # 1 proved of the 2 searches the machinery did not end
    assert first == {"policy_version": 0, "targets": 3, "proved": 1, "system_errors": 1, "proved_within_time": 0.5,
                     "seconds_per_target": 6.0, "model_calls": 4,
                     "statuses": {"valid": 1, NOT_FOUND: 1, "system_error": 1}}
    assert held_out_search(tmp_path, targets, 0, 6.0, search) == first and len(runs) == 1   # stored: not again
    after = held_out_search(tmp_path, targets, 2, 6.0, lambda held: [searched(t.id, "valid") for t in held])
    assert json.loads((tmp_path / HELD_OUT_SEARCH_FILE).read_text()) == {"0": first, "2": after}
    assert held_out_search_line(first, after) == (
        "held-out proved by one search each (6 s) on 3 targets: 0.500 (1 proved, policy version 0, 1 system "
        "error(s)) -> 1.000 (3 proved, policy version 2)")
    assert held_out_search_line(None, after).startswith("held-out proved by one search each (6 s) on 3 targets: "
                                                         "not measured -> ")
    assert held_out_search(tmp_path / "none", targets[:1], 0, 6.0, search) is None and len(runs) == 1
