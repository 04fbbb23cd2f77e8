"""The pure parts of the check by proof-term content
(:mod:`lean_env.rocq.term_check`) and the rule that blames a proof for a
crash that repeats on fresh sessions (``RocqBackend._attempt``), with fakes:
no coqtop needed.  The same against real Rocq:
``tests/integration/lean_env/test_rocq_term_check.py``."""

from __future__ import annotations

import time

import pytest

from lean_env.rocq import RocqConfig
from lean_env.rocq.backend import RocqBackend, _Outcome, _ProofCrashed
from lean_env.rocq.session import SessionDied
from lean_env.rocq.term_check import (
    alpha_equal,
    bound_names,
    fixpoint_names,
    located_constants,
    printed_body,
    reaches_primitives,
    scan_term,
    split_parameters,
    tokens,
    unexplained_fixpoints,
)
from lean_env.verdict import Status

# ``Print Nat.testbit.`` under the checker's printing settings (Coq 8.16.1)
TESTBIT = """Nat.testbit =
fix testbit (a n : nat) {struct n} : bool :=
  match n return bool with
  | O => odd a
  | S n0 => testbit (div2 a) n0
  end
     : forall (_ : nat) (_ : nat), bool

Arguments Nat.testbit (a n)%nat_scope
"""


def test_scan_counts_fixpoints_and_vm_casts_but_not_names_containing_fix():
    found = scan_term("t = fun x : nat => (fix f (n : nat) : nat := n) (prefix_fix x) (@eq_refl bool true <: T) "
                      "(cofix g : S := g) (y <<: U)")
    assert (found.fixpoints, found.vm_casts) == (2, 2)
    assert scan_term("fix_me prefix fix' suffix_fix").fixpoints == 0


def test_primitive_types_among_the_assumptions_are_recognised_qualified_or_not():
    assert reaches_primitives(("int", "eqb"))
    assert reaches_primitives(("Coq.Floats.PrimFloat.float",))
    assert not reaches_primitives(("classic", "integer", "R"))


def test_tokens_ignore_where_the_printer_broke_lines():
    assert tokens("(fun\n   x : nat =>\n x)") == tokens("(fun x : nat => x)") == \
        ["(", "fun", "x", ":", "nat", "=", ">", "x", ")"]


def test_the_body_of_a_printed_constant_and_the_names_locate_lists():
    body = printed_body(TESTBIT)
    assert body[:3] == ["fix", "testbit", "("] and body[-1] == "end"
    assert printed_body("Nat.odd =\nfun n : nat => negb (even n)\n     : nat -> bool\n") == []
    located = ("Constant Coq.Arith.PeanoNat.Nat.testbit (alias of Init.Nat.testbit)\nConstant Coq.Init.Nat.testbit\n"
               "  (shorter name to refer to it in current context is Init.Nat.testbit)\nConstant Top.testbit\n")
    assert located_constants(located) == ["Coq.Arith.PeanoNat.Nat.testbit", "Coq.Init.Nat.testbit"]


def test_bound_names_come_from_binding_positions_only():
    term = tokens("fix f (a n : nat) {struct n} : bool := match n return bool with | O => g a "
                  "| S m => let k := h a in (fun (z : nat) => f z m) k end")
    assert bound_names(term) == {"f", "a", "n", "m", "k", "z"}


def test_a_renamed_copy_of_a_library_body_is_explained():
    library = printed_body(TESTBIT)
    copy = tokens("fix testbit (a0 n2 : nat) {struct n2} : bool := match n2 return bool with "
                  "| O => odd a0 | S n3 => testbit (div2 a0) n3 end")
    assert alpha_equal(library, copy)
    term = tokens("t = fun x : nat => ") + ["("] + copy + [")", "x", "O"]
    assert fixpoint_names(term) == {"testbit"}
    assert unexplained_fixpoints(term, [library]) == 0


@pytest.mark.parametrize("changed", [
    # a constant replaced: div2 by id makes the recursion non-structural
    "fix testbit (a n : nat) {struct n} : bool := match n return bool with | O => odd a | S n0 => testbit (id a) n0 end",
    # a bound variable replaced by another bound one (n0 by n): not a renaming
    "fix testbit (a n : nat) {struct n} : bool := match n return bool with | O => odd a | S n0 => testbit (div2 a) n end",
    # a bound name replacing a constant (odd becomes the parameter a)
    "fix testbit (odd n : nat) {struct n} : bool := match n return bool with | O => odd odd | S n0 => testbit (div2 odd) n0 end",
])
def test_a_changed_copy_is_not_explained(changed):
    assert not alpha_equal(printed_body(TESTBIT), tokens(changed))
    assert unexplained_fixpoints(["("] + tokens(changed) + [")"], [printed_body(TESTBIT)]) == 1


def test_a_copy_continued_by_more_term_is_not_explained():
    library = printed_body(TESTBIT)
    # the matched text followed by an argument would be a longer body, not the library's
    assert unexplained_fixpoints(library + ["x"], [library]) == 1
    assert unexplained_fixpoints(library + ["in", "x"], [library]) == 0
    assert unexplained_fixpoints(tokens("fix loop (n : nat) : False := loop n"), [library]) == 1


