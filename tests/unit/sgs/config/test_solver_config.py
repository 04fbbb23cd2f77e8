"""The ``solver`` node: how the Solver proves in self-play (``solver.mode``),
its search settings checked in search mode, and every experiment of
``conf/experiment/`` composed and validated with the search."""

from __future__ import annotations

import pytest

from sgs import config as C
from sgs.config.choices import override_problems
from sgs.method.registry import config_problems as objective_problems
from tests.config_support import compose_cfg

EXPERIMENTS = sorted(p.stem for p in (C.CONFIG_DIR / "experiment").glob("*.yaml") if not p.stem.startswith("_"))
#: The groups that run an experiment on this kind of machine (the experiment alone is the paper's GPU setting).
HERE = ("model=rocq_prover", "prover=rocq", "resources=local_cpu", "scale=laptop")


def problems_of(*overrides: str) -> list[str]:
    return C.config_problems(compose_cfg(*overrides))


def test_the_default_solver_samples_whole_proofs_and_reserves_no_search_actors():
    cfg = C.validate(compose_cfg())
    assert cfg.solver.mode == "sample" and not C.searching(cfg.solver) and C.search_cpus(cfg.solver) == 0
    # Sample mode never reads the search's settings, so they are not held against it.
    assert problems_of("solver.attempts=0", "solver.search.workers=0") == []


def test_search_mode_reserves_a_cpu_per_search_worker():
    cfg = C.validate(compose_cfg("solver.mode=search", "solver.search.workers=3"))
    assert C.searching(cfg.solver) and C.search_cpus(cfg.solver) == 3


@pytest.mark.parametrize("overrides, problem", [
    (["solver.attempts=0"], "solver.attempts=0 must be at least 1"),
    (["solver.seconds_per_attempt=0"], "solver.seconds_per_attempt=0.0 must be positive"),
    (["solver.search.width=-1"], "solver.search.width=-1 must be at least 0"),
    (["solver.search.workers=0"], "solver.search.workers=0 must be at least 1"),
    (["solver.search.width=0", "solver.search.finishers=[]"], "solver.search: width=0 and no finishers"),
    (["solver.anchor_corpus=/no/such/corpus"], "solver.anchor_corpus='/no/such/corpus' is not a directory"),
    (["solver.anchor_corpus=.", "solver.anchor_ratio=0"], "solver.anchor_ratio=0.0 must be positive"),
])
def test_search_settings_are_checked_in_search_mode(overrides, problem):
    found = problems_of("solver.mode=search", *overrides)
    assert any(problem in p for p in found), found


@pytest.mark.parametrize("budgets", [[1, 0, 4, 8], [1, 16, 4, 64]])   # a search that may expand nothing; shrinking
def test_the_searches_budgets_are_checked(budgets):
    found = problems_of("solver.mode=search", f"solver.expansions=[{','.join(map(str, budgets))}]")
    assert [p for p in found if p.startswith("solver.expansions=")] == [
        f"solver.expansions={budgets!r} must be budgets of at least 1 state, growing (or empty: equal budgets)"]


def test_each_search_of_a_problem_gets_its_own_budget_the_last_repeating():
    cfg = C.validate(compose_cfg("solver.mode=search", "solver.attempts=6"))
    assert [C.attempt_expansions(cfg.solver, j) for j in range(6)] == [1, 4, 16, 64, 64, 64]
    equal = C.validate(compose_cfg("solver.mode=search", "solver.expansions=[]"))
    assert C.attempt_expansions(equal.solver, 0) is None


def test_a_mode_that_does_not_exist_is_named_with_the_ones_that_do():
    assert override_problems(["solver.mode=beam"]) == ["solver.mode='beam' is not one of sample, search"]


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_runs_with_the_search(experiment):
    """Each experiment, at the groups that run here, in search mode: a valid config whose
    Solver objective asks nothing the config lacks (the entry's own checks)."""
    cfg = C.validate(compose_cfg(f"+experiment={experiment}", *HERE, "solver.mode=search"))
    assert cfg.experiment == experiment and C.searching(cfg.solver)
    assert objective_problems(cfg) == []


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_the_papers_lean_setting_searches_too(experiment):
    """The search steps Lean REPL proof states as it steps Rocq's (sgs/search/languages.py)."""
    found = problems_of(f"+experiment={experiment}", "solver.mode=search")
    assert [p for p in found if p.startswith("solver.")] == []
