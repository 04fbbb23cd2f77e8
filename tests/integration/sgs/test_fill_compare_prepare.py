"""``sgs.fill.compare``'s work copy against real Rocq: section lemmas admitted with
the ``Proof using`` clause Coq suggests keep their types, so the lemmas after them
still build (admitted bare, ``needs_nothing`` would take ``n`` and ``H`` as
arguments and ``after`` would break)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import sgs.fill.compare as compare

pytestmark = pytest.mark.skipif(shutil.which("coqc") is None, reason="needs coqc")

SECTIONS = """\
Section WithVariables.
Variable n : nat.
Hypothesis H : n = 0.
Lemma uses_h : n + 0 = 0.
Proof. rewrite <- plus_n_O. exact H. Qed.
Lemma needs_nothing : 1 = 1.
Proof. reflexivity. Qed.
End WithVariables.
Section WithoutVariables.
Lemma plain : 2 = 2.
Proof. reflexivity. Qed.
End WithoutVariables.
Lemma after : forall n, n = 0 -> n + 0 = 0 /\\ 1 = 1 /\\ 2 = 2.
Proof. intros n H. exact (conj (uses_h n H) (conj needs_nothing plain)). Qed.
"""


def test_section_lemmas_are_admitted_with_coqs_clause_and_the_copy_builds(tmp_path: Path, monkeypatch):
    project = tmp_path / "demo"
    project.mkdir()
    (project / "_CoqProject").write_text("-R . Demo\nA.v\n")
    (project / "A.v").write_text(SECTIONS)
    # every lemma the rule allows but the one that uses the others
    monkeypatch.setattr(compare, "draw", lambda ids, traced, fraction, seed: [i for i in ids if i != "Demo.A.after"])
    logged: list[str] = []
    work = compare.prepare(project, tmp_path / "out", fraction=0.5, seed=0, log=logged.append)

    record = json.loads((tmp_path / "out" / "work" / "demo.admitted.json").read_text())
    assert record["admitted"] == ["Demo.A.needs_nothing", "Demo.A.plain", "Demo.A.uses_h"]
    assert record["suggested_clauses"] == 2
    text = (work / "A.v").read_text()
    assert "Lemma uses_h : n + 0 = 0.\nProof using H.\nAdmitted." in text
    assert "Lemma needs_nothing : 1 = 1.\nProof using .\nAdmitted." in text
    assert "Lemma plain : 2 = 2.\nAdmitted." in text               # no section variable: nothing to keep
    assert "exact (conj (uses_h n H)" in text                       # `after` stays proved, and it built
    assert (tmp_path / "out" / "build" / "demo" / "A.vo").is_file()
    assert any("asking Coq" in line for line in logged)
