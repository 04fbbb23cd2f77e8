"""Killing a command the way a user's machine does: SIGKILL to its whole process group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable


def run_until_then_kill(argv: list[str], ready: Callable[[], bool], never: str, *, timeout: float = 300,
                        poll: float = 0.02, **popen) -> int:
    """Start ``argv`` in a session of its own, wait until ``ready()`` (an assertion naming
    ``never`` after ``timeout`` seconds, or if the command ends first), then SIGKILL its
    process group; its exit status (``-SIGKILL`` when it was still running)."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               **popen)
    try:
        deadline = time.monotonic() + timeout
        while not ready() and process.poll() is None:
            assert time.monotonic() < deadline, never
            time.sleep(poll)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return process.returncode
