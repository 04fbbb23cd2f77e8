"""The warm-start corpus (``sgs/data/warmstart_rocq.jsonl``), its loader
(``sgs.state.warmstart``) and its generator (``tools/make_warmstart.py``).

All in plain Python: the shipped file must be exactly what the generator
builds (the generator is deterministic and needs Rocq only to check), every
line must parse, no held-out target may leak, and the Guide's scores must
follow the documented rules.  Every statement and proof of the shipped file
compiled in one ``coqc`` run: ``tests/integration/sgs/test_warmstart_rocq.py``.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from sgs.method.roles import (
    PromptSet,
    Role,
    canonical_form,
    extract_conjecture,
    extract_guide_scores,
    extract_proof,
)
from sgs.state.warmstart import (
    DEFAULT_CORPUS,
    CorpusError,
    WarmstartExample,
    corpus_fingerprint,
    corpus_path,
    load_corpus,
    pairs_by_role,
)
from tests.paths import REPO
from tools.warmstart.corpus import SEED, build_corpus
from tools.warmstart.guards import leakage_problems
from tools.warmstart.guide import complexity, guide_scores, redundancy, relevance
from tools.warmstart.instances import instance_proof, instances, substitute
from tools.warmstart.statements import Lemma, shape

TOOLS = REPO / "tools"


def _load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


gen = _load_tool("make_warmstart")
targets_tool = gen.targets_tool


@pytest.fixture(scope="module")
def shipped_text() -> str:
    """The corpus as installed package data."""
    return (importlib.resources.files("sgs.data") / "warmstart_rocq.jsonl").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def examples() -> list[WarmstartExample]:
    return load_corpus()


@pytest.fixture(scope="module")
def lines(shipped_text) -> list[dict]:
    return [json.loads(line) for line in shipped_text.splitlines()]


@pytest.fixture(scope="module")
def targets() -> list[dict]:
    return targets_tool.load_jsonl(targets_tool.OUTPUT)


def _statement(block_text: str) -> str:
    """The one ``Theorem ... .`` line of a coq block."""
    return next(line for line in block_text.splitlines() if line.startswith("Theorem "))


def _blocks(text: str) -> list[str]:
    return re.findall(r"```coq\n(.*?)```", text, re.S)


# ---------------------------------------------------------------------------
# The shipped file


def test_shipped_file_is_what_the_generator_builds(shipped_text, targets):
    built = gen.to_jsonl(build_corpus(targets).examples)
    assert built == shipped_text, "sgs/data/warmstart_rocq.jsonl is stale: run python tools/make_warmstart.py"


def test_a_different_seed_gives_a_different_corpus(shipped_text, targets):
    assert gen.to_jsonl(build_corpus(targets, seed=SEED + 1).examples) != shipped_text


def test_corpus_is_small(shipped_text):
    assert len(shipped_text.encode("utf-8")) < 2_000_000


def test_role_counts_are_within_range(examples):
    counts = Counter(example.role for example in examples)
    assert 600 <= counts[Role.SOLVER] <= 1500
    assert 300 <= counts[Role.CONJECTURER] <= 600
    assert 300 <= counts[Role.GUIDE] <= 600


def test_lines_have_the_documented_keys(lines):
    for line in lines:
        assert tuple(line) == gen.FIELDS
        assert isinstance(line["meta"], dict) and line["meta"]["kind"]


def test_every_completion_parses_with_its_extractor(examples):
    for example in examples:
        if example.role is Role.SOLVER:
            proof = extract_proof(example.completion, "rocq")
            assert proof.ok, example.source
            assert proof.value.startswith("Proof.\n") and proof.value.endswith("\nQed.")
        elif example.role is Role.CONJECTURER:
            conjecture = extract_conjecture(example.completion, "rocq")
            assert conjecture.ok, example.source
            assert conjecture.value == _statement(_blocks(example.completion)[0])
        else:
            scores = extract_guide_scores(example.completion)
            assert scores.ok, example.source
            assert {k: getattr(scores.value, k) for k in ("relevance", "redundancy", "complexity")} \
                == example.meta["scores"]


def test_prompts_are_the_loops_prompts(examples):
    prompts = PromptSet("rocq")
    for example in examples:
        blocks = _blocks(example.prompt)
        if example.role is Role.SOLVER:
            statement = _statement(blocks[0])
            assert example.prompt == prompts.solver(targets_tool.HEADER, statement)
            # the Solver restates the theorem it was given
            assert _statement(_blocks(example.completion)[0]) == statement
        elif example.role is Role.CONJECTURER:
            assert example.prompt == prompts.conjecturer(blocks[0].strip())
        else:
            assert example.prompt == prompts.guide(blocks[0].strip(), blocks[1].strip())


def test_conjectures_shown_to_solver_and_guide_carry_the_loops_names(examples):
    # the loop renames every conjecture before the Solver or the Guide sees it
    for example in examples:
        if example.role is Role.GUIDE:
            assert _statement(_blocks(example.prompt)[1]).startswith("Theorem sgs_conjecture_")
        if example.role is Role.SOLVER and example.meta["kind"] == "conjecture":
            assert _statement(_blocks(example.prompt)[0]).startswith("Theorem sgs_conjecture_")


# ---------------------------------------------------------------------------
# Held-out targets, training targets


def test_no_held_out_leakage(lines, targets):
    assert leakage_problems(lines, targets) == []
    # the same check, independently of the generator's code: ids,
    # statements up to renaming, and reference proofs that only held-out
    # targets use (short ones such as "lia." are everyone's)
    held = [t for t in targets if t["held_out"]]
    held_ids = {t["id"] for t in held}
    held_forms = {canonical_form(t["statement"], "rocq") for t in held}
    held_proofs = {t["proof"] for t in held} - {t["proof"] for t in targets if not t["held_out"]}
    for line in lines:
        assert line["source"] not in held_ids
        assert not held_ids & {v for v in line["meta"].values() if isinstance(v, str)}
        text = line["prompt"] + "\n" + line["completion"]
        for block in _blocks(text):
            for row in block.splitlines():
                if row.startswith("Theorem "):
                    assert canonical_form(row, "rocq") not in held_forms, row
        if line["role"] == "solver":
            proof = extract_proof(line["completion"], "rocq").value
            assert proof not in held_proofs or len(" ".join(proof.split())) < len("Proof. Qed.") + 30


def test_leakage_check_catches_a_held_out_statement(lines, targets):
    held = next(t for t in targets if t["held_out"])
    renamed = held["statement"].replace(held["id"], "innocent_name", 1)
    leaking = dict(lines[0], prompt=PromptSet("rocq").solver(targets_tool.HEADER, renamed))
    problems = leakage_problems([leaking], targets)
    assert problems and "held-out" in problems[0]


def test_reference_proofs_cover_a_fraction_of_training_targets(examples, targets):
    training = {t["id"]: t for t in targets if not t["held_out"]}
    references = [e for e in examples if e.role is Role.SOLVER and e.meta["kind"] == "reference"]
    assert {e.source for e in references} <= set(training)
    assert 0.3 <= len(references) / len(training) <= 0.5
    for example in references:
        target = training[example.source]
        assert extract_proof(example.completion, "rocq").value == target["proof"]
    # no other solver example states a target (the references are the only copies)
    target_forms = {canonical_form(t["statement"], "rocq") for t in targets}
    for example in examples:
        if example.role is Role.SOLVER and example.meta["kind"] != "reference":
            assert canonical_form(_statement(_blocks(example.completion)[0]), "rocq") not in target_forms


def test_conjectures_are_for_training_targets_and_are_not_targets(examples, targets):
    training = {t["id"]: t for t in targets if not t["held_out"]}
    target_forms = {canonical_form(t["statement"], "rocq") for t in targets}
    sources = set()
    for example in examples:
        if example.role is Role.CONJECTURER:
            assert example.source in training
            assert example.prompt == PromptSet("rocq").conjecturer(training[example.source]["statement"])
            conjecture = extract_conjecture(example.completion, "rocq").value
            assert canonical_form(conjecture, "rocq") not in target_forms
            sources.add(example.source)
    assert len(sources) >= 0.5 * len(training)


def test_every_kind_of_conjecture_example_is_closer_to_its_own_target_than_to_the_others(lines, targets):
    """What the warm start shows the Conjecturer, measured as a run's trained-on conjectures are
    (sgs.analysis.run_closeness): each kind of lemma shares more of its statement, and its
    checking proof more of the reference proof's names, with its own target than with the rest."""
    closeness = gen.conjecture_closeness(lines, targets)
    assert set(closeness) == {"instance_base", "instance_case", "key", "library"}
    assert sum(statement.items for statement, _ in closeness.values()) == sum(
        line["role"] == "conjecturer" for line in lines)
    for kind, (statement, proof) in closeness.items():
        assert statement.own > statement.other and proof.own > proof.other, kind


