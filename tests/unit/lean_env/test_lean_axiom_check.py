"""The Lean axiom check through a separate process (``lean_env/lean/axiom_check.py``),
and the rule that a proof which kills the REPL twice is invalid.

The REPL is the stand-in ``lean_standin.py`` and ``lake`` is ``lake_standin.py``
(test doubles: no Lean toolchain can be installed here).  The stand-in REPL can
forge its ``#print axioms`` answers (``--forge-axioms``), as the REPL would after
a proof that redefined the command; its pickle keeps the truth, and the checker
reads only the pickle."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from lean_env.lean import LeanBackend, LeanConfig
from lean_env.lean.axiom_check import CHECKER_SOURCE, checker_command, judge_report
from lean_env.sandbox import CommandResult
from lean_env.verdict import ProofTask, Status
from tests.paths import LEAN

REPL_STANDIN = LEAN / "lean_standin.py"
LAKE_STANDIN = LEAN / "lake_standin.py"
HEADER = "import Mathlib\nopen Real\n"
ALLOWED = frozenset({"propext", "Classical.choice", "Quot.sound"})


def result(stdout: str, returncode: int | None = 0) -> CommandResult:
    return CommandResult(argv=("lake",), returncode=returncode, stdout=stdout, stderr="", seconds=0.1)


def line(nonce: str, answer: object) -> str:
    return f"SGS-AXIOMS {nonce} {json.dumps(answer)}\n"


# -- reading the checker's answer -------------------------------------------------------

@pytest.mark.parametrize("stdout, status, reason", [
    (line("n", {"theorem": "t", "axioms": ["propext"], "replayed": 3}), Status.VALID, "ok"),
    (line("n", {"theorem": "t", "axioms": []}), Status.VALID, "ok"),
    (line("n", {"theorem": "t", "axioms": ["propext", "sorryAx"]}), Status.INVALID, "sorry"),
    (line("n", {"theorem": "t", "axioms": ["Lean.ofReduceBool"]}), Status.INVALID, "axioms"),
    (line("n", {"error": "(kernel) declaration has metavariables 't'"}), Status.INVALID, "axioms_replay_failed"),
    # look-alike lines a proof could have printed elsewhere are not this check's answer
    ("'t' does not depend on any axioms\n", Status.INVALID, "axioms_unknown"),
    (line("other", {"theorem": "t", "axioms": []}), Status.INVALID, "axioms_unknown"),
    (line("n", {"theorem": "t", "axioms": []}) * 2, Status.INVALID, "axioms_unknown"),
    (line("n", {"theorem": "u", "axioms": []}), Status.INVALID, "axioms_unknown"),
    (line("n", {"theorem": "t", "axioms": "propext"}), Status.INVALID, "axioms_unknown"),
    (line("n", {"theorem": "t", "axioms": [1]}), Status.INVALID, "axioms_unknown"),
    ("SGS-AXIOMS n {not json\n", Status.INVALID, "axioms_unknown"),
    ("SGS-AXIOMS n [1, 2]\n", Status.INVALID, "axioms_unknown"),
    ("", Status.INVALID, "axioms_unknown"),
])
def test_only_one_well_formed_answer_with_this_checks_nonce_counts(stdout, status, reason):
    report = judge_report(result(stdout), "n", "t", ALLOWED)
    assert (report.status, report.reason) == (status, reason)


def test_a_checker_that_does_not_finish_is_a_timeout():
    assert judge_report(result("", None), "n", "t", ALLOWED).status is Status.TIMEOUT


def test_sorry_is_never_allowed_and_the_offending_axioms_are_named():
    report = judge_report(result(line("n", {"theorem": "t", "axioms": ["sorryAx", "propext"]})), "n", "t",
                          ALLOWED | {"sorryAx"})
    assert (report.reason, report.offending) == ("sorry", ("sorryAx",))


def test_the_checker_runs_from_its_installed_place():
    argv = checker_command("lake", "/p", "n", "pickle", "/x/env.olean", "t")
    assert argv == ["lake", "-d", "/p", "env", "lean", "--run", str(CHECKER_SOURCE), "n", "pickle", "/x/env.olean", "t"]
    assert CHECKER_SOURCE.is_file() and "Environment" in CHECKER_SOURCE.read_text()
    with pytest.raises(ValueError):
        checker_command("lake", "/p", "n", "source", "f", "t")


# -- the backend with the separate checker ------------------------------------------------

def backend(tmp_path: Path, *repl_flags: str, lake_mode: str = "", **options) -> LeanBackend:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.15.0\n")
    extra_env = {"LAKE_STANDIN_LOG": str(tmp_path / "lake.jsonl")}
    if lake_mode:
        extra_env["LAKE_STANDIN_MODE"] = lake_mode
    settings = {"spare": False, "timeout": 30.0, "header_timeout": 30.0, "project_dir": str(project),
                "lake_command": shlex.join([sys.executable, str(LAKE_STANDIN)]), "extra_env": extra_env,
                # the stand-in's log lives outside every scratch directory
                "writable_paths": (str(tmp_path),),
                "repl_command": shlex.join([sys.executable, str(REPL_STANDIN), *repl_flags]), **options}
    return LeanBackend(LeanConfig(**settings))


def task(body: str, claim: str = "(a b : ℝ) : (a + b) ^ 2 = a ^ 2 + 2 * a * b + b ^ 2") -> ProofTask:
    return ProofTask("t", HEADER, f"theorem t {claim} := by", body)


def lake_calls(tmp_path: Path) -> list[dict]:
    log = tmp_path / "lake.jsonl"
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def test_a_valid_proof_is_judged_by_the_checker_on_the_repls_pickle(tmp_path):
    with backend(tmp_path) as lean:
        verdict = lean.check_proof(task("ring"), timeout=30)
        exchange = lean._active.exchange_dir
        assert (verdict.status, verdict.reason) == (Status.VALID, "ok"), verdict.messages
        assert any("separate checker" in m for m in verdict.messages)
        [call] = lake_calls(tmp_path)
        assert call["argv"][4:6] == ["--run", str(CHECKER_SOURCE)] and call["argv"][7] == "pickle"
        assert call["argv"][-1] == "_root_.t" and Path(call["argv"][8]).parent == Path(exchange)
        # the pickle is gone once read, and the exchange directory with the process
        assert not Path(call["argv"][8]).exists()
    assert not Path(exchange).exists()


def test_a_forged_print_axioms_fools_the_repl_channel_but_not_the_checker(tmp_path):
    """The REPL says "no axioms" (as after a proof that redefined `#print axioms`); the
    environment it pickles still holds what the proof used (Classical.choice here)."""
    strict = {"allowed_axioms": ("propext",)}
    proof = task("ring")
    with backend(tmp_path, "--forge-axioms", axiom_check="repl", **strict) as lean:
        assert lean.check_proof(proof, timeout=30).status is Status.VALID  # what the separate check prevents
    with backend(tmp_path, "--forge-axioms", **strict) as lean:
        verdict = lean.check_proof(proof, timeout=30)
    assert (verdict.status, verdict.reason) == (Status.INVALID, "axioms")
    assert "Classical.choice" in verdict.messages[0]


@pytest.mark.parametrize("mode, status, reason", [
    ("checker_silent", Status.INVALID, "axioms_unknown"),
    ("checker_wrong_nonce", Status.INVALID, "axioms_unknown"),
    ("checker_twice", Status.INVALID, "axioms_unknown"),
    ("checker_replay_error", Status.INVALID, "axioms_replay_failed"),
])
def test_a_checker_answer_that_is_not_exactly_right_fails_closed(tmp_path, mode, status, reason):
    with backend(tmp_path, lake_mode=mode) as lean:
        verdict = lean.check_proof(task("ring"), timeout=30)
    assert (verdict.status, verdict.reason) == (status, reason)


def test_without_lake_the_check_is_a_system_error_never_a_verdict(tmp_path):
    with backend(tmp_path, lake_command="/no/such/lake") as lean:
        verdict = lean.check_proof(task("ring"), timeout=30)
    assert (verdict.status, verdict.reason) == (Status.SYSTEM_ERROR, "axiom_check_unavailable")


def test_a_rejected_proof_never_reaches_the_checker(tmp_path):
    with backend(tmp_path) as lean:
        assert lean.check_proof(task("linarith"), timeout=30).status is Status.INVALID
        assert lean.check_proof(task("sorry"), timeout=30).reason == "banned:sorry"
    assert lake_calls(tmp_path) == []


# -- a proof that kills the prover ------------------------------------------------------------

def test_a_proof_that_exits_the_repl_in_two_fresh_processes_is_invalid(tmp_path):
    """As a proof calling `IO.Process.exit` would: each try costs a REPL, so the proof
    is blamed (and cached like any invalid verdict) rather than retried forever."""
    with backend(tmp_path, "--exit-on", "positivity") as lean:
        verdict = lean.check_proof(task("positivity", "(x : ℝ) : 0 < x ^ 2 + 1"), timeout=30)
        assert (verdict.status, verdict.reason) == (Status.INVALID, "prover_crash")
        # the same backend goes on judging other proofs
        assert lean.check_proof(task("ring"), timeout=30).status is Status.VALID


def test_a_header_that_exits_the_repl_stays_a_system_error(tmp_path):
    with backend(tmp_path, "--exit-on", "open Real") as lean:
        verdict = lean.check_proof(task("ring"), timeout=30)
    assert verdict.status is Status.SYSTEM_ERROR
