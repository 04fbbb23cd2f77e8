"""``python -m sgs.corpus extract`` through real ``coqtop`` on one small
standard-library file (``Bool/Bool.v``: 123 proofs, about 2 s here): its
steps carry goals, tactics, lemma names and sources; a second run skips the
finished file; bad input exits 2.  The whole corpus is docs/corpus.md's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sgs.corpus.records import read_meta, read_theorems, shard_path
from tests.paths import REPO

pytestmark = [pytest.mark.rocq]

FILE = "Bool/Bool.v"


def corpus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sgs.corpus", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def extracted(tmp_path_factory, coqtop) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("corpus")
    done = corpus("extract", "--out", str(out), "--libraries", "stdlib", "--files", FILE, "--jobs", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done


def test_every_step_has_its_goals_tactic_and_source(extracted):
    out, _ = extracted
    shard = shard_path(out, "stdlib", FILE)
    meta = read_meta(shard)
    assert meta is not None and meta.status == "ok", meta
    assert (meta.library, meta.file, meta.module) == ("stdlib", FILE, "Coq.Bool.Bool")
    assert meta.split in ("train", "valid", "test") and meta.coq_version.startswith("8.")
    theorems = list(read_theorems(shard))
    assert len(theorems) == meta.theorems >= 100
    steps = [step for theorem in theorems for step in theorem.steps]
    assert len(steps) == meta.steps >= len(theorems)
    for theorem in theorems:
        assert theorem.library == "stdlib" and theorem.file == FILE and theorem.name and theorem.line > 0
        assert theorem.statement.split()[0] in ("Lemma", "Theorem", "Definition", "Remark", "Fact", "Corollary",
                                                "Proposition", "Example")
        assert theorem.proof.rstrip().endswith((f"{theorem.ending}.", "Defined.", "Qed."))
    for step in steps:
        assert step.tactic.strip() and step.kind in ("tactic", "bullet", "brace")
        assert step.goals and step.num_goals >= 1, step
        assert "============================" in step.goals or " is:" in step.goals


def test_the_first_proof_is_recorded_as_rocq_ran_it(extracted):
    out, _ = extracted
    first = next(read_theorems(shard_path(out, "stdlib", FILE)))
    assert first.name == "bool_dec" and first.ending == "Defined"
    assert first.statement.startswith("Lemma bool_dec : forall b1 b2 : bool")
    (step,) = first.steps
    assert step.tactic == "decide equality."
    assert step.goals.endswith("forall b1 b2 : bool, {b1 = b2} + {b1 <> b2}")


def test_lemma_names_are_resolved_to_global_constants(extracted):
    out, _ = extracted
    mentions = [m for t in read_theorems(shard_path(out, "stdlib", FILE)) for s in t.steps for m in s.mentions]
    constants = {m.path for m in mentions if m.kind == "Constant"}
    assert constants and all(path.startswith("Coq.") for path in constants)
    # the file's own earlier lemmas are in scope, under the file's module name
    assert any(path.startswith("Coq.Bool.Bool.") for path in constants)


def test_the_standard_library_cases_carry_coqcs_ground_truth(extracted):
    out, _ = extracted
    theorems = list(read_theorems(shard_path(out, "stdlib", FILE)))
    truths = [t.truth for t in theorems if t.truth is not None]
    assert truths.count("closed") >= 100
    closed = next(t for t in theorems if t.truth == "closed")
    assert closed.case is not None and {"header", "statement", "proof"} <= set(closed.case)


def test_a_rerun_skips_the_finished_file(extracted):
    out, _ = extracted
    shard = shard_path(out, "stdlib", FILE)
    before = shard.stat().st_mtime_ns
    again = corpus("extract", "--out", str(out), "--libraries", "stdlib", "--files", FILE)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "1 already done, 0 to replay" in again.stdout
    assert shard.stat().st_mtime_ns == before
    summary = corpus("stats", str(out))
    assert summary.returncode == 0 and "stdlib" in summary.stdout


def test_bad_input_exits_2(tmp_path, coqtop):
    unknown = corpus("extract", "--out", str(tmp_path / "c"), "--libraries", "stdlib,no_such_library")
    assert unknown.returncode == 2 and "no_such_library" in unknown.stderr
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    unwritable = corpus("extract", "--out", str(blocker / "c"), "--libraries", "stdlib", "--files", FILE)
    assert unwritable.returncode == 2 and "cannot write" in unwritable.stderr
    nothing = corpus("extract", "--out", str(tmp_path / "c"), "--libraries", "stdlib", "--files", "No/Such.v")
    assert nothing.returncode == 2 and "matches" in nothing.stderr
