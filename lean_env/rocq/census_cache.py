"""Where axiom censuses (:mod:`lean_env.rocq.census`) are kept on disk, and
the locks that let every worker on a machine share them.

One JSON file per census key, written atomically; a lock file per key, so
that workers sharing the directory take each census once (the others wait
and read it); and ``census_max_concurrent`` slot files, so that at most that
many censuses run at once on the machine, whichever worker runs them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator, Optional

from lean_env.rocq.coqchk import Census, CensusError
from lean_env.rocq.environment import Environment

#: bump whenever a change to the census can change a census (part of the cache key)
CENSUS_VERSION = "2"

#: how often a census waiting for a slot tries again, and how long a census
#: thread that just gave a slot back waits before taking one again (longer, so
#: that the waiting workers get their turn)
_SLOT_POLL = 0.2
_SLOT_REST = 0.5


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/lean_env``, or ``~/.cache/lean_env``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lean_env"


class CensusCache:
    """The census files of one directory, seen by one backend's census.

    ``closed`` is the census's own "stop" event: waits for a slot or a lock
    end when it is set.
    """

    def __init__(self, directory: Path, max_concurrent: int, closed: threading.Event, coqchk_version: str) -> None:
        self.directory = directory
        self.max_concurrent = max_concurrent
        self._closed = closed
        self._coqchk_version = coqchk_version
        #: when this instance last gave a slot back
        self._slot_released = -_SLOT_REST

    def path(self, key: str) -> Path:
        return self.directory / f"census-{key}.json"

    def read(self, env: Environment) -> Optional[Census]:
        """The cached census of ``env``; an unreadable entry counts as absent."""
        try:
            data = json.loads(self.path(env.key).read_text())
            if data["version"] != CENSUS_VERSION or data["key"] != env.key:
                return None
            axioms, unsafe = data["axioms"], data["unsafe"]
            if not all(isinstance(x, str) for x in [*axioms, *unsafe]):
                return None
            return Census(axioms=tuple(axioms), unsafe=tuple(unsafe))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, env: Environment, census: Census, seconds: float) -> None:
        """Write atomically, so that a reader never sees half an entry."""
        data = {"version": CENSUS_VERSION, "key": env.key, "axioms": list(census.axioms),
                "unsafe": list(census.unsafe), "seconds": round(seconds, 1), "coqchk": self._coqchk_version,
                "libraries": [[lib.name, lib.path, lib.size, lib.mtime_ns] for lib in env.libraries],
                "header_sentences": len(env.header)}
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".census-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path(env.key))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the machine's ``max_concurrent`` census slots (lock
        files in the directory, shared by every worker that uses it); waits
        for one, until ``closed`` is set."""
        self.directory.mkdir(parents=True, exist_ok=True)
        rest = self._slot_released + _SLOT_REST - time.monotonic()
        if rest > 0 and self._closed.wait(rest):
            raise CensusError("the backend was closed")
        while True:
            for i in range(self.max_concurrent):
                fd = os.open(self.directory / f"census-slot-{i}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as e:
                    os.close(fd)
                    if e.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    continue
                try:
                    yield
                finally:
                    os.close(fd)   # releases the slot
                    self._slot_released = time.monotonic()
                return
            if self._closed.wait(_SLOT_POLL):
                raise CensusError("the backend was closed")

    @contextlib.contextmanager
    def lock(self, key: str, deadline: float) -> Iterator[None]:
        """Hold the lock of ``key`` against other processes (and threads)."""
        fd = os.open(self.directory / f"census-{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as e:
                    if e.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                if time.monotonic() > deadline or self._closed.wait(0.2):
                    raise CensusError("another worker held the census lock for too long")
            yield
        finally:
            os.close(fd)   # releases the lock
