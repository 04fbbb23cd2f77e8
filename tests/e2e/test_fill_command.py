"""``python -m sgs.fill`` as a user runs it, on small projects written here,
with real Rocq, Ray and the verifier pool.

The main project: ``A.v`` with a human proof, an admitted lemma the
automation proves (``double``) and a false one (``bogus``); ``B.v`` uses
``double`` in a proof of its own and has an admitted lemma in a section with
variables (``pos``), which a later lemma applies to its two arguments, so a
written proof must keep the lemma's type.  Its fill is killed midway and
resumed.  Bad inputs exit 2 before any prover starts, except a file that
changes during the run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.kill_support import run_until_then_kill
from tests.paths import REPO

pytestmark = [pytest.mark.rocq, pytest.mark.slow]

A = """\
Require Import Arith Lia.

Lemma easy_add : forall n, n + 0 = n.
Proof. intros n. lia. Qed.

(* Lemma in_comment : False. Admitted. *)
Lemma double : forall n, n + n = 2 * n.
Admitted.

Lemma bogus : forall n : nat, n = n + 1.
Proof.
Admitted.
"""

B = """\
Require Import Arith Lia.
Require Import Fill.A.

Lemma uses : forall n, n + n + 0 = 2 * n.
Proof. intros n. rewrite Nat.add_0_r. apply double. Qed.

Section S.
Variable m : nat.
Hypothesis Hm : m > 0.
Lemma pos : m >= 1.
Admitted.
End S.

Lemma use_pos : 3 >= 1.
Proof. apply (pos 3). lia. Qed.
"""


def make_project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    (root / "_CoqProject").write_text("-R . Fill\n" + "".join(f"{name}\n" for name in files))
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def command(project: Path, tmp: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "sgs.fill", str(project), "--build-dir", str(tmp / "build"), *flags]


def fill(project: Path, tmp: Path, *flags: str, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run(command(project, tmp, *flags), cwd=REPO, capture_output=True, text=True, timeout=timeout)


def sources(project: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(project.glob("*.v"))}


@pytest.fixture(scope="module")
def filled(tmp_path_factory, require_rocq):
    """The fill as a user runs it, killed (SIGKILL, its whole process group) as soon as
    its journal holds a finished lemma round, then the same command again, which
    resumes: the tests below read the resumed run's report and output."""
    tmp = tmp_path_factory.mktemp("fill")
    project = make_project(tmp / "project", {"A.v": A, "B.v": B})
    out = tmp / "out" / "report.jsonl"
    # the k-NN on the project's proofs and the shipped model taking turns in the search
    flags = ("--out", str(out), "--time-per-lemma", "12", "--workers", "2", "--write", "--proposer", "knn+model")
    journal = out.with_suffix(".progress.jsonl")
    code = run_until_then_kill(command(project, tmp, *flags),
                               lambda: journal.exists() and journal.read_bytes().count(b"\n") >= 2,
                               "the fill never finished a lemma's first round", cwd=REPO)
    assert code == -signal.SIGKILL
    assert sources(project) == {"A.v": A, "B.v": B} and not out.exists()
    return project, out, fill(project, tmp, *flags)


