"""A Rocq project on disk: its project file, its build, and its version.

A Rocq (Coq) development describes itself in a ``_CoqProject`` file or, in
older projects, a ``Make`` file (the same format, read by ``coq_makefile``):
blank-separated items, ``"..."`` quoting, ``#`` comments.  :func:`read_project`
keeps what checking targets in context needs, the load path (``-R DIR
Name`` / ``-Q DIR Name``) and the ``.v`` files, and reports every other item
with why it is not used (``-extra`` make rules, OCaml plugin files and
``-I``, ``-arg`` options, ...).

:func:`build` never writes into the project folder (it may be read-only): it
mirrors the project into a build directory, writes a ``_CoqProject.sgs``
with the usable items, and runs ``coq_makefile`` and ``make`` there, which
compile the files in dependency order and reuse ``.vo`` files that are up to
date.  A file that does not compile is a :class:`BuildError` naming it and
Coq's error.

:func:`source_digest` is the project's version: a hash of every ``.v`` file
under a directory.  A targets file records the build directory and this
digest; reading it (:mod:`sgs.state.targets`) recomputes the digest and
refuses targets traced from another version of the project, whose headers
would no longer match the compiled libraries.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: the project files read, in order of preference
PROJECT_FILES = ("_CoqProject", "Make")
#: what the build writes beside the mirrored sources
BUILD_PROJECT_FILE = "_CoqProject.sgs"
BUILD_MAKEFILE = "Makefile.sgs"
#: options of the project-file format and how many items follow each
_OPTION_ARITY = {"-R": 2, "-Q": 2, "-I": 1, "-arg": 1, "-extra": 3, "-extra-phony": 3, "-custom": 3,
                 "-install": 1, "-f": 1, "-o": 1, "-docroot": 1, "-generate-meta-for-package": 1,
                 "-native-compiler": 1, "-no-install": 0, "-no-opt": 0, "-byte": 0, "-opt": 0}
#: why an option the build does not use is left out
_UNUSED_BECAUSE = {
    "-I": "OCaml plugin directories are not built",
    "-arg": "the verifier checks every file with Coq's default options",
    "-extra": "custom make rules are not run",
    "-extra-phony": "custom make rules are not run",
    "-custom": "custom make rules are not run",
}
#: files of a project that are build outputs, never mirrored
_BUILD_OUTPUTS = re.compile(r".*\.(vo|vos|vok|glob|aux|cmx|cmxs|cmi|cmo|o)$|\.lia\.cache$|Makefile\.sgs.*|\.Makefile\.sgs.*")
#: seconds allowed for ``coq_makefile`` and for ``make``
MAKEFILE_TIMEOUT_S = 60
DEFAULT_BUILD_TIMEOUT_S = 1_800


class ProjectError(ValueError):
    """The folder is not a Rocq project this tool can read."""


class BuildError(RuntimeError):
    """The project does not build; the message names each file that failed."""


@dataclass(frozen=True)
class LoadPathItem:
    """One ``-R``/``-Q`` item of the project file, its directory relative to the project."""

    flag: str
    directory: str
    name: str


@dataclass(frozen=True)
class Project:
    """What a project file says, as far as checking in context needs it."""

    #: the project folder (absolute)
    root: Path
    #: the project file it was read from (``_CoqProject`` or ``Make``)
    project_file: str
    #: the ``-R``/``-Q`` items
    load_path: tuple[LoadPathItem, ...]
    #: the ``.v`` files, relative to ``root``, in the project file's order
    sources: tuple[str, ...]
    #: items not used, each with why
    ignored: tuple[str, ...]

    def logical_module(self, source: str) -> str:
        """The logical name of ``source`` (``GroupTheory.Z.Zle`` for
        ``Z/Zle.v`` under ``-R . GroupTheory``): the innermost ``-R``/``-Q``
        directory holding it, then its sub-folders, then its name."""
        parts = Path(source).with_suffix("").parts
        best: tuple[int, str] | None = None
        for item in self.load_path:
            prefix = () if item.directory == "." else Path(item.directory).parts
            if parts[:len(prefix)] == prefix and (best is None or len(prefix) > best[0]):
                best = (len(prefix), ".".join((item.name, *parts[len(prefix):])))
        if best is None:
            raise ProjectError(f"{source} is in no -R/-Q directory of {self.project_file}, so it has no logical name")
        return best[1]


def read_project(root: Path) -> Project:
    """Read the project file of ``root``; :class:`ProjectError` when there is
    none, it names no load path or no ``.v`` file, or it names a file that is
    not there or lies outside the project."""
    root = root.resolve()
    if not root.is_dir():
        raise ProjectError(f"{root} is not a directory")
    found = next((name for name in PROJECT_FILES if (root / name).is_file()), None)
    if found is None:
        raise ProjectError(f"{root} is not a Rocq project: it has no {' or '.join(PROJECT_FILES)} file")
    try:
        lexer = shlex.shlex((root / found).read_text(encoding="utf-8"), posix=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        items = list(lexer)
    except (UnicodeDecodeError, ValueError) as error:
        raise ProjectError(f"{root / found}: cannot be read ({error})") from None
    load_path: list[LoadPathItem] = []
    sources: list[str] = []
    ignored: list[str] = []
    i = 0
    while i < len(items):
        item = items[i]
        if item.startswith("-"):
            arity = _OPTION_ARITY.get(item)
            if arity is None:
                ignored.append(f"{item}: unknown option, skipped")
                i += 1
                continue
            arguments = items[i + 1:i + 1 + arity]
            if len(arguments) < arity:
                raise ProjectError(f"{root / found}: {item} needs {arity} arguments, the file ends first")
            i += 1 + arity
            if item in ("-R", "-Q"):
                load_path.append(LoadPathItem(item, _inside(root, arguments[0], found), arguments[1]))
            else:
                shown = " ".join(a if len(a) < 40 else a[:37] + "..." for a in arguments).replace("\n", " ")
                ignored.append(f"{item} {shown}: {_UNUSED_BECAUSE.get(item, 'a build option, not used')}")
            continue
        i += 1
        if item.endswith(".v"):
            source = _inside(root, item, found)
            if not (root / source).is_file():
                raise ProjectError(f"{root / found} lists {item}, which is not in the project")
            sources.append(source)
        else:
            ignored.append(f"{item}: not a .v file (OCaml and other files are not built)")
    if not load_path:
        raise ProjectError(f"{root / found} has no -R or -Q line, so its files have no logical name")
    if not sources:
        raise ProjectError(f"{root / found} lists no .v file")
    project = Project(root, found, tuple(load_path), tuple(dict.fromkeys(sources)), tuple(ignored))
    for source in project.sources:
        project.logical_module(source)
    return project


def _inside(root: Path, item: str, project_file: str) -> str:
    """``item`` as a normalised path relative to ``root``; it may not leave it."""
    relative = os.path.normpath(item)
    if os.path.isabs(relative) or relative == ".." or relative.startswith(".." + os.sep):
        raise ProjectError(f"{root / project_file}: {item!r} lies outside the project folder")
    return relative


def source_digest(directory: Path) -> str:
    """The version of the project in ``directory``: a SHA-256 over every
    ``.v`` file below it (relative path and contents, in sorted order)."""
    digest = hashlib.sha256()
    for path in sorted(_v_files(directory)):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\x00")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _v_files(directory: Path) -> list[Path]:
    return [Path(folder) / name for folder, subfolders, names in os.walk(directory)
            for name in names if name.endswith(".v") and not name.startswith(".")]


def default_build_dir(project: Project) -> Path:
    """``$XDG_CACHE_HOME/sgs/rocq_projects/<folder>-<digest>``: one build per version."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "sgs" / "rocq_projects" / f"{project.root.name}-{source_digest(project.root)[:16]}"


