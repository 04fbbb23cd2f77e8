"""The patch logic of sgs.fill --write: edits, the patch file, replacing files (no build here)."""

from __future__ import annotations

import os

import pytest

from sgs.fill.write import Edit, WriteError, check_writable, edit_at_line, patched_text, replace_files, unified_patch
from sgs.state.rocq_project import LoadPathItem, Project

TEXT = "Require Import Arith.\nLemma a : 1 = 1.\nAdmitted.\nLemma b : 2 = 2.\nProof. Admitted.\n"


def spans(*pieces: str) -> list[tuple[int, int]]:
    found = []
    for piece in pieces:
        start = TEXT.index(piece)
        found.append((start, start + len(piece)))
    return found


def test_edits_replace_their_spans_in_any_order():
    first, second = spans("Admitted.\nLemma b", "Proof. Admitted.")
    first = (first[0], first[0] + len("Admitted."))
    edits = [Edit(second, "Proof.\n  reflexivity.\nQed."), Edit(first, "Proof.\n  auto.\nQed.")]
    assert patched_text(TEXT, edits) == ("Require Import Arith.\nLemma a : 1 = 1.\nProof.\n  auto.\nQed.\n"
                                         "Lemma b : 2 = 2.\nProof.\n  reflexivity.\nQed.\n")


def test_a_proof_that_needs_coqhammer_loads_it_at_the_top():
    [span] = spans("Proof. Admitted.")
    text = patched_text(TEXT, [Edit(span, "Proof.\n  sauto.\nQed.", needs_hammer=True)])
    assert text.startswith("From Hammer Require Import Tactics.")
    assert text.splitlines()[1] == "Require Import Arith."


def test_a_build_error_line_is_traced_back_to_the_proof_written_there():
    first = (TEXT.index("Admitted.\nLemma b"), TEXT.index("Admitted.\nLemma b") + len("Admitted."))
    [second] = spans("Proof. Admitted.")
    a, b = Edit(first, "Proof.\n  auto.\nQed.", lemma="P.a"), Edit(second, "Proof.\n  reflexivity.\nQed.", lemma="P.b")
    patched = patched_text(TEXT, [a, b]).splitlines()
    assert patched[3 - 1] == "Proof." and patched[8 - 1] == "  reflexivity."
    assert [edit_at_line(TEXT, [b, a], line) for line in (2, 3, 5, 6, 7, 8, 9)] == [None, a, a, None, b, b, b]
    hammered = Edit(second, b.text, needs_hammer=True, lemma="P.b")
    assert patched_text(TEXT, [a, hammered]).splitlines()[9 - 1] == "  reflexivity."
    assert edit_at_line(TEXT, [a, hammered], 9) == hammered and edit_at_line(TEXT, [a, hammered], 7) is None


def test_overlapping_or_outside_edits_are_refused():
    [span] = spans("Proof. Admitted.")
    with pytest.raises(ValueError):
        patched_text(TEXT, [Edit(span, "x"), Edit((span[0] + 1, span[1]), "y")])
    with pytest.raises(ValueError):
        patched_text(TEXT, [Edit((0, len(TEXT) + 1), "x")])


def test_the_patch_names_only_changed_files_and_marks_a_missing_final_newline():
    patch = unified_patch({"A.v": TEXT, "B.v": "same\n", "C.v": "no newline"},
                          {"A.v": TEXT.replace("Proof. Admitted.", "Proof. reflexivity. Qed."),
                           "B.v": "same\n", "C.v": "no newline either"})
    assert "diff --git a/A.v b/A.v\n--- a/A.v\n+++ b/A.v\n" in patch
    assert "-Proof. Admitted.\n+Proof. reflexivity. Qed.\n" in patch
    assert "B.v" not in patch
    assert patch.count("\\ No newline at end of file\n") == 2


def project_in(root) -> Project:
    (root / "A.v").write_text(TEXT)
    (root / "B.v").write_text("Lemma c : True. Admitted.\n")
    return Project(root.resolve(), "_CoqProject", (LoadPathItem("-R", ".", "P"),), ("A.v", "B.v"), ())


def test_replacing_keeps_the_originals_in_a_patch_and_never_overwrites_one(tmp_path):
    project = project_in(tmp_path)
    originals = {"A.v": TEXT, "B.v": "Lemma c : True. Admitted.\n"}
    patched = {"A.v": TEXT.replace("Proof. Admitted.", "Proof. reflexivity. Qed."), "B.v": originals["B.v"]}
    os.chmod(tmp_path / "A.v", 0o640)
    first = replace_files(project, originals, patched)
    assert first.name == "sgs-fill.patch" and "-Proof. Admitted." in first.read_text()
    assert (tmp_path / "A.v").read_text() == patched["A.v"]
    assert (tmp_path / "A.v").stat().st_mode & 0o777 == 0o640
    second = replace_files(project, patched, {"A.v": TEXT, "B.v": originals["B.v"]})
    assert second.name == "sgs-fill-2.patch" and first.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A.v", "B.v", "sgs-fill-2.patch", "sgs-fill.patch"]


def test_a_read_only_folder_or_file_is_refused(tmp_path, monkeypatch):
    project = project_in(tmp_path)
    check_writable(project)
    os.chmod(tmp_path / "B.v", 0o444)
    with pytest.raises(WriteError, match="B.v is read-only"):
        check_writable(project)
    os.chmod(tmp_path / "B.v", 0o644)
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(project.root))
    with pytest.raises(WriteError, match="folder .* is read-only"):
        check_writable(project)