def test_most_conjectures_carry_a_checking_proof(examples):
    conjectures = [e for e in examples if e.role is Role.CONJECTURER]
    proved = [e for e in conjectures if e.meta["proof"]]
    assert len(proved) >= 0.6 * len(conjectures)
    kinds = Counter(e.meta["kind"] for e in conjectures)
    assert {"instance_base", "instance_case", "library", "key"} <= set(kinds)


# ---------------------------------------------------------------------------
# Guide scores: the rules, and their spread over the corpus


def test_guide_scores_follow_the_rules(examples):
    for example in examples:
        if example.role is Role.GUIDE:
            target, conjecture = (_statement(block) for block in _blocks(example.prompt))
            assert example.meta["scores"] == guide_scores(target, conjecture)


def test_guide_scores_vary(examples):
    guide = [e for e in examples if e.role is Role.GUIDE]
    kinds = Counter(e.meta["kind"] for e in guide)
    assert set(kinds) == {"positive", "unrelated", "renamed", "hedged", "many", "redundant", "conjunction"}
    for name, low, high in (("relevance", 0, 5), ("redundancy", 0, 1), ("complexity", 0, 4)):
        values = Counter(e.meta["scores"][name] for e in guide)
        assert set(values) == set(range(low, high + 1)), (name, values)
    # the negatives are scored below the positives on average
    def mean_reward(kind: str) -> float:
        chosen = [e.meta["scores"] for e in guide if e.meta["kind"] == kind]
        rewards = [0 if s["complexity"] >= 3 else s["relevance"] + 2 - s["complexity"] + 1 - s["redundancy"]
                   for s in chosen]
        return sum(rewards) / len(rewards)
    for kind in ("unrelated", "renamed", "hedged", "many", "redundant"):
        assert mean_reward(kind) < mean_reward("positive"), kind


