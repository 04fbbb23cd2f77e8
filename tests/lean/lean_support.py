"""Helpers for the Lean backend tests: where the recorded REPL transcripts
are, how to read them, and how to build a backend whose REPL is the replay
test double (``lean_replay.py``, standing in for the Lean binary, which
cannot be installed on the machines these tests run on)."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from lean_env.lean import LeanBackend, LeanConfig
from tests.lean.lean_replay import read_blocks

#: the checkout's root; CI has shared/ beside the checkout
REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / ".." / "shared" / "fixtures" / "lean_repl"
REPLAY = Path(__file__).resolve().parent / "lean_replay.py"

#: marks tests that need the recorded transcripts
needs_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"the shared REPL transcripts are not at {FIXTURES} (repo_root/../shared)")


def stem(name: str) -> str:
    """Path of a transcript pair without its extensions (``mathlib/H20231020``)."""
    return str((FIXTURES / name).resolve())


def requests(name: str) -> list[dict]:
    """The requests of ``name.in``, as the REPL reads them."""
    return [json.loads(b) for b in read_blocks((FIXTURES / f"{name}.in").read_text(encoding="utf-8"))]


def responses(name: str) -> list[dict]:
    """The recorded answers of ``name.expected.out``."""
    return [json.loads(b) for b in read_blocks((FIXTURES / f"{name}.expected.out").read_text(encoding="utf-8"))]


def transcript_names() -> list[str]:
    """Every transcript pair that has recorded answers."""
    if not FIXTURES.is_dir():
        return []
    return sorted(str(p.relative_to(FIXTURES)).removesuffix(".expected.out")
                  for p in FIXTURES.rglob("*.expected.out"))


def replay_command(*names: str, **options: object) -> str:
    """The command line of a replay process serving the named transcripts;
    ``options`` become flags (``fault_on="x"`` -> ``--fault-on x``, ``True``
    -> a bare flag)."""
    argv = [sys.executable, str(REPLAY), *(stem(n) for n in names)]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not None and value is not False:
            argv += [flag, str(value)]
    return shlex.join(argv)


def replay_backend(*names: str, config: dict | None = None, **options: object) -> LeanBackend:
    """A :class:`LeanBackend` whose REPL is the replay of ``names``."""
    # the recorded transcripts hold `#print axioms` answers, not pickles: the REPL's axiom channel;
    # the files the replay writes for the test (request log, pid file) lie outside its scratch directory
    written = tuple(sorted({str(Path(value).parent) for value in options.values() if isinstance(value, Path)}))
    settings = {"spare": False, "timeout": 30.0, "header_timeout": 30.0, "axiom_check": "repl",
                "writable_paths": written, **(config or {})}
    return LeanBackend(LeanConfig(repl_command=replay_command(*names, **options), **settings))


def split_at_by(command: str) -> tuple[str, str]:
    """A recorded whole-proof command split into statement (up to and
    including the first ``:= by``) and tactic body."""
    head, _, body = command.partition(":= by")
    return head + ":= by", body.strip()


def logged_requests(path: Path) -> list[dict]:
    """The entries a replay wrote with ``--request-log``."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def wait_for(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Poll ``condition`` until it holds or ``seconds`` pass (for background
    work such as the spare starting; not a timing assertion)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()
