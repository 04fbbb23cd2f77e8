"""tools/setup_lean.sh cannot run here (it needs GitHub), so check what can
be checked without network: the script parses, documents itself and refuses
bad options before touching anything; without GitHub it says so and writes
nothing; and with git, elan and lake replaced by stand-ins (test doubles
whose REPL is the Lean REPL stand-in) a whole run builds, smoke-tests, prints
settings that work, and removes what it created when a later step fails."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lean_env.lean import LeanBackend, LeanConfig
from lean_env.verdict import ProofTask, Status
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


@pytest.mark.parametrize("args, message", [
    (["--tag=4.15"], "--tag must look like v4.15.0, got '4.15'"),
    (["--dir="], "--dir must not be empty"),
    (["--dir"], "--dir needs a value"),
    (["extra"], "unknown option: extra"),
])
def test_bad_values_are_usage_errors(args, message, tmp_path):
    result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 2 and message in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_without_github_it_stops_before_writing_anything(tmp_path):
    """No network: the real git is asked (github.com rewritten to a host that
    never resolves, so the test does not depend on this machine's network)."""
    home, target = tmp_path / "home", tmp_path / "lean"
    home.mkdir()
    result = subprocess.run(
        ["bash", str(SCRIPT), "--dir", str(target)], capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "GIT_CONFIG_COUNT": "1",
             "GIT_CONFIG_KEY_0": "url.https://github.invalid/.insteadOf", "GIT_CONFIG_VALUE_0": "https://github.com/"})
    assert result.returncode == 1, result.stderr
    assert "cannot reach GitHub (https://github.com/leanprover-community/repl)" in result.stderr
    assert "nothing was installed or changed" in result.stderr
    assert not target.exists() and list(home.iterdir()) == []


# -- a whole run, with git, elan and lake replaced by stand-ins ------------------------------

FAKE_GIT = r"""#!/bin/bash
# stand-in for git: ls-remote finds the tag, clone makes a checkout with a lean-toolchain file
args=(); while [[ $# -gt 0 ]]; do case "$1" in -c|-C) shift 2 ;; *) args+=("$1"); shift ;; esac; done
set -- "${args[@]}"
case "$1" in
  ls-remote) [[ -n "$FAKE_NO_TAG" ]] || printf 'deadbeef\t%s\n' "${!#}" ;;
  clone) dest="${!#}"; url="${@: -2:1}"; tag="${@: -3:1}"; mkdir -p "$dest/.git"
         toolchain="leanprover/lean4:$tag"
         [[ "$url" == *mathlib4* && -n "$FAKE_MATHLIB_TOOLCHAIN" ]] && toolchain="$FAKE_MATHLIB_TOOLCHAIN"
         echo "$toolchain" > "$dest/lean-toolchain" ;;
esac
"""
FAKE_LAKE = r"""#!/bin/bash
# stand-in for lake: build makes a REPL binary that runs the Lean REPL stand-in; env runs a command
if [[ "$1" == -d ]]; then cd "$2"; shift 2; fi
case "$1" in
  build) mkdir -p .lake/build/bin
         if [[ -n "$FAKE_BROKEN_REPL" ]]; then printf '#!/bin/sh\nexit 1\n'; else
           printf '#!/bin/sh\nexec %s %s "$@"\n' "__PYTHON__" "__STANDIN__"; fi > .lake/build/bin/repl
         chmod +x .lake/build/bin/repl ;;
  env) shift; exec "$@" ;;
esac
"""