# -- the crash rule, with fake sessions ------------------------------------------

class FakeSession:
    def __init__(self, uses: int) -> None:
        self.uses = uses


def bare_backend(session_uses: list[int]) -> RocqBackend:
    """A backend whose sessions are fakes handed out with the given use counts."""
    backend = RocqBackend.__new__(RocqBackend)
    backend.config = RocqConfig()
    backend.worker = "fake"
    handed = iter(session_uses)
    backend._ready_session = lambda load_path: FakeSession(next(handed))
    backend._discard = lambda: None
    backend._recycle_if_needed = lambda: None
    return backend


def failing(*errors):
    """A piece of work that raises ``errors`` in turn, then succeeds."""
    queue = list(errors)

    def work(session):
        if queue:
            raise queue.pop(0)
        return _Outcome(Status.VALID, "ok")
    return work


def test_a_crash_on_two_fresh_sessions_is_the_proofs_fault():
    verdict = bare_backend([0, 0])._attempt(
        failing(_ProofCrashed("out of memory"), _ProofCrashed("out of memory")), time.monotonic(), ())
    assert (verdict.status, verdict.reason) == (Status.INVALID, "prover_crash")
    assert "2 fresh sessions" in verdict.messages[0]


def test_a_crash_on_a_used_session_needs_two_more_on_fresh_ones():
    backend = bare_backend([7, 0, 0])
    verdict = backend._attempt(failing(*[_ProofCrashed("killed")] * 3), time.monotonic(), ())
    assert (verdict.status, verdict.reason) == (Status.INVALID, "prover_crash")
    backend = bare_backend([7, 0, 0])
    verdict = backend._attempt(failing(_ProofCrashed("killed"), _ProofCrashed("killed")), time.monotonic(), ())
    assert verdict.valid   # the third, fresh session did it: not blamed


def test_a_crash_that_does_not_repeat_is_retried_and_not_blamed():
    verdict = bare_backend([0, 0])._attempt(failing(_ProofCrashed("once")), time.monotonic(), ())
    assert verdict.valid


def test_failures_outside_the_proofs_text_stay_system_errors():
    verdict = bare_backend([0, 0, 0])._attempt(failing(SessionDied("header"), SessionDied("header")),
                                              time.monotonic(), ())
    assert (verdict.status, verdict.reason) == (Status.SYSTEM_ERROR, "crash")
    # one crash in the text, one failure at start-up: not twice the text's fault
    verdict = bare_backend([0, 0, 0])._attempt(failing(_ProofCrashed("oom"), SessionDied("start"), SessionDied("x")),
                                              time.monotonic(), ())
    assert (verdict.status, verdict.reason) == (Status.SYSTEM_ERROR, "crash")


# ``Print List.map.`` under the checker's printing settings: a fixpoint after parameters
MAP = """map =
fun (A B : Type) (f : forall _ : A, B) =>
fix map (l : list A) : list B :=
  match l return (list B) with
  | nil => @nil B
  | cons a t => @cons B (f a) (map t)
  end
     : forall (A B : Type) (_ : forall _ : A, B) (_ : list A), list B
"""


def test_a_parameterised_library_body_splits_into_parameters_and_fixpoint():
    params, fixpoint = split_parameters(printed_body(MAP))
    assert params == {"A", "B", "f"} and fixpoint[:2] == ["fix", "map"]


def test_an_instance_of_a_library_fixpoint_with_its_parameters_replaced_is_explained():
    # what injection on map f l = map g l leaves in a term
    instance = tokens("(fix map (l0 : list nat) : list bool := match l0 return (list bool) with "
                      "| nil => @nil bool | cons a0 t0 => @cons bool (g a0) (map t0) end) xs")
    assert unexplained_fixpoints(instance, [printed_body(MAP)]) == 0
    lambda_argument = tokens("(fix map (l0 : list nat) : list nat := match l0 return (list nat) with "
                             "| nil => @nil nat | cons a0 t0 => @cons nat ((fun y : nat => S y) a0) (map t0) end)")
    assert unexplained_fixpoints(lambda_argument, [printed_body(MAP)]) == 0


@pytest.mark.parametrize("instance", [
    # B stands for two different types
    "(fix map (l0 : list nat) : list bool := match l0 return (list nat) with "
    "| nil => @nil bool | cons a0 t0 => @cons bool (g a0) (map t0) end)",
    # the argument for f mentions the recursive function: it joins the recursion
    "(fix map (l0 : list nat) : list nat := match l0 return (list nat) with "
    "| nil => @nil nat | cons a0 t0 => @cons nat (map t0) (map t0) end)",
    # the argument for f holds a fixpoint of its own
    "(fix map (l0 : list nat) : list nat := match l0 return (list nat) with "
    "| nil => @nil nat | cons a0 t0 => @cons nat ((fix h (n : nat) : nat := h n) a0) (map t0) end)",
    # the recursive call changed
    "(fix map (l0 : list nat) : list bool := match l0 return (list bool) with "
    "| nil => @nil bool | cons a0 t0 => @cons bool (g a0) (map l0) end)",
])
def test_a_changed_or_capturing_instance_is_not_explained(instance):
    assert unexplained_fixpoints(tokens(instance), [printed_body(MAP)]) >= 1
