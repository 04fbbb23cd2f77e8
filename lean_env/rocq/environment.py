"""What the axiom census knows about the state right after a header: the
libraries coqtop loaded, the header's own declarations, and the census cache
key.

Shared by :mod:`lean_env.rocq.census` (which builds these) and
:mod:`lean_env.rocq.session` (which keeps the one of its header), so that
neither has to import the other.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Library:
    """One compiled library coqtop loaded."""

    #: qualified name (``Coq.micromega.Lia``)
    name: str
    #: the ``.vo`` file, with symbolic links resolved
    path: str
    #: size in bytes (with the modification time, a rebuilt file makes a new key)
    size: int
    #: modification time in nanoseconds
    mtime_ns: int


@dataclass(frozen=True)
class Environment:
    """What the census needs to know about the state right after a header."""

    #: every library loaded (the header's and their dependencies, the prelude included)
    libraries: tuple[Library, ...]
    #: cache key: the libraries, coqtop, coqchk and the census logic; empty
    #: when the census does not apply (see ``reason``)
    key: str
    #: why the census does not apply, if it does not
    reason: str = ""
    #: the task's load path options (``-R``/``-Q``); the census's own coqtop,
    #: coqc and coqchk get them too
    load_path: tuple[str, ...] = ()
    #: the header's sentences when it declares something of its own (a
    #: project file's definitions and lemmas): the census then also compiles
    #: and re-checks them; empty when the header only loads libraries
    header: tuple[str, ...] = ()
    #: the key of the libraries alone, shared by every header that loads them
    #: (equal to ``key`` when ``header`` is empty)
    library_key: str = ""

    def libraries_only(self) -> "Environment":
        """The census question for the libraries alone."""
        return replace(self, key=self.library_key, header=())
