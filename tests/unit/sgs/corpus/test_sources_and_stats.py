"""Library names, modules and command lines; the summary table; a run's settings."""

from __future__ import annotations

import json

import pytest

from sgs.corpus.extract import ExtractError, prepare_out
from sgs.corpus.rocq_text import error_line
from sgs.corpus.sources import LIBRARIES, Library, SourceError, find, parse_names
from sgs.corpus.stats import Row, render


def test_library_names_are_checked_and_put_in_replay_order():
    assert parse_names("") == list(LIBRARIES)
    assert parse_names("flocq, stdlib") == ["stdlib", "flocq"]
    with pytest.raises(SourceError, match="unknown library nope"):
        parse_names("stdlib,nope")
    with pytest.raises(SourceError):
        parse_names(",")


def test_a_library_not_installed_is_named_with_its_package(tmp_path):
    with pytest.raises(SourceError, match="apt-get install libcoq-flocq"):
        find("flocq", tmp_path)
    with pytest.raises(SourceError, match="unknown library"):
        find("mathcomp-everything", tmp_path)


def test_files_modules_and_the_command_line(tmp_path):
    for name in ("Core/Raux.v", "Core/Zaux.v", "Prop/Div.v"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("Lemma x : True. Proof. exact I. Qed.\n")
    flocq = Library(LIBRARIES["flocq"], tmp_path)
    assert flocq.files() == ["Core/Raux.v", "Core/Zaux.v", "Prop/Div.v"]
    assert flocq.files(["Core/*"]) == ["Core/Raux.v", "Core/Zaux.v"]
    assert flocq.module_of("Core/Raux.v") == "Flocq.Core.Raux"
    argv = flocq.coqtop_argv("coqtop", "Core/Raux.v")
    # the library's own files by their short names, as it was built; the file as its own module
    assert argv[-5:] == ["-R", str(tmp_path), "Flocq", "-top", "Flocq.Core.Raux"]
    stdlib = Library(LIBRARIES["stdlib"], tmp_path)
    assert "-noinit" in stdlib.coqtop_argv("coqtop", "Init/Logic.v")
    assert "-noinit" not in stdlib.coqtop_argv("coqtop", "Bool/Bool.v")
    assert "-R" not in stdlib.coqtop_argv("coqtop", "Bool/Bool.v")


def test_every_library_names_its_licence_and_reason():
    for spec in LIBRARIES.values():
        assert spec.licence and spec.why and spec.package.startswith("libcoq-")


def test_the_error_line_is_rocqs_error_not_the_location():
    error = ("Toplevel input, characters 0-20:\n> Require Import Zaux.\n> ^^^^\n"
             "Error: Cannot find a physical path bound to logical path Zaux.\n")
    assert error_line(error) == "Error: Cannot find a physical path bound to logical path Zaux."
    in_environment = ("Error:\nIn environment\nbval : state -> bexpr -> bool\na1, a2 : aexpr\n"
                      "The term \"aval s a1\" has type \"nat\" while it is expected to have type\n \"string\".")
    assert error_line(in_environment) == 'Error: The term "aval s a1" has type "nat" while it is expected to have type'
    assert error_line("Anomaly \"Uncaught exception Not_found.\"") == 'Anomaly "Uncaught exception Not_found."'
    assert error_line("coqtop: died") == "coqtop: died"
    assert error_line("") == ""


def test_a_corpus_directory_keeps_its_settings(tmp_path):
    out = tmp_path / "corpus"
    prepare_out(out, seed=0)
    prepare_out(out, seed=0)               # resuming with the same settings is fine
    assert json.loads((out / "corpus.json").read_text())["seed"] == 0
    with pytest.raises(ExtractError, match="resume"):
        prepare_out(out, seed=1)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ExtractError, match="cannot write"):
        prepare_out(blocker / "corpus", seed=0)


def test_the_summary_has_a_line_per_library_and_split_and_totals():
    rows = {("stdlib", "train"): Row(files=9, theorems=90, finished=88, stdlib_closed=70, steps=400, bytes=2048,
                                     seconds=40.0),
            ("stdlib", "test"): Row(files=1, failed=1, theorems=5, finished=5, steps=20, bytes=100, seconds=10.0)}
    text = render(rows, totals={"stdlib": 562})
    lines = text.splitlines()
    assert any(line.startswith("stdlib           train") and " 400 " in line for line in lines)
    (whole,) = [line for line in lines if line.startswith("stdlib           all")]
    assert "10/562" in whole and " 420 " in whole and "8.4" in whole      # 420 steps in 50 s
    assert any(line.startswith("total") for line in lines)
