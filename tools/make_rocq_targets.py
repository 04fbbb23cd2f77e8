#!/usr/bin/env python3
"""Build and check the shipped Rocq target set, ``sgs/data/rocq_targets.jsonl``.

The targets are written here as compact tables, one per topic, so the set can
be reviewed and regenerated.  Each row is ``(name, difficulty, proposition,
tactics)``; the target's id is ``<topic prefix>_<name>`` and its statement is
``Theorem <id> : <proposition>.``.  ``tactics`` is the reference proof without
``Proof.``/``Qed.`` (``None`` would mark a target without one; every target
here has a proof).  A few families of concrete facts (``12 * 13 + 7 = 163``,
``Nat.gcd 84 36 = 12``) are generated from number tables, with the values
computed in Python and confirmed by Rocq.

Difficulty scale: 1 = one standard tactic (``lia``, ``ring``, ``tauto``,
``firstorder``, ``reflexivity``) or a direct witness; 2 = a named library
lemma, a rewrite, ``nia`` or a small case split; 3 = induction or a chain of library facts;
4 = needs a generalised induction, an invented witness or a non-obvious idea
(a small model will rarely find these).

About a fifth of the targets are held out for evaluation (:func:`assign_held_out`):
inside each topic the targets are ordered by difficulty and then by a hash of
their id, and every fifth one is held out, so the split is deterministic and
spread over topics and difficulties.

Nothing is taken on trust.  :func:`schema_problems` checks the records and
puts every text through the verifier's own policy (:mod:`lean_env.rocq.checks`),
so each reference proof is one the production backend would accept.
:func:`check_targets` then compiles all targets sharing a header in ONE
``coqc`` run.  The file holds, for every target and each in its own module so
that no target can use another:

* the statement, checked to be a proposition and closed with ``Admitted.``
  (what the verifier does to a conjecture), and
* the statement with its reference proof.

A last ``Print Assumptions``, over a definition that mentions every reference
proof, must answer "Closed under the global context"; when it does not, a
second run asks about each proof to name the ones that use an axiom.  When
``coqc`` stops on an error, the error's line names the target; it is recorded
as failed and the rest are compiled again.

:func:`build_targets` takes any topic tables and :func:`check_targets` any
records of this schema, so derived sets (such as simpler lemmas per target for
a warm-start corpus) can reuse both.

Usage::

    python tools/make_rocq_targets.py             # build, check, write the file
    python tools/make_rocq_targets.py --no-rocq   # build and write without Rocq
    python tools/make_rocq_targets.py --verify    # check the shipped file only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from lean_env.rocq import (  # noqa: E402  (needs the repository on the path)
    PROP_CHECK,
    RocqTextError,
    validate_header,
    validate_proof,
    validate_statement,
)

#: where the generated set is shipped (package data of ``sgs``)
OUTPUT = REPO_ROOT / "sgs" / "data" / "rocq_targets.jsonl"

#: the one header every target shares, so the verifier needs a single warm state
HEADER = "Require Import Arith Lia List Bool.\nImport ListNotations."

#: keys of one JSONL record, in the order they are written
FIELDS = ("id", "header", "statement", "proof", "difficulty", "topic", "held_out")

#: every ``HELD_OUT_PERIOD``-th target of a topic is held out (a fifth)
HELD_OUT_PERIOD = 5

#: a target id: a Coq identifier without ``__`` (reserved by extraction) and
#: without primes, so it is also a plain Python/JSON-friendly name
ID_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")

#: what ``Print Assumptions`` says about a theorem that uses no axiom
CLOSED = "Closed under the global context"


# ---------------------------------------------------------------------------
# The targets, topic by topic.  Rows: (name, difficulty, proposition, tactics).

ARITH = [
    ("add_0_r", 1, "forall n : nat, n + 0 = n", "lia."),
    ("add_rearrange", 1, "forall a b c : nat, a + b + c = c + b + a", "lia."),
    ("succ_add", 1, "forall n m : nat, S n + m = S (n + m)", "intros n m. reflexivity."),
    ("pred_succ", 1, "forall n : nat, pred (S n) = n", "intros n. reflexivity."),
    ("double", 1, "forall n : nat, n + n = 2 * n", "lia."),
    ("sub_diag", 1, "forall n : nat, n - n = 0", "lia."),
    ("sub_add", 1, "forall n m : nat, m <= n -> n - m + m = n", "lia."),
    ("linear_eq", 1, "forall x : nat, 3 * x + 5 = 20 -> x = 5", "lia."),
    ("linear_system", 1, "forall x y : nat, x + y = 10 -> x - y = 4 -> x = 7", "lia."),
    ("mul_comm", 1, "forall n m : nat, n * m = m * n", "intros n m. ring."),
    ("mul_succ_r", 1, "forall n m : nat, n * S m = n + n * m", "intros n m. ring."),
    ("distr", 1, "forall a b c : nat, a * (b + c) = a * b + a * c", "intros a b c. ring."),
    ("square_sum", 1, "forall a b : nat, (a + b) * (a + b) = a * a + 2 * a * b + b * b",
     "intros a b. ring."),
    ("cube_succ", 2, "forall a : nat, (a + 1) ^ 3 = a ^ 3 + 3 * a ^ 2 + 3 * a + 1",
     "intros a. simpl. ring."),
    ("product_expand", 1, "forall a b c d : nat, (a + b) * (c + d) = a * c + a * d + b * c + b * d",
     "intros a b c d. ring."),
    ("diff_squares", 3, "forall a b : nat, (a + b) * (a - b) = a * a - b * b",
     """
     intros a b.
     rewrite Nat.mul_sub_distr_l, !Nat.mul_add_distr_r.
     replace (b * a) with (a * b) by ring.
     lia.
     """),
]

REWRITE = [
    ("add_comm_under_f", 2, "forall (f : nat -> nat) (a b : nat), f (a + b) = f (b + a)",
     "intros f a b. rewrite Nat.add_comm. reflexivity."),
    ("mul_comm_under_f", 2, "forall (f : nat -> nat) (a b : nat), f (a * b) = f (b * a)",
     "intros f a b. rewrite Nat.mul_comm. reflexivity."),
    ("max_comm_under_f", 2, "forall (f : nat -> nat) (a b : nat), f (Nat.max a b) = f (Nat.max b a)",
     "intros f a b. rewrite Nat.max_comm. reflexivity."),
    ("hypothesis", 2, "forall (f : nat -> nat) (x y : nat), x = y + 1 -> f x = f (1 + y)",
     "intros f x y H. rewrite H, Nat.add_comm. reflexivity."),
    ("chain", 1, "forall a b c : nat, a = b -> b = c -> a = c",
     "intros a b c H1 H2. rewrite H1. exact H2."),
    ("sub_add_under_f", 2, "forall (f : nat -> nat) (n m : nat), m <= n -> f (n - m + m) = f n",
     "intros f n m H. rewrite Nat.sub_add by exact H. reflexivity."),
    ("pow_add", 2, "forall a n m : nat, a ^ (n + m) = a ^ n * a ^ m",
     "intros a n m. apply Nat.pow_add_r."),
    ("gcd_comm_plus", 2, "forall a b : nat, Nat.gcd a b + 1 = Nat.gcd b a + 1",
     "intros a b. rewrite Nat.gcd_comm. reflexivity."),
    ("negb_triple", 1, "forall b : bool, negb (negb (negb b)) = negb b",
     "intros b. rewrite negb_involutive. reflexivity."),
    ("app_nil_r", 2, "forall (A : Type) (l : list A), l ++ [] = l",
     "intros A l. apply app_nil_r."),
    ("rev_of_revs", 2, "forall (A : Type) (l m : list A), rev (rev l ++ rev m) = m ++ l",
     "intros A l m. rewrite rev_app_distr, !rev_involutive. reflexivity."),
    ("map_map", 2, "forall (f g : nat -> nat) (l : list nat), map g (map f l) = map (fun x => g (f x)) l",
     "intros f g l. apply map_map."),
    ("length_app_rev", 2, "forall (A : Type) (l m : list A), length (l ++ rev m) = length m + length l",
     "intros A l m. rewrite app_length, rev_length. lia."),
    ("firstn_skipn_length", 2,
     "forall (A : Type) (n : nat) (l : list A), length (firstn n l) + length (skipn n l) = length l",
     "intros A n l. rewrite <- app_length, firstn_skipn. reflexivity."),
    ("list_sum_swap", 2, "forall l1 l2 : list nat, list_sum (l1 ++ l2) = list_sum (l2 ++ l1)",
     "intros l1 l2. rewrite !list_sum_app. lia."),
    ("mod_add_multiple", 2, "forall a b : nat, b <> 0 -> (a + 3 * b) mod b = a mod b",
     "intros a b H. apply Nat.mod_add. exact H."),
    ("rev_map_app", 3,
     "forall (f : nat -> nat) (l m : list nat), rev (map f (l ++ m)) = map f (rev m) ++ map f (rev l)",
     "intros f l m. rewrite map_app, rev_app_distr, !map_rev. reflexivity."),
]

INDUCTION = [
    ("pow2_pos", 2, "forall n : nat, 0 < 2 ^ n",
     "induction n as [|n IH]. - simpl. lia. - simpl. lia."),
    ("lt_pow2", 3, "forall n : nat, n < 2 ^ n",
     "induction n as [|n IH]. - simpl. lia. - simpl. lia."),
    ("pow_ge_1", 3, "forall a n : nat, 1 <= a -> 1 <= a ^ n",
     """
     intros a n Ha. induction n as [|n IH].
     - simpl. lia.
     - simpl. nia.
     """),
    ("linear_recurrence", 3, "forall f : nat -> nat, (forall n, f (S n) = f n + 2) -> forall n, f n = f 0 + 2 * n",
     """
     intros f Hf n. induction n as [|n IH].
     - lia.
     - rewrite Hf, IH. lia.
     """),
    ("strictly_increasing", 3, "forall f : nat -> nat, (forall n, f n < f (S n)) -> forall n, n + f 0 <= f n",
     """
     intros f Hf n. induction n as [|n IH].
     - lia.
     - specialize (Hf n). lia.
     """),
    ("monotone", 3,
     "forall f : nat -> nat, (forall n, f n <= f (S n)) -> forall n m, n <= m -> f n <= f m",
     """
     intros f Hf n m Hle. induction Hle as [|m Hle IH].
     - lia.
     - specialize (Hf m). lia.
     """),
    ("even_steps", 3, "forall P : nat -> Prop, P 0 -> (forall n, P n -> P (S (S n))) -> forall n, P (2 * n)",
     """
     intros P H0 HS n. induction n as [|n IH].
     - exact H0.
     - replace (2 * S n) with (S (S (2 * n))) by lia. apply HS. exact IH.
     """),
    ("seq_length", 2, "forall n s : nat, length (seq s n) = n",
     "intros n s. apply seq_length."),
    ("sum_repeat", 3, "forall n c : nat, list_sum (repeat c n) = n * c",
     "intros n c. induction n as [|n IH]. - reflexivity. - simpl. rewrite IH. ring."),
    ("fold_add_acc", 3, "forall (l : list nat) (a : nat), fold_left Nat.add l a = a + list_sum l",
     """
     induction l as [|x l IH]; intros a.
     - simpl. lia.
     - simpl. rewrite IH. lia.
     """),
    ("fold_add", 4, "forall l : list nat, fold_left Nat.add l 0 = list_sum l",
     """
     assert (H : forall (l : list nat) (a : nat), fold_left Nat.add l a = a + list_sum l).
     { induction l as [|x l IH]; intros a.
       - simpl. lia.
       - simpl. rewrite IH. lia. }
     intros l. rewrite H. reflexivity.
     """),
    ("gauss_sum", 4, "forall n : nat, 2 * list_sum (seq 1 n) = n * (n + 1)",
     """
     induction n as [|n IH].
     - reflexivity.
     - rewrite seq_S, list_sum_app. simpl. nia.
     """),
    ("odd_sum", 4, "forall n : nat, list_sum (map (fun i => 2 * i + 1) (seq 0 n)) = n * n",
     """
     induction n as [|n IH].
     - reflexivity.
     - rewrite seq_S, map_app, list_sum_app, IH. simpl. nia.
     """),
    ("squares_sum", 4,
     "forall n : nat, 6 * list_sum (map (fun i => i * i) (seq 0 (S n))) = n * (n + 1) * (2 * n + 1)",
     """
     induction n as [|n IH].
     - reflexivity.
     - rewrite seq_S, map_app, list_sum_app, Nat.mul_add_distr_l, IH. simpl. nia.
     """),
    ("cubes_sum", 4,
     "forall n : nat, 4 * list_sum (map (fun i => i * i * i) (seq 0 (S n))) = n * n * (n + 1) * (n + 1)",
     """
     induction n as [|n IH].
     - reflexivity.
     - rewrite seq_S, map_app, list_sum_app, Nat.mul_add_distr_l, IH. simpl. nia.
     """),
    ("geometric_sum", 4, "forall n : nat, list_sum (map (fun i => 2 ^ i) (seq 0 n)) + 1 = 2 ^ n",
     """
     induction n as [|n IH].
     - reflexivity.
     - rewrite seq_S, map_app, list_sum_app. simpl. lia.
     """),
    ("square_lt_pow2", 4, "forall n : nat, 5 <= n -> n * n < 2 ^ n",
     """
     intros n Hn. induction Hn as [|n Hn IH].
     - simpl. lia.
     - simpl. nia.
     """),
    ("postage", 4, "forall n : nat, 8 <= n -> exists a b : nat, n = 3 * a + 5 * b",
     """
     assert (H : forall k, exists a b : nat, k + 8 = 3 * a + 5 * b).
     { induction k as [|k [a [b Hab]]].
       - exists 1, 1. reflexivity.
       - destruct b as [|b].
         + exists (a - 3), 2. lia.
         + exists (a + 2), b. lia. }
     intros n Hn. destruct (H (n - 8)) as [a [b Hab]].
     exists a, b. lia.
     """),
    ("fact_pos", 2, "forall n : nat, 0 < fact n",
     "intros n. apply lt_O_fact."),
    ("fact_ge", 3, "forall n : nat, n <= fact n",
     """
     induction n as [|n IH].
     - simpl. lia.
     - simpl. pose proof (lt_O_fact n). nia.
     """),
    ("pow3_ge_pow2", 3, "forall n : nat, 2 ^ n + n <= 3 ^ n",
     """
     induction n as [|n IH].
     - simpl. lia.
     - assert (H : 2 ^ n <> 0) by (apply Nat.pow_nonzero; discriminate).
       simpl. lia.
     """),
]

LISTS = [
    ("app_nil_l", 1, "forall (A : Type) (l : list A), [] ++ l = l", "intros A l. reflexivity."),
    ("rev_singleton", 1, "forall (A : Type) (x : A), rev [x] = [x]", "intros A x. reflexivity."),
    ("length_cons", 1, "forall (A : Type) (x : A) (l : list A), length (x :: l) = S (length l)",
     "intros A x l. reflexivity."),
    ("length_app", 2, "forall (A : Type) (l m : list A), length (l ++ m) = length l + length m",
     "intros A l m. apply app_length."),
    ("length_rev", 2, "forall (A : Type) (l : list A), length (rev l) = length l",
     "intros A l. apply rev_length."),
    ("length_map", 2, "forall (f : nat -> bool) (l : list nat), length (map f l) = length l",
     "intros f l. apply map_length."),
    ("rev_involutive", 2, "forall (A : Type) (l : list A), rev (rev l) = l",
     "intros A l. apply rev_involutive."),
    ("rev_app", 2, "forall (A : Type) (l m : list A), rev (l ++ m) = rev m ++ rev l",
     "intros A l m. apply rev_app_distr."),
    ("map_app", 2, "forall (f : nat -> nat) (l m : list nat), map f (l ++ m) = map f l ++ map f m",
     "intros f l m. apply map_app."),
    ("app_assoc", 2, "forall (A : Type) (l m n : list A), l ++ (m ++ n) = (l ++ m) ++ n",
     "intros A l m n. apply app_assoc."),
    ("length_app_cons", 2,
     "forall (A : Type) (x : A) (l m : list A), length (l ++ x :: m) = S (length l + length m)",
     "intros A x l m. rewrite app_length. simpl. lia."),
    ("length_app_comm", 2, "forall (A : Type) (l m : list A), length (l ++ m) = length (m ++ l)",
     "intros A l m. rewrite !app_length. lia."),
    ("length_map_map", 2,
     "forall (f g : nat -> nat) (l : list nat), length (map f (map g l)) = length l",
     "intros f g l. rewrite !map_length. reflexivity."),
    ("repeat_length", 2, "forall (A : Type) (x : A) (n : nat), length (repeat x n) = n",
     "intros A x n. apply repeat_length."),
    ("rev_map", 2, "forall (f : nat -> nat) (l : list nat), rev (map f l) = map f (rev l)",
     "intros f l. symmetry. apply map_rev."),
    ("in_app_left", 2, "forall (A : Type) (x : A) (l m : list A), In x l -> In x (l ++ m)",
     "intros A x l m H. apply in_or_app. left. exact H."),
    ("in_map", 2, "forall (f : nat -> nat) (x : nat) (l : list nat), In x l -> In (f x) (map f l)",
     "intros f x l H. apply in_map. exact H."),
    ("in_rev", 2, "forall (A : Type) (x : A) (l : list A), In x (rev l) <-> In x l",
     "intros A x l. symmetry. apply in_rev."),
    ("length_zero_nil", 2, "forall (A : Type) (l : list A), length l = 0 -> l = []",
     "intros A l H. destruct l as [|x l]. - reflexivity. - discriminate H."),
    ("app_eq_nil", 2, "forall (A : Type) (l m : list A), l ++ m = [] -> l = [] /\\ m = []",
     "intros A l m H. destruct l as [|x l]. - split; [reflexivity | exact H]. - discriminate H."),
    ("forall_app", 2,
     "forall (P : nat -> Prop) (l m : list nat), Forall P l -> Forall P m -> Forall P (l ++ m)",
     "intros P l m Hl Hm. apply Forall_app. split; assumption."),
    ("count_occ_app", 2,
     "forall (l m : list nat) (x : nat), count_occ Nat.eq_dec (l ++ m) x = "
     "count_occ Nat.eq_dec l x + count_occ Nat.eq_dec m x",
     "intros l m x. apply count_occ_app."),
    ("nodup_rev", 2, "forall (A : Type) (l : list A), NoDup l -> NoDup (rev l)",
     "intros A l H. apply NoDup_rev. exact H."),
    ("map_id", 3, "forall (A : Type) (l : list A), map (fun x => x) l = l",
     "intros A l. induction l as [|x l IH]. - reflexivity. - simpl. rewrite IH. reflexivity."),
    ("map_ext", 3,
     "forall (f g : nat -> nat) (l : list nat), (forall x, f x = g x) -> map f l = map g l",
     """
     intros f g l H. induction l as [|x l IH].
     - reflexivity.
     - simpl. rewrite H, IH. reflexivity.
     """),
    ("sum_rev", 3, "forall l : list nat, list_sum (rev l) = list_sum l",
     """
     induction l as [|x l IH].
     - reflexivity.
     - simpl. rewrite list_sum_app, IH. simpl. lia.
     """),
    ("sum_map_succ", 3, "forall l : list nat, list_sum (map S l) = list_sum l + length l",
     """
     induction l as [|x l IH].
     - reflexivity.
     - simpl. rewrite IH. lia.
     """),
    ("sum_ge_length", 3, "forall l : list nat, Forall (fun x => 1 <= x) l -> length l <= list_sum l",
     """
     intros l H. induction H as [|x l Hx Hl IH].
     - simpl. lia.
     - simpl. lia.
     """),
    ("filter_length_le", 3, "forall (f : nat -> bool) (l : list nat), length (filter f l) <= length l",
     """
     intros f l. induction l as [|x l IH].
     - simpl. lia.
     - simpl. destruct (f x); simpl; lia.
     """),
    ("filter_true", 3, "forall l : list nat, filter (fun _ => true) l = l",
     "induction l as [|x l IH]. - reflexivity. - simpl. rewrite IH. reflexivity."),
    ("sum_zero", 3, "forall l : list nat, list_sum l = 0 -> Forall (fun x => x = 0) l",
     """
     induction l as [|x l IH]; simpl; intros H.
     - constructor.
     - constructor.
       + lia.
       + apply IH. lia.
     """),
    ("rev_nil", 2, "forall (A : Type) (l : list A), rev l = [] -> l = []",
     "intros A l H. rewrite <- (rev_involutive l), H. reflexivity."),
    ("rev_inj", 3, "forall (A : Type) (l m : list A), rev l = rev m -> l = m",
     "intros A l m H. rewrite <- (rev_involutive l), <- (rev_involutive m), H. reflexivity."),
    ("rev_wrap", 3, "forall (A : Type) (x : A) (l : list A), rev (x :: l ++ [x]) = x :: rev l ++ [x]",
     "intros A x l. simpl. rewrite rev_app_distr. reflexivity."),
    ("firstn_app_length", 3, "forall (A : Type) (l m : list A), firstn (length l) (l ++ m) = l",
     "intros A l m. induction l as [|x l IH]. - reflexivity. - simpl. rewrite IH. reflexivity."),
    ("skipn_app_length", 3, "forall (A : Type) (l m : list A), skipn (length l) (l ++ m) = m",
     "intros A l m. induction l as [|x l IH]. - reflexivity. - simpl. exact IH."),
    ("nth_error_middle", 3,
     "forall (A : Type) (l m : list A) (x : A), nth_error (l ++ x :: m) (length l) = Some x",
     "intros A l m x. induction l as [|y l IH]. - reflexivity. - simpl. exact IH."),
    ("in_split", 3,
     "forall (A : Type) (x : A) (l : list A), In x l -> exists l1 l2, l = l1 ++ x :: l2",
     "intros A x l H. apply in_split. exact H."),
    ("rev_fold", 4, "forall (A : Type) (l : list A), fold_left (fun acc x => x :: acc) l [] = rev l",
     """
     intros A.
     assert (H : forall (l acc : list A), fold_left (fun acc x => x :: acc) l acc = rev l ++ acc).
     { induction l as [|x l IH]; intros acc.
       - reflexivity.
       - simpl. rewrite IH, <- app_assoc. reflexivity. }
     intros l. rewrite H, app_nil_r. reflexivity.
     """),
]

LOGIC = [
    ("imp_refl", 1, "forall P : Prop, P -> P", "intros P H. exact H."),
    ("and_comm", 1, "forall P Q : Prop, P /\\ Q -> Q /\\ P", "tauto."),
    ("or_comm", 1, "forall P Q : Prop, P \\/ Q -> Q \\/ P", "tauto."),
    ("modus_ponens", 1, "forall P Q : Prop, P -> (P -> Q) -> Q", "intros P Q HP HPQ. exact (HPQ HP)."),
    ("imp_trans", 1, "forall P Q R : Prop, (P -> Q) -> (Q -> R) -> P -> R", "tauto."),
    ("double_neg_intro", 1, "forall P : Prop, P -> ~ ~ P", "intros P HP HnP. exact (HnP HP)."),
    ("iff_trans", 1, "forall P Q R : Prop, (P <-> Q) -> (Q <-> R) -> (P <-> R)", "tauto."),
    ("or_elim", 1, "forall P Q R : Prop, (P -> R) -> (Q -> R) -> P \\/ Q -> R", "tauto."),
    ("swap_forall", 1, "forall (A : Type) (R : A -> A -> Prop), (forall x y, R x y) -> forall y x, R x y",
     "intros A R H y x. apply H."),
    ("exists_six", 1, "exists n : nat, n + n = 6", "exists 3. reflexivity."),
    ("curry", 1, "forall P Q R : Prop, (P /\\ Q -> R) <-> (P -> Q -> R)", "tauto."),
    ("contrapositive", 2, "forall P Q : Prop, (P -> Q) -> ~ Q -> ~ P",
     "intros P Q HPQ HnQ HP. apply HnQ. apply HPQ. exact HP."),
    ("demorgan_or", 1, "forall P Q : Prop, ~ (P \\/ Q) <-> ~ P /\\ ~ Q", "tauto."),
    ("demorgan_and", 1, "forall P Q : Prop, ~ P \\/ ~ Q -> ~ (P /\\ Q)", "tauto."),
    ("and_or_distr", 1, "forall P Q R : Prop, P /\\ (Q \\/ R) <-> (P /\\ Q) \\/ (P /\\ R)", "tauto."),
    ("triple_neg", 2, "forall P : Prop, ~ ~ ~ P -> ~ P", "intros P H HP. apply H. intros HnP. exact (HnP HP)."),
    ("exists_not", 2, "forall (A : Type) (P : A -> Prop), (exists x, ~ P x) -> ~ (forall x, P x)",
     "intros A P [x Hx] H. exact (Hx (H x))."),
    ("forall_and", 1,
     "forall (A : Type) (P Q : A -> Prop), (forall x, P x /\\ Q x) <-> (forall x, P x) /\\ (forall x, Q x)",
     "firstorder."),
    ("exists_or", 1,
     "forall (A : Type) (P Q : A -> Prop), (exists x, P x \\/ Q x) <-> (exists x, P x) \\/ (exists x, Q x)",
     "firstorder."),
    ("not_exists", 1, "forall (A : Type) (P : A -> Prop), ~ (exists x, P x) <-> (forall x, ~ P x)",
     "firstorder."),
    ("exists_swap", 2,
     "forall (A B : Type) (R : A -> B -> Prop), (exists x y, R x y) -> exists y x, R x y",
     "intros A B R [x [y H]]. exists y, x. exact H."),
    ("above_every_nat", 2, "forall n : nat, exists m, n < m", "intros n. exists (S n). lia."),
    ("left_neutral_unique", 2, "forall n : nat, (forall m, n + m = m) -> n = 0",
     "intros n H. specialize (H 0). lia."),
    ("eq_dec_nat", 1, "forall n m : nat, n = m \\/ n <> m", "intros n m. lia."),
    ("inj_compose", 2,
     "forall f g : nat -> nat, (forall x y, f x = f y -> x = y) -> (forall x y, g x = g y -> x = y) -> "
     "forall x y, f (g x) = f (g y) -> x = y",
     "intros f g Hf Hg x y H. apply Hg. apply Hf. exact H."),
    ("no_fixpoint", 2, "forall f : nat -> nat, (forall n, n < f n) -> ~ exists n, f n = n",
     "intros f Hf [n Hn]. specialize (Hf n). lia."),
    ("em_not_not", 3, "forall P : Prop, ~ ~ (P \\/ ~ P)",
     "intros P H. apply H. right. intros HP. apply H. left. exact HP."),
    ("peirce_not_not", 1, "forall P Q : Prop, ~ ~ (((P -> Q) -> P) -> P)", "tauto."),
    ("no_largest_nat", 3, "~ exists n : nat, forall m, m <= n",
     "intros [n H]. specialize (H (S n)). lia."),
    ("surj_compose", 3,
     "forall f g : nat -> nat, (forall y, exists x, f x = y) -> (forall y, exists x, g x = y) -> "
     "forall z, exists x, f (g x) = z",
     """
     intros f g Hf Hg z.
     destruct (Hf z) as [y Hy]. destruct (Hg y) as [x Hx].
     exists x. rewrite Hx. exact Hy.
     """),
    ("barber", 3, "forall (A : Type) (shaves : A -> A -> Prop), ~ exists b, forall x, shaves b x <-> ~ shaves x x",
     "intros A shaves [b H]. specialize (H b). tauto."),
    ("diagonal", 4, "forall f : nat -> nat -> nat, exists g : nat -> nat, forall n, g <> f n",
     """
     intros f. exists (fun k => S (f k k)). intros n H.
     assert (E : S (f n n) = f n n) by exact (f_equal (fun h => h n) H).
     lia.
     """),
]

NUMBER_THEORY = [
    ("even_0", 1, "Nat.Even 0", "exists 0. reflexivity."),
    ("divide_refl", 1, "forall n : nat, Nat.divide n n", "intros n. exists 1. lia."),
    ("divide_0", 1, "forall n : nat, Nat.divide n 0", "intros n. exists 0. reflexivity."),
    ("one_divides", 1, "forall n : nat, Nat.divide 1 n", "intros n. exists n. lia."),
    ("gcd_comm", 1, "forall a b : nat, Nat.gcd a b = Nat.gcd b a", "intros a b. apply Nat.gcd_comm."),
    ("even_double", 2, "forall n : nat, Nat.Even (2 * n)", "intros n. exists n. reflexivity."),
    ("odd_double_succ", 2, "forall n : nat, Nat.Odd (2 * n + 1)", "intros n. exists n. reflexivity."),
    ("even_add", 2, "forall n m : nat, Nat.Even n -> Nat.Even m -> Nat.Even (n + m)",
     "intros n m [a Ha] [b Hb]. exists (a + b). lia."),
    ("odd_add_odd", 2, "forall n m : nat, Nat.Odd n -> Nat.Odd m -> Nat.Even (n + m)",
     "intros n m [a Ha] [b Hb]. exists (a + b + 1). lia."),
    ("even_succ_odd", 2, "forall n : nat, Nat.Even n -> Nat.Odd (S n)",
     "intros n [a Ha]. exists a. lia."),
    ("odd_sum_consecutive", 2, "forall n : nat, Nat.Odd (n + S n)", "intros n. exists n. lia."),
    ("even_pow2", 2, "forall n : nat, Nat.Even (2 ^ S n)", "intros n. exists (2 ^ n). simpl. lia."),
    ("even_bool_double", 2, "forall n : nat, Nat.even (2 * n) = true",
     "intros n. apply Nat.even_spec. exists n. reflexivity."),
    ("divide_trans", 2, "forall a b c : nat, Nat.divide a b -> Nat.divide b c -> Nat.divide a c",
     "intros a b c [x Hx] [y Hy]. exists (y * x). rewrite Hy, Hx. ring."),
    ("divide_add", 2, "forall d a b : nat, Nat.divide d a -> Nat.divide d b -> Nat.divide d (a + b)",
     "intros d a b [x Hx] [y Hy]. exists (x + y). rewrite Hx, Hy. ring."),
    ("divide_mul_r", 2, "forall d a b : nat, Nat.divide d a -> Nat.divide d (a * b)",
     "intros d a b [x Hx]. exists (x * b). rewrite Hx. ring."),
    ("gcd_divides_l", 2, "forall a b : nat, Nat.divide (Nat.gcd a b) a",
     "intros a b. apply Nat.gcd_divide_l."),
    ("gcd_diag", 2, "forall n : nat, Nat.gcd n n = n", "intros n. apply Nat.gcd_diag."),
    ("mod_mul_self", 2, "forall n : nat, (n * 7) mod 7 = 0",
     "intros n. apply Nat.mod_mul. discriminate."),
    ("mod_small", 2, "forall n : nat, n < 4 -> n mod 4 = n",
     "intros n H. apply Nat.mod_small. exact H."),
    ("mod_mod", 2, "forall n : nat, (n mod 6) mod 6 = n mod 6",
     "intros n. apply Nat.mod_mod. discriminate."),
    ("div_mod_3", 2, "forall n : nat, n = 3 * (n / 3) + n mod 3",
     "intros n. apply Nat.div_mod. discriminate."),
    ("mod_add_5", 2, "forall a b : nat, (a + 5 * b) mod 5 = a mod 5",
     "intros a b. rewrite (Nat.mul_comm 5 b). apply Nat.mod_add. discriminate."),
    ("last_digit", 2, "forall n : nat, (10 * n + 7) mod 10 = 7",
     "intros n. rewrite Nat.add_comm, Nat.mul_comm, Nat.mod_add by discriminate. reflexivity."),
    ("mod_le", 2, "forall a b : nat, b <> 0 -> a mod b <= a",
     "intros a b H. apply Nat.mod_le. exact H."),
    ("even_mul_l", 3, "forall n m : nat, Nat.Even n -> Nat.Even (n * m)",
     "intros n m [a Ha]. exists (a * m). rewrite Ha. ring."),
    ("odd_square", 3, "forall n : nat, Nat.Odd n -> Nat.Odd (n * n)",
     "intros n [k Hk]. exists (2 * k * k + 2 * k). rewrite Hk. ring."),
    ("not_even_and_odd", 3, "forall n : nat, ~ (Nat.Even n /\\ Nat.Odd n)",
     "intros n [[a Ha] [b Hb]]. lia."),
    ("even_or_odd", 3, "forall n : nat, Nat.Even n \\/ Nat.Odd n",
     """
     induction n as [|n [[k Hk] | [k Hk]]].
     - left. exists 0. reflexivity.
     - right. exists k. lia.
     - left. exists (S k). lia.
     """),
    ("divide_sub", 3, "forall d a b : nat, Nat.divide d a -> Nat.divide d b -> Nat.divide d (a - b)",
     "intros d a b [x Hx] [y Hy]. exists (x - y). rewrite Hx, Hy. symmetry. apply Nat.mul_sub_distr_r."),
    ("divide_antisym", 3, "forall a b : nat, Nat.divide a b -> Nat.divide b a -> a = b",
     "intros a b H1 H2. apply Nat.divide_antisym; assumption."),
    ("mod_2_cases", 3, "forall n : nat, n mod 2 = 0 \\/ n mod 2 = 1",
     "intros n. pose proof (Nat.mod_upper_bound n 2) as H. lia."),
    ("even_consecutive_product", 4, "forall n : nat, Nat.Even (n * (n + 1))",
     """
     intros n. destruct (Nat.Even_or_Odd n) as [[k Hk] | [k Hk]].
     - exists (k * (n + 1)). rewrite Hk. ring.
     - exists (n * (k + 1)). rewrite Hk. ring.
     """),
    ("three_divides_consecutive", 4, "forall n : nat, Nat.divide 3 (n * (n + 1) * (n + 2))",
     """
     induction n as [|n [k Hk]].
     - exists 0. reflexivity.
     - exists (k + (n + 1) * (n + 2)). nia.
     """),
    ("three_divides_cube_plus", 4, "forall n : nat, Nat.divide 3 (n * n * n + 2 * n)",
     """
     induction n as [|n [k Hk]].
     - exists 0. reflexivity.
     - exists (k + n * n + n + 1). nia.
     """),
    ("square_mod_4", 4, "forall n : nat, (n * n) mod 4 = 0 \\/ (n * n) mod 4 = 1",
     """
     intros n. destruct (Nat.Even_or_Odd n) as [[k Hk] | [k Hk]]; subst n.
     - left. replace (2 * k * (2 * k)) with (k * k * 4) by ring.
       apply Nat.mod_mul. discriminate.
     - right. replace ((2 * k + 1) * (2 * k + 1)) with (1 + (k * k + k) * 4) by ring.
       rewrite Nat.mod_add by discriminate. reflexivity.
     """),
    ("six_divides_square_sum", 4, "forall n : nat, Nat.divide 6 (n * (n + 1) * (2 * n + 1))",
     """
     induction n as [|n [k Hk]].
     - exists 0. reflexivity.
     - exists (k + (n + 1) * (n + 1)). nia.
     """),
    ("odd_square_mod_8", 4, "forall n : nat, Nat.Odd n -> Nat.divide 8 (n * n - 1)",
     """
     intros n [k Hk]. subst n.
     destruct (Nat.Even_or_Odd k) as [[j Hj] | [j Hj]]; subst k.
     - exists (2 * j * j + j). nia.
     - exists (2 * j * j + 3 * j + 1). nia.
     """),
    ("sqrt2_irrational", 4, "forall p q : nat, p * p = 2 * (q * q) -> q = 0",
     """
     intros p. induction p as [p IH] using (well_founded_induction lt_wf).
     intros q H.
     destruct (Nat.Even_or_Odd p) as [[a Ha] | [a Ha]]; subst p.
     - destruct (Nat.Even_or_Odd q) as [[b Hb] | [b Hb]]; subst q.
       + assert (Hab : a * a = 2 * (b * b)) by nia.
         destruct (Nat.eq_0_gt_0_cases a) as [Ha0 | Ha0].
         * subst a. nia.
         * assert (b = 0) by (apply (IH a); [lia | exact Hab]). lia.
       + exfalso. nia.
     - exfalso. nia.
     """),
]

BOOL = [
    ("negb_involutive", 1, "forall b : bool, negb (negb b) = b",
     "intros b. destruct b; reflexivity."),
    ("andb_comm", 1, "forall a b : bool, a && b = b && a",
     "intros a b. destruct a, b; reflexivity."),
    ("orb_comm", 1, "forall a b : bool, a || b = b || a",
     "intros a b. destruct a, b; reflexivity."),
    ("andb_true_l", 1, "forall b : bool, true && b = b", "intros b. reflexivity."),
    ("demorgan", 1, "forall a b : bool, negb (a && b) = negb a || negb b",
     "intros a b. destruct a, b; reflexivity."),
    ("andb_orb_distr", 1, "forall a b c : bool, a && (b || c) = a && b || a && c",
     "intros a b c. destruct a, b, c; reflexivity."),
    ("xorb_self", 1, "forall b : bool, xorb b b = false",
     "intros b. destruct b; reflexivity."),
    ("if_same", 1, "forall (b : bool) (x : nat), (if b then x else x) = x",
     "intros b x. destruct b; reflexivity."),
    ("if_negb", 2, "forall (b : bool) (x y : nat), (if negb b then x else y) = (if b then y else x)",
     "intros b x y. destruct b; reflexivity."),
    ("andb_true_split", 2, "forall a b : bool, a && b = true -> a = true /\\ b = true",
     "intros a b H. destruct a, b; simpl in H; split; congruence."),
    ("eqb_refl", 2, "forall n : nat, (n =? n) = true", "intros n. apply Nat.eqb_refl."),
    ("eqb_sym", 2, "forall n m : nat, (n =? m) = (m =? n)", "intros n m. apply Nat.eqb_sym."),
    ("eqb_neq", 2, "forall n m : nat, n <> m -> (n =? m) = false",
     "intros n m H. apply Nat.eqb_neq. exact H."),
    ("ltb_leb", 2, "forall n m : nat, (n <? m) = true -> (n <=? m) = true",
     "intros n m H. apply Nat.ltb_lt in H. apply Nat.leb_le. lia."),
    ("odd_negb_even", 2, "forall n : nat, Nat.odd n = negb (Nat.even n)",
     "intros n. rewrite Nat.negb_even. reflexivity."),
    ("existsb_app", 2,
     "forall (f : nat -> bool) (l m : list nat), existsb f (l ++ m) = existsb f l || existsb f m",
     "intros f l m. apply existsb_app."),
    ("forallb_in", 3,
     "forall (f : nat -> bool) (l : list nat) (x : nat), forallb f l = true -> In x l -> f x = true",
     "intros f l x H Hx. rewrite forallb_forall in H. apply H. exact Hx."),
    ("even_succ_succ", 3, "forall n : nat, Nat.even (S n) = negb (Nat.even n)",
     """
     induction n as [|n IH].
     - reflexivity.
     - change (Nat.even (S (S n))) with (Nat.even n). rewrite IH. destruct (Nat.even n); reflexivity.
     """),
]

OPTION = [
    ("map_some", 1, "forall (f : nat -> nat) (x : nat), option_map f (Some x) = Some (f x)",
     "intros f x. reflexivity."),
    ("map_none", 1, "forall f : nat -> nat, option_map f None = None", "intros f. reflexivity."),
    ("some_inj", 1, "forall x y : nat, Some x = Some y -> x = y", "intros x y H. injection H. auto."),
    ("some_not_none", 1, "forall x : nat, Some x <> None", "intros x. discriminate."),
    ("hd_error_cons_app", 1,
     "forall (A : Type) (x : A) (l m : list A), hd_error ((x :: l) ++ m) = Some x",
     "intros A x l m. reflexivity."),
    ("map_compose", 2,
     "forall (f g : nat -> nat) (o : option nat), option_map g (option_map f o) = option_map (fun x => g (f x)) o",
     "intros f g o. destruct o; reflexivity."),
    ("map_id", 2, "forall o : option nat, option_map (fun x => x) o = o",
     "intros o. destruct o; reflexivity."),
    ("nth_error_nil", 2, "forall (A : Type) (n : nat), nth_error (@nil A) n = None",
     "intros A n. destruct n; reflexivity."),
    ("match_le", 2,
     "forall o : option nat, match o with Some x => x | None => 0 end <= match o with Some x => x + 1 | None => 1 end",
     "intros o. destruct o; lia."),
    ("not_none_some", 2, "forall o : option nat, o <> None -> exists x, o = Some x",
     "intros o H. destruct o as [x|]. - exists x. reflexivity. - contradiction."),
    ("nth_error_in_range", 3,
     "forall (A : Type) (l : list A) (n : nat), n < length l -> nth_error l n <> None",
     "intros A l n Hn H. apply nth_error_None in H. lia."),
    ("nth_error_map", 3,
     "forall (f : nat -> nat) (l : list nat) (n : nat), nth_error (map f l) n = option_map f (nth_error l n)",
     """
     intros f l. induction l as [|x l IH]; intros n.
     - destruct n; reflexivity.
     - destruct n as [|n].
       + reflexivity.
       + simpl. apply IH.
     """),
    ("nth_error_app_left", 3,
     "forall (A : Type) (l m : list A) (n : nat), n < length l -> nth_error (l ++ m) n = nth_error l n",
     "intros A l m n H. apply nth_error_app1. exact H."),
    ("find_in", 3, "forall (f : nat -> bool) (l : list nat) (x : nat), find f l = Some x -> In x l",
     """
     intros f l x. induction l as [|y l IH]; simpl.
     - discriminate.
     - destruct (f y).
       + intros H. injection H. auto.
       + intros H. right. apply IH. exact H.
     """),
]

INEQUALITY = [
    ("le_refl", 1, "forall n : nat, n <= n", "lia."),
    ("le_trans", 1, "forall a b c : nat, a <= b -> b <= c -> a <= c", "lia."),
    ("lt_succ", 1, "forall n : nat, n < S n", "lia."),
    ("add_le_mono", 1, "forall a b c d : nat, a <= b -> c <= d -> a + c <= b + d", "lia."),
    ("lt_irrefl", 1, "forall n : nat, ~ n < n", "lia."),
    ("le_antisym", 1, "forall n m : nat, n <= m -> m <= n -> n = m", "lia."),
    ("sub_le", 1, "forall n m : nat, n - m <= n", "lia."),
    ("lt_double", 1, "forall n : nat, 0 < n -> n < 2 * n", "lia."),
    ("between", 2, "forall a b : nat, a + 1 < b -> exists c, a < c /\\ c < b",
     "intros a b H. exists (S a). lia."),
    ("mul_le_mono", 2, "forall a b c d : nat, a <= b -> c <= d -> a * c <= b * d",
     "intros a b c d H1 H2. apply Nat.mul_le_mono; assumption."),
    ("le_square", 2, "forall n : nat, n <= n * n", "intros n. destruct n; simpl; lia."),
    ("square_mono", 2, "forall a b : nat, a <= b -> a * a <= b * b", "intros a b H. nia."),
    ("lt_mul", 2, "forall a b : nat, 0 < a -> 1 < b -> a < a * b", "intros a b Ha Hb. nia."),
    ("div2_le", 2, "forall n : nat, n / 2 <= n",
     "intros n. apply Nat.div_le_upper_bound. - discriminate. - lia."),
    ("am_gm", 3, "forall a b : nat, 2 * a * b <= a * a + b * b",
     """
     intros a b. destruct (Nat.le_ge_cases a b) as [H | H].
     - destruct (Nat.le_exists_sub a b H) as [k [Hk _]]. subst b. nia.
     - destruct (Nat.le_exists_sub b a H) as [k [Hk _]]. subst a. nia.
     """),
    ("pow3_pos", 3, "forall n : nat, 1 <= 3 ^ n",
     "induction n as [|n IH]. - simpl. lia. - simpl. lia."),
    ("pow2_mono", 3, "forall n m : nat, n <= m -> 2 ^ n <= 2 ^ m",
     "intros n m H. apply Nat.pow_le_mono_r. - discriminate. - exact H."),
    ("sum_bounded", 3,
     "forall l : list nat, Forall (fun x => x <= 10) l -> list_sum l <= 10 * length l",
     """
     intros l H. induction H as [|x l Hx Hl IH].
     - simpl. lia.
     - simpl. lia.
     """),
    ("square_inj", 3, "forall a b : nat, a * a = b * b -> a = b",
     """
     intros a b H. destruct (Nat.lt_trichotomy a b) as [Hab | [Hab | Hab]].
     - assert (a * a < b * b) by nia. lia.
     - exact Hab.
     - assert (b * b < a * a) by nia. lia.
     """),
    ("integer_sqrt", 4, "forall n : nat, exists k, k * k <= n < (k + 1) * (k + 1)",
     """
     induction n as [|n [k [Hlo Hhi]]].
     - exists 0. lia.
     - destruct (Nat.eq_dec (S n) ((k + 1) * (k + 1))) as [E | E].
       + exists (k + 1). nia.
       + exists k. lia.
     """),
    ("cauchy_schwarz_2", 4,
     "forall a b c d : nat, (a * c + b * d) * (a * c + b * d) <= (a * a + b * b) * (c * c + d * d)",
     """
     intros a b c d.
     destruct (Nat.le_ge_cases (a * d) (b * c)) as [H | H].
     - destruct (Nat.le_exists_sub (a * d) (b * c) H) as [k [Hk _]]. nia.
     - destruct (Nat.le_exists_sub (b * c) (a * d) H) as [k [Hk _]]. nia.
     """),
]

MINMAX = [
    ("max_comm", 1, "forall a b : nat, Nat.max a b = Nat.max b a", "lia."),
    ("min_comm", 1, "forall a b : nat, Nat.min a b = Nat.min b a", "lia."),
    ("le_max_l", 1, "forall a b : nat, a <= Nat.max a b", "lia."),
    ("min_le_l", 1, "forall a b : nat, Nat.min a b <= a", "lia."),
    ("max_idem", 1, "forall a : nat, Nat.max a a = a", "lia."),
    ("max_assoc", 1, "forall a b c : nat, Nat.max a (Nat.max b c) = Nat.max (Nat.max a b) c", "lia."),
    ("max_lub", 1, "forall a b c : nat, a <= c -> b <= c -> Nat.max a b <= c", "lia."),
    ("max_mono", 1, "forall a b c : nat, a <= b -> Nat.max a c <= Nat.max b c", "lia."),
    ("min_max_absorb", 2, "forall a b : nat, Nat.min a (Nat.max a b) = a",
     "intros a b. apply Nat.min_l. apply Nat.le_max_l."),
    ("max_plus_min", 1, "forall a b : nat, Nat.max a b + Nat.min a b = a + b", "lia."),
    ("max_add_r", 2, "forall a b c : nat, Nat.max (a + c) (b + c) = Nat.max a b + c",
     "intros a b c. apply Nat.add_max_distr_r."),
    ("min_double", 1, "forall a b : nat, Nat.min (2 * a) (2 * b) = 2 * Nat.min a b", "lia."),
    ("max_minus_min", 1, "forall a b : nat, Nat.max a b - Nat.min a b = (a - b) + (b - a)", "lia."),
    ("list_max_in", 3, "forall (l : list nat) (x : nat), In x l -> x <= list_max l",
     """
     induction l as [|y l IH]; intros x H.
     - destruct H.
     - simpl. destruct H as [H | H].
       + subst y. lia.
       + specialize (IH x H). lia.
     """),
    ("list_max_app", 3,
     "forall l1 l2 : list nat, list_max (l1 ++ l2) = Nat.max (list_max l1) (list_max l2)",
     """
     induction l1 as [|x l1 IH]; intros l2.
     - reflexivity.
     - simpl. rewrite IH. lia.
     """),
]


# ---------------------------------------------------------------------------
# Families of concrete facts: the values are computed here and Rocq confirms
# them.  Each yields rows like the tables above.

def arith_facts() -> Iterator[tuple[str, int, str, str]]:
    """Closed arithmetic identities proved by computation."""
    for name, text, value in [
        ("eval_mul_add", "12 * 13 + 7", 12 * 13 + 7),
        ("eval_nested", "(17 + 8) * (9 - 4)", (17 + 8) * (9 - 4)),
        ("eval_pow2", "2 ^ 10", 2 ** 10),
        ("eval_pow3", "3 ^ 5 + 1", 3 ** 5 + 1),
        ("eval_div", "1000 / 7", 1000 // 7),
        ("eval_truncated_sub", "5 - 9 + 3", max(5 - 9, 0) + 3),
    ]:
        yield name, 1, f"{text} = {value}", "reflexivity."


def number_facts() -> Iterator[tuple[str, int, str, str]]:
    """Concrete gcd, modulo, divisibility and parity facts."""
    for a, b in [(84, 36), (35, 64), (91, 65)]:
        yield f"gcd_{a}_{b}", 1, f"Nat.gcd {a} {b} = {math.gcd(a, b)}", "reflexivity."
    for a, b in [(100, 7), (123, 10), (77, 11)]:
        yield f"mod_{a}_{b}", 1, f"{a} mod {b} = {a % b}", "reflexivity."
    for d, n in [(7, 91), (12, 144), (6, 45), (9, 100)]:
        if n % d == 0:
            yield f"divides_{d}_{n}", 1, f"Nat.divide {d} {n}", f"exists {n // d}. reflexivity."
        else:
            yield f"not_divides_{d}_{n}", 2, f"~ Nat.divide {d} {n}", "intros [k Hk]. lia."
    for n in (42, 57):
        parity = "Even" if n % 2 == 0 else "Odd"
        yield f"{parity.lower()}_{n}", 1, f"Nat.{parity} {n}", f"exists {n // 2}. reflexivity."
    yield "not_even_15", 2, "~ Nat.Even 15", "intros [k Hk]. lia."


def list_facts() -> Iterator[tuple[str, int, str, str]]:
    """Computations on concrete lists of naturals."""
    def coq(values: Sequence[int]) -> str:
        return "[" + "; ".join(str(v) for v in values) + "]"

    xs = [3, 1, 4, 1, 5]
    yield "eval_rev", 1, f"rev {coq(xs)} = {coq(xs[::-1])}", "reflexivity."
    yield "eval_map_succ", 1, f"map S {coq(xs)} = {coq([x + 1 for x in xs])}", "reflexivity."
    yield "eval_sum", 1, f"list_sum {coq(xs)} = {sum(xs)}", "reflexivity."
    yield "eval_seq", 1, f"seq 4 3 = {coq(range(4, 7))}", "reflexivity."
    yield "eval_firstn", 1, f"firstn 2 {coq(xs)} = {coq(xs[:2])}", "reflexivity."
    yield "eval_nth", 1, f"nth 2 {coq(xs)} 0 = {xs[2]}", "reflexivity."
    yield "eval_filter_even", 1, (f"filter Nat.even {coq(range(8))} = "
                                  f"{coq([x for x in range(8) if x % 2 == 0])}"), "reflexivity."


@dataclass(frozen=True)
class Topic:
    """One table of targets: its name (the JSON ``topic``) and id prefix."""

    name: str
    prefix: str
    rows: tuple[tuple[str, int, str, str | None], ...]


TOPICS = (
    Topic("arith", "arith", tuple(ARITH) + tuple(arith_facts())),
    Topic("rewrite", "rw", tuple(REWRITE)),
    Topic("induction", "ind", tuple(INDUCTION)),
    Topic("lists", "list", tuple(LISTS) + tuple(list_facts())),
    Topic("logic", "logic", tuple(LOGIC)),
    Topic("number_theory", "nt", tuple(NUMBER_THEORY) + tuple(number_facts())),
    Topic("bool", "bool", tuple(BOOL)),
    Topic("option", "opt", tuple(OPTION)),
    Topic("inequality", "ineq", tuple(INEQUALITY)),
    Topic("minmax", "minmax", tuple(MINMAX)),
)


# ---------------------------------------------------------------------------
# Building the records


def render_proof(tactics: str | None) -> str | None:
    """``Proof.``, the tactics indented by two spaces, ``Qed.``."""
    if tactics is None:
        return None
    body = textwrap.indent(textwrap.dedent(tactics).strip(), "  ")
    return f"Proof.\n{body}\nQed."


def build_targets(topics: Iterable[Topic] = TOPICS) -> list[dict]:
    """Every target as a JSON-ready record, in table order, held-out split applied."""
    targets = []
    for topic in topics:
        for name, difficulty, prop, tactics in topic.rows:
            target_id = f"{topic.prefix}_{name}"
            targets.append({
                "id": target_id,
                "header": HEADER,
                "statement": f"Theorem {target_id} : {prop}.",
                "proof": render_proof(tactics),
                "difficulty": difficulty,
                "topic": topic.name,
                "held_out": False,
            })
    assign_held_out(targets)
    return targets


def _id_hash(target_id: str) -> str:
    return hashlib.sha256(target_id.encode()).hexdigest()


def assign_held_out(targets: list[dict]) -> None:
    """Mark every :data:`HELD_OUT_PERIOD`-th target of each topic as held out,
    counting in (difficulty, id hash) order so the split covers every
    difficulty; the choice depends only on ids, topics and difficulties."""
    by_topic: dict[str, list[dict]] = {}
    for target in targets:
        by_topic.setdefault(target["topic"], []).append(target)
    for members in by_topic.values():
        ordered = sorted(members, key=lambda t: (t["difficulty"], _id_hash(t["id"])))
        for i, target in enumerate(ordered):
            target["held_out"] = i % HELD_OUT_PERIOD == HELD_OUT_PERIOD // 2


def to_jsonl(targets: Iterable[Mapping]) -> str:
    """One JSON object per line, keys in :data:`FIELDS` order."""
    return "".join(json.dumps({k: t[k] for k in FIELDS}) + "\n" for t in targets)


def load_jsonl(path: Path) -> list[dict]:
    """Read a target file written by :func:`to_jsonl`."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------------------
