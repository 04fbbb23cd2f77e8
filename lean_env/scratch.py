"""Scratch directories for prover processes that do not outlive their owner.

Every prover session and batch check gets a private directory under the
system's temporary directory, deleted when the session ends.  A Python
process that is killed (a Ray actor replaced after a crash, a driver stopped
with SIGKILL, ``ray stop --force``) never runs that clean-up, and over a run of
days its directories pile up.  So each directory's name carries the process
id of its owner (``lean_env-<kind>-pid<N>-<random>``), and the first directory
a process makes sweeps away those whose owner no longer runs.

The sweep trusts process ids, so it assumes the processes sharing one
temporary directory share one PID namespace (true for Ray's workers on a
node); a directory whose owner's number was taken by a new process waits for
a later sweep.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
from typing import Iterator, Optional

#: the name every scratch directory gets; the sweep touches nothing else
_NAME = re.compile(r"lean_env-.+-pid(\d+)-[A-Za-z0-9_]{8}")

_swept_by: Optional[int] = None   # the pid that last swept (a forked child sweeps again)
_sweep_lock = threading.Lock()


def make_scratch_dir(kind: str) -> str:
    """A new private directory (mode 0700) named for ``kind`` and this process;
    the caller deletes it.  The first call in a process first removes the
    directories of owners that have died."""
    global _swept_by
    with _sweep_lock:
        if _swept_by != os.getpid():
            _swept_by = os.getpid()
            remove_orphaned_scratch_dirs()
    return tempfile.mkdtemp(prefix=f"lean_env-{kind}-pid{os.getpid()}-")


@contextlib.contextmanager
def scratch_dir(kind: str) -> Iterator[str]:
    """:func:`make_scratch_dir` for the length of a ``with`` block, deleted after it."""
    path = make_scratch_dir(kind)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def owner_pid(name: str) -> Optional[int]:
    """The owner's process id written in a scratch directory's name (``None``:
    not a scratch directory's name)."""
    match = _NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def remove_orphaned_scratch_dirs(parent: Optional[str] = None) -> list[str]:
    """Delete the scratch directories in ``parent`` (default: the temporary
    directory) whose owner process no longer runs; returns their paths."""
    parent = parent or tempfile.gettempdir()
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    removed = []
    for name in names:
        pid = owner_pid(name)
        if pid is None or pid == os.getpid() or _running(pid):
            continue
        path = os.path.join(parent, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # another user's process
        return True
    except OverflowError:     # a number no process can have: not a name this module wrote
        return True
    return True
