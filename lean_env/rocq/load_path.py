"""Per-task load paths: which compiled project libraries a Rocq check may load.

A target traced from a Rocq project (``tools/trace_rocq_targets.py``) is
checked in its own project's context: its header ``Require``s the project's
other files, so coqtop must be started with the project's ``-R DIR Name`` or
``-Q DIR Name`` options.  The load path comes from a data file, so it is
hostile input like any other: each entry is a ``(flag, directory, logical
name)`` triple that becomes three separate ``argv`` items (never a shell
string), the flag is ``-R`` or ``-Q``, the directory must be an existing
absolute directory, and the logical name must be Coq identifiers separated by
dots whose first one is not a name Coq or this verifier uses for itself
(``Coq``, ``Top``, ...: binding it would let a data file replace the standard
library or the theorem's own module).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

#: the flags a load path may use: ``-R`` (recursive, names usable unqualified
#: after ``Require Import``) and ``-Q`` (the same, qualified names only)
FLAGS = ("-R", "-Q")
#: most entries one task may carry
MAX_ENTRIES = 16
#: longest directory path accepted, in characters
MAX_DIRECTORY_CHARS = 4_096
#: first components a logical name may not have: Coq's own libraries, the
#: toplevel module theorems are checked in, and the audit's scratch library
RESERVED_ROOTS = frozenset({"Coq", "Corelib", "Stdlib", "Rocq", "Ltac2", "Top", "SgsAudit"})

_LOGICAL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_']*(?:\.[A-Za-z_][A-Za-z0-9_']*)*")


class LoadPathError(ValueError):
    """A load path entry is malformed or names a directory that is not there."""


@dataclass(frozen=True)
class LoadPathEntry:
    """One ``-R DIR Name`` / ``-Q DIR Name`` option."""

    flag: str
    directory: str
    name: str

    def argv(self) -> list[str]:
        return [self.flag, self.directory, self.name]


LoadPath = tuple[LoadPathEntry, ...]


def parse_load_path(value: object) -> LoadPath:
    """A load path from its JSON form, a list of ``[flag, directory, name]``
    triples; raises :class:`LoadPathError` naming the first bad entry."""
    if not isinstance(value, (list, tuple)):
        raise LoadPathError(f"a load path must be a list of [flag, directory, name] entries, got {value!r:.200}")
    if len(value) > MAX_ENTRIES:
        raise LoadPathError(f"a load path has at most {MAX_ENTRIES} entries, got {len(value)}")
    entries = []
    for index, item in enumerate(value):
        if not (isinstance(item, (list, tuple)) and len(item) == 3 and all(isinstance(part, str) for part in item)):
            raise LoadPathError(f"load path entry {index} must be [flag, directory, name] strings, got {item!r:.200}")
        entries.append(check_entry(LoadPathEntry(*item)))
    return tuple(entries)


def check_entry(entry: LoadPathEntry) -> LoadPathEntry:
    """``entry`` unchanged when it is well formed and its directory exists."""
    if entry.flag not in FLAGS:
        raise LoadPathError(f"load path flag {entry.flag!r:.40} is not one of {', '.join(FLAGS)}")
    directory = entry.directory
    if not directory or len(directory) > MAX_DIRECTORY_CHARS or "\x00" in directory or not os.path.isabs(directory):
        raise LoadPathError(f"load path directory {directory!r:.200} must be an absolute path")
    if not os.path.isdir(directory):
        raise LoadPathError(f"load path directory {directory!r:.200} does not exist (or is not a directory)")
    if not _LOGICAL_NAME.fullmatch(entry.name) or len(entry.name) > 200:
        raise LoadPathError(f"load path name {entry.name!r:.200} is not Coq identifiers separated by dots")
    if entry.name.split(".")[0] in RESERVED_ROOTS:
        raise LoadPathError(f"load path name {entry.name!r} may not start with {entry.name.split('.')[0]!r} "
                            f"(reserved: {', '.join(sorted(RESERVED_ROOTS))})")
    return entry


def load_path_argv(load_path: LoadPath) -> list[str]:
    """The coqtop/coqc/coqchk options of ``load_path``, one argv item each."""
    return [part for entry in load_path for part in entry.argv()]


def to_json(load_path: LoadPath) -> list[list[str]]:
    return [[entry.flag, entry.directory, entry.name] for entry in load_path]