# Checks without Rocq


def schema_problems(targets: Sequence[Mapping]) -> list[str]:
    """Everything wrong with the records' shape, one message per problem
    (empty when the set is well formed).  Includes the verifier's own text
    policy for headers, statements and proofs."""
    problems = []
    seen: set[str] = set()
    for i, target in enumerate(targets):
        where = f"record {i} ({target.get('id')!r})"
        if list(target) != list(FIELDS):
            problems.append(f"{where}: keys {list(target)} are not {list(FIELDS)}")
            continue
        target_id = target["id"]
        if not isinstance(target_id, str) or not ID_PATTERN.fullmatch(target_id):
            problems.append(f"{where}: id is not a plain Coq identifier")
            continue
        if target_id in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(target_id)
        if type(target["difficulty"]) is not int or target["difficulty"] not in (1, 2, 3, 4):
            problems.append(f"{where}: difficulty {target['difficulty']!r} is not 1-4")
        if not isinstance(target["topic"], str) or not target["topic"]:
            problems.append(f"{where}: topic must be a non-empty string")
        if not isinstance(target["held_out"], bool):
            problems.append(f"{where}: held_out must be a boolean")
        try:
            validate_header(target["header"])
            statement = validate_statement(target["statement"])
            if statement.name != target_id:
                problems.append(f"{where}: the statement declares {statement.name!r}")
            if target["proof"] is not None:
                validate_proof(target["proof"])
        except RocqTextError as e:
            problems.append(f"{where}: refused by the verifier's text checks: {e}")
    return problems


