"""The two hand-kept tables of Conjecturer lemmas besides instances: the
library lemmas that reference proofs cite (:data:`LIBRARY`) and hand-written
key lemmas for harder training targets (:data:`KEY_LEMMAS`)."""

from __future__ import annotations

import re

from .statements import Lemma


# ---------------------------------------------------------------------------
# Library lemmas that reference proofs cite: name -> proposition (as Rocq
# 8.16 states it; Rocq checks each against the library by applying it)

LIBRARY = {
    "app_length": "forall (A : Type) (l l' : list A), length (l ++ l') = length l + length l'",
    "rev_length": "forall (A : Type) (l : list A), length (rev l) = length l",
    "map_length": "forall (A B : Type) (f : A -> B) (l : list A), length (map f l) = length l",
    "map_app": "forall (A B : Type) (f : A -> B) (l l' : list A), map f (l ++ l') = map f l ++ map f l'",
    "app_assoc": "forall (A : Type) (l m n : list A), l ++ m ++ n = (l ++ m) ++ n",
    "app_nil_r": "forall (A : Type) (l : list A), l ++ [] = l",
    "map_map": "forall (A B C : Type) (f : A -> B) (g : B -> C) (l : list A), "
               "map g (map f l) = map (fun x => g (f x)) l",
    "firstn_skipn": "forall (A : Type) (n : nat) (l : list A), firstn n l ++ skipn n l = l",
    "list_sum_app": "forall l1 l2 : list nat, list_sum (l1 ++ l2) = list_sum l1 + list_sum l2",
    "map_rev": "forall (A B : Type) (f : A -> B) (l : list A), map f (rev l) = rev (map f l)",
    "seq_S": "forall len start : nat, seq start (S len) = seq start len ++ [start + len]",
    "seq_length": "forall len start : nat, length (seq start len) = len",
    "repeat_length": "forall (A : Type) (x : A) (n : nat), length (repeat x n) = n",
    "in_or_app": "forall (A : Type) (l m : list A) (a : A), In a l \\/ In a m -> In a (l ++ m)",
    "in_map": "forall (A B : Type) (f : A -> B) (l : list A) (x : A), In x l -> In (f x) (map f l)",
    "in_rev": "forall (A : Type) (l : list A) (x : A), In x l <-> In x (rev l)",
    "in_split": "forall (A : Type) (x : A) (l : list A), In x l -> exists l1 l2 : list A, l = l1 ++ x :: l2",
    "Forall_app": "forall (A : Type) (P : A -> Prop) (l1 l2 : list A), "
                  "Forall P (l1 ++ l2) <-> Forall P l1 /\\ Forall P l2",
    "existsb_app": "forall (A : Type) (f : A -> bool) (l1 l2 : list A), "
                   "existsb f (l1 ++ l2) = existsb f l1 || existsb f l2",
    "nth_error_None": "forall (A : Type) (l : list A) (n : nat), nth_error l n = None <-> length l <= n",
    "Nat.add_comm": "forall n m : nat, n + m = m + n",
    "Nat.div_le_upper_bound": "forall a b q : nat, b <> 0 -> a <= b * q -> a / b <= q",
    "Nat.div_mod": "forall x y : nat, y <> 0 -> x = y * (x / y) + x mod y",
    "Nat.eq_0_gt_0_cases": "forall n : nat, n = 0 \\/ 0 < n",
    "Nat.eqb_neq": "forall x y : nat, (x =? y) = false <-> x <> y",
    "Nat.even_spec": "forall n : nat, Nat.even n = true <-> Nat.Even n",
    "Nat.le_exists_sub": "forall n m : nat, n <= m -> exists p : nat, m = p + n /\\ 0 <= p",
    "Nat.le_ge_cases": "forall n m : nat, n <= m \\/ m <= n",
    "Nat.leb_le": "forall n m : nat, (n <=? m) = true <-> n <= m",
    "Nat.lt_trichotomy": "forall n m : nat, n < m \\/ n = m \\/ m < n",
    "Nat.ltb_lt": "forall n m : nat, (n <? m) = true <-> n < m",
    "Nat.min_l": "forall n m : nat, n <= m -> Nat.min n m = n",
    "Nat.mod_add": "forall a b c : nat, c <> 0 -> (a + b * c) mod c = a mod c",
    "Nat.mod_mod": "forall a n : nat, n <> 0 -> (a mod n) mod n = a mod n",
    "Nat.mod_mul": "forall a b : nat, b <> 0 -> (a * b) mod b = 0",
    "Nat.mod_small": "forall a b : nat, a < b -> a mod b = a",
    "Nat.mod_upper_bound": "forall a b : nat, b <> 0 -> a mod b < b",
    "Nat.mul_add_distr_r": "forall n m p : nat, (n + m) * p = n * p + m * p",
    "Nat.mul_sub_distr_l": "forall n m p : nat, p * (n - m) = p * n - p * m",
    "Nat.mul_sub_distr_r": "forall n m p : nat, (n - m) * p = n * p - m * p",
    "Nat.negb_even": "forall n : nat, negb (Nat.even n) = Nat.odd n",
    "Nat.pow_nonzero": "forall a b : nat, a <> 0 -> a ^ b <> 0",
    "lt_O_fact": "forall n : nat, 0 < fact n",
}