def fake_tools(tmp_path: Path) -> Path:
    """A bin directory with stand-ins for git, elan and lake (test doubles: no
    network here), whose REPL binary is the Lean REPL stand-in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    lake = FAKE_LAKE.replace("__PYTHON__", sys.executable).replace(
        "__STANDIN__", str(REPO_ROOT / "tests" / "lean" / "lean_standin.py"))
    # stand-in for lean: `lean --run SgsAxiomCheck.lean ...` answers as the checker (lake_standin.py)
    lean = f'#!/bin/sh\nexec {sys.executable} {REPO_ROOT / "tests" / "lean" / "lake_standin.py"} -d . env lean "$@"\n'
    for name, text in (("git", FAKE_GIT), ("lake", lake), ("lean", lean), ("elan", "#!/bin/sh\nexit 0\n"),
                       ("curl", "#!/bin/sh\necho 'curl: must not be called' >&2\nexit 7\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_with_fakes(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, Path]:
    home, target = tmp_path / "home", tmp_path / "lean"
    home.mkdir(exist_ok=True)
    result = subprocess.run(
        ["bash", str(SCRIPT), "--tag", "v4.15.0", "--dir", str(target)], capture_output=True, text=True,
        timeout=300, env={"PATH": f"{fake_tools(tmp_path)}:/usr/bin:/bin", "HOME": str(home), **env})
    return result, target


def test_a_run_prints_settings_that_work(tmp_path, monkeypatch):
    """The whole script with git, elan and lake replaced: it builds, smoke-tests
    the REPL under the Mathlib checkout, and prints settings; those settings,
    exported as printed, make ``LeanConfig.from_env()`` check proofs there."""
    result, target = run_with_fakes(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "[setup_lean] smoke test passed" in result.stdout
    repl, project, lake = target / "repl/.lake/build/bin/repl", target / "mathlib", tmp_path / "bin/lake"
    command = f"{lake} env {repl}"
    assert f"Lean leanprover/lean4:v4.15.0 is ready.  The REPL runs in {project}." in result.stdout
    assert f"prover=lean prover.lean.repl_command='{command}' prover.lean.project_dir={project}" in result.stdout
    assert f"export SGS_LEAN_REPL='{command}'" in result.stdout
    exported = {m.group(1): m.group(2) or m.group(3)
                for m in re.finditer(r"export (LEAN_ENV_\w+)=(?:'([^']*)'|(\S+))", result.stdout)}
    assert exported == {"LEAN_ENV_REPL_COMMAND": command, "LEAN_ENV_PROJECT_DIR": str(project),
                        "LEAN_ENV_LAKE_COMMAND": str(lake)}
    assert "[setup_lean] smoke test passed (axiom checker: " in result.stdout
    for name, value in exported.items():
        monkeypatch.setenv(name, value)
    # `lake env lean` finds the toolchain's lean; here the stand-in beside the fake lake
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    backend = LeanBackend(LeanConfig.from_env(spare=False, timeout=60, header_timeout=60))
    try:
        ok = ProofTask("ok", "import Mathlib", "theorem ok (a b : ℕ) : a + b = b + a := by", "omega")
        wrong = ProofTask("wrong", "import Mathlib", "theorem wrong : 2 + 2 = 5 := by", "norm_num")
        assert backend.check_proof(ok, 60).status == Status.VALID
        assert backend.check_proof(wrong, 60).status == Status.INVALID
        assert backend.pid is not None and Path(f"/proc/{backend.pid}/cwd").resolve() == project
    finally:
        backend.close()
    again, _ = run_with_fakes(tmp_path)                     # a second run re-uses the checkouts
    assert again.returncode == 0 and (repl.is_file() and project.is_dir()), again.stderr


@pytest.mark.parametrize("env, message", [
    ({"FAKE_MATHLIB_TOOLCHAIN": "leanprover/lean4:v4.16.0"}, "toolchain mismatch: REPL leanprover/lean4:v4.15.0"),
    ({"FAKE_BROKEN_REPL": "1"}, "smoke test failed"),
])
def test_a_failed_run_removes_what_it_created(tmp_path, env, message):
    result, target = run_with_fakes(tmp_path, **env)
    assert result.returncode == 1 and message in result.stderr
    assert f"failed; removing what this run created: {target}" in result.stderr
    assert not target.exists()


def test_a_missing_tag_is_a_usage_error(tmp_path):
    result, target = run_with_fakes(tmp_path, FAKE_NO_TAG="1")
    assert result.returncode == 2 and "tag v4.15.0 not found in leanprover-community/repl" in result.stderr
    assert not target.exists()
