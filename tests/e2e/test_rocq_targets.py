"""The shipped Rocq target set (``sgs/data/rocq_targets.jsonl``) and its
generator (``tools/make_rocq_targets.py``).

Schema tests need nothing but Python.  The ``rocq`` tests compile every target
with real Rocq in one ``coqc`` run: each statement must elaborate to a
proposition and each reference proof must be accepted with its assumptions
closed under the global context.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.paths import REPO

TOOL = REPO / "tools" / "make_rocq_targets.py"


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_rocq_targets", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


@pytest.fixture(scope="module")
def shipped_text() -> str:
    """The file as installed package data."""
    return (importlib.resources.files("sgs.data") / "rocq_targets.jsonl").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def shipped(shipped_text) -> list[dict]:
    return [json.loads(line) for line in shipped_text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def coqc(require_rocq) -> str:
    """``coqc`` of the same installation as the ``coqtop`` that
    ``require_rocq`` found (skipped, or failed under ``CI=true``, without it)."""
    path = shutil.which("coqc") or str(Path(require_rocq).with_name("coqc"))
    assert Path(path).is_file(), f"coqtop is installed at {require_rocq} but coqc is not"
    return path


# ---------------------------------------------------------------------------
# Shape of the shipped set


def test_shipped_file_matches_the_generator(shipped_text):
    assert shipped_text == gen.to_jsonl(gen.build_targets()), \
        "sgs/data/rocq_targets.jsonl is stale: run python tools/make_rocq_targets.py"


def test_schema(shipped):
    assert gen.schema_problems(shipped) == []
    assert len(shipped) >= 150
    ids = [t["id"] for t in shipped]
    assert len(set(ids)) == len(ids)
    for target in shipped:
        assert list(target) == list(gen.FIELDS)
        assert target["statement"].startswith(f"Theorem {target['id']} : ")
        assert target["statement"].endswith(".")
        assert target["difficulty"] in (1, 2, 3, 4)
        proof = target["proof"]
        assert proof is None or (proof.startswith("Proof.\n") and proof.endswith("\nQed."))


def test_reference_proofs_for_nearly_all(shipped):
    with_proof = sum(t["proof"] is not None for t in shipped)
    assert with_proof >= 0.9 * len(shipped)


def test_one_shared_header(shipped):
    # the verifier keeps one warm coqtop state per header
    assert {t["header"] for t in shipped} == {gen.HEADER}


def test_topics_and_difficulties_are_varied(shipped):
    topics = Counter(t["topic"] for t in shipped)
    difficulties = Counter(t["difficulty"] for t in shipped)
    assert len(topics) >= 8
    assert min(topics.values()) >= 10
    assert set(difficulties) == {1, 2, 3, 4}
    assert difficulties[4] >= 10  # some targets a small model will not prove


def test_held_out_split(shipped):
    held = [t for t in shipped if t["held_out"]]
    assert 0.15 <= len(held) / len(shipped) <= 0.25
    # every topic has targets on both sides; the held-out ones cover every difficulty
    for topic in {t["topic"] for t in shipped}:
        members = [t["held_out"] for t in shipped if t["topic"] == topic]
        assert any(members) and not all(members), topic
    assert {t["difficulty"] for t in held} == {1, 2, 3, 4}


def test_held_out_split_does_not_depend_on_order(shipped):
    shuffled = [dict(t, held_out=False) for t in shipped]
    random.Random(7).shuffle(shuffled)
    gen.assign_held_out(shuffled)
    assert {t["id"] for t in shuffled if t["held_out"]} == {t["id"] for t in shipped if t["held_out"]}


def test_schema_problems_name_each_defect(shipped):
    good = shipped[0]
    broken = [
        dict(good),                                                                  # duplicate id
        dict(good, id="other_name"),                                                 # name mismatch
        dict(good, id="admits", statement="Theorem admits : True.", proof="Proof.\nAdmitted."),
        dict(good, id="bad_level", statement="Theorem bad_level : True.", difficulty=5),
        dict(good, id="Bad__id", statement="Theorem Bad__id : True."),
        {k: v for k, v in good.items() if k != "topic"},
    ]
    problems = gen.schema_problems([good] + broken)
    assert len(problems) == len(broken)
    for problem, expected in zip(problems, ["duplicate id", "declares 'arith_add_0_r'", "banned:Admitted",
                                            "difficulty 5", "not a plain Coq identifier", "keys"]):
        assert expected in problem


def test_topic_tables_load_in_file_order_with_their_families(tmp_path):
    tables = tmp_path / "tables.toml"
    tables.write_text(
        "[first]\nprefix = 'one'\nrows = [\n"
        "  ['and_comm', 1, 'forall A B : Prop, A /\\ B -> B /\\ A', 'tauto.'],\n"
        "  ['no_proof', 2, 'True'],\n"
        "]\n"
        "[second]\nprefix = 'two'\nrows = [\n"
        "  ['multi', 3, 'True', '''\n    idtac.\n    - exact I.\n    '''],\n"
        "]\n", encoding="utf-8")
    topics = gen.load_topics(tables, families={"second": lambda: [("fact", 1, "1 = 1", "reflexivity.")]})
    assert [(t.name, t.prefix) for t in topics] == [("first", "one"), ("second", "two")]
    assert topics[0].rows == (("and_comm", 1, "forall A B : Prop, A /\\ B -> B /\\ A", "tauto."),
                              ("no_proof", 2, "True", None))
    assert topics[1].rows == (("multi", 3, "True", "    idtac.\n    - exact I.\n    "),
                              ("fact", 1, "1 = 1", "reflexivity."))
    assert gen.render_proof(topics[1].rows[0][3]) == "Proof.\n  idtac.\n  - exact I.\nQed."


@pytest.mark.parametrize("row, complaint", [
    ("['short', 1]", "row 2 (short): expected [name, difficulty, proposition, tactics]"),
    ("['long', 1, 'True', 'exact I.', 'extra']", "row 2 (long): expected [name, difficulty, proposition, tactics]"),
    ("['typed', '1', 'True', 'exact I.']", "row 2 (typed): the difficulty must be an integer, got '1'"),
    ("['flag', true, 'True', 'exact I.']", "row 2 (flag): the difficulty must be an integer, got True"),
    ("['tactic', 1, 'True', 7]", "row 2 (tactic): the tactics must be a string, got 7"),
    ("[3, 1, 'True', 'exact I.']", "row 2: the name must be a string, got 3"),
    ("'a string'", "row 2: expected [name, difficulty, proposition, tactics], got 'a string'"),
])
def test_a_malformed_row_is_named(tmp_path, row, complaint):
    tables = tmp_path / "tables.toml"
    tables.write_text("[topic]\nprefix = 't'\nrows = [\n  ['fine', 1, 'True', 'exact I.'],\n"
                      f"  {row},\n]\n", encoding="utf-8")
    with pytest.raises(gen.TableError) as caught:
        gen.load_topics(tables, families={})
    assert str(caught.value).startswith(f"{tables}: [topic] {complaint}")


def test_a_malformed_table_or_file_is_named(tmp_path):
    tables = tmp_path / "tables.toml"
    tables.write_text("[topic]\nrows = []\n", encoding="utf-8")
    with pytest.raises(gen.TableError, match=r"\[topic\]: expected a table with 'prefix' and 'rows'"):
        gen.load_topics(tables, families={})
    empty = tmp_path / "empty.toml"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(gen.TableError, match=r"no table for the topics of the families \['missing'\]"):
        gen.load_topics(empty, families={"missing": list})
    tables.write_text("[topic\n", encoding="utf-8")
    with pytest.raises(gen.TableError, match="not valid TOML"):
        gen.load_topics(tables, families={})


def test_render_proof_indents_the_tactics():
    assert gen.render_proof("\n    intros n.\n    - lia.\n") == "Proof.\n  intros n.\n  - lia.\nQed."
    assert gen.render_proof(None) is None


# ---------------------------------------------------------------------------
# Real Rocq


@pytest.mark.rocq
def test_every_target_checks_in_rocq(shipped, coqc):
    assert gen.check_targets(shipped, coqc=coqc) == []


@pytest.mark.rocq
def test_rocq_check_names_each_bad_target(coqc):
    def target(name: str, prop: str, tactics: str | None, header: str = gen.HEADER) -> dict:
        return {"id": name, "header": header, "statement": f"Theorem {name} : {prop}.",
                "proof": gen.render_proof(tactics), "difficulty": 1, "topic": "test", "held_out": False}

    classical = "Require Import Coq.Logic.Classical_Prop."
    targets = [
        target("fine", "forall n : nat, n + 0 = n", "lia."),
        target("false_claim", "forall n : nat, n + 1 = n", "lia."),
        target("not_a_prop", "nat", None),
        target("no_proof", "forall a b : nat, a + b = b + a", None),
        target("uses_axiom", "forall P : Prop, P \\/ ~ P", "exact classic.", header=classical),
        target("fine_too", "True", "exact I.", header=classical),
    ]
    failures = gen.check_targets(targets, coqc=coqc)
    assert sorted(f.target_id for f in failures) == ["false_claim", "not_a_prop", "uses_axiom"]
    by_id = {f.target_id: f.detail for f in failures}
    assert "classic" in by_id["uses_axiom"]
    assert "Error" in by_id["false_claim"]


@pytest.mark.rocq
def test_the_command_writes_the_shipped_file_and_verifies_it(tmp_path, coqc, shipped_text):
    """``python tools/make_rocq_targets.py`` as the module docstring shows it:
    built from tools/rocq_targets.toml and checked by Rocq, its output equals the
    shipped file byte for byte, and ``--verify`` passes on it."""
    script = str(TOOL)
    output = tmp_path / "targets.jsonl"
    built = subprocess.run([sys.executable, script, "--output", str(output), "--coqc", coqc],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    assert output.read_text(encoding="utf-8") == shipped_text
    verified = subprocess.run([sys.executable, script, "--verify", "--output", str(output), "--coqc", coqc],
                              capture_output=True, text=True, timeout=600)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "258 targets, 50 held out" in verified.stdout
