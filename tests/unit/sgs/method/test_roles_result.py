"""Extraction results and the per-role failure counter."""

import pytest

from sgs.method.roles import Extraction, Failure, FailureCounter, Role, extract_guide_scores, extract_proof


def test_extraction_outcome():
    assert Extraction.success("x").outcome == "ok"
    failed = Extraction.fail(Failure.MISSING_BY, "why")
    assert (failed.ok, failed.outcome, failed.detail) == (False, "missing_by", "why")


def test_counter_tallies_outcomes_per_role():
    counter = FailureCounter()
    for output in ["```lean4\ntheorem t : P := by simp\n```", "no block", "no block either"]:
        counter.add(Role.SOLVER, extract_proof(output, "lean"))
    counter.add("guide", extract_guide_scores("nothing"))
    assert counter.count(Role.SOLVER, "ok") == 1
    assert counter.count("solver", Failure.NO_CODE_BLOCK) == 2
    assert counter.total(Role.SOLVER) == 3
    assert counter.failures(Role.SOLVER) == 2
    assert counter.failures(Role.GUIDE) == 1
    assert counter.total(Role.CONJECTURER) == 0
    assert counter.as_dict() == {"guide/missing_tag": 1, "solver/no_code_block": 2, "solver/ok": 1}


def test_counters_merge():
    a, b = FailureCounter(), FailureCounter()
    a.add(Role.CONJECTURER, Extraction.fail(Failure.SEVERAL_BY))
    b.add(Role.CONJECTURER, Extraction.fail(Failure.SEVERAL_BY))
    b.add(Role.CONJECTURER, Extraction.success("theorem t : True := by"))
    a.update(b)
    assert a.as_dict() == {"conjecturer/ok": 1, "conjecturer/several_by": 2}


def test_counter_rejects_unknown_roles():
    with pytest.raises(ValueError):
        FailureCounter().add("prover", Extraction.success("x"))


def test_failure_values_are_distinct_metric_keys():
    values = [failure.value for failure in Failure]
    assert len(values) == len(set(values)) and "ok" not in values