# ---------------------------------------------------------------------------
# Checks with Rocq


@dataclass(frozen=True)
class Failure:
    """One target that Rocq did not accept (``target_id`` is ``None`` when the
    failure could not be pinned on a target, e.g. a broken header)."""

    target_id: str | None
    detail: str


@dataclass(frozen=True)
class _Block:
    """Where one target's text sits in a check file (1-based, inclusive)."""

    target_id: str
    first_line: int
    last_line: int


@dataclass(frozen=True)
class _CheckFile:
    """A generated ``.v`` file and what is needed to read ``coqc``'s answer."""

    text: str
    blocks: list[_Block]
    #: module holding a reference proof -> the target it proves
    references: dict[str, str]


#: module and definition that mention every reference proof, so that one
#: ``Print Assumptions`` covers them all
_ALL_MODULE = "AllReferences"
_ALL_NAME = "proofs"


def _check_file(header: str, targets: Sequence[Mapping], *, each: bool) -> _CheckFile:
    """The ``.v`` text that checks ``targets`` under ``header``.

    ``Print Assumptions`` walks the whole dependency graph (``lia``'s library
    included) on every call, so by default it runs once, on a definition that
    mentions every reference proof; with ``each`` a ``Locate``/``Print
    Assumptions`` pair follows every reference proof instead, to name the
    target that uses an axiom.
    """
    lines = header.splitlines()
    blocks = []
    references: dict[str, str] = {}
    for i, target in enumerate(targets):
        first = len(lines) + 1
        lines += [f"Module Statement{i}.", target["statement"], "Proof.", PROP_CHECK, "Admitted.",
                  f"End Statement{i}."]
        if target["proof"] is not None:
            module = f"Reference{i}"
            references[module] = target["id"]
            lines += [f"Module {module}.", target["statement"], *target["proof"].splitlines(), f"End {module}."]
            if each:
                lines += [f"Locate {module}.{target['id']}.", f"Print Assumptions {module}.{target['id']}."]
        blocks.append(_Block(target["id"], first, len(lines)))
    if references and not each:
        # unused lets keep every proof in the term at a constant type (a
        # tuple of the proofs takes seconds to elaborate)
        mentions = [f"  let _ := {module}.{target_id} in" for module, target_id in references.items()]
        lines += [f"Module {_ALL_MODULE}.", f"Definition {_ALL_NAME} : unit :=", *mentions, "  tt.",
                  f"End {_ALL_MODULE}.", f"Locate {_ALL_MODULE}.{_ALL_NAME}.",
                  f"Print Assumptions {_ALL_MODULE}.{_ALL_NAME}."]
    return _CheckFile("\n".join(lines) + "\n", blocks, references)


