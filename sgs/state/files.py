"""File primitives of the run directory: writes that a kill cannot tear, and
JSONL reading that knows what a killed writer leaves behind.

A file is created by writing a temporary file beside it, fsyncing it and
``os.replace``-ing it into place (:func:`atomic_write`), or appended to one
fsynced line at a time (:func:`append_line`).  A writer killed mid-append
leaves a last line without its newline: :func:`jsonl_rows` reports it, and
:func:`cut_torn_tail` (the writer's, before appending again) removes it.

Nothing here decides what damage means: :class:`Problems` is told by its
owner whether a problem stops the reading (the store, which must not run on
damaged state) or becomes a note (the report, which shows what it can).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional


class StoreError(Exception):
    """The run directory is damaged, inconsistent, in use, or incompatible
    with what the caller asked for."""


class Problems:
    """What a reader does with damage it meets: raise it, or note it and go on.

    ``strict`` (the store's rule) raises :class:`StoreError` with the message;
    otherwise (the report's rule) the message, followed by what the reader
    does instead, is added to :attr:`notes` and the caller skips the damaged
    part.
    """

    def __init__(self, *, strict: bool):
        self.strict = strict
        self.notes: list[str] = []
        """The problems met so far, each with what was left out (lenient readers only)."""

    def __call__(self, message: str, instead: str) -> None:
        """Report ``message``; ``instead`` says what a lenient reader does about it."""
        if self.strict:
            raise StoreError(message)
        self.notes.append(f"{message}; {instead}")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def writable(path: Path) -> bool:
    """Whether this process may write ``path``; one its owner marked read-only (no
    write bit for anyone) counts as read-only even where the user could write it
    anyway (root)."""
    return os.access(path, os.W_OK) and bool(path.stat().st_mode & 0o222)


def folder_problem(folder: Path) -> Optional[str]:
    """Why ``folder`` cannot be made or written, or None: the nearest part of its
    path that exists must be a folder (see :func:`writable`)."""
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not writable(existing):
        return f"{existing} cannot be written (read-only)"
    return None


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old file or the
    new one, never a mix, even if the process is killed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def json_line(obj: Any) -> bytes:
    """``obj`` as one compact JSON line, newline included."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def append_line(path: Path, obj: Any) -> None:
    """Append one JSON line and fsync (for the small, rare history files)."""
    line = json_line(obj)  # fails on unserialisable values before the file is touched
    with open(path, "ab") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def jsonl_rows(path: Path, problems: Problems) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, parsed object)`` for each complete line of a JSONL file.

    A line that is not JSON is a problem (a lenient reader skips it).  A last
    line without its newline is what a writer killed mid-write leaves, or one
    still writing: it is a problem too, and never yielded.  The file is not
    changed (see :func:`cut_torn_tail`).
    """
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                problems(f"{path}:{lineno}: incomplete last line ({len(raw)} bytes, no newline); the file is damaged "
                         "or its writer was killed mid-line", "the line is ignored")
                return
            try:
                obj = json.loads(raw)
            except ValueError as e:
                problems(f"{path}:{lineno}: not valid JSON ({e})", "line ignored")
                continue
            yield lineno, obj


def cut_torn_tail(path: Path) -> tuple[int, int] | None:
    """Cut a last line without its newline off ``path`` (so it can be appended
    to again); return its ``(line number, size in bytes)``, or None when the
    file ends cleanly.  Only a file's own writer may call this."""
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return None
    good_end = data.rfind(b"\n") + 1
    lineno = data.count(b"\n", 0, good_end) + 1
    os.truncate(path, good_end)
    return lineno, len(data) - good_end
