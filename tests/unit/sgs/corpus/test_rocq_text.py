"""Reading Rocq's text: goal displays, Locate answers and a tactic's identifiers.

The displays and answers here are copied from real ``coqtop -emacs`` 8.16.1 output."""

from __future__ import annotations

from sgs.corpus.rocq_text import (
    goal_count,
    goal_display,
    hypothesis_names,
    parse_goals,
    parse_locate,
    tactic_identifiers,
)

TWO_GOALS = """2 focused goals (shelved: 1) (ID 19)
  
  n, m : nat
  H : n <= m
  f := fun x : nat => x + n : nat -> nat
  ============================
  ?x = n

goal 2 (ID 20) is:
 True"""

LONG_HYPOTHESIS = """1 goal (ID 3)
  
  l : list nat
  IH : forall a : nat,
       In a l -> a < 10
  ============================
  length l = length l"""


def test_the_goal_display_is_found_after_messages_and_without_them():
    output = ("<infomsg>\nThis subproof is complete, but there are some unfocused goals.\n"
              "Focus next goal with bullet -.\n</infomsg>\n1 goal\n\ngoal 1 (ID 6) is:\n True\n\n")
    assert goal_display(output) == "1 goal\n\ngoal 1 (ID 6) is:\n True"
    assert goal_display("hello from idtac\n" + TWO_GOALS + "\n") == TWO_GOALS
    assert goal_display("No more goals.\n\n") == "No more goals."
    assert goal_display("Constant Coq.Init.Logic.not\n") is None
    assert goal_display("") is None


def test_goals_and_hypotheses_are_split_as_printed():
    first, second = parse_goals(TWO_GOALS)
    assert first.hypotheses == ("n, m : nat", "H : n <= m", "f := fun x : nat => x + n : nat -> nat")
    assert first.conclusion == "?x = n"
    assert second.hypotheses == () and second.conclusion == "True"
    assert goal_count(TWO_GOALS) == 2
    assert goal_count("No more goals.") == 0
    assert parse_goals("No more goals.") == []


def test_a_long_hypothesis_is_one_hypothesis():
    (goal,) = parse_goals(LONG_HYPOTHESIS)
    assert goal.hypotheses == ("l : list nat", "IH : forall a : nat,\nIn a l -> a < 10")
    assert goal.conclusion == "length l = length l"


def test_hypothesis_names_are_the_local_names():
    assert hypothesis_names(TWO_GOALS) == {"n", "m", "H", "f"}
    assert hypothesis_names(LONG_HYPOTHESIS) == {"l", "IH"}
    assert hypothesis_names("No more goals.") == set()


def test_locate_names_the_object_the_query_denotes():
    assert parse_locate("Constant Coq.Arith.PeanoNat.Nat.add_comm\n", "Nat.add_comm") == \
        ("Constant", "Coq.Arith.PeanoNat.Nat.add_comm")
    # every object whose name ends with `le` is listed; `le` alone denotes the one without a note
    many = ("Inductive Coq.Init.Peano.le\nConstant Coq.Bool.Bool.le\n"
            "  (shorter name to refer to it in current context is Bool.le)\n"
            "Constant Coq.Arith.PeanoNat.Nat.le\n"
            "  (shorter name to refer to it in current context is Nat.le)\n")
    assert parse_locate(many, "le") == ("Inductive", "Coq.Init.Peano.le")
    assert parse_locate("Notation Coq.Init.Peano.plus\n", "plus") == ("Notation", "Coq.Init.Peano.plus")


def test_locate_finds_nothing_for_names_out_of_scope():
    # `add_comm` unqualified is in scope nowhere: every entry needs a longer name
    unqualified = ("Constant Coq.NArith.BinNat.N.add_comm\n"
                   "  (shorter name to refer to it in current context is BinNat.N.add_comm)\n"
                   "Constant Coq.Arith.PeanoNat.Nat.add_comm\n"
                   "  (shorter name to refer to it in current context is Nat.add_comm)\n")
    assert parse_locate(unqualified, "add_comm") is None
    assert parse_locate("No term of basename intros\n", "intros") is None
    assert parse_locate("No object of suffix Nat.add_comm\n", "Nat.add_comm") is None
    syntax_error = ("Toplevel input, characters 7-10:\n> Locate fun.\n>        ^^^\n"
                    "Error: Syntax error: [locatable] expected after 'Locate' (in [command]).\n")
    assert parse_locate(syntax_error, "fun") is None


def test_a_longer_qualified_name_still_denotes_its_object():
    answer = ("Constant Coq.Arith.PeanoNat.Nat.add_comm\n"
              "  (shorter name to refer to it in current context is Nat.add_comm)\n")
    assert parse_locate(answer, "PeanoNat.Nat.add_comm") == ("Constant", "Coq.Arith.PeanoNat.Nat.add_comm")


def test_tactic_names_keywords_and_scope_keys_are_not_lemma_candidates():
    assert tactic_identifiers("intros n m; rewrite Nat.add_comm, (plus_n_O m) in H.") == \
        ["n", "m", "Nat.add_comm", "plus_n_O", "H"]
    assert tactic_identifiers("split; [apply app_inj_tail|intros [-> ->]].") == ["app_inj_tail"]
    assert tactic_identifiers("auto using in_app_or, in_or_app with arith.") == ["in_app_or", "in_or_app"]
    assert tactic_identifiers("exact (x + 0)%nat.") == ["x"]
    assert tactic_identifiers("eapply foo; eauto.") == ["foo"]


def test_a_word_is_a_tactic_only_in_tactic_position():
    # `symmetry` the tactic, and `symmetry` the lemma of Coq.Classes.RelationClasses
    assert tactic_identifiers("symmetry in H.") == ["H"]
    assert tactic_identifiers("apply symmetry.") == ["symmetry"]
    assert tactic_identifiers("try apply f_equal.") == ["f_equal"]
    assert tactic_identifiers("do 2 rewrite app_nil_r.") == ["app_nil_r"]
    assert tactic_identifiers("2: apply le_S.") == ["le_S"]
    assert tactic_identifiers("all: now rewrite ?app_assoc.") == ["app_assoc"]
    assert tactic_identifiers("rewrite -> foo, <- bar, !baz.") == ["foo", "bar", "baz"]
    # a tactic in parentheses is in tactic position; a term in parentheses is not
    assert tactic_identifiers("assert (H : x = y) by (symmetry; auto).") == ["H", "x", "y"]
    assert tactic_identifiers("try (apply foo; auto).") == ["foo"]
    assert tactic_identifiers("rewrite (Nat.add_comm n).") == ["Nat.add_comm", "n"]
    assert tactic_identifiers("destruct (split l); [now left|right].") == ["split", "l"]
    assert tactic_identifiers("inv bst; repeat apply create_bst.") == ["bst", "create_bst"]
    assert tactic_identifiers("intuition reflexivity.") == []
