"""pip's settings as uv's command-line options, one per line (for tools/setup.sh).

    python tools/uv_options.py        # with the interpreter whose pip is configured

pip reads pip.conf files and PIP_* variables (local wheel folders, extra
indexes, a constraints file); uv reads neither, so ``setup.sh`` passes them
on to get the same packages from either installer.  An extra index that is
a local folder no longer there is left out, as pip skips it with a warning.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys


def pip_settings() -> dict[str, str]:
    """pip's effective settings, by name ("find-links", ...): the
    environment's values are listed after the files' and win."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=True).stdout
    settings = {}
    for line in listed.splitlines():  # "global.find-links='/opt/wheels'", ":env:.find-links='/opt/wheels'"
        key, _, value = line.partition("=")
        settings[key.rsplit(".", 1)[-1]] = shlex.split(value)[0] if value.strip() else ""
    return settings


def uv_options(settings: dict[str, str]) -> list[str]:
    options = []
    for url in settings.get("find-links", "").split():
        options += ["--find-links", url]
    if settings.get("index-url"):
        options += ["--index-url", settings["index-url"]]
    for url in settings.get("extra-index-url", "").split():
        if not url.startswith("file://") or os.path.isdir(url[len("file://"):]):
            options += ["--extra-index-url", url]
    for path in settings.get("constraint", "").split():
        options += ["--constraint", path]
    return options


if __name__ == "__main__":
    print("\n".join(uv_options(pip_settings())))