def mirror(project: Project, build_dir: Path) -> None:
    """Copy the project's files (not its build outputs, not symbolic links)
    into ``build_dir``; a file whose contents are already there is left
    alone, so that ``make`` sees its ``.vo`` as up to date."""
    if build_dir.resolve() == project.root or project.root in build_dir.resolve().parents:
        raise ProjectError(f"the build directory {build_dir} may not be inside the project folder")
    for folder, subfolders, names in os.walk(project.root):
        subfolders[:] = [name for name in subfolders if not name.startswith(".")]
        target_folder = build_dir / Path(folder).relative_to(project.root)
        target_folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            source = Path(folder) / name
            if source.is_symlink() or not source.is_file() or _BUILD_OUTPUTS.fullmatch(name):
                continue
            target = target_folder / name
            if target.is_file() and target.read_bytes() == source.read_bytes():
                continue
            shutil.copyfile(source, target)


def build(project: Project, build_dir: Path, *, jobs: int = 2, timeout: float = DEFAULT_BUILD_TIMEOUT_S) -> None:
    """Mirror and compile the project in ``build_dir``; :class:`BuildError`
    naming every file without an up-to-date ``.vo`` afterwards."""
    build_dir.mkdir(parents=True, exist_ok=True)
    mirror(project, build_dir)
    lines = [f"{item.flag} {shlex.quote(item.directory)} {item.name}" for item in project.load_path]
    lines += [shlex.quote(source) for source in project.sources]
    (build_dir / BUILD_PROJECT_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    _run(["coq_makefile", "-f", BUILD_PROJECT_FILE, "-o", BUILD_MAKEFILE], build_dir, MAKEFILE_TIMEOUT_S)
    # -k: go on past a failing file, so that every failure is reported at once
    output = _run(["make", "-f", BUILD_MAKEFILE, "-k", f"-j{jobs}"], build_dir, timeout, check=False)
    failed = [source for source in project.sources if not _up_to_date(build_dir / source)]
    if failed:
        raise BuildError(f"{project.root} does not build ({len(failed)} of {len(project.sources)} files failed): "
                         + "; ".join(f"{source}: {_error_of(source, output)}" for source in failed))


def _up_to_date(source: Path) -> bool:
    compiled = source.with_suffix(".vo")
    return compiled.is_file() and compiled.stat().st_mtime_ns >= source.stat().st_mtime_ns


def _error_of(source: str, output: str) -> str:
    """Coq's error for ``source`` in the build output, or why it has none."""
    match = re.search(rf'File "(?:\./)?{re.escape(source)}", line (\d+)[^\n]*\n(?:(?!File ").*\n)*?Error:\s*(.*)',
                      output)
    if match:
        return f"line {match.group(1)}: Error: {match.group(2).strip()[:300]}"
    return "not compiled (a file it needs failed, or make stopped)"


def _run(argv: list[str], cwd: Path, timeout: float, *, check: bool = True) -> str:
    """Run one build command in a process group of its own (so that a timeout
    kills ``make`` and every ``coqc`` it started); its output, stdout and
    stderr together."""
    try:
        process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    except FileNotFoundError:
        raise BuildError(f"{argv[0]} is not installed (install Rocq/Coq 8.16 and make)") from None
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise BuildError(f"{' '.join(argv)} did not finish within {timeout:.0f} s") from None
    if check and process.returncode != 0:
        raise BuildError(f"{' '.join(argv)} failed (exit {process.returncode}): {output[-1500:]}")
    return output
