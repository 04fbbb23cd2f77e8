"""`python -m lean_env verify --audit`: the documented command run as a
subprocess with real argv and real Rocq (coqtop for the check; coqc and
coqchk for the audit), and the verdicts file it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_binary
from tests.paths import REPO

HEADER = "Require Import Arith Lia."
ROWS = [
    {"id": "ok", "header": HEADER, "statement": "Theorem ok : forall n, n + 1 = S n.", "proof": "Proof. lia. Qed."},
    {"id": "bad", "header": HEADER, "statement": "Theorem bad : 1 = 2.", "proof": "Proof. reflexivity. Qed."},
    {"id": "ok2", "header": HEADER, "statement": "Theorem ok2 : 2 + 2 = 4.", "proof": "Proof.\n- reflexivity.\nQed."},
]


def verify(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return subprocess.run([sys.executable, "-m", "lean_env", "verify", "--backend", "rocq", "--input", str(src),
                           "--output", str(tmp_path / "out.jsonl"), "--workers", "1", "--timeout", "30",
                           "--quiet", *flags],
                          cwd=REPO, env={**os.environ, "RAY_AUTH_MODE": "disabled"}, capture_output=True, text=True,
                          timeout=300)


def written(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.rocq
def test_audit_flag_audits_every_valid_proof(tmp_path, require_rocq):
    require_binary("coqc")
    require_binary("coqchk")
    log = tmp_path / "disagreements.jsonl"
    proc = verify(tmp_path, "--audit", "--audit-log", str(log))
    assert proc.returncode == 0, proc.stderr
    verdicts = written(tmp_path)
    assert [(v["id"], v["status"], v.get("audit")) for v in verdicts] == [
        ("ok", "valid", "agree"), ("bad", "invalid", None), ("ok2", "valid", "agree")]
    assert "audited 2: 0 disagreements, 0 inconclusive" in proc.stderr
    assert not log.exists()   # only disagreements are logged


@pytest.mark.slow
@pytest.mark.rocq
def test_without_audit_flags_nothing_is_audited(tmp_path, require_rocq):
    proc = verify(tmp_path)
    assert proc.returncode == 0, proc.stderr
    verdicts = written(tmp_path)
    assert [v["status"] for v in verdicts] == ["valid", "invalid", "valid"]
    assert all("audit" not in v for v in verdicts)
    assert "audited" not in proc.stderr


@pytest.mark.parametrize("flags, problem", [
    (["--audit-fraction", "1.5"], "--audit-fraction must be between 0 and 1"),
    (["--audit", "--audit-fraction", "0.5"], "not allowed with argument"),
    (["--audit-fraction", "many"], "invalid float value"),
])
def test_bad_audit_flags_are_usage_errors(tmp_path, flags, problem):
    proc = verify(tmp_path, *flags)
    assert proc.returncode == 2 and problem in proc.stderr
    assert not (tmp_path / "out.jsonl").exists()
