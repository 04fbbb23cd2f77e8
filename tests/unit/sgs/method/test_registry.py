"""The objective registry (sgs.method.registry): every name a config may choose is an
entry, and what the loop and the learner ask of an entry."""

from __future__ import annotations

import pytest

from sgs import config as C
from sgs.method.objectives import Rollout
from sgs.method.registry import (
    CONJECTURER_OBJECTIVE,
    OBJECTIVES,
    STEP_OBJECTIVE,
    Objective,
    config_problems,
    objective,
    register,
    trained_roles,
)
from tests.config_support import compose_cfg


def test_the_config_offers_every_registered_solver_objective_and_nothing_else():
    # The Conjecturer's, and the search mode's steps', are the loop's to choose.
    assert set(C.SOLVER_OBJECTIVES) == set(OBJECTIVES) - {CONJECTURER_OBJECTIVE, STEP_OBJECTIVE}


def test_a_name_is_registered_once_and_an_unknown_one_is_named():
    with pytest.raises(ValueError, match="an objective named 'cispo' is registered already"):
        register(Objective("cispo", None))
    with pytest.raises(ValueError, match="unknown objective 'ppo'; expected one of reinforce, reinforce_half"):
        objective("ppo")


def test_the_entries_say_what_the_loop_and_the_learner_need():
    assert objective("cispo").needs_old_logprobs and objective("cispo").whole_groups
    assert not any(objective(name).needs_old_logprobs or objective(name).whole_groups
                   for name in ("reinforce", "reinforce_half", "ei", "conjecturer"))
    assert objective("ei").replay is not None and objective("reinforce_half").replay is None
    assert not objective("none").trains and all(objective(name).trains for name in OBJECTIVES if name != "none")
    rollouts = [Rollout("a", "valid", 1.0), Rollout("a", "invalid", 0.0)]
    assert objective("none").select(rollouts) == [] and objective("reinforce").select(rollouts)


def test_expert_iteration_samples_only_targets_with_few_stored_proofs():
    counts = {"a": 16, "b": 3}
    assert objective("ei").sample_targets(["a", "b", "c"], counts, 16) == ["b", "c"]
    assert objective("reinforce_half").sample_targets(["a", "b", "c"], counts, 16) == ["a", "b", "c"]


@pytest.mark.parametrize(("experiment", "roles"), [
    ("standard", ["solver", "conjecturer"]),
    ("frozen_conjecturer", ["solver"]),
    ("ei_solver_only", ["solver"]),
    ("parallel_sampling", []),  # no learner run, so colocated engines never need to sleep
])
def test_the_trained_roles_follow_the_solver_objective_and_the_conjecturer_switch(experiment, roles):
    assert trained_roles(C.validate(compose_cfg(f"+experiment={experiment}")).method) == roles


@pytest.mark.parametrize(("overrides", "message"), [
    (["method.solver_objective=none"],
     "method.solver_objective=none never trains the Solver (parallel sampling): a Solver that never learns "
     "gains nothing from conjectures"),
    (["method.solver_objective=cispo", "training.global_batch_size=12"],
     "training.global_batch_size=12 must be a multiple of method.num_solver_samples=8 for "
     "method.solver_objective=cispo, whose batches hold whole groups"),
])
def test_the_solver_objective_checks_what_it_asks_of_the_config(overrides, message):
    assert any(message in problem for problem in config_problems(C.validate(compose_cfg(*overrides))))


@pytest.mark.parametrize("experiment", ["standard", "cispo_sgs", "ei_solver_only", "parallel_sampling"])
def test_the_shipped_experiments_ask_nothing_of_their_objective_they_lack(experiment):
    assert config_problems(C.validate(compose_cfg(f"+experiment={experiment}"))) == []
