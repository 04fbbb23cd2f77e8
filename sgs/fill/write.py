"""``--write``: proofs into the project's files, only when the project still builds.

The rule: nothing in the project folder changes unless the *whole* project,
with every proof written in, builds with ``coqc``.  So the patched files are
first written into a copy of the project (outside it), built from scratch
there (:func:`sgs.state.rocq_project.build`, ``coq_makefile`` and ``make``
in dependency order).  A proof the checker accepted at the top level may still
fail in its file (inside a section it sees the earlier section lemmas
without the generalisation the top level gives them): when the build's error
lies inside a written proof, that proof is left out, reported, and the rest
built again (:func:`build_written`); an error anywhere else writes nothing.
Only when the build passes, and only if no source changed since the run
began, the originals are saved as one patch file in the project folder
(``sgs-fill.patch``, or ``sgs-fill-2.patch`` ... when one is there already:
``git apply -R sgs-fill.patch`` or ``patch -p1 -R < sgs-fill.patch`` undoes
it), and each changed file is replaced atomically (written beside, then
renamed).  A replacement that fails puts back the files already replaced.

A proof that uses CoqHammer's tactics (:func:`sgs.fill.attempts.recheck_all`
says which) needs ``From Hammer Require Import Tactics.`` in its file: the
line is added at the file's top, and the build decides whether that is fine.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from sgs.prover.baselines import HAMMER_TACTICS
from sgs.state.files import atomic_write, writable
from sgs.state.rocq_project import BuildError, Project, build

__all__ = ["Edit", "WriteError", "patched_text", "edit_at_line", "unified_patch", "check_writable", "build_check",
           "build_written", "replace_files", "PATCH_NAME"]

PATCH_NAME = "sgs-fill"


class WriteError(RuntimeError):
    """The files cannot be written (a read-only folder, a file that changed)."""


@dataclasses.dataclass(frozen=True)
class Edit:
    """One proof into one file: the text at ``span`` (offsets) becomes ``text``."""

    span: tuple[int, int]
    text: str
    needs_hammer: bool = False
    #: the lemma it proves (its id), for the report
    lemma: str = ""


def patched_text(original: str, edits: Sequence[Edit]) -> str:
    """``original`` with every edit made (spans of the original, never overlapping),
    and CoqHammer's tactics loaded at its top when an edit needs them."""
    ordered = sorted(edits, key=lambda edit: edit.span)
    for before, after in zip(ordered, ordered[1:]):
        if after.span[0] < before.span[1]:
            raise ValueError(f"overlapping edits at offsets {before.span} and {after.span}")
    pieces, position = [], 0
    for edit in ordered:
        start, end = edit.span
        if not 0 <= start <= end <= len(original):
            raise ValueError(f"edit span {edit.span} outside a text of {len(original)} characters")
        pieces += [original[position:start], edit.text]
        position = end
    pieces.append(original[position:])
    text = "".join(pieces)
    if any(edit.needs_hammer for edit in edits):
        text = HAMMER_TACTICS + "  (* added by sgs.fill: a proof below uses sauto *)\n" + text
    return text


def edit_at_line(original: str, edits: Sequence[Edit], line: int) -> Edit | None:
    """The edit whose written text holds ``line`` (1-based) of :func:`patched_text`'s result, if any."""
    line -= any(edit.needs_hammer for edit in edits)
    added = 0   # lines the edits before this one added
    for edit in sorted(edits, key=lambda edit: edit.span):
        first = original.count("\n", 0, edit.span[0]) + 1 + added
        if first <= line <= first + edit.text.count("\n"):
            return edit
        added += edit.text.count("\n") - original.count("\n", *edit.span)
    return None


_FAILED_AT = re.compile(r"(?:^|; |: )([^\s;:]+\.v): line (\d+): (Error:[^;]*)")


