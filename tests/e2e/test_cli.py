"""`python -m lean_env verify`: input validation and an end-to-end run."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from lean_env.cli import build_spec, parse_line
from tests.paths import REPO


@pytest.mark.parametrize("line, problem", [
    ("not json", "line 3: not valid JSON"),
    ("[1, 2]", "line 3: expected a JSON object"),
    ('{"id": "a", "header": ""}', "line 3: missing field(s) statement, proof"),
    ('{"id": [1], "header": "", "statement": "", "proof": ""}', "line 3: 'id' must be a string"),
    ('{"id": "a", "header": "", "statement": 5, "proof": ""}', "line 3: 'statement' must be a string"),
])
def test_malformed_lines_are_explained(line, problem):
    task, message = parse_line(line, 3)
    assert task is None and message.startswith(problem)


def test_integer_ids_become_strings():
    task, problem = parse_line('{"id": 7, "header": "H", "statement": "S", "proof": "P"}', 1)
    assert problem is None and task.id == "7"


@pytest.mark.slow
def test_verify_command_end_to_end(tmp_path, require_rocq):
    header = "Require Import Arith Lia."
    rows = [
        {"id": "ok", "header": header, "statement": "Theorem ok : forall n, n + 1 = S n.", "proof": "Proof. lia. Qed."},
        "{broken json",
        {"id": "bad", "header": header, "statement": "Theorem bad : 1 = 2.", "proof": "Proof. reflexivity. Qed."},
        {"id": "cheat", "header": header, "statement": "Theorem cheat : 1 = 2.", "proof": "Proof. Admitted."},
        {"id": "fixpoint", "header": header, "statement": "Theorem fixpoint : forall n, n + 0 = n.",
         "proof": "Proof. fix IH 1. intros [|n]. - reflexivity. - simpl. f_equal. apply IH. Qed."},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "lean_env", "verify", "--backend", "rocq", "--input", str(src),
                           "--output", str(out), "--workers", "2", "--timeout", "30", "--quiet"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert [v["id"] for v in verdicts] == ["ok", "line-2", "bad", "cheat", "fixpoint"]
    assert [v["status"] for v in verdicts] == ["valid", "invalid", "invalid", "invalid", "invalid"]
    assert verdicts[1]["reason"] == "malformed_input" and "line 2" in verdicts[1]["messages"][0]
    assert verdicts[3]["reason"].startswith("banned")
    assert verdicts[4]["reason"] == "known_bug:fixpoints" and "allow_bug_prone_features" in verdicts[4]["messages"][0]
    assert "1 valid, 4 invalid" in proc.stderr


@pytest.mark.parametrize("backend, features, problem", [
    ("lean", "fixpoints", "--allow-bug-prone applies to --backend rocq only"),
    ("rocq", "fixpoint", "allow_bug_prone_features: unknown ['fixpoint'] (known: ['fixpoints', 'vm_reduction'])"),
])
def test_bug_prone_features_are_checked_before_anything_runs(tmp_path, backend, features, problem, require_rocq):
    src = tmp_path / "in.jsonl"
    src.write_text("")
    proc = subprocess.run([sys.executable, "-m", "lean_env", "verify", "--backend", backend, "--input", str(src),
                           "--allow-bug-prone", features], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and problem in proc.stderr


def test_the_allowed_bug_prone_features_reach_the_backend_recipe():
    args = argparse.Namespace(backend="rocq", allowed_axioms=None, allow_bug_prone="fixpoints, vm_reduction")
    assert build_spec(args).options == {"allow_bug_prone_features": ("fixpoints", "vm_reduction")}


def test_missing_input_file_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "lean_env", "verify", "--backend", "rocq",
                           "--input", str(tmp_path / "nope.jsonl")], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_verify_with_a_tactic_library_loaded_after_each_header(tmp_path, require_rocq):
    """``--tactic-library`` as a user passes it: CoqHammer's sauto proves under a header that never loads it;
    a sentence that is not a Require is refused before any work."""
    row = {"id": "s", "header": "Require Import Arith.", "statement": "Theorem s : forall n : nat, n + 0 = n.",
           "proof": "Proof. sauto. Qed."}
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(row) + "\n")
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    base = [sys.executable, "-m", "lean_env", "verify", "--backend", "rocq", "--input", str(src), "--output",
            str(out), "--workers", "1", "--timeout", "60", "--quiet"]
    proc = subprocess.run(base + ["--tactic-library", "From Hammer Require Import Tactics."], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["status"] == "valid"
    bad = subprocess.run(base + ["--tactic-library", "Axiom cheat : False."], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "Axiom cheat" in bad.stderr
