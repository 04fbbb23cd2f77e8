"""tools/setup.sh as a user calls it, as far as a test can without
reinstalling everything (CI's fresh clone runs the whole set-up with uv; the
pip fallback was tried by hand: see tools/setup.sh)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.paths import REPO


def test_an_unknown_installer_is_refused_before_anything_is_installed():
    done = subprocess.run(["bash", "tools/setup.sh"], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SGS_INSTALLER": "conda"})
    assert done.returncode == 2
    assert done.stderr.strip() == "[setup] SGS_INSTALLER must be uv or pip, got 'conda'"


def test_pips_settings_become_uvs_options(tmp_path):
    constraints = tmp_path / "constraints.txt"
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull,  # no pip.conf: only the variables below
               PIP_FIND_LINKS=f"{tmp_path} /wheels", PIP_INDEX_URL="https://mirror.example/simple",
               PIP_EXTRA_INDEX_URL=f"file://{tmp_path} file:///no/such/index https://extra.example/simple",
               PIP_CONSTRAINT=str(constraints))
    done = subprocess.run([sys.executable, "tools/uv_options.py"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "--find-links", str(tmp_path), "--find-links", "/wheels",
        "--index-url", "https://mirror.example/simple",
        # a local index folder that is not there is left out, as pip skips it
        "--extra-index-url", f"file://{tmp_path}", "--extra-index-url", "https://extra.example/simple",
        "--constraint", str(constraints)]


def test_without_pip_settings_there_are_no_options():
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    done = subprocess.run([sys.executable, "tools/uv_options.py"], cwd=REPO, capture_output=True, text=True,
                          env={**env, "PIP_CONFIG_FILE": os.devnull}, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == ""
