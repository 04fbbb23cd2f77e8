"""Backtracking in the Rocq tactic API (``run_tactic(..., at=state)``): a
search goes back to an earlier state of the open proof and tries another
branch, with every check of a step and of the final ``Qed`` as before."""

from __future__ import annotations

import pytest

from lean_env.rocq.backend import RocqBackend
from lean_env.rocq.config import RocqConfig

HEADER = "Require Import Arith Lia."
STATEMENT = "Theorem t : forall P Q : Prop, P /\\ Q -> Q /\\ P."


@pytest.fixture(scope="module")
def backend(coqtop):
    b = RocqBackend(RocqConfig(coqtop=coqtop, timeout=60, axiom_census=False), worker="test")
    yield b
    b.close()


@pytest.mark.rocq
def test_a_step_can_start_from_an_earlier_state(backend):
    root = backend.start_proof(HEADER, STATEMENT)
    intro = backend.run_tactic("intros P Q H.")
    left = backend.run_tactic("destruct H as [a b].")
    assert root.state is not None and intro.state is not None and left.state is not None
    assert len({root.state, intro.state, left.state}) == 3
    # another branch from the state after intros: the goals are that state's
    right = backend.run_tactic("split.", at=intro.state)
    assert right.kind == "goals" and "H : P /\\ Q" in right.goals and "2 goals" in right.goals
    # a failing step from an earlier state leaves the proof at that state
    failed = backend.run_tactic("exact H.", at=root.state)
    assert failed.kind == "error" and failed.goals == root.goals
    # the first branch was forgotten when the proof went back before it
    with pytest.raises(ValueError):
        backend.run_tactic("split.", at=left.state)
    again = backend.run_tactic("intros P Q [a b].", at=root.state)
    done = backend.run_tactic("split; assumption.", at=again.state)
    assert done.kind == "finished" and done.verdict is not None and done.verdict.valid


@pytest.mark.rocq
def test_going_back_keeps_the_checks_of_a_step(backend):
    root = backend.start_proof(HEADER, "Theorem u : 2 + 2 = 4.")
    assert backend.run_tactic("idtac.").kind == "goals"
    refused = backend.run_tactic("Admitted.", at=root.state)
    assert refused.kind == "error" and "Admitted" in refused.messages[0]
    done = backend.run_tactic("lia.", at=root.state)
    assert done.kind == "finished" and done.verdict is not None and done.verdict.valid