_ERROR_LINE = re.compile(r'File "[^"]*", line (\d+), characters')
_LOCATED = re.compile(rf"Constant \S*?\b(Reference\d+|{_ALL_MODULE})\.\w+")


def _assumption_answers(stdout: str) -> dict[str, list[str]]:
    """``Print Assumptions`` answers by module: each follows the ``Locate``
    line (``Constant <path>.<module>.<name>``) that names its theorem."""
    answers: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        located = _LOCATED.fullmatch(line.strip())
        if located:
            current = answers.setdefault(located.group(1), [])
        elif current is not None and line.strip():
            current.append(line.strip())
    return answers


def _compile(coqc: str, text: str, timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="rocq_targets_") as tmp:
        path = Path(tmp) / "RocqTargetsCheck.v"
        path.write_text(text, encoding="utf-8")
        return subprocess.run([coqc, "-q", path.name], cwd=tmp, capture_output=True, text=True,
                              timeout=timeout, check=False)


def _check_group(coqc: str, header: str, group: Sequence[Mapping], timeout: float) -> list[Failure]:
    """Check targets sharing ``header``: one ``coqc`` run when all is well."""
    failures: list[Failure] = []
    pending = list(group)
    each = False
    while pending:
        check = _check_file(header, pending, each=each)
        result = _compile(coqc, check.text, timeout)
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()
            located = _ERROR_LINE.search(output)
            line = int(located.group(1)) if located else 0
            culprit = next((b for b in check.blocks if b.first_line <= line <= b.last_line), None)
            if culprit is None:
                return failures + [Failure(None, f"coqc failed outside any target: {output[-600:]}")]
            failures.append(Failure(culprit.target_id, output[located.start():][:600]))
            pending = [t for t in pending if t["id"] != culprit.target_id]
            continue
        answers = _assumption_answers(result.stdout)
        if not each and check.references and answers.get(_ALL_MODULE) != [CLOSED]:
            each = True  # some proof uses an axiom: run again to find which
            continue
        if each:
            for module, target_id in check.references.items():
                answer = answers.get(module)
                if answer != [CLOSED]:
                    detail = "no Print Assumptions answer" if answer is None else " ".join(answer)[:300]
                    failures.append(Failure(target_id, f"assumptions: {detail}"))
        break
    return failures


