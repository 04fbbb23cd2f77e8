"""Which kind of project a folder is: _CoqProject/Make (the tracer's reader) or dune."""

from __future__ import annotations

import pytest

from sgs.fill.project import find_project, sexp, source_hashes
from sgs.state.rocq_project import ProjectError


def test_sexp_reads_nested_lists_strings_and_comments():
    assert sexp('(coq.theory (name Foo) ; a comment\n (synopsis "a (b)"))') == \
        [["coq.theory", ["name", "Foo"], ["synopsis", "a (b)"]]]
    with pytest.raises(ValueError):
        sexp("(coq.theory (name Foo)")


def test_a_dune_project_gives_its_theories_load_path_and_files(tmp_path):
    (tmp_path / "dune-project").write_text("(lang dune 3.0)\n(using coq 0.6)\n")
    (tmp_path / "theories" / "Sub").mkdir(parents=True)
    (tmp_path / "theories" / "dune").write_text("(include_subdirs qualified)\n(coq.theory (name Foo) (theories Bar))\n")
    (tmp_path / "theories" / "A.v").write_text("Lemma a : True. Admitted.\n")
    (tmp_path / "theories" / "Sub" / "B.v").write_text("Lemma b : True. Admitted.\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "dune").write_text("(library (name ocaml_part))\n")
    project = find_project(tmp_path)
    assert project.project_file == "dune"
    assert [(item.flag, item.directory, item.name) for item in project.load_path] == [("-Q", "theories", "Foo")]
    assert project.sources == ("theories/A.v", "theories/Sub/B.v")
    assert project.logical_module("theories/Sub/B.v") == "Foo.Sub.B"
    assert set(source_hashes(project)) == set(project.sources)


def test_a_coqproject_wins_over_dune_and_a_folder_with_neither_is_no_project(tmp_path):
    with pytest.raises(ProjectError, match="no _CoqProject, Make or dune-project"):
        find_project(tmp_path)
    (tmp_path / "dune-project").write_text("(lang dune 3.0)\n")
    with pytest.raises(ProjectError, match=r"no dune file with a \(coq.theory"):
        find_project(tmp_path)
    (tmp_path / "A.v").write_text("Lemma a : True. Admitted.\n")
    (tmp_path / "_CoqProject").write_text("-R . P\nA.v\n")
    assert find_project(tmp_path).project_file == "_CoqProject"
