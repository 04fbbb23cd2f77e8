"""tools/setup_lean.sh cannot run here (it needs GitHub), so check what can
be checked without network: the script parses, documents itself and refuses
unknown options before touching anything."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.lean.lean_support import REPO_ROOT

SCRIPT = REPO_ROOT / "tools" / "setup_lean.sh"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", *args], capture_output=True, text=True, timeout=60)


def test_script_parses():
    result = run("-n", str(SCRIPT))
    assert result.returncode == 0, result.stderr


def test_help_documents_the_options_and_settings():
    result = run(str(SCRIPT), "--help")
    assert result.returncode == 0
    for word in ("--tag", "--dir", "v4.15.0", "prover.lean.repl_command", "SGS_LEAN_REPL", "LEAN_ENV_REPL_COMMAND"):
        assert word in result.stdout


@pytest.mark.parametrize("args", [["--bogus"], ["--tag"]])
def test_bad_options_fail_before_doing_anything(args, tmp_path):
    result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 2
    assert list(tmp_path.iterdir()) == []
