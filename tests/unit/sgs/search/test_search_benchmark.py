"""What ``python -m sgs.evaluate`` writes in its search and both modes
(:mod:`sgs.search.benchmark`), from hand-made sampling and search results."""

from __future__ import annotations

import json

import pytest

from lean_env.verdict import Status, Verdict
from sgs.analysis.evaluation import SAMPLE_STATUSES, BenchmarkResult, ProblemResult
from sgs.machinery.engines import SamplingSettings
from sgs.search.benchmark import SolverModeResult, _searched, result_table


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