def build_written(project: Project, texts: dict[str, str], edits: dict[str, list[Edit]], *, jobs: int
                  ) -> tuple[dict[str, str], list[tuple[Edit, str]]]:
    """The patched texts that build (:func:`build_check`) and the edits left out, each with
    the build's error: an error inside a written proof leaves that proof out and builds
    again; :class:`BuildError` when an error lies elsewhere or no proof is left."""
    edits = {file: list(file_edits) for file, file_edits in edits.items()}
    dropped: list[tuple[Edit, str]] = []
    while True:
        patched = {file: patched_text(texts[file], file_edits) for file, file_edits in edits.items() if file_edits}
        if not patched:
            raise BuildError("no proof builds in its file: " + "; ".join(reason for _, reason in dropped))
        try:
            build_check(project, patched, jobs=jobs)
            return patched, dropped
        except BuildError as error:
            culprits = []
            for file, line, message in _FAILED_AT.findall(str(error)):
                edit = edit_at_line(texts[file], edits.get(file, []), int(line)) if file in texts else None
                if edit is None:
                    raise
                culprits.append((file, edit, f"{file}: line {line}: {' '.join(message.split())}"))
            if not culprits:
                raise
            for file, edit, reason in culprits:
                if edit in edits[file]:
                    edits[file].remove(edit)
                    dropped.append((edit, reason))


def unified_patch(originals: dict[str, str], patched: dict[str, str]) -> str:
    """A ``git apply``-able patch from the originals to the patched texts (paths ``a/FILE``, ``b/FILE``)."""
    parts = []
    for file in sorted(patched):
        if patched[file] == originals[file]:
            continue
        parts.append(f"diff --git a/{file} b/{file}\n")
        for line in difflib.unified_diff(originals[file].splitlines(keepends=True),
                                         patched[file].splitlines(keepends=True), f"a/{file}", f"b/{file}"):
            # a last line without its newline gets the marker patch tools expect
            parts.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(parts)


def check_writable(project: Project) -> None:
    """WriteError unless the folder and every source in it can be written."""
    if not writable(project.root):
        raise WriteError(f"--write: the project folder {project.root} is read-only")
    for source in project.sources:
        path = project.root / source
        if not writable(path) or not writable(path.parent):
            raise WriteError(f"--write: {path} is read-only")


def build_check(project: Project, patched: dict[str, str], *, jobs: int) -> None:
    """Build the whole project with ``patched`` (file -> text) in a scratch
    copy outside it; :class:`BuildError` naming the files that fail."""
    with tempfile.TemporaryDirectory(prefix="sgs-fill-") as scratch:
        copy = Path(scratch) / "src"
        shutil.copytree(project.root, copy, symlinks=True,
                        ignore=shutil.ignore_patterns(".*", "*.vo", "*.vos", "*.vok", "*.glob", "*.aux"))
        for file, text in patched.items():
            (copy / file).write_text(text, encoding="utf-8")
        try:
            build(dataclasses.replace(project, root=copy.resolve()), Path(scratch) / "build", jobs=jobs)
        except BuildError as error:
            # name the user's folder, not the scratch copy
            raise BuildError(str(error).replace(str(copy.resolve()), str(project.root))) from None


def replace_files(project: Project, originals: dict[str, str], patched: dict[str, str]) -> Path:
    """Save the patch in the project folder, then replace each changed file
    atomically; the patch file's path.  On a failure the files already
    replaced get their originals back and the patch file goes."""
    number = 1
    while (path := project.root / (f"{PATCH_NAME}.patch" if number == 1 else f"{PATCH_NAME}-{number}.patch")).exists():
        number += 1
    atomic_write(path, unified_patch(originals, patched).encode("utf-8"))
    done: list[str] = []
    try:
        for file, text in sorted(patched.items()):
            if text != originals[file]:
                target = project.root / file
                mode = target.stat().st_mode
                atomic_write(target, text.encode("utf-8"))
                os.chmod(target, mode & 0o7777)
                done.append(file)
    except OSError as error:
        for file in done:
            atomic_write(project.root / file, originals[file].encode("utf-8"))
        path.unlink(missing_ok=True)
        raise WriteError(f"--write: could not replace {project.root / file}: {error}; nothing was changed") from None
    return path