def _t(prop: str, name: str = "t") -> str:
    return f"Theorem {name} : {prop}."


@pytest.mark.parametrize("target, conjecture, expected", [
    # the target up to renaming
    ("forall n : nat, n + 0 = n", "forall m : nat, m + 0 = m", 0),
    # unrelated and trivial: no shared symbol, no variable
    ("forall a b : nat, Nat.max a b = Nat.max b a", "rev [1; 2] = [2; 1]", 0),
    # unrelated, with a variable
    ("forall a b : nat, Nat.max a b = Nat.max b a", "forall l : list nat, rev (rev l) = l", 1),
    # a generalisation: every symbol of the target, more variables in the conclusion
    ("forall l : list nat, fold_left Nat.add l 0 = list_sum l",
     "forall (l : list nat) (a : nat), fold_left Nat.add l a = list_sum l + a", 5),
    # special cases: the new constant counts as a symbol the target lacks
    ("forall a b : nat, Nat.max a b = Nat.max b a", "forall b : nat, Nat.max 0 b = Nat.max b 0", 3),
    ("forall l m : list nat, length (l ++ m) = length l + length m",
     "forall m : list nat, length ([1] ++ m) = length [1] + length m", 4),
])
def test_relevance_rule(target, conjecture, expected):
    assert relevance(_t(target), _t(conjecture, "c")) == expected


@pytest.mark.parametrize("prop, expected", [
    ("forall P Q : Prop, P -> (P -> Q) -> Q", 0),          # premises reach the conclusion in a chain
    ("forall P Q : Prop, P -> Q -> P", 1),                 # Q is not needed
    ("forall (A : Type) (l : list A), rev (rev l) = l", 0),  # A is used by the type of l
    ("forall n m : nat, n = n", 1),                        # m occurs nowhere
    ("forall k n : nat, k <= 3 -> n + 0 = n", 1),          # a premise disconnected from the conclusion
    ("2 + 2 = 4 -> 3 = 3", 1),                             # a premise without variables
    ("forall x y : nat, x + y = 10 -> x - y = 4 -> x = 7", 0),
])
def test_redundancy_rule(prop, expected):
    assert redundancy(_t(prop)) == expected


@pytest.mark.parametrize("prop, expected", [
    ("forall n : nat, n = n", 0),
    ("forall P Q : Prop, (P /\\ Q -> Q) <-> (Q \\/ P -> Q)", 0),             # an equivalence is one claim
    ("forall P Q : Prop, P /\\ Q -> Q /\\ P", 1),                            # linked through the premise
    ("forall a b : nat, a = 0 /\\ rev [1] = [1]", 2),                        # unlinked conjuncts
    ("forall n : nat, n mod 2 = 0 \\/ n mod 2 = 1", 2),                      # related alternatives
    ("forall n : nat, n = 0 \\/ rev [1] = [1]", 3),                          # unrelated alternatives
    ("1 = 1 /\\ 2 = 2 /\\ 3 = 3 /\\ 4 = 4 /\\ 5 = 5", 3),                       # many conjuncts
    ("forall n : nat, n = 0 \\/ rev [1] = [1] \\/ 2 + 2 = 4 \\/ Nat.Even 0", 4),  # many unrelated
])
def test_complexity_rule(prop, expected):
    assert complexity(_t(prop)) == expected


# ---------------------------------------------------------------------------
# Generator pieces


