#!/usr/bin/env python3
"""Build and check the Rocq warm-start corpus, ``sgs/data/warmstart_rocq.jsonl``.

The tiny default model starts from random weights, so before self-play can
show anything it needs a supervised warm start on the three roles.  This tool
writes that corpus: one JSON object per line,
``{"role", "prompt", "completion", "source", "meta"}``, where ``prompt`` is
rendered by :class:`sgs.method.roles.PromptSet` (``rocq`` templates) exactly as the
loop renders it and ``completion`` is the output the role's extractor
(:func:`sgs.method.roles.extract_proof`, :func:`~sgs.method.roles.extract_conjecture`,
:func:`~sgs.method.roles.extract_guide_scores`) parses.  Everything is generated
here from tables and seeded random choices
(:data:`~tools.warmstart.corpus.SEED`), so the file is reproducible and
reviewable; every statement and proof in it is checked by Rocq (below).

Solver pairs (statement -> ``Proof. ... Qed.``)
    * Reference proofs of about 40%
      (:data:`~tools.warmstart.corpus.REFERENCE_FRACTION`) of the
      TRAINING targets, chosen per topic by a seeded hash of the id.  The
      other 60% of training targets are deliberately left out: after the warm
      start the Solver should prove some but not all training targets at
      k = 8, so that self-play has something to learn.  It can reach them
      only by generalising from the rest of the corpus.
    * Generated lemmas that are NOT targets (ids ``ws_<family>_<n>``):
      families of the proof styles the targets use (closed computations,
      ``lia``/``ring``/``nia`` identities, rewrites, library lemmas at
      concrete types, tautologies, witnesses, boolean truth tables, small
      inductions...) with other constants, variables and types, plus type
      instances of training targets (``ws_<target>_at_nat``: ``(A : Type)``
      made ``nat`` or ``bool``, proved by the reference proof minus ``A``).
    * The proved conjectures below, under the name the loop gives a
      conjecture (:func:`sgs.method.roles.conjecture_name`), as the Solver sees them
      during self-play.

Conjecturer pairs (target -> a simpler related lemma, ``Admitted``)
    For training targets only, three kinds of lemma: ``instance`` (a nat, list
    or bool variable of the target set to a constant: the base case and a
    special case, or a closed instance when one of those is unusable; true
    because the target is; never one that makes a premise redundant, such as
    ``5 <= 0 -> ...``), ``library`` (a library lemma the target's reference
    proof cites, stated as a theorem) and ``key`` (a hand-written step,
    generalisation or auxiliary fact for a harder target,
    :data:`~tools.warmstart.lemma_tables.KEY_LEMMAS`).  Each has a checking
    proof when one is known (``meta["proof"]``; derived for instances by
    :func:`~tools.warmstart.instances.instance_proof`); every statement is
    checked to elaborate.

Guide triples (target + conjecture -> three scores)
    A sample of the conjectures above (``positive``) and constructed
    negatives: an ``unrelated`` lemma from another topic, the ``renamed``
    target, a conclusion ``hedged`` with an alternative (a closed instance of
    the same target or an unrelated closed fact), ``many`` unrelated
    alternatives, a ``conjunction`` of two closed instances, and a
    ``redundant`` premise.  The scores are never chosen by hand: they follow
    from the texts by the rules of :func:`~tools.warmstart.guide.guide_scores`:

    * relevance (0-5), from ``S(x)``: the symbols of a statement's canonical
      form (:func:`sgs.method.roles.canonical_form`) other than bound variables,
      brackets, binder keywords, ``nat``, ``Type``, ``Prop``, ``->`` and
      ``=`` (which nearly every statement has);
      ``overlap`` is the Jaccard index of S(target) and S(conjecture).
      0 if the conjecture is the target up to renaming, or shares no symbol
      with it and has no variable (unrelated and trivial); 5 if it is a
      generalisation: S(target) minus numerals is contained in S(conjecture)
      and the conjecture's conclusion uses more bound variables than the
      target's; otherwise 1 if overlap < 0.2, 2 if < 0.4, 3 if < 0.6, else 4.
    * redundancy (0/1): 1 if a bound variable occurs nowhere after its binder,
      or a top-level premise is disconnected from the conclusion: starting
      from the variables of the conclusion, a premise is needed when it
      shares a variable with those reached so far (which then reach its
      variables too); a premise never reached, including one with no
      variable, is redundant.
    * conclusion complexity (0-4), from the conclusion split at top-level
      ``\\/`` into alternatives and, with one alternative, at top-level
      ``/\\`` into conjuncts; a top-level ``<->`` makes it one claim (it
      binds looser than both).  Two parts are linked when they share a bound
      variable or an identifier other than a type, or a premise mentions a
      variable of each; a set of parts is linked when that relation connects
      them all.  One claim: 0; 2-3 linked
      conjuncts: 1; 2-3 unlinked conjuncts or 4 conjuncts: 2; 5 or more
      conjuncts: 3; 2-3 linked alternatives: 2; 2-3 unlinked alternatives or
      4+ linked ones: 3; 4+ unlinked alternatives: 4.

Held-out targets never leak (:func:`~tools.warmstart.guards.leakage_problems`):
no held-out id is a source, and no statement anywhere in the corpus
(prompts included) equals a held-out statement up to renaming, nor up to
renaming AND changing numerals (its "skeleton"), so no family re-teaches a
held-out target with other constants; no proof equals a held-out reference
proof of 30 characters or more that no training target shares.  Generated statements that equal any
target up to renaming are dropped too (the references are the only copies of
targets), and the loop would drop such a conjecture anyway.

Rocq checks reuse ``tools/make_rocq_targets.py``: the lemmas are records of
the target schema, so :func:`make_rocq_targets.schema_problems` applies the
verifier's text policy and :func:`make_rocq_targets.check_targets` compiles
them all in one ``coqc`` run (each statement closed with ``Admitted`` after
a Prop check, each proof with ``Qed`` and ``Print Assumptions``).

The code: this file is the command (arguments, checks, writing); the corpus
is built by the package ``tools/warmstart/`` (its ``__init__`` lists the
modules, one job each).

Usage::

    python tools/make_warmstart.py             # build, check with Rocq, write
    python tools/make_warmstart.py --no-rocq   # build and write without Rocq
    python tools/make_warmstart.py --verify    # check that the shipped file is
                                               # what the generator builds, and
                                               # check its lemmas with Rocq
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Iterable, Mapping, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from sgs.analysis.closeness import (OwnAndOther, coverage, jaccard, own_and_other, proof_names,  # noqa: E402
                                    statement_symbols)
from sgs.method.roles import extract_conjecture, extract_proof  # noqa: E402  (needs the repository on the path)
from tools import make_rocq_targets as targets_tool  # noqa: E402
from tools.warmstart.corpus import build_corpus  # noqa: E402
from tools.warmstart.guards import leakage_problems, statements_in  # noqa: E402
from tools.warmstart.statements import ROCQ, Lemma, prop_of, tactics_of  # noqa: E402

#: where the corpus is shipped (package data of ``sgs``)
OUTPUT = REPO_ROOT / "sgs" / "data" / "warmstart_rocq.jsonl"

#: the target set the corpus is built around
TARGETS = targets_tool.OUTPUT

#: keys of one corpus line, in the order they are written
FIELDS = ("role", "prompt", "completion", "source", "meta")


def to_jsonl(examples: Iterable[Mapping]) -> str:
    """One JSON object per line, keys in :data:`FIELDS` order."""
    return "".join(json.dumps({k: e[k] for k in FIELDS}, ensure_ascii=False) + "\n" for e in examples)


def check_records(lemmas: Iterable[Lemma]) -> list[dict]:
    """Records of the target schema for every distinct lemma (by name)."""
    records: dict[str, dict] = {}
    for lemma in lemmas:
        record = lemma.record()
        if record["id"] not in records or (records[record["id"]]["proof"] is None and record["proof"]):
            records[record["id"]] = record
    return list(records.values())


def records_from_corpus(examples: Sequence[Mapping]) -> list[dict]:
    """Records of the target schema for what the corpus lines state, read
    back from the lines themselves: each solver completion's statement and
    proof, each conjecture with its checking proof, each guide conjecture."""
    lemmas = []
    for example in examples:
        if example["role"] == "solver":
            statement = statements_in({"prompt": "", "completion": example["completion"]})[0]
            proof = extract_proof(example["completion"], ROCQ).value
        elif example["role"] == "conjecturer":
            statement = extract_conjecture(example["completion"], ROCQ).value
            proof = example["meta"].get("proof")
        else:
            statement = extract_conjecture(example["prompt"], ROCQ).value
            proof = None
        name = statement.split()[1]
        lemmas.append(Lemma(name, prop_of(statement), tactics_of(proof), "corpus", 1, example["role"]))
    return check_records(lemmas)


def conjecture_closeness(examples: Sequence[Mapping],
                         targets: Sequence[Mapping]) -> dict[str, tuple[OwnAndOther, OwnAndOther]]:
    """Per kind of Conjecturer example, how close its lemmas are to their
    targets, measured as a run's trained-on conjectures are
    (:mod:`sgs.analysis.run_closeness`): statement overlap with the target's
    statement, and the share of the names of the target's reference proof
    that the lemma's checking proof uses; each against its own training
    target and, as the chance level, every other one."""
    training = [t for t in targets if not t["held_out"]]
    statements = {t["id"]: statement_symbols(t["statement"], ROCQ) for t in training}
    proofs = {t["id"]: proof_names(t["proof"], ROCQ) for t in training if t["proof"]}
    by_kind: dict[str, list[tuple[str, str, str | None]]] = {}
    for example in examples:
        if example["role"] == "conjecturer":
            statement = extract_conjecture(example["completion"], ROCQ).value
            by_kind.setdefault(example["meta"]["kind"], []).append(
                (example["source"], statement, example["meta"].get("proof")))
    return {kind: (own_and_other([(target, statement_symbols(statement, ROCQ)) for target, statement, _ in lemmas],
                                 statements, jaccard),
                   own_and_other([(target, proof_names(proof, ROCQ)) for target, _, proof in lemmas if proof],
                                 proofs, coverage))
            for kind, lemmas in sorted(by_kind.items())}


def _summary(examples: Sequence[Mapping], targets: Sequence[Mapping]) -> str:
    roles = Counter(e["role"] for e in examples)
    kinds = Counter((e["role"], e["meta"]["kind"]) for e in examples)
    scores = Counter(json.dumps(e["meta"]["scores"], sort_keys=True) for e in examples if e["role"] == "guide")
    closeness = "".join(
        f"\n  {kind}: statements {statement.own:.2f} own / {statement.other:.2f} other ({statement.items}), "
        f"proof names {proof.own:.2f} / {proof.other:.2f} ({proof.items})"
        for kind, (statement, proof) in conjecture_closeness(examples, targets).items())
    return (f"{len(examples)} examples: {dict(roles)}\nkinds: {dict(sorted(kinds.items()))}\n"
            f"distinct guide reviews: {len(scores)}\n"
            f"conjecture examples against their own target / every other one (lemmas):{closeness}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the JSONL")
    parser.add_argument("--targets", type=Path, default=TARGETS, help="the target set")
    parser.add_argument("--no-rocq", action="store_true", help="skip the Rocq check")
    parser.add_argument("--verify", action="store_true",
                        help="check that the output file is what the generator builds, instead of writing it")
    parser.add_argument("--coqc", default=None, help="coqc binary (default: from PATH)")
    args = parser.parse_args(argv)

    targets = targets_tool.load_jsonl(args.targets)
    corpus = build_corpus(targets)
    text = to_jsonl(corpus.examples)
    ok = True
    if args.verify and (not args.output.is_file() or args.output.read_text(encoding="utf-8") != text):
        print(f"{args.output} is not what the generator builds: run python tools/make_warmstart.py",
              file=sys.stderr)
        ok = False
    for problem in leakage_problems(corpus.examples, targets):
        print(f"leak: {problem}", file=sys.stderr)
        ok = False
    records = check_records(corpus.lemmas)
    problems = targets_tool.schema_problems(records)
    failures = [] if args.no_rocq or problems else targets_tool.check_targets(records, coqc=args.coqc)
    for problem in problems:
        print(f"schema: {problem}", file=sys.stderr)
    for failure in failures:
        print(f"rocq: {failure.target_id}: {failure.detail}", file=sys.stderr)
    ok = ok and not problems and not failures
    if not ok:
        return 1
    if not args.verify:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output} ({len(text.encode()):,} bytes)")
    print(f"{len(records)} distinct lemmas checked{' (schema only)' if args.no_rocq else ' by Rocq'}")
    print(_summary(corpus.examples, targets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
