"""The corpus: which reference proofs go in, the examples of each role
(Solver, Conjecturer, Guide with its negative conjectures) and
:func:`build_corpus`, which puts them together from the target set and
:data:`SEED`."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from sgs.method.roles import PromptSet

from .families import family_lemmas
from .guards import Guard, dedupe
from .guide import guide_completion, guide_scores
from .instances import instances, replace_identifiers, type_instances
from .lemma_tables import key_lemmas, library_lemmas
from .statements import HEADER, Lemma, identifiers, shape, target_lemma

#: seed of every random choice; change it and the corpus changes
SEED = 20260424

#: share of each topic's training targets whose reference proof is included
REFERENCE_FRACTION = 0.4

#: at most this many instance conjectures per training target
INSTANCES_PER_TARGET = 2

#: guide triples per kind (positives, then each kind of negative)
GUIDE_POSITIVES = 220
GUIDE_NEGATIVES = 50


def _hash_order(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def reference_ids(targets: Sequence[Mapping], seed: int = SEED) -> list[str]:
    """The training targets whose reference proof is in the corpus: in each
    topic, the first :data:`REFERENCE_FRACTION` (rounded) in seeded hash order."""
    by_topic: dict[str, list[Mapping]] = {}
    for target in targets:
        if not target["held_out"] and target["proof"] is not None:
            by_topic.setdefault(target["topic"], []).append(target)
    chosen = set()
    for members in by_topic.values():
        ordered = sorted(members, key=lambda t: _hash_order(seed, t["id"]))
        chosen.update(t["id"] for t in ordered[:round(REFERENCE_FRACTION * len(ordered))])
    return [t["id"] for t in targets if t["id"] in chosen]


def solver_example(prompts: PromptSet, lemma: Lemma, source: str, kind: str) -> dict:
    return {
        "role": "solver",
        "prompt": prompts.solver(HEADER, lemma.statement),
        "completion": f"```coq\n{lemma.statement}\n{lemma.proof}\n```",
        "source": source,
        "meta": {"kind": kind, "family": lemma.family, "topic": lemma.topic, "difficulty": lemma.difficulty},
    }


def conjecturer_example(prompts: PromptSet, target: Lemma, lemma: Lemma) -> dict:
    return {
        "role": "conjecturer",
        "prompt": prompts.conjecturer(target.statement),
        "completion": f"```coq\n{lemma.statement}\nAdmitted.\n```",
        "source": target.name,
        "meta": {"kind": lemma.family, "lemma": lemma.name, "topic": target.topic, "proof": lemma.proof},
    }


def guide_example(prompts: PromptSet, target: Lemma, conjecture: str, kind: str) -> dict:
    scores = guide_scores(target.statement, conjecture)
    return {
        "role": "guide",
        "prompt": prompts.guide(target.statement, conjecture),
        "completion": guide_completion(scores),
        "source": target.name,
        "meta": {"kind": kind, "topic": target.topic, "scores": scores},
    }


def _fresh(used: Iterable[str], pool: Sequence[str] = ("k", "j", "q", "r", "t", "u", "w", "z")) -> str:
    taken = set(used)
    return next(name for name in pool if name not in taken)


def _rename_bound(prop: str) -> str | None:
    """``prop`` with each leading bound variable renamed (``n`` -> ``n0``)."""
    s = shape(prop)
    if not s.variables:
        return None
    return replace_identifiers(prop, {name: name + "0" for name in s.variables})


def _with_conclusion(prop: str, new_conclusion: Callable[[str], str]) -> str:
    """``prop`` with its conclusion text replaced by ``new_conclusion(old)``."""
    s = shape(prop)
    start = prop.rfind(s.conclusion)
    return prop[:start] + new_conclusion(s.conclusion)


def _closed(lemmas: Sequence[Lemma]) -> list[Lemma]:
    return [lemma for lemma in lemmas if not shape(lemma.prop).variables and not shape(lemma.prop).premises]


def guide_conjectures(target: Lemma, related: Sequence[Lemma], other: Sequence[Lemma],
                      closed_other: Sequence[Lemma], rng: random.Random) -> list[tuple[str, str]]:
    """Negative conjectures for ``target``: ``(kind, proposition)`` pairs.
    ``other`` is the pool of lemmas to draw unrelated ones from, and
    ``closed_other`` its closed members (no variable, no premise)."""
    made = []
    unrelated = [lemma for lemma in other if lemma.topic != target.topic]
    closed_unrelated = [lemma for lemma in closed_other if lemma.topic != target.topic]
    pick = rng.choice(unrelated)
    made.append(("unrelated", pick.prop))
    renamed = _rename_bound(target.prop)
    if renamed:
        made.append(("renamed", renamed))
    if related:
        base = rng.choice(related)
        # the alternative is a closed instance of the same target when there
        # is one (often a related alternative), else an unrelated fact
        closed_related = [lemma for lemma in _closed(related) if lemma is not base]
        fact = rng.choice(closed_related if closed_related and rng.random() < 0.5 else closed_unrelated).prop
        made.append(("hedged", _with_conclusion(base.prop, lambda c: f"({c}) \\/ ({fact})")))
        facts = [f"({lemma.prop})" for lemma in rng.sample(closed_unrelated, 3)]
        made.append(("many", _with_conclusion(base.prop, lambda c: f"({c}) \\/ " + " \\/ ".join(facts))))
        name = _fresh(identifiers(base.prop))
        made.append(("redundant", f"forall {name} : nat, {name} <= {rng.randint(2, 9)} -> {base.prop}"))
        closed = _closed(related)
        if len(closed) >= 2:
            first, second = rng.sample(closed, 2)
            made.append(("conjunction", f"{first.prop} /\\ {second.prop}"))
    return made


@dataclass
class Corpus:
    """The corpus lines and every lemma they state, for the Rocq check."""

    examples: list[dict]
    lemmas: list[Lemma]


def build_corpus(targets: Sequence[Mapping], seed: int = SEED) -> Corpus:
    """The whole corpus, deterministically from ``targets`` and ``seed``."""
    rng = random.Random(seed)
    prompts = PromptSet("rocq")
    guard = Guard.from_targets(targets)
    training = [target_lemma(t) for t in targets if not t["held_out"] and t["proof"] is not None]
    by_id = {lemma.name: lemma for lemma in training}
    seen: set[str] = set()

    # Conjectures, per training target
    conjectures: dict[str, list[Lemma]] = {}
    for target in training:
        candidates = instances(target, rng)[:INSTANCES_PER_TARGET] + library_lemmas(target) + key_lemmas(target)
        conjectures[target.name] = dedupe(candidates, guard, seen)

    # Solver lemmas
    variants = dedupe(family_lemmas(rng), guard, seen)
    variants += dedupe((inst for t in training for inst in type_instances(t)), guard, seen)

    examples = []
    for target_id in reference_ids(targets, seed):
        examples.append(solver_example(prompts, by_id[target_id], target_id, "reference"))
    for lemma in variants:
        examples.append(solver_example(prompts, lemma, lemma.name, "variant"))
    proved = [lemma for lemmas in conjectures.values() for lemma in lemmas if lemma.tactics]
    for lemma in proved:
        examples.append(solver_example(prompts, lemma.renamed(), lemma.name, "conjecture"))

    for target in training:
        for lemma in conjectures[target.name]:
            examples.append(conjecturer_example(prompts, target, lemma))

    # Guide: a sample of the positives, then the negatives
    guide_lemmas: list[Lemma] = []
    pairs = [(target, lemma) for target in training for lemma in conjectures[target.name]]
    for target, lemma in rng.sample(pairs, min(GUIDE_POSITIVES, len(pairs))):
        renamed = lemma.renamed()
        examples.append(guide_example(prompts, target, renamed.statement, "positive"))
    negatives: dict[str, list[tuple[Lemma, str]]] = {}
    pool = variants + proved
    closed_pool = _closed(pool)
    for target in training:
        for kind, prop in guide_conjectures(target, conjectures[target.name], pool, closed_pool, rng):
            negatives.setdefault(kind, []).append((target, prop))
    for kind in sorted(negatives):
        chosen = negatives[kind]
        for target, prop in rng.sample(chosen, min(GUIDE_NEGATIVES, len(chosen))):
            lemma = Lemma("guide_conjecture", prop, None, target.topic, 1, f"guide_{kind}").renamed()
            if guard.statement_leaks(lemma.statement):
                continue
            guide_lemmas.append(lemma)
            examples.append(guide_example(prompts, target, lemma.statement, kind))

    lemmas = variants + [lemma for lemmas in conjectures.values() for lemma in lemmas]
    lemmas += [lemma.renamed() for lemma in proved] + guide_lemmas
    return Corpus(examples, lemmas)
