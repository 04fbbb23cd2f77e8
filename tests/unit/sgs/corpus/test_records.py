"""The record format: shards written whole, read back unchanged, recognised as finished."""

from __future__ import annotations

import gzip
import json

from sgs.corpus.records import (
    FORMAT_VERSION,
    FileRecord,
    Mention,
    Step,
    TheoremRecord,
    read_meta,
    read_theorems,
    shard_path,
    shards,
    write_shard,
)


def _theorem(ending: str = "Qed", truth: str | None = "closed", library: str = "stdlib") -> TheoremRecord:
    step = Step(tactic="rewrite Nat.add_comm.", kind="tactic", goals="1 goal (ID 2)\n  \n  n : nat\n  "
                "============================\n  n + 0 = 0 + n", num_goals=1, line=12,
                mentions=[Mention("Nat.add_comm", "Constant", "Coq.Arith.PeanoNat.Nat.add_comm"),
                          Mention("nat", "Inductive", "Coq.Init.Datatypes.nat")], seconds=0.01)
    return TheoremRecord(library=library, file="Arith/Foo.v", name="foo", line=10,
                         statement="Lemma foo (n : nat) : n + 0 = 0 + n.",
                         proof="Proof.\n  rewrite Nat.add_comm.\n  reflexivity.\nQed.", ending=ending,
                         split="train", steps=[step], truth=truth,
                         case={"header": "Require Import Coq.Arith.Foo.", "statement": "Lemma sgs_case_0 ...",
                               "proof": "Proof. ... Qed."})


def _meta(**changes) -> FileRecord:
    return FileRecord(**{"library": "stdlib", "file": "Arith/Foo.v", "module": "Coq.Arith.Foo", "split": "train",
                         "status": "ok", "theorems": 1, "steps": 1, **changes})


def test_a_shard_reads_back_as_written(tmp_path):
    path = shard_path(tmp_path, "stdlib", "Arith/Foo.v")
    assert path == tmp_path / "stdlib" / "Arith" / "Foo.v.jsonl.gz"
    size = write_shard(path, _meta(), [_theorem()])
    assert size == path.stat().st_size > 0
    assert read_meta(path) == _meta()
    assert list(read_theorems(path)) == [_theorem()]
    assert shards(tmp_path) == [path]
    # written under a temporary name and renamed: nothing else is left beside it
    assert [p.name for p in path.parent.iterdir()] == ["Foo.v.jsonl.gz"]


def test_the_first_line_is_the_file_record(tmp_path):
    path = shard_path(tmp_path, "stdlib", "Arith/Foo.v")
    write_shard(path, _meta(), [_theorem(), _theorem()])
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    assert list(json.loads(lines[0])) == ["file"]
    assert [list(json.loads(line)) for line in lines[1:]] == [["theorem"], ["theorem"]]


def test_the_same_records_give_the_same_bytes(tmp_path):
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    write_shard(a, _meta(), [_theorem()])
    write_shard(b, _meta(), [_theorem()])
    assert a.read_bytes() == b.read_bytes()


def test_a_damaged_or_outdated_shard_is_not_finished(tmp_path):
    damaged = tmp_path / "x.jsonl.gz"
    damaged.write_bytes(b"not gzip at all")
    assert read_meta(damaged) is None
    old = tmp_path / "old.jsonl.gz"
    write_shard(old, _meta(format_version=FORMAT_VERSION - 1), [])
    assert read_meta(old) is None
    empty = tmp_path / "empty.jsonl.gz"
    empty.write_bytes(gzip.compress(b""))
    assert read_meta(empty) is None


def test_lemmas_are_the_constants_a_step_mentions():
    assert _theorem().steps[0].lemmas == ["Coq.Arith.PeanoNat.Nat.add_comm"]


def test_closed_means_finished_and_for_the_stdlib_closed_under_coqc():
    assert _theorem().closed
    assert not _theorem(ending="Admitted").closed
    assert not _theorem(truth="axioms").closed
    assert _theorem(truth=None).closed              # no case for it (a theorem in a section)
    assert _theorem(library="flocq", truth=None, ending="Defined").closed
