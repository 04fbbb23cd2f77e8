"""Families of generated Solver lemmas (ids ``ws_<family>_<n>``): the proof
styles the targets use, with other constants, variables and types.

A family is a sequence of parts, each giving ``(prop, tactics, difficulty)``
rows: templates filled from a range of numbers or a list of types
(:func:`each`), fixed rows (:func:`fixed`), or rows drawn at random from the
one seeded generator the families share, in the order of :data:`FAMILIES`.
The values are computed here and Rocq confirms them.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from typing import Callable, Iterable, Iterator

from .statements import Lemma

#: one generated lemma: (proposition, tactics, difficulty)
Row = tuple[str, str, int]
#: a piece of a family: its rows, drawing from the shared generator if it needs to
Part = Callable[[random.Random], Iterator[Row]]

#: what a ``{...}`` field of a template stands for, given the value it is
#: filled from: a number ``k`` or a type ``T``
_FIELDS: dict[str, Callable[..., int | str]] = {
    "k": lambda k: k, "k+1": lambda k: k + 1, "2*k": lambda k: 2 * k, "2*k+1": lambda k: 2 * k + 1,
    "k*k": lambda k: k * k, "T": lambda kind: kind,
}


def _fill(template: str, value: int | str) -> str:
    return re.sub(r"\{([^{}]*)\}", lambda m: str(_FIELDS[m.group(1)](value)), template)


def each(values: Iterable[int | str], *templates: Row) -> Part:
    """The templates filled from each value in turn (every template for the
    first value, then for the next)."""
    def part(rng: random.Random) -> Iterator[Row]:
        for value in values:
            for prop, tactics, difficulty in templates:
                yield _fill(prop, value), _fill(tactics, value), difficulty
    return part


def fixed(*rows: Row) -> Part:
    """Rows as they stand."""
    return lambda rng: iter(rows)


# ---------------------------------------------------------------------------
# Parts drawn at random


def _coq_list(values: Iterable[int]) -> str:
    return "[" + "; ".join(str(v) for v in values) + "]"


def _power(rng: random.Random) -> str:
    base, e = rng.randint(2, 4), rng.randint(2, 5)
    return f"{base} ^ {e} = {base ** e}"


#: closed arithmetic equations over drawn a, b, c (the power draws its own numbers)
_ARITH_EVAL_FORMS: tuple[Callable[[int, int, int, random.Random], str], ...] = (
    lambda a, b, c, rng: f"{a} * {b} + {c} = {a * b + c}",
    lambda a, b, c, rng: f"({a} + {b}) * {c % 9 + 1} = {(a + b) * (c % 9 + 1)}",
    lambda a, b, c, rng: _power(rng),
    lambda a, b, c, rng: f"{a * b + c} / {a} = {(a * b + c) // a}",
    lambda a, b, c, rng: f"{a} - {b} + {c} = {max(a - b, 0) + c}",
    lambda a, b, c, rng: f"{a} * ({b} + {c}) = {a * (b + c)}",
)


def _arith_eval(rng: random.Random) -> Iterator[Row]:
    """Closed arithmetic, by computation."""
    for _ in range(40):
        a, b, c = rng.randint(2, 30), rng.randint(2, 30), rng.randint(0, 40)
        form = _ARITH_EVAL_FORMS[rng.randrange(len(_ARITH_EVAL_FORMS))]
        yield form(a, b, c, rng), "reflexivity.", 1


def _arith_linear(rng: random.Random) -> Iterator[Row]:
    """Linear equations in one or two unknowns, by ``lia``."""
    for _ in range(24):
        s, b, a = rng.randint(1, 12), rng.randint(1, 20), rng.randint(2, 6)
        form = rng.randrange(3)
        if form == 0:
            yield f"forall x : nat, x + {b} = {s + b} -> x = {s}", "lia.", 1
        elif form == 1:
            yield f"forall x : nat, {a} * x = {a * s} -> x = {s}", "lia.", 1
        else:
            yield f"forall x : nat, {b} + {a} * x = {b + a * s} -> x = {s}", "intros x H. lia.", 1
    for _ in range(10):
        x, y = rng.randint(5, 20), rng.randint(0, 5)
        yield (f"forall x y : nat, x + y = {x + y} -> x - y = {x - y} -> y = {y}",
               "intros x y H1 H2. lia.", 1)


def _ring_products(rng: random.Random) -> Iterator[Row]:
    """Products of two shifted variables, expanded, by ``ring``."""
    for _ in range(8):
        k, m = rng.randint(1, 6), rng.randint(1, 6)
        yield (f"forall a b : nat, (a + {k}) * (b + {m}) = a * b + {m} * a + {k} * b + {k * m}",
               "intros a b. ring.", 1)


def _arith_rearrange(rng: random.Random) -> Iterator[Row]:
    """Sums rearranged, by ``lia``."""
    names = ["a", "b", "c", "d"]
    for _ in range(20):
        n = rng.randint(2, 4)
        used = names[:n]
        k = rng.randint(1, 9)
        left = used + [str(k)]
        right = left[:]
        while right == left:
            rng.shuffle(right)
        yield f"forall {' '.join(used)} : nat, {' + '.join(left)} = {' + '.join(right)}", "lia.", 1


def _seq(rng: random.Random) -> str:
    start, n = rng.randint(0, 5), rng.randint(1, 4)
    return f"seq {start} {n} = {_coq_list(range(start, start + n))}"


#: computations on drawn lists xs and ys and a cut k inside xs (the seq draws its own bounds)
_LIST_EVAL_FORMS: tuple[Callable[[list[int], list[int], int, random.Random], str], ...] = (
    lambda xs, ys, k, rng: f"rev {_coq_list(xs)} = {_coq_list(xs[::-1])}",
    lambda xs, ys, k, rng: f"map S {_coq_list(xs)} = {_coq_list(x + 1 for x in xs)}",
    lambda xs, ys, k, rng: f"list_sum {_coq_list(xs)} = {sum(xs)}",
    lambda xs, ys, k, rng: f"length {_coq_list(xs)} = {len(xs)}",
    lambda xs, ys, k, rng: f"{_coq_list(xs)} ++ {_coq_list(ys)} = {_coq_list(xs + ys)}",
    lambda xs, ys, k, rng: f"firstn {k} {_coq_list(xs)} = {_coq_list(xs[:k])}",
    lambda xs, ys, k, rng: f"skipn {k} {_coq_list(xs)} = {_coq_list(xs[k:])}",
    lambda xs, ys, k, rng: f"filter Nat.odd {_coq_list(xs)} = {_coq_list(x for x in xs if x % 2)}",
    lambda xs, ys, k, rng: f"list_max {_coq_list(xs)} = {max(xs)}",
    lambda xs, ys, k, rng: f"map (fun x => x * 2) {_coq_list(xs)} = {_coq_list(2 * x for x in xs)}",
    lambda xs, ys, k, rng: _seq(rng),
)


def _list_eval(rng: random.Random) -> Iterator[Row]:
    """Computations on concrete lists."""
    for _ in range(70):
        xs = [rng.randint(0, 9) for _ in range(rng.randint(2, 6))]
        ys = [rng.randint(0, 9) for _ in range(rng.randint(1, 3))]
        form = _LIST_EVAL_FORMS[rng.randrange(len(_LIST_EVAL_FORMS))]
        k = rng.randint(1, len(xs) - 1)
        yield form(xs, ys, k, rng), "reflexivity.", 1


#: tautologies over X, Y, Z; ``{V}`` in the tactics stands for the bound
#: proposition names, which are introduced first
_TAUTOLOGIES = [
    ("X -> Y -> X", "intros {V} HX HY. exact HX."),
    ("X /\\ Y -> X", "intros {V} [HX HY]. exact HX."),
    ("X /\\ Y -> Y", "intros {V} [HX HY]. exact HY."),
    ("X -> X \\/ Y", "intros {V} HX. left. exact HX."),
    ("Y -> X \\/ Y", "intros {V} HY. right. exact HY."),
    ("X -> Y -> X /\\ Y", "intros {V} HX HY. split.\n- exact HX.\n- exact HY."),
    ("(X -> Y) -> (Y -> Z) -> X -> Z", "intros {V} HXY HYZ HX. apply HYZ. apply HXY. exact HX."),
    ("X /\\ Y -> Y /\\ X", "tauto."),
    ("(X /\\ Y) /\\ Z -> X /\\ (Y /\\ Z)", "tauto."),
    ("X \\/ (Y \\/ Z) -> (X \\/ Y) \\/ Z", "tauto."),
    ("X -> ~ ~ X", "intros {V} HX HnX. exact (HnX HX)."),
    ("~ (X \\/ Y) -> ~ X", "tauto."),
    ("(X <-> Y) -> (Y <-> X)", "tauto."),
    ("(X -> Y /\\ Z) -> X -> Z", "tauto."),
    ("(X -> Y) -> (X -> Z) -> X -> Y /\\ Z", "tauto."),
    ("X /\\ ~ X -> Y", "tauto."),
    ("(X -> Y -> Z) -> Y -> X -> Z", "intros {V} H HY HX. apply H.\n- exact HX.\n- exact HY."),
    ("(X <-> Y) -> X -> Y", "intros {V} [H1 H2] HX. apply H1. exact HX."),
    ("(X \\/ Y) /\\ ~ X -> Y", "tauto."),
    ("~ X -> X -> Y", "intros {V} HnX HX. exfalso. exact (HnX HX)."),
    ("X \\/ Y -> (X -> Z) -> (Y -> Z) -> Z", "tauto."),
    ("(X /\\ Y -> Z) -> X -> Y -> Z", "tauto."),
]


def _logic_prop(rng: random.Random) -> Iterator[Row]:
    """Propositional tautologies, each under two assignments of P, Q, R to
    its letters (the binders stay in alphabetical order)."""
    for template, tactics in _TAUTOLOGIES:
        binders = ["P", "Q", "R"] if "Z" in template else ["P", "Q"]
        orders = list(itertools.permutations(binders))
        rng.shuffle(orders)
        for order in orders[:2]:
            names = dict(zip("XYZ", order))
            prop = re.sub(r"\b[XYZ]\b", lambda m: names[m.group()], template)
            yield f"forall {' '.join(binders)} : Prop, {prop}", tactics.replace("{V}", " ".join(binders)), 1


def _witnesses(rng: random.Random) -> Iterator[Row]:
    """Existential statements proved by a witness."""
    for _ in range(16):
        k = rng.randint(1, 15)
        form = rng.randrange(4)
        if form == 0:
            yield f"exists n : nat, n + n = {2 * k}", f"exists {k}. reflexivity.", 1
        elif form == 1:
            a = rng.randint(2, 5)
            yield f"exists n : nat, {a} * n = {a * k}", f"exists {k}. reflexivity.", 1
        elif form == 2:
            yield f"exists n : nat, {k} < n", f"exists {k + 1}. lia.", 1
        else:
            yield f"forall n : nat, exists m, m = n + {k}", f"intros n. exists (n + {k}). reflexivity.", 1


def _number_eval(rng: random.Random) -> Iterator[Row]:
    """Concrete gcd, modulo and divisibility facts."""
    for _ in range(36):
        form = rng.randrange(3)
        if form == 0:
            g = rng.randint(2, 9)
            a, b = g * rng.randint(1, 12), g * rng.randint(1, 12)
            yield f"Nat.gcd {a} {b} = {math.gcd(a, b)}", "reflexivity.", 1
        elif form == 1:
            a, b = rng.randint(10, 150), rng.randint(2, 12)
            yield f"{a} mod {b} = {a % b}", "reflexivity.", 1
        else:
            d, q = rng.randint(2, 12), rng.randint(2, 12)
            yield f"Nat.divide {d} {d * q}", f"exists {q}. reflexivity.", 1


def _par(text: str) -> str:
    return f"({text})" if " " in text else text


def _bool_expressions() -> list[tuple[str, Callable[[bool, bool, bool], bool]]]:
    """Small boolean expressions over a, b, c with their truth functions."""
    leaves = [("a", lambda a, b, c: a), ("b", lambda a, b, c: b), ("c", lambda a, b, c: c),
              ("true", lambda a, b, c: True), ("false", lambda a, b, c: False)]
    exprs = list(leaves)
    for text, fn in leaves[:3]:
        exprs.append((f"negb {text}", lambda a, b, c, fn=fn: not fn(a, b, c)))
    binary = []
    for (t1, f1), (t2, f2) in itertools.product(exprs, exprs):
        if t1 == t2:
            continue
        binary.append((f"{_par(t1)} && {_par(t2)}", lambda a, b, c, f1=f1, f2=f2: f1(a, b, c) and f2(a, b, c)))
        binary.append((f"{_par(t1)} || {_par(t2)}", lambda a, b, c, f1=f1, f2=f2: f1(a, b, c) or f2(a, b, c)))
        binary.append((f"xorb {_par(t1)} {_par(t2)}", lambda a, b, c, f1=f1, f2=f2: f1(a, b, c) != f2(a, b, c)))
    negated = [(f"negb ({text})", lambda a, b, c, fn=fn: not fn(a, b, c))
               for text, fn in binary if not text.startswith("xorb")]
    return exprs + binary + negated


def _bool_identities(rng: random.Random) -> Iterator[Row]:
    """Boolean identities that hold on every row of their truth table."""
    exprs = _bool_expressions()
    table = list(itertools.product((False, True), repeat=3))
    by_truth: dict[tuple[bool, ...], list[str]] = {}
    for text, fn in exprs:
        by_truth.setdefault(tuple(fn(*row) for row in table), []).append(text)

    def variables(text: str) -> list[str]:
        return [v for v in "abc" if re.search(rf"\b{v}\b", text)]

    pairs = [(x, y) for texts in by_truth.values() for x, y in itertools.combinations(texts, 2)
             if variables(x) and variables(y)]
    rng.shuffle(pairs)
    for left, right in pairs[:36]:
        names = variables(left + " " + right)
        yield (f"forall {' '.join(names)} : bool, {left} = {right}",
               f"intros {' '.join(names)}. destruct {', '.join(names)}; reflexivity.", 1)


def _bool_comparisons(rng: random.Random) -> Iterator[Row]:
    """Closed boolean comparisons of numbers, by computation."""
    for _ in range(20):
        a, b = rng.randint(0, 20), rng.randint(0, 20)
        op, fn = rng.choice([("=?", lambda x, y: x == y), ("<=?", lambda x, y: x <= y),
                             ("<?", lambda x, y: x < y)])
        yield f"({a} {op} {b}) = {str(fn(a, b)).lower()}", "reflexivity.", 1


def _option_eval(rng: random.Random) -> Iterator[Row]:
    """Computations on options, by computation."""
    for _ in range(16):
        a, k = rng.randint(0, 20), rng.randint(1, 9)
        xs = [rng.randint(0, 9) for _ in range(rng.randint(1, 5))]
        i = rng.randint(0, len(xs) + 1)
        form = rng.randrange(3)
        if form == 0:
            yield f"option_map (fun x => x + {k}) (Some {a}) = Some {a + k}", "reflexivity.", 1
        elif form == 1:
            answer = f"Some {xs[i]}" if i < len(xs) else "None"
            yield f"nth_error {_coq_list(xs)} {i} = {answer}", "reflexivity.", 1
        else:
            yield f"hd_error {_coq_list(xs)} = Some {xs[0]}", "reflexivity.", 1


def _minmax_eval(rng: random.Random) -> Iterator[Row]:
    """Closed minima and maxima, by computation."""
    for _ in range(10):
        a, b = rng.randint(0, 30), rng.randint(0, 30)
        fn = rng.choice(["max", "min"])
        yield f"Nat.{fn} {a} {b} = {max(a, b) if fn == 'max' else min(a, b)}", "reflexivity.", 1


# ---------------------------------------------------------------------------
# The families

#: list lemmas stated at a concrete element type: (proposition with {T},
#: tactics); they teach the library lemma, not a target's exact statement
_LIST_LEMMAS = [
    ("forall l m : list {T}, length (l ++ m) = length l + length m", "intros l m. apply app_length."),
    ("forall l : list {T}, length (rev l) = length l", "intros l. apply rev_length."),
    ("forall l : list {T}, l ++ [] = l", "intros l. apply app_nil_r."),
    ("forall l m n : list {T}, l ++ (m ++ n) = (l ++ m) ++ n", "intros l m n. apply app_assoc."),
    ("forall (x : {T}) (n : nat), length (repeat x n) = n", "intros x n. apply repeat_length."),
    ("forall (l : list {T}) (n : nat), firstn n l ++ skipn n l = l", "intros l n. apply firstn_skipn."),
    ("forall (x : {T}) (l : list {T}), length (x :: l) = 1 + length l", "intros x l. reflexivity."),
    ("forall (x : {T}) (l : list {T}), rev (l ++ [x]) = x :: rev l",
     "intros x l. rewrite rev_app_distr. reflexivity."),
    ("forall (x : {T}) (l m : list {T}), In x l -> In x (m ++ l)",
     "intros x l m H. apply in_or_app. right. exact H."),
    ("forall (x : {T}) (l : list {T}), In x (x :: l)", "intros x l. left. reflexivity."),
    ("forall l : list {T}, [] ++ l = l", "intros l. reflexivity."),
    ("forall l m : list {T}, length (l ++ m) = length (m ++ l)", "intros l m. rewrite !app_length. lia."),
]

#: the element types the list lemmas are stated at
_LIST_TYPES = ("nat", "bool", "(list nat)", "(option nat)")

#: (family, topic, parts): the rows of a family are its parts' rows in order
FAMILIES: tuple[tuple[str, str, tuple[Part, ...]], ...] = (
    ("arith_eval", "arith", (_arith_eval,)),
    ("arith_linear", "arith", (_arith_linear,)),
    # polynomial identities, by ring
    ("arith_ring", "arith", (
        each(range(2, 9),
             ("forall a b : nat, (a + {k}) * b = a * b + {k} * b", "intros a b. ring.", 1),
             ("forall a : nat, (a + {k}) * (a + {k}) = a * a + {2*k} * a + {k*k}", "intros a. ring.", 1),
             ("forall a b : nat, {k} * (a + b) = {k} * a + {k} * b", "intros a b. ring.", 1),
             ("forall n : nat, {k} * n + n = {k+1} * n", "intros n. ring.", 1)),
        _ring_products,
        fixed(("forall a b c : nat, (a + b) * c = a * c + b * c", "intros a b c. ring.", 1),
              ("forall a b : nat, (a + b) * (a + b) * (a + b) = a * a * a + 3 * a * a * b + 3 * a * b * b + b * b * b",
               "intros a b. ring.", 2),
              ("forall a b c : nat, a * b * c = c * b * a", "intros a b c. ring.", 1)))),
    ("arith_sum", "arith", (_arith_rearrange,)),
    # rewriting under an opaque function, with a library fact or a hypothesis
    ("rewrite", "rewrite", (
        each(("nat", "bool", "list nat"),
             ("forall (g : nat -> {T}) (a b : nat), g (b + a) = g (a + b)",
              "intros g a b. rewrite Nat.add_comm. reflexivity.", 2),
             ("forall (g : nat -> {T}) (a b : nat), g (b * a) = g (a * b)",
              "intros g a b. rewrite Nat.mul_comm. reflexivity.", 2),
             ("forall (g : nat -> {T}) (a b : nat), g (Nat.min a b) = g (Nat.min b a)",
              "intros g a b. rewrite Nat.min_comm. reflexivity.", 2)),
        fixed(("forall (g : nat -> nat -> nat) (a b c : nat), g (a + b) c = g (b + a) c",
               "intros g a b c. rewrite Nat.add_comm. reflexivity.", 2)),
        each(range(2, 10),
             ("forall (f : nat -> nat) (x y : nat), x = y + {k} -> f x = f ({k} + y)",
              "intros f x y H. rewrite H, Nat.add_comm. reflexivity.", 2),
             ("forall (f : nat -> nat) (x y : nat), x = y -> f (x + {k}) = f (y + {k})",
              "intros f x y H. rewrite H. reflexivity.", 2)),
        each(("nat", "bool", "list nat"),
             ("forall a b c d : {T}, a = b -> b = c -> c = d -> a = d",
              "intros a b c d H1 H2 H3. rewrite H1, H2. exact H3.", 1),
             ("forall a b : {T}, a = b -> b = a", "intros a b H. rewrite H. reflexivity.", 1)),
        fixed(("forall (l : list nat) (x : nat), (l ++ []) ++ [x] = l ++ [x]",
               "intros l x. rewrite app_nil_r. reflexivity.", 2),
              ("forall l m : list nat, rev (rev l ++ m) = rev m ++ l",
               "intros l m. rewrite rev_app_distr, rev_involutive. reflexivity.", 2)))),
    # list library lemmas at concrete element types: each lemma at every type in turn
    ("list_types", "lists",
     tuple(each(_LIST_TYPES, (template, tactics, 2)) for template, tactics in _LIST_LEMMAS)),
    ("list_eval", "lists", (_list_eval,)),
    # short inductions on lists of naturals (x * k, not k * x: simpl would
    # unfold k * x inside the map and the induction hypothesis would no
    # longer match)
    ("list_induction", "lists", (
        each(range(1, 7),
             ("forall l : list nat, list_sum (map (fun x => x + {k}) l) = list_sum l + {k} * length l",
              "induction l as [|x l IH].\n- reflexivity.\n- simpl. rewrite IH. lia.", 3),
             ("forall l : list nat, list_sum (map (fun x => x * {k+1}) l) = {k+1} * list_sum l",
              "induction l as [|x l IH].\n- reflexivity.\n- simpl. rewrite IH. lia.", 3),
             ("forall l : list nat, length (map (fun x => x * {k}) l) = length l",
              "intros l. apply map_length.", 2)),
        fixed(("forall l : list nat, length (map S l) = length l",
               "induction l as [|x l IH].\n- reflexivity.\n- simpl. rewrite IH. reflexivity.", 3),
              ("forall l : list nat, list_sum (l ++ l) = 2 * list_sum l",
               "intros l. rewrite list_sum_app. lia.", 2)))),
    ("logic_prop", "logic", (_logic_prop,)),
    # quantifier facts over several domains, and witnesses
    ("logic_fo", "logic", (
        each(("nat", "bool", "(list nat)"),
             ("forall P Q : {T} -> Prop, (forall x, P x /\\ Q x) -> forall x, P x", "firstorder.", 1),
             ("forall P Q : {T} -> Prop, (exists x, P x /\\ Q x) -> exists x, Q x", "firstorder.", 1),
             ("forall P : {T} -> Prop, ~ (exists x, P x) -> forall x, ~ P x", "firstorder.", 1),
             ("forall (P : {T} -> Prop) (Q : Prop), (forall x, P x -> Q) -> (exists x, P x) -> Q",
              "intros P Q H [x Hx]. apply (H x). exact Hx.", 2),
             ("forall P Q : {T} -> Prop, (forall x, P x -> Q x) -> (forall x, P x) -> forall x, Q x",
              "intros P Q H HP x. apply H. apply HP.", 1)),
        each(range(2, 9), ("forall P : nat -> Prop, (forall n, P n) -> P {k}", "intros P H. apply H.", 1)),
        _witnesses)),
    ("nt_eval", "number_theory", (_number_eval,)),
    # divisibility, parity and modulo facts with a variable
    ("nt_forms", "number_theory", (
        each(range(2, 10),
             ("forall n : nat, Nat.divide {k} ({k} * n)", "intros n. exists n. lia.", 1),
             ("forall n : nat, Nat.divide {k} (n * {k})", "intros n. exists n. reflexivity.", 1),
             ("forall n : nat, (n mod {k}) mod {k} = n mod {k}", "intros n. apply Nat.mod_mod. discriminate.", 2),
             ("forall n : nat, n < {k} -> n mod {k} = n", "intros n H. apply Nat.mod_small. exact H.", 2),
             ("forall a b : nat, (a + b * {k}) mod {k} = a mod {k}",
              "intros a b. apply Nat.mod_add. discriminate.", 2),
             ("forall n : nat, n mod {k} < {k}", "intros n. apply Nat.mod_upper_bound. discriminate.", 2)),
        each(range(1, 6),
             ("forall n : nat, Nat.Even (2 * n + {2*k})", "intros n. exists (n + {k}). lia.", 2),
             ("forall n : nat, Nat.Odd (2 * n + {2*k+1})", "intros n. exists (n + {k}). lia.", 2),
             ("forall n : nat, Nat.Even ({2*k} * n)", "intros n. exists ({k} * n). lia.", 2)),
        fixed(("forall a b : nat, Nat.Even a -> Nat.Even (a + 2 * b)",
               "intros a b [k Hk]. exists (k + b). lia.", 2),
              ("forall n m : nat, Nat.Odd n -> Nat.Even m -> Nat.Odd (n + m)",
               "intros n m [a Ha] [b Hb]. exists (a + b). lia.", 2),
              ("forall d a : nat, Nat.divide d a -> Nat.divide d (a * a)",
               "intros d a [x Hx]. exists (x * a). rewrite Hx. ring.", 2)))),
    # boolean identities and computations, and facts about boolean tests
    ("bool", "bool", (
        _bool_identities,
        _bool_comparisons,
        each(range(1, 6),
             ("forall n : nat, (n <=? n + {k}) = true", "intros n. apply Nat.leb_le. lia.", 2),
             ("forall n : nat, (n + {k} <=? n) = false", "intros n. apply Nat.leb_gt. lia.", 2),
             ("forall n : nat, (n =? n + {k}) = false", "intros n. apply Nat.eqb_neq. lia.", 2)),
        fixed(("forall n : nat, (n <=? n) = true", "intros n. apply Nat.leb_refl.", 2),
              ("forall n : nat, (n <? n) = false", "intros n. apply Nat.ltb_irrefl.", 2),
              ("forall (b : bool) (x y : nat), (if b then x else y) <= x + y + x + y",
               "intros b x y. destruct b; lia.", 2),
              ("forall (b : bool) (x y : nat), (if b then x else y) <= x * y + x + y",
               "intros b x y. destruct b; lia.", 2),
              ("forall (b : bool) (x y : nat), (if b then x else y) <= Nat.max x y + x + y",
               "intros b x y. destruct b; lia.", 2)))),
    # options: computations, and facts about Some at several types
    ("option", "option", (
        _option_eval,
        each(("bool", "(list nat)", "(nat * nat)"),
             ("forall x : {T}, Some x <> None", "intros x. discriminate.", 1),
             ("forall x y : {T}, Some x = Some y -> x = y", "intros x y H. injection H as E. exact E.", 1)),
        each(range(1, 6),
             ("forall x : nat, option_map (fun y => y * {k+1}) (Some x) = Some (x * {k+1})",
              "intros x. reflexivity.", 1)),
        fixed(("forall (f : nat -> nat) (o : option nat), o = None -> option_map f o = None",
               "intros f o H. rewrite H. reflexivity.", 2)))),
    # order facts, by lia or nia
    ("ineq", "inequality", (
        each(range(1, 8),
             ("forall a b : nat, a <= b -> a + {k} <= b + {k}", "lia.", 1),
             ("forall n : nat, n < n + {k}", "lia.", 1),
             ("forall n : nat, n <= {k} * n", "lia.", 1),
             ("forall a b : nat, a + b <= {k} -> a <= {k}", "lia.", 1),
             ("forall a b : nat, a <= b -> {k+1} * a <= {k+1} * b", "intros a b H. lia.", 1)),
        fixed(("forall a b c : nat, a < b -> b < c -> a < c", "lia.", 1),
              ("forall a b c : nat, a <= b -> b < c -> a < c", "lia.", 1),
              ("forall n : nat, 1 <= n -> n <= n * n", "intros n H. nia.", 2),
              ("forall a b : nat, a * b <= (a + b) * (a + b)", "intros a b. nia.", 2),
              ("forall a b c : nat, a <= b -> a * c <= b * c", "intros a b c H. nia.", 2)))),
    # minimum and maximum, by lia or computation
    ("minmax", "minmax", (
        each(range(1, 6),
             ("forall a b : nat, Nat.max (a + {k}) (b + {k}) = {k} + Nat.max a b", "lia.", 1),
             ("forall a : nat, Nat.min a (a + {k}) = a", "lia.", 1),
             ("forall a : nat, Nat.max a (a + {k}) = a + {k}", "lia.", 1)),
        fixed(("forall a b : nat, Nat.min a b <= Nat.max a b", "lia.", 1),
              ("forall a : nat, Nat.max a 0 = a", "lia.", 1),
              ("forall a : nat, Nat.min a 0 = 0", "lia.", 1),
              ("forall a b : nat, Nat.min a b + Nat.max a b = a + b", "lia.", 1),
              ("forall a b c : nat, Nat.min a (Nat.min b c) = Nat.min (Nat.min a b) c", "lia.", 1)),
        _minmax_eval)),
    # short inductions on naturals
    ("induction", "induction", (
        each(range(2, 8),
             ("forall n : nat, list_sum (repeat {k} n) = {k} * n",
              "induction n as [|n IH].\n- reflexivity.\n- simpl. rewrite IH. lia.", 3),
             ("forall n : nat, length (seq {k} n) = n", "intros n. apply seq_length.", 2)),
        fixed(("forall f : nat -> nat, (forall n, f (S n) = f n) -> forall n, f n = f 0",
               "intros f Hf n. induction n as [|n IH].\n- reflexivity.\n- rewrite Hf. exact IH.", 3),
              ("forall f : nat -> nat, (forall n, f n <= f (S n)) -> forall n, f 0 <= f n",
               "intros f Hf n. induction n as [|n IH].\n- lia.\n- specialize (Hf n). lia.", 3),
              ("forall n : nat, 1 <= fact n", "intros n. pose proof (lt_O_fact n). lia.", 2),
              ("forall n : nat, list_sum (seq 0 n) <= n * n",
               "induction n as [|n IH].\n- simpl. lia.\n- rewrite seq_S, list_sum_app. simpl. lia.", 3)))),
)


def family_lemmas(rng: random.Random) -> list[Lemma]:
    """Every family's rows as lemmas ``ws_<family>_<n>``."""
    lemmas = []
    for family, topic, parts in FAMILIES:
        rows = itertools.chain.from_iterable(part(rng) for part in parts)
        for i, (prop, tactics, difficulty) in enumerate(rows):
            lemmas.append(Lemma(f"ws_{family}_{i}", prop, tactics, topic, difficulty, family))
    return lemmas
