"""A run over files, with the replay replaced by a stand-in (no coqtop): one
shard per file, finished files skipped, a crash on one file recorded as its
failure and never the end of the run."""

from __future__ import annotations

import pytest

from sgs.corpus import extract, replay
from sgs.corpus.records import FileRecord, TheoremRecord, read_meta, read_theorems, shard_path
from sgs.corpus.sources import LIBRARIES, Library


@pytest.fixture
def library(tmp_path) -> Library:
    root = tmp_path / "Flocq"
    for name in ("Core/A.v", "Core/B.v", "Prop/C.v"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("Lemma x : True. Proof. exact I. Qed.\n")
    return Library(LIBRARIES["flocq"], root)


@pytest.fixture
def replayed(monkeypatch) -> list[str]:
    """The files the stand-in replay was asked for; ``Core/B.v`` crashes it."""
    calls: list[str] = []

    def fake_replay(library, file, *, coqtop, split, step_timeout, file_timeout, coq_version):
        calls.append(file)
        if file == "Core/B.v":
            raise RuntimeError("a bug on this file")
        meta = FileRecord(library=library.name, file=file, module=library.module_of(file), split=split,
                          status="ok", theorems=1, steps=0, coq_version=coq_version)
        theorem = TheoremRecord(library=library.name, file=file, name="x", line=1, statement="Lemma x : True.",
                                proof="Proof. exact I. Qed.", ending="Qed", split=split)
        return meta, [theorem]

    monkeypatch.setattr(replay, "replay_file", fake_replay)
    monkeypatch.setattr(replay, "coq_version", lambda exe: "8.16.1")
    return calls


def test_every_file_gets_a_shard_and_a_crash_is_a_recorded_failure(tmp_path, library, replayed):
    out = tmp_path / "corpus"
    summary = extract.run(out, [library], coqtop="sh", log=lambda _: None)
    assert replayed == ["Core/A.v", "Core/B.v", "Prop/C.v"]
    assert (summary.replayed, summary.failed, summary.skipped, summary.theorems) == (3, 1, 0, 2)
    crashed = read_meta(shard_path(out, "flocq", "Core/B.v"))
    assert crashed.status == "failed" and "a bug on this file" in crashed.error
    assert [t.name for t in read_theorems(shard_path(out, "flocq", "Prop/C.v"))] == ["x"]


def test_a_rerun_skips_finished_and_failed_files_and_retries_failed_ones_when_asked(tmp_path, library, replayed):
    out = tmp_path / "corpus"
    extract.run(out, [library], coqtop="sh", log=lambda _: None)
    replayed.clear()
    again = extract.run(out, [library], coqtop="sh", log=lambda _: None)
    assert replayed == [] and again.skipped == 3
    extract.run(out, [library], coqtop="sh", retry_failed=True, log=lambda _: None)
    assert replayed == ["Core/B.v"]


def test_only_the_files_asked_for(tmp_path, library, replayed):
    extract.run(tmp_path / "corpus", [library], patterns=["Prop/*"], coqtop="sh", log=lambda _: None)
    assert replayed == ["Prop/C.v"]


def test_no_coqtop_is_bad_input(tmp_path, library):
    with pytest.raises(extract.ExtractError, match="not found"):
        extract.run(tmp_path / "corpus", [library], coqtop="no-such-coqtop-here", log=lambda _: None)