def test_instances_of_a_target():
    target = Lemma("arith_x", "forall a b : nat, Nat.max a b = Nat.max b a", "lia.", "minmax", 1, "reference")
    made = instances(target, random.Random(0))
    assert [m.name for m in made] == ["arith_x_base", "arith_x_case", "arith_x_closed"]
    assert made[0].prop == "forall b : nat, Nat.max 0 b = Nat.max b 0"
    assert made[0].tactics == "intros. lia."
    assert not shape(made[2].prop).variables


def test_instance_proof_reuses_the_parents_intros():
    proof = instance_proof("intros f a b. rewrite Nat.mul_comm. reflexivity.",
                           "forall (f : nat -> nat) (b : nat), f (0 * b) = f (b * 0)", {"a": "0"})
    assert proof == "intros f b.\nrewrite Nat.mul_comm. reflexivity."
    # induction on the instantiated variable cannot carry over
    assert instance_proof("intros n. induction n as [|n IH]. - reflexivity. - simpl. lia.",
                          "0 <= 0 * 0 + 1", {"n": "0"}) == "simpl. lia."


def test_substitute_refuses_to_capture():
    assert substitute("n + (forall n, n = n)", {"n": "0"}) is None
    assert substitute("S n + Nat.add n 1", {"n": "3"}) == "S 3 + Nat.add 3 1"


def test_records_from_corpus_cover_every_statement(lines):
    records = gen.records_from_corpus(lines)
    assert targets_tool.schema_problems(records) == []
    statements = {record["statement"] for record in records}
    for line in lines:
        if line["role"] == "solver":
            assert _statement(_blocks(line["completion"])[0]) in statements
        elif line["role"] == "conjecturer":
            assert extract_conjecture(line["completion"], "rocq").value in statements
        else:
            assert _statement(_blocks(line["prompt"])[1]) in statements


# ---------------------------------------------------------------------------
# The loader


def test_default_corpus_is_the_packaged_file():
    assert corpus_path(DEFAULT_CORPUS) == Path(str(importlib.resources.files("sgs.data"))) / "warmstart_rocq.jsonl"


def test_pairs_by_role(examples):
    pairs = pairs_by_role(examples)
    assert set(pairs) == set(Role)
    counts = Counter(example.role for example in examples)
    for role in Role:
        assert len(pairs[role]) == counts[role]
    first_guide = next(e for e in examples if e.role is Role.GUIDE)
    assert pairs[Role.GUIDE][0] == (first_guide.prompt, first_guide.completion)
    assert pairs_by_role([]) == {role: [] for role in Role}


def test_meta_is_read_only(examples):
    with pytest.raises(TypeError):
        examples[0].meta["kind"] = "changed"


def test_fingerprint_is_the_content_hash(tmp_path, shipped_text):
    assert corpus_fingerprint() == hashlib.sha256(shipped_text.encode("utf-8")).hexdigest()
    copy = tmp_path / "corpus.jsonl"
    copy.write_text(shipped_text, encoding="utf-8")
    assert corpus_fingerprint(copy) == corpus_fingerprint()
    copy.write_text(shipped_text + "\n", encoding="utf-8")
    assert corpus_fingerprint(copy) != corpus_fingerprint()


GOOD = {"role": "guide", "prompt": "Score it.", "source": "x", "meta": {},
        "completion": "<begin_relevance_score>3<end_relevance_score>\n"
                      "<begin_redundancy_score>0<end_redundancy_score>\n"
                      "<begin_conclusion_complexity_score>1<end_conclusion_complexity_score>"}


@pytest.mark.parametrize("bad, message", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "source"}), "missing source"),
    (json.dumps(dict(GOOD, extra=1)), "unknown extra"),
    (json.dumps(dict(GOOD, role="critic")), "role 'critic'"),
    (json.dumps(dict(GOOD, prompt="  ")), "prompt must be a non-empty string"),
    (json.dumps(dict(GOOD, meta=[])), "meta must be a JSON object"),
    (json.dumps(dict(GOOD, completion="<begin_relevance_score>9<end_relevance_score>")), "out_of_range"),
    (json.dumps(dict(GOOD, role="solver")), "no_code_block"),
    (json.dumps(dict(GOOD, role="conjecturer", completion="```coq\nProof. lia. Qed.\n```")), "not_a_theorem"),
])
def test_loader_names_file_and_line(tmp_path, bad, message):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(CorpusError) as error:
        load_corpus(path)
    assert f"{path}:3:" in str(error.value)
    assert message in str(error.value)


def test_loader_reads_a_small_file_and_refuses_an_empty_one(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    [example] = load_corpus(path)
    assert example.role is Role.GUIDE and example.source == "x"
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="no example"):
        load_corpus(path)
    with pytest.raises(CorpusError, match="cannot read"):
        load_corpus(tmp_path / "missing.jsonl")
