"""Which libraries the corpus replays, where their ``.v`` files are, and the
``coqtop`` command line that replays one of their files.

Debian ships each library's ``.v`` sources beside its compiled ``.vo`` files,
under ``coqc -where``: the standard library under ``theories`` (logical name
``Coq``), the ``libcoq-*`` packages under ``user-contrib/<Name>``, where
``coqtop`` finds them without any ``-R``/``-Q`` option.  A file is replayed
as the module it is in its library (``-top Coq.Bool.Bool``), so the names its
lemmas get, and the names ``Locate`` prints, are the library's own; the other
files it ``Require``s load from their compiled ``.vo``.

The choice (docs/corpus.md says more): the standard library, then libraries
written in plain Ltac style, the style of the proofs the prover will write
(licences from each package's ``/usr/share/doc/<package>/copyright``).
The five projects under ``shared/data/rocq_projects`` are the evaluation set
and are never a source.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence


class SourceError(ValueError):
    """A library that is unknown or not installed (the command exits 2)."""


@dataclass(frozen=True)
class LibrarySpec:
    """One library the corpus knows."""

    name: str
    #: where its ``.v`` files are: relative to ``coqc -where``, or absolute
    location: str
    #: the logical name of its root (``Coq``, ``Flocq``)
    prefix: str
    #: the Debian package that installs it (tools/setup.sh installs them)
    package: str
    #: the licence(s) its copyright file names
    licence: str
    #: why it is in the corpus
    why: str
    #: files left out (``fnmatch`` on the path relative to the root), each for a reason in ``why``
    exclude: tuple[str, ...] = ()
    #: files replayed without the prelude (``-noinit``): those the prelude itself is made of
    noinit: tuple[str, ...] = ()
    #: bind the root to the prefix with ``-R`` (how the library was built: its files
    #: ``Require`` one another by short names, ``Require Import Zaux.``)
    bind_root: bool = True


#: every library, in the order ``extract`` replays them (the standard library first, then
#: Ltac-style libraries, smallest dependencies first)
LIBRARIES: dict[str, LibrarySpec] = {spec.name: spec for spec in (
    LibrarySpec("stdlib", "theories", "Coq", "libcoq-stdlib", "LGPL-2.1 (a few files BSD-3/MIT/LGPL-2+)",
                "the library every Rocq development loads; plain Ltac; its 4,111 closed cases are the "
                "project's stdlib corpus (tools/rocq_stdlib_corpus.py)",
                noinit=("Init/*",), bind_root=False),
    LibrarySpec("bignums", "user-contrib/Bignums", "Bignums", "libcoq-bignums", "LGPL-2.1",
                "arbitrary-precision integers and rationals in plain Ltac, on top of the standard library"),
    LibrarySpec("flocq", "user-contrib/Flocq", "Flocq", "libcoq-flocq", "LGPL-3",
                "floating-point arithmetic over the reals; long plain-Ltac proofs with real-number lemmas"),
    LibrarySpec("coquelicot", "user-contrib/Coquelicot", "Coquelicot", "libcoq-coquelicot", "LGPL-3+",
                "real analysis (limits, derivatives, integrals); mostly plain Ltac over the standard "
                "library's reals (it loads ssreflect for a few files)"),
    LibrarySpec("ext-lib", "user-contrib/ExtLib", "ExtLib", "libcoq-ext-lib", "BSD-2-clause",
                "data structures and type classes for programming; small Ltac proofs"),
    LibrarySpec("stdpp", "user-contrib/stdpp", "stdpp", "libcoq-stdpp", "BSD-3-clause",
                "an extended standard library (lists, finite maps and sets); Ltac with its own automation"),
    LibrarySpec("math-classes", "user-contrib/MathClasses", "MathClasses", "libcoq-math-classes",
                "MIT (Expat), parts LGPL-2.1",
                "algebraic hierarchy with type classes and setoid rewriting; Ltac"),
    LibrarySpec("hammer-examples", "/usr/share/doc/libcoq-hammer/examples", "HammerExamples", "libcoq-hammer",
                "LGPL-2.1",
                "CoqHammer's examples of its sauto/hauto tactics (plain Rocq tactics); the files that call "
                "`hammer` itself need external provers and are left out",
                exclude=("hammer_tests.v", "tutorial/hammer/*"), bind_root=False),
)}

#: where the evaluation projects are (never a source): ``<checkout>/../shared/data/rocq_projects``
EVALUATION_PROJECTS = Path(__file__).resolve().parents[3] / "shared" / "data" / "rocq_projects"


@dataclass(frozen=True)
class Library:
    """A library found on this machine."""

    spec: LibrarySpec
    root: Path

    @property
    def name(self) -> str:
        return self.spec.name

    def files(self, patterns: Sequence[str] = ()) -> list[str]:
        """Its ``.v`` files relative to the root, sorted; only those matching one of
        ``patterns`` (``fnmatch`` on the relative path, ``Bool/*.v``) when given."""
        files = sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*.v"))
        files = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in self.spec.exclude)]
        if patterns:
            files = [f for f in files if any(fnmatch.fnmatch(f, pattern) for pattern in patterns)]
        return files

    def module_of(self, file: str) -> str:
        """``Bool/Bool.v`` -> ``Coq.Bool.Bool``."""
        return ".".join((self.spec.prefix, *Path(file).with_suffix("").parts))

    def coqtop_argv(self, coqtop: str, file: str) -> list[str]:
        """The command line that replays ``file``: ``-emacs`` prints the goals after
        every sentence; no native compiler (nothing compiled and loaded behind our
        back); no warnings (they only add text to every answer)."""
        argv = [coqtop, "-emacs", "-q", "-native-compiler", "no", "-w", "-all"]
        if any(fnmatch.fnmatch(file, pattern) for pattern in self.spec.noinit):
            argv.append("-noinit")
        if self.spec.bind_root:
            argv += ["-R", str(self.root), self.spec.prefix]
        return [*argv, "-top", self.module_of(file)]


def coq_where(coqc: str = "coqc") -> Path:
    """Rocq's library directory (``coqc -where``); SourceError when there is no coqc."""
    exe = shutil.which(coqc)
    if exe is None:
        raise SourceError(f"{coqc} not found: install Rocq 8.16 (tools/setup.sh, or apt-get install coq)")
    out = subprocess.run([exe, "-where"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0 or not out.stdout.strip():
        raise SourceError(f"{exe} -where failed: {out.stderr.strip()[:300]}")
    return Path(out.stdout.strip())


def parse_names(value: Optional[str]) -> list[str]:
    """``stdlib,flocq`` -> the library names, in :data:`LIBRARIES` order (all when
    empty); SourceError naming an unknown one and the known ones."""
    if not value:
        return list(LIBRARIES)
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in LIBRARIES]
    if unknown or not names:
        raise SourceError(f"unknown librar{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown) or repr(value)}"
                          f" (known: {', '.join(LIBRARIES)})")
    return [n for n in LIBRARIES if n in names]


def find(name: str, where: Path) -> Library:
    """The library ``name`` as installed under ``where`` (``coqc -where``);
    SourceError when it is unknown, not installed, or inside the evaluation set."""
    if name not in LIBRARIES:
        raise SourceError(f"unknown library {name!r} (known: {', '.join(LIBRARIES)})")
    spec = LIBRARIES[name]
    root = Path(spec.location) if os.path.isabs(spec.location) else where / spec.location
    if not root.is_dir() or not any(root.rglob("*.v")):
        raise SourceError(f"library {name!r} is not installed: no .v files under {root} "
                          f"(apt-get install {spec.package}, or run tools/setup.sh)")
    resolved = root.resolve()
    if resolved == EVALUATION_PROJECTS.resolve() or EVALUATION_PROJECTS.resolve() in resolved.parents:
        raise SourceError(f"library {name!r} is inside the evaluation projects ({EVALUATION_PROJECTS})")
    return Library(spec, root)
