"""Which kind of Rocq project a folder is, its files, and their version.

A ``_CoqProject`` or ``Make`` file is read as the tracer reads it
(:func:`sgs.state.rocq_project.read_project`).  A dune project (a
``dune-project`` file at the root) is read from its ``dune`` files: each
``(coq.theory (name X) ...)`` stanza makes its folder's ``.v`` files the
theory ``X`` (with ``(include_subdirs qualified)``, its sub-folders' too, as
``X.Sub``), bound with ``-Q`` as dune binds it.  Either way the result is a
:class:`~sgs.state.rocq_project.Project`, which
:func:`~sgs.state.rocq_project.build` compiles with ``coq_makefile`` in a
build directory outside the folder (dune itself is not needed).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from sgs.state.rocq_project import PROJECT_FILES, LoadPathItem, Project, ProjectError, read_project

__all__ = ["find_project", "read_dune_project", "source_hashes", "sexp"]

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[()]|[^\s()";]+|;[^\n]*')


def find_project(root: Path) -> Project:
    """The project in ``root``: its ``_CoqProject``/``Make`` file, else its dune
    theories; :class:`ProjectError` naming what is missing when it has none."""
    root = Path(root)
    if not root.is_dir():
        raise ProjectError(f"{root} is not a directory")
    if any((root / name).is_file() for name in PROJECT_FILES) or not (root / "dune-project").is_file():
        try:
            return read_project(root)
        except ProjectError as error:
            if "is not a Rocq project" in str(error):
                raise ProjectError(f"{root.resolve()} is not a Rocq project: it has no _CoqProject, Make or "
                                   "dune-project file") from None
            raise
    return read_dune_project(root)


def sexp(text: str) -> list:
    """The s-expressions of a dune file, as nested lists of atoms (strings unquoted)."""
    stack: list[list] = [[]]
    for token in _TOKEN.findall(text):
        if token.startswith(";"):
            continue
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) == 1:
                raise ValueError("unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token[1:-1] if token.startswith('"') else token)
    if len(stack) != 1:
        raise ValueError("unbalanced '('")
    return stack[0]


def read_dune_project(root: Path) -> Project:
    """The Rocq theories of a dune project (see the module docstring)."""
    root = root.resolve()
    load_path: list[LoadPathItem] = []
    sources: list[str] = []
    ignored: list[str] = []
    for folder, subfolders, names in sorted(os.walk(root)):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith(("_build", ".")))
        if "dune" not in names:
            continue
        dune = Path(folder) / "dune"
        try:
            stanzas = sexp(dune.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise ProjectError(f"{dune}: cannot be read ({error})") from None
        theories = [s for s in stanzas if isinstance(s, list) and s[:1] == ["coq.theory"]]
        if not theories:
            continue
        if len(theories) > 1:
            raise ProjectError(f"{dune}: more than one coq.theory stanza in one folder")
        fields = {field[0]: field[1:] for field in theories[0][1:] if isinstance(field, list) and field}
        name = fields.get("name", [None])[0]
        if not isinstance(name, str):
            raise ProjectError(f"{dune}: its coq.theory stanza has no (name ...)")
        relative = os.path.relpath(folder, root)
        load_path.append(LoadPathItem("-Q", relative, name))
        recursive = any(isinstance(s, list) and s[:2] == ["include_subdirs", "qualified"] for s in stanzas)
        pattern = "**/*.v" if recursive else "*.v"
        sources += sorted(os.path.normpath(path.relative_to(root).as_posix())
                          for path in Path(folder).glob(pattern) if "_build" not in path.parts)
        ignored += [f"coq.theory {name}: ({key} ...): not used" for key in fields
                    if key not in ("name", "package", "synopsis", "theories", "modules")]
    if not load_path:
        raise ProjectError(f"{root} has a dune-project file but no dune file with a (coq.theory ...) stanza")
    if not sources:
        raise ProjectError(f"{root}: its coq.theory folders hold no .v file")
    project = Project(root, "dune", tuple(load_path), tuple(dict.fromkeys(sources)), tuple(ignored))
    for source in project.sources:
        project.logical_module(source)
    return project


def source_hashes(project: Project) -> dict[str, str]:
    """The SHA-256 of each of the project's ``.v`` files: what it was when the run began."""
    return {source: hashlib.sha256((project.root / source).read_bytes()).hexdigest() for source in project.sources}