def check_targets(targets: Sequence[Mapping], coqc: str | None = None, timeout: float = 600.0) -> list[Failure]:
    """Check with Rocq that every statement elaborates to a proposition and
    every reference proof is accepted with assumptions closed under the global
    context.

    Targets sharing a header are compiled in one ``coqc`` run; after a failure
    the offending target is dropped and the rest compiled again, so a clean
    set costs one run per header.  Returns the failures (empty when all is
    well).  The texts are assumed to have passed :func:`schema_problems` (a
    statement that closed its module early could hide what follows it).
    """
    coqc = coqc or shutil.which("coqc")
    if coqc is None:
        raise FileNotFoundError("coqc is not installed")
    by_header: dict[str, list[Mapping]] = {}
    for target in targets:
        by_header.setdefault(target["header"], []).append(target)
    failures: list[Failure] = []
    for header, group in by_header.items():
        failures += _check_group(coqc, header, group, timeout)
    return failures


# ---------------------------------------------------------------------------
# Command line


def _report(problems: Sequence[str], failures: Sequence[Failure]) -> bool:
    for problem in problems:
        print(f"schema: {problem}", file=sys.stderr)
    for failure in failures:
        print(f"rocq: {failure.target_id}: {failure.detail}", file=sys.stderr)
    return not problems and not failures


def _summary(targets: Sequence[Mapping]) -> str:
    held = sum(t["held_out"] for t in targets)
    topics: dict[str, int] = {}
    for t in targets:
        topics[t["topic"]] = topics.get(t["topic"], 0) + 1
    difficulties = {d: sum(t["difficulty"] == d for t in targets) for d in (1, 2, 3, 4)}
    return (f"{len(targets)} targets, {held} held out; topics {topics}; difficulties {difficulties}; "
            f"{sum(t['proof'] is not None for t in targets)} with reference proofs")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the JSONL")
    parser.add_argument("--no-rocq", action="store_true", help="skip the Rocq check")
    parser.add_argument("--verify", action="store_true",
                        help="check the existing output file instead of writing it")
    parser.add_argument("--coqc", default=None, help="coqc binary (default: from PATH)")
    args = parser.parse_args(argv)

    targets = load_jsonl(args.output) if args.verify else build_targets()
    problems = schema_problems(targets)
    failures = [] if args.no_rocq or problems else check_targets(targets, coqc=args.coqc)
    if not _report(problems, failures):
        return 1
    if not args.verify:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(to_jsonl(targets), encoding="utf-8")
        print(f"wrote {args.output}")
    print(_summary(targets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
