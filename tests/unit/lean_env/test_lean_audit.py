"""The Lean audit (``lean -o`` + the trusted axiom checker), against the
``lake`` stand-in (``lake_standin.py``, a test double: Lean cannot be
installed here)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from lean_env.lean.audit import AUDIT_FILE, AUDIT_OLEAN, judge
from lean_env.lean.axiom_check import CHECKER_SOURCE
from lean_env.sandbox import CommandResult
from lean_env.verdict import ProofTask, Status
from tests.lean.lean_support import needs_fixtures, replay_backend, requests, split_at_by
from tests.paths import LEAN

STANDIN = LEAN / "lake_standin.py"
ALLOWED = frozenset({"propext", "Classical.choice", "Quot.sound"})
MATHLIB = "mathlib/H20231020"
NONCE = "n0nce"


def result(stdout: str = "", returncode: int | None = 0) -> CommandResult:
    return CommandResult(argv=("lake",), returncode=returncode, stdout=stdout, stderr="", seconds=0.1)


def checker(axioms: list[str], theorem: str = "t", nonce: str = NONCE) -> CommandResult:
    return result(f"SGS-AXIOMS {nonce} " + json.dumps({"theorem": theorem, "axioms": axioms, "replayed": 1}) + "\n")


@pytest.mark.parametrize("results, status, reason", [
    ([result(), checker(["propext", "Quot.sound"])], Status.VALID, "ok"),
    ([result(), checker([])], Status.VALID, "ok"),
    ([result(), checker(["propext", "sorryAx"])], Status.INVALID, "audit_axioms:sorryAx"),
    ([result(), checker(["Lean.ofReduceBool", "propext"])], Status.INVALID, "audit_axioms:Lean.ofReduceBool"),
    ([result("Audited.lean:5:2: error: unsolved goals\n", 1)], Status.INVALID, "audit_compile_failed"),
    # the compile's own output never answers for the axioms, whatever it prints
    ([result("Audited.lean:5:2: error: unsolved goals\n't' does not depend on any axioms\n", 0),
      checker([])], Status.INVALID, "audit_compile_failed"),
    ([result("'t' does not depend on any axioms\n"), checker(["sorryAx"])], Status.INVALID, "audit_axioms:sorryAx"),
    ([result(), result("")], Status.INVALID, "audit_axioms_unknown"),
    ([result(), checker([], nonce="other")], Status.INVALID, "audit_axioms_unknown"),
    ([result(), checker([], theorem="u")], Status.INVALID, "audit_axioms_unknown"),
    ([result()], Status.INVALID, "audit_axioms_unknown"),
    ([result("", None)], Status.TIMEOUT, "audit_timeout"),
    ([result(), result("", None)], Status.TIMEOUT, "audit_timeout"),
])
def test_judge_reads_the_compile_then_the_checker(results, status, reason):
    outcome = judge(results, NONCE, "t", ALLOWED)
    assert (outcome.status, outcome.reason) == (status, reason)


def test_sorry_is_never_an_allowed_axiom():
    assert judge([result(), checker(["sorryAx"])], NONCE, "t", ALLOWED | {"sorryAx"}).reason == "audit_axioms:sorryAx"


def mathlib_task(body: str | None = None) -> ProofTask:
    header = requests(MATHLIB)[0]["cmd"]
    statement, recorded = split_at_by(requests(MATHLIB)[1]["cmd"])
    return ProofTask("p", header=header, statement=statement, proof=recorded if body is None else body)


def audit(tmp_path: Path, mode: str, *, task: ProofTask | None = None, project: bool = True,
          lake: str | None = None, timeout: float = 30.0):
    project_dir = tmp_path / "project"
    project_dir.mkdir(exist_ok=True)
    config = {"lake_command": lake or shlex.join([sys.executable, str(STANDIN)]),
              "extra_env": {"LAKE_STANDIN_MODE": mode, "LAKE_STANDIN_LOG": str(tmp_path / "calls.jsonl")},
              "project_dir": str(project_dir) if project else "",
              "writable_paths": (str(tmp_path),)}  # the stand-in's log
    with replay_backend(MATHLIB, config=config) as backend:
        return backend.audit(task or mathlib_task(), timeout)


def calls(tmp_path: Path) -> list[dict]:
    log = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@needs_fixtures
def test_a_sound_proof_agrees_and_the_compiled_file_is_the_checked_one(tmp_path):
    verdict = audit(tmp_path, "axioms:propext,Classical.choice,Quot.sound")
    assert (verdict.status, verdict.reason) == (Status.VALID, "ok")
    compiled, checked = calls(tmp_path)
    task = mathlib_task()
    project = str(tmp_path / "project")
    assert compiled["argv"] == ["-d", project, "env", "lean", "-o", AUDIT_OLEAN, AUDIT_FILE]
    # the checker runs from its installed place, on the module the compile wrote, in the same scratch directory
    nonce = checked["argv"][6]
    assert checked["argv"] == ["-d", project, "env", "lean", "--run", str(CHECKER_SOURCE), nonce, "olean",
                               AUDIT_OLEAN, "mathd_numbertheory_188"]
    assert len(nonce) == 32 and checked["cwd"] == compiled["cwd"]
    # A fresh scratch directory, not the project, and gone afterwards.
    assert compiled["cwd"] != project and not Path(compiled["cwd"]).exists()
    assert compiled["source"].startswith(task.header.rstrip() + "\n\n" + task.statement + "\n")
    assert compiled["source"].endswith(task.proof.strip() + "\n")
    assert "#print axioms" not in compiled["source"]


@needs_fixtures
@pytest.mark.parametrize("mode, status, reason", [
    ("axioms:propext,sorryAx", Status.INVALID, "audit_axioms:sorryAx"),
    ("axioms:propext,mathd_numbertheory_188._native.native_decide.ax_1_1", Status.INVALID,
     "audit_axioms:mathd_numbertheory_188._native.native_decide.ax_1_1"),
    # a proof that made `#print axioms` lie while it compiled: the checker reads the module instead
    ("forged:propext,sorryAx", Status.INVALID, "audit_axioms:sorryAx"),
    ("error", Status.INVALID, "audit_compile_failed"),
    ("error0", Status.INVALID, "audit_compile_failed"),
    ("checker_silent", Status.INVALID, "audit_axioms_unknown"),
    ("checker_twice", Status.INVALID, "audit_axioms_unknown"),
    ("checker_wrong_nonce", Status.INVALID, "audit_axioms_unknown"),
    ("checker_replay_error", Status.INVALID, "audit_axioms_unknown"),
])
def test_what_the_compiler_and_the_checker_say_decides(tmp_path, mode, status, reason):
    verdict = audit(tmp_path, mode)
    assert (verdict.status, verdict.reason) == (status, reason)


@needs_fixtures
def test_a_hung_compile_is_a_timeout(tmp_path):
    verdict = audit(tmp_path, "hang", timeout=2.0)
    assert (verdict.status, verdict.reason) == (Status.TIMEOUT, "audit_timeout")


@needs_fixtures
def test_without_lake_or_a_project_the_audit_is_unavailable(tmp_path):
    assert audit(tmp_path, "axioms:", project=False).reason == "audit_unavailable"
    missing = audit(tmp_path, "axioms:", lake="/no/such/lake")
    assert (missing.status, missing.reason) == (Status.SYSTEM_ERROR, "audit_unavailable")
    assert calls(tmp_path) == []


@needs_fixtures
def test_text_the_prefilter_refuses_is_not_compiled(tmp_path):
    verdict = audit(tmp_path, "axioms:", task=mathlib_task("native_decide"))
    assert (verdict.status, verdict.reason) == (Status.INVALID, "audit_text_rejected")
    assert "banned:native_decide" in verdict.messages[0] and calls(tmp_path) == []