def test_every_admitted_lemma_gets_a_line_and_the_summary_counts_them(filled):
    project, out, result = filled
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {row["name"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {"double", "bogus", "pos"}
    assert rows["bogus"]["status"] == "not_proved" and "proof" not in rows["bogus"]
    assert rows["pos"]["status"] == "proved" and rows["pos"]["proof"].startswith("Proof using All.")
    assert (rows["double"]["file"], rows["double"]["line"]) == ("A.v", 7)
    for row in rows.values():
        assert row["seconds"] >= 0 and row["id"] == f"Fill.{row['file'][0]}.{row['name']}"
    proved = sum(row["status"] == "proved" for row in rows.values())
    assert result.stdout.strip().splitlines()[-1].startswith(f"proved {proved} of 3 admitted lemmas")
    page = out.with_suffix(".md").read_text()
    assert "# sgs.fill:" in page and "`bogus`" in page and "--write: wrote" in page
    assert "k-NN on the project's proofs and the model pkg://sgs/data/rocq_prover, taking turns" in page


def test_the_killed_fill_resumed_from_its_journal_and_the_report_replaced_it(filled):
    project, out, result = filled
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resuming from {out.with_suffix('.progress.jsonl')}:" in result.stderr
    assert "finished before, from the journal)" in result.stderr
    assert not out.with_suffix(".progress.jsonl").exists() and out.exists()
    resumed = json.loads(out.with_suffix(".summary.json").read_text())["resumed_rounds"]
    assert resumed >= 1 and f"resumed: {resumed} lemma rounds from a stopped run" in out.with_suffix(".md").read_text()


def test_write_puts_the_proofs_in_keeps_the_originals_and_the_project_builds(filled, tmp_path):
    project, out, result = filled
    rows = {row["name"]: row for row in map(json.loads, out.read_text().splitlines())}
    after = sources(project)
    assert rows["pos"]["proof"] in after["B.v"] and "Lemma pos : m >= 1.\nProof using All." in after["B.v"]
    still_admitted = "Lemma double : forall n, n + n = 2 * n.\nAdmitted." in after["A.v"]
    assert still_admitted == (rows["double"]["status"] != "proved")
    assert "Lemma bogus : forall n : nat, n = n + 1.\nProof.\nAdmitted." in after["A.v"]
    # the patch undoes it exactly (the --write rule already built the patched project)
    patch = project / "sgs-fill.patch"
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    undone = subprocess.run(["git", "apply", "-R", patch.name], cwd=copy, capture_output=True, text=True)
    assert undone.returncode == 0, undone.stderr
    assert sources(copy) == {"A.v": A, "B.v": B}


def test_write_is_refused_when_the_project_no_longer_builds(tmp_path, require_rocq):
    """The project shadows ``lia`` (so only ``sauto`` proves ``double``) and has a tactic of its
    own named like one of CoqHammer's: the checker (CoqHammer loaded after the header) accepts
    the ``sauto`` proof, but the line --write adds to load CoqHammer breaks a later proof."""
    shadowed = """\
Require Import Arith Lia.
Ltac lia := fail.
Ltac hauto := idtac.

Lemma double : forall n, n + n = 2 * n.
Admitted.

Lemma later : True.
Proof. hauto. exact I. Qed.
"""
    project = make_project(tmp_path / "project", {"A.v": shadowed})
    out = tmp_path / "report.jsonl"
    result = fill(project, tmp_path, "--out", str(out), "--time-per-lemma", "15", "--workers", "1", "--write")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "nothing written: the project does not build with the proofs written in" in result.stderr
    assert sources(project) == {"A.v": shadowed}
    assert not list(project.glob("*.patch"))
    [row] = map(json.loads, out.read_text().splitlines())
    assert row["status"] == "proved" and row["needs_hammer"] is True
    assert "nothing written" in out.with_suffix(".md").read_text()


@pytest.mark.parametrize("case, flags, complaint", [
    ("not a project", (), "is not a Rocq project: it has no _CoqProject, Make or dune-project file"),
    ("does not build", (), "does not build (1 of 1 files failed): A.v: line 4: Error"),
    ("dune project that does not build", (), "does not build (1 of 1 files failed): A.v: line 4: Error"),
    ("no admitted lemma", (), "has no admitted lemma"),
    ("unknown name", ("--names", "double,nope"), "--names: no admitted lemma named nope"),
    ("read-only folder", ("--write",), "is read-only"),
    ("read-only report folder", (), "cannot be written (read-only)"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, require_rocq, case, flags, complaint):
    broken = {"A.v": "Lemma a : True.\nAdmitted.\nLemma x : True.\nProof. exact I Qed.\n"}
    files = {"not a project": {}, "does not build": broken, "dune project that does not build": broken,
             "no admitted lemma": {"A.v": "Lemma x : True.\nProof. exact I. Qed.\n"}}.get(case, {"A.v": A})
    project = make_project(tmp_path / "project", files)
    if case in ("not a project", "dune project that does not build"):
        (project / "_CoqProject").unlink()
    if case == "dune project that does not build":
        (project / "dune-project").write_text("(lang dune 3.0)\n(using coq 0.6)\n")
        (project / "dune").write_text("(coq.theory (name Fill))\n")
    if case == "read-only folder":
        os.chmod(project, 0o555)
    before = sorted(p.name for p in project.iterdir())
    reports = tmp_path / "reports"
    reports.mkdir()
    out = reports / "out" / "report.jsonl"
    if case == "read-only report folder":
        os.chmod(reports, 0o555)
    try:
        result = fill(project, tmp_path, "--out", str(out), *flags, timeout=120)
    finally:
        os.chmod(project, 0o755)
        os.chmod(reports, 0o755)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()[-1:]
    assert line.startswith("sgs.fill: error: ") and complaint in line, result.stderr[-2000:]
    assert not out.parent.exists()
    assert sorted(p.name for p in project.iterdir()) == before


def test_a_file_changed_during_the_run_exits_2_and_writes_nothing(tmp_path, require_rocq):
    project = make_project(tmp_path / "project", {"A.v": A})
    out = tmp_path / "out" / "report.jsonl"
    process = subprocess.Popen(command(project, tmp_path, "--out", str(out), "--time-per-lemma", "4",
                                       "--workers", "1", "--names", "bogus", "--write"),
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    deadline = time.monotonic() + 300
    for line in process.stderr:
        lines.append(line)
        if line.startswith("automation:"):
            # the user saves the file while the provers run
            (project / "A.v").write_text(A + "\n(* edited *)\n")
            break
        assert time.monotonic() < deadline, "".join(lines)
    rest = process.stderr.read()
    process.wait(timeout=300)
    assert process.returncode == 2, "".join(lines) + rest
    assert "sgs.fill: error: A.v changed during the run: nothing written" in rest
    assert not out.exists() and not out.with_suffix(".md").exists()
    assert (project / "A.v").read_text() == A + "\n(* edited *)\n"
    assert not list(project.glob("*.patch"))