def library_lemmas(target: Lemma) -> list[Lemma]:
    """The library lemmas that ``target``'s reference proof cites, as
    conjectures proved by applying the lemma itself."""
    cited = set(re.findall(r"[A-Za-z_][\w.']*", target.tactics or ""))
    made = []
    for name, prop in LIBRARY.items():
        if name in cited:
            suffix = name.replace("Nat.", "").lower()
            made.append(Lemma(f"{target.name}_uses_{suffix}", prop, f"intros. apply {name}; assumption.",
                              target.topic, 2, "library"))
    return made


# ---------------------------------------------------------------------------
# Hand-written key lemmas for harder training targets: target id -> rows of
# (proposition, tactics): a step of the induction, a generalisation the
# proof needs, or an auxiliary fact

KEY_LEMMAS = {
    "ind_fold_add": [("forall (l : list nat) (a : nat), fold_left Nat.add l a = list_sum l + a",
                      "induction l as [|x l IH]; intros a.\n- simpl. lia.\n- simpl. rewrite IH. lia.")],
    "ind_gauss_sum": [("forall n : nat, list_sum (seq 1 (S n)) = list_sum (seq 1 n) + S n",
                       "intros n. rewrite seq_S, list_sum_app. simpl. lia.")],
    "ind_odd_sum": [("forall n : nat, list_sum (map (fun i => 2 * i + 1) (seq 0 (S n))) = "
                     "list_sum (map (fun i => 2 * i + 1) (seq 0 n)) + (2 * n + 1)",
                     "intros n. rewrite seq_S, map_app, list_sum_app. simpl. lia.")],
    "ind_squares_sum": [("forall n : nat, list_sum (map (fun i => i * i) (seq 0 (S n))) = "
                         "list_sum (map (fun i => i * i) (seq 0 n)) + n * n",
                         "intros n. rewrite seq_S, map_app, list_sum_app. simpl. lia.")],
    "ind_geometric_sum": [("forall n : nat, list_sum (map (fun i => 2 ^ i) (seq 0 (S n))) = "
                           "list_sum (map (fun i => 2 ^ i) (seq 0 n)) + 2 ^ n",
                           "intros n. rewrite seq_S, map_app, list_sum_app. simpl. lia.")],
    "ind_square_lt_pow2": [("forall n : nat, 5 <= n -> 2 * n + 1 < n * n", "intros n H. nia.")],
    "ind_postage": [("forall k : nat, exists a b : nat, k + 8 = 3 * a + 5 * b",
                     "induction k as [|k [a [b Hab]]].\n- exists 1, 1. reflexivity.\n- destruct b as [|b].\n"
                     "  + exists (a - 3), 2. lia.\n  + exists (a + 2), b. lia.")],
    "ind_fact_ge": [("forall n : nat, 1 <= fact n", "intros n. pose proof (lt_O_fact n). lia.")],
    "ind_pow3_ge_pow2": [("forall n : nat, 2 ^ n <= 3 ^ n", "intros n. apply Nat.pow_le_mono_l. lia.")],
    "ind_pow_ge_1": [("forall a b : nat, 1 <= a -> 1 <= b -> 1 <= a * b", "intros a b Ha Hb. nia.")],
    "ind_strictly_increasing": [("forall f : nat -> nat, (forall n, f n < f (S n)) -> forall n, f n + 1 <= f (S n)",
                                 "intros f Hf n. specialize (Hf n). lia.")],
    "ind_monotone": [("forall f : nat -> nat, (forall n, f n <= f (S n)) -> forall n k, f n <= f (n + k)",
                      "intros f Hf n k. induction k as [|k IH].\n- rewrite Nat.add_0_r. lia.\n"
                      "- rewrite Nat.add_succ_r. specialize (Hf (n + k)). lia.")],
    "ind_sum_repeat": [("forall n c : nat, list_sum (repeat c (S n)) = c + list_sum (repeat c n)",
                        "intros n c. reflexivity.")],
    "list_sum_rev": [("forall (l : list nat) (x : nat), list_sum (l ++ [x]) = list_sum l + x",
                      "intros l x. rewrite list_sum_app. simpl. lia.")],
    "list_sum_map_succ": [("forall (x : nat) (l : list nat), list_sum (map S (x :: l)) = S x + list_sum (map S l)",
                           "intros x l. reflexivity.")],
    "list_rev_fold": [("forall (A : Type) (l acc : list A), fold_left (fun acc x => x :: acc) l acc = rev l ++ acc",
                       "intros A l. induction l as [|x l IH]; intros acc.\n- reflexivity.\n"
                       "- simpl. rewrite IH, <- app_assoc. reflexivity.")],
    "list_rev_inj": [("forall (A : Type) (l m : list A), l = m -> rev l = rev m",
                      "intros A l m H. rewrite H. reflexivity.")],
    "list_firstn_app_length": [("forall (A : Type) (x : A) (l m : list A), "
                                "firstn (length (x :: l)) ((x :: l) ++ m) = x :: firstn (length l) (l ++ m)",
                                "intros A x l m. reflexivity.")],
    "list_filter_length_le": [("forall (f : nat -> bool) (x : nat) (l : list nat), "
                               "length (filter f (x :: l)) <= S (length (filter f l))",
                               "intros f x l. simpl. destruct (f x); simpl; lia.")],
    "list_sum_ge_length": [("forall (x : nat) (l : list nat), 1 <= x -> length l <= list_sum l -> "
                            "length (x :: l) <= list_sum (x :: l)", "intros x l Hx H. simpl. lia.")],
    "list_sum_zero": [("forall x y : nat, x + y = 0 -> x = 0 /\\ y = 0", "intros x y H. lia.")],
    "logic_em_not_not": [("forall P : Prop, ~ (P \\/ ~ P) -> ~ P", "intros P H HP. apply H. left. exact HP.")],
    "logic_no_largest_nat": [("forall n : nat, ~ S n <= n", "intros n. lia.")],
    "logic_diagonal": [("forall (f : nat -> nat -> nat) (n : nat), S (f n n) <> f n n", "intros f n. lia.")],
    "logic_surj_compose": [("forall f : nat -> nat, (forall y, exists x, f x = y) -> forall z, exists y, f y = z",
                            "intros f Hf z. apply Hf.")],
    "nt_even_mul_l": [("forall a m : nat, 2 * a * m = 2 * (a * m)", "intros a m. ring.")],
    "nt_odd_square": [("forall k : nat, (2 * k + 1) * (2 * k + 1) = 2 * (2 * k * k + 2 * k) + 1",
                       "intros k. ring.")],
    "nt_mod_2_cases": [("forall n : nat, n mod 2 < 2", "intros n. apply Nat.mod_upper_bound. discriminate.")],
    "nt_even_consecutive_product": [("forall k : nat, Nat.Even (2 * k * (2 * k + 1))",
                                     "intros k. exists (k * (2 * k + 1)). ring.")],
    "nt_three_divides_cube_plus": [("forall n : nat, (n + 1) * (n + 1) * (n + 1) + 2 * (n + 1) = "
                                    "n * n * n + 2 * n + 3 * (n * n + n + 1)", "intros n. ring.")],
    "nt_square_mod_4": [("forall k : nat, (2 * k * (2 * k)) mod 4 = 0",
                         "intros k. replace (2 * k * (2 * k)) with (k * k * 4) by ring.\n"
                         "apply Nat.mod_mul. discriminate.")],
    "nt_sqrt2_irrational": [("forall p : nat, Nat.Even (p * p) -> Nat.Even p",
                             "intros p [m Hm]. destruct (Nat.Even_or_Odd p) as [Hp | [k Hk]].\n- exact Hp.\n"
                             "- exfalso. subst p. nia.")],
    "nt_not_even_and_odd": [("forall a b : nat, 2 * a <> 2 * b + 1", "intros a b. lia.")],
    "nt_divide_sub": [("forall d x y : nat, d * x - d * y = d * (x - y)",
                       "intros d x y. symmetry. apply Nat.mul_sub_distr_l.")],
    "ineq_am_gm": [("forall a k : nat, 2 * a * (a + k) <= a * a + (a + k) * (a + k)", "intros a k. nia.")],
    "ineq_square_inj": [("forall a b : nat, a < b -> a * a < b * b", "intros a b H. nia.")],
    "ineq_sum_bounded": [("forall (x : nat) (l : list nat), x <= 10 -> list_sum l <= 10 * length l -> "
                          "list_sum (x :: l) <= 10 * length (x :: l)", "intros x l Hx H. simpl. lia.")],
    "bool_even_succ_succ": [("forall n : nat, Nat.even (S (S n)) = Nat.even n", "intros n. reflexivity.")],
    "minmax_list_max_app": [("forall (x : nat) (l : list nat), list_max (x :: l) = Nat.max x (list_max l)",
                             "intros x l. reflexivity.")],
    "minmax_list_max_in": [("forall (x : nat) (l : list nat), x <= list_max (x :: l)",
                            "intros x l. simpl. lia.")],
    "opt_nth_error_map": [("forall (f : nat -> nat) (x : nat) (l : list nat), "
                           "nth_error (map f (x :: l)) 0 = Some (f x)", "intros f x l. reflexivity.")],
    "arith_diff_squares": [("forall a b : nat, a * (a - b) = a * a - a * b",
                            "intros a b. apply Nat.mul_sub_distr_l.")],
}


def key_lemmas(target: Lemma) -> list[Lemma]:
    return [Lemma(f"{target.name}_key{i}", prop, tactics, target.topic, max(1, target.difficulty - 1), "key")
            for i, (prop, tactics) in enumerate(KEY_LEMMAS.get(target.name, []))]
