"""The Python half of ``tools/gpu_bundle.sh``: which wheels a lent GPU machine lacks, and how to cut
the bundle into pieces that one call to that machine can carry each.

    python tools/gpu_bundle.py wheels --have-file HAVE --skip "a b" --out DIR REQUIREMENT...
    python tools/gpu_bundle.py pack --max-mib 54 --out DIR FILE...

``wheels`` resolves the requirements' closure for CPython 3.12 on manylinux x86-64 and downloads one
wheel per package into ``--out``: a package installed in this environment at a version the
requirement accepts is taken at that version (the versions SGS is tested with), any other at the
newest version pip finds for the requirement; each wheel's own metadata names the next requirements.
Packages the machine already has (``--have``/``--have-file``) and those named in ``--skip`` are left
out.  A package that PyPI has only as source (DeepSpeed) is built into a wheel here.  Requirements that
disagree about a version stop it with the list of conflicts; ``--override NAME==VERSION`` settles one.

``pack`` fills folders ``call1``, ``call2``, ... of at most ``--max-mib`` each with the files, cutting a
file where a folder is full (``NAME.part-00``, ``NAME.part-01``, ...): one folder per call to the lent
machine (each call carries at most 64 MiB with the repository).  Each
folder gets ``stash.sh`` (keeps its pieces in ``$SGS_BUNDLE_ROOT/carried``, default
``/tmp/sgs-bundle``) and ``activate.sh`` (to source in the last call: stashes, names the pieces still
missing or joins and unpacks ``rocq``, ``python`` and ``vllm`` once and sets PATH, COQLIB, COQCORELIB,
OCAMLPATH, OCAMLFIND_CONF (a findlib configuration naming the bundle's plugins), PYTHONPATH and, with
vLLM, VLLM_USE_FLASHINFER_SAMPLER=0).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

MIB = 2**20
#: The lent machines' interpreter and platform (device README, KINDS.md).
TARGET = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
          "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
          "platform_python_implementation": "CPython", "os_name": "posix"}
PLATFORMS = ["manylinux_2_35_x86_64", "manylinux_2_34_x86_64", "manylinux_2_31_x86_64", "manylinux_2_28_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def applies(requirement: Requirement, extras: set[str]) -> bool:
    """Whether ``requirement`` holds on the target machine for a package asked for with ``extras``."""
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({**TARGET, "extra": extra}) for extra in extras | {""})


def requirements_of(metadata_text: str) -> list[Requirement]:
    return [Requirement(line.split(":", 1)[1].strip()) for line in metadata_text.splitlines()
            if line.startswith("Requires-Dist:")]


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def pin(requirement: Requirement) -> str:
    """The requirement to download: this environment's version where it is accepted, else the requirement."""
    version = installed_version(requirement.name)
    if version is not None and requirement.specifier.contains(Version(version), prereleases=True):
        return f"{requirement.name}=={version}"
    return f"{requirement.name}{requirement.specifier}"


def fetch_wheel(spec: str, directory: Path) -> Path:
    """Download (or, for a source-only package, build) the wheel pip picks for ``spec``; its path."""
    before = set(directory.glob("*.whl"))
    platform_args = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    download = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                "--python-version", TARGET["python_version"], "--implementation", "cp", *platform_args,
                "-d", str(directory), spec]
    if subprocess.run(download, capture_output=True, text=True).returncode != 0:
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(directory), spec],
                               capture_output=True, text=True)
        if built.returncode != 0:
            raise RuntimeError(f"no wheel for {spec} (pip download and pip wheel failed):\n{built.stderr[-2000:]}")
    new = sorted(set(directory.glob("*.whl")) - before)
    if new:
        return new[0]
    name = canonical(Requirement(spec).name)
    existing = [path for path in directory.glob("*.whl") if canonical(path.name.split("-")[0]) == name]
    if not existing:
        raise RuntimeError(f"pip reported success for {spec} but left no wheel in {directory}")
    return existing[0]


def wheel_metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [entry for entry in archive.namelist() if entry.endswith(".dist-info/METADATA")
                   and entry.count("/") == 1]
        return archive.read(name).decode()


def resolve(roots: list[str], have: set[str], skip: set[str], out: Path, overrides: list[str] = (),
            fetch=fetch_wheel, read_metadata=wheel_metadata) -> list[Path]:
    """Download the closure of ``roots`` into ``out``; the wheels, one per package.

    Each package is fetched once, for the first requirement naming it (or at its ``overrides`` entry,
    ``name==version``, whatever the requirements say).  A later requirement that rejects the version
    chosen is a conflict: all of them are raised together (this is no backtracking resolver; settle a
    conflict with an override).  ``fetch`` and ``read_metadata`` are pip and the wheel's METADATA
    (replaced in tests).
    """
    leave_out = {canonical(name) for name in have | skip}
    forced = {canonical(Requirement(spec).name): spec for spec in overrides}
    todo = [(Requirement(root), "the command line") for root in roots]
    wanted: dict[str, set[str]] = {}
    wheels: dict[str, Path] = {}
    conflicts: list[str] = []
    while todo:
        requirement, asked_by = todo.pop(0)
        key = canonical(requirement.name)
        if key in leave_out:
            continue
        if key in wheels and key not in forced:
            chosen = wheel_version(wheels[key])
            if not requirement.specifier.contains(chosen, prereleases=True):
                conflicts.append(f"{asked_by} needs {requirement}, but {key} {chosen} was chosen")
        extras = set(requirement.extras)
        if key in wanted and extras <= wanted[key]:
            continue
        wanted[key] = wanted.get(key, set()) | extras
        if key not in wheels:
            wheels[key] = fetch(forced.get(key) or pin(requirement), out)
        for needed in requirements_of(read_metadata(wheels[key])):
            if applies(needed, wanted[key]):
                todo.append((needed, f"{key} {wheel_version(wheels[key])}"))
    if conflicts:
        raise ValueError("conflicting requirements (settle each with --override NAME==VERSION):\n  "
                         + "\n  ".join(conflicts))
    return list(wheels.values())


def wheel_version(wheel: Path) -> Version:
    """The version in a wheel's file name (``name-version-...whl``)."""
    return Version(wheel.name.split("-")[1])


def pack(files: list[Path], out: Path, max_mib: float) -> list[Path]:
    """Fill folders ``call1``, ``call2``, ... of at most ``max_mib`` each with ``files`` in turn, a file
    that does not fit in what is left of a folder cut there and continued in the next (its pieces named
    ``NAME.part-00``, ``NAME.part-01``, ...): as few folders as the total size allows.  The folders."""
    limit = int(max_mib * MIB)
    folders: list[Path] = []
    room = 0
    for path in files:
        size = path.stat().st_size
        pieces = 0
        with path.open("rb") as stream:
            while True:
                if room == 0:
                    folders.append(out / f"call{len(folders) + 1}")
                    folders[-1].mkdir(parents=True, exist_ok=True)
                    room = limit
                chunk = stream.read(room)
                whole = pieces == 0 and len(chunk) == size
                name = path.name if whole else f"{path.name}.part-{pieces:02d}"
                (folders[-1] / name).write_bytes(chunk)
                room -= len(chunk)
                pieces += 1
                if stream.tell() >= size:
                    break
    return folders


#: Written into every call folder: keeps the folder's pieces on the machine for the last call.
STASH_SH = """# keep this folder's pieces of the SGS GPU bundle on the machine until the last call needs them
ROOT="${SGS_BUNDLE_ROOT:-/tmp/sgs-bundle}"
mkdir -p "$ROOT/carried" && cp "$(dirname "${BASH_SOURCE[0]}")"/*.tar.xz* "$ROOT/carried/"
"""

#: Written into every call folder; ``{pieces}`` is filled with the names of all pieces of the bundle.
ACTIVATE_SH = """# source this on the GPU machine, in the last call: join and unpack the bundle, set the environment
PIECES="{pieces}"
bash "$(dirname "${{BASH_SOURCE[0]}}")/stash.sh"
ROOT="${{SGS_BUNDLE_ROOT:-/tmp/sgs-bundle}}"
MISSING="$(for piece in $PIECES; do [[ -f "$ROOT/carried/$piece" ]] || printf '%s ' "$piece"; done)"
if [[ -n "$MISSING" ]]; then
  echo "gpu bundle: not carried yet: $MISSING(carry each .gpu_bundle/callN and run its stash.sh first)" >&2
  return 1 2>/dev/null || exit 1
fi
for part in rocq python vllm; do
  ls "$ROOT/carried/$part.tar.xz"* >/dev/null 2>&1 || continue
  if [[ ! -d "$ROOT/$part" ]]; then
    mkdir -p "$ROOT/$part.partial" && cat "$ROOT/carried/$part.tar.xz"* | tar -C "$ROOT/$part.partial" -xJ \\
      && mv "$ROOT/$part.partial" "$ROOT/$part"
  fi
done
export PATH="$ROOT/rocq/bin:$PATH" COQLIB="$ROOT/rocq/lib/coq" COQCORELIB="$ROOT/rocq/lib/coq-core"
export OCAMLPATH="$ROOT/rocq/lib" PYTHONPATH="$ROOT/python${{PYTHONPATH:+:$PYTHONPATH}}"
# coqtop finds its plugins (lia's among them) through findlib, which stops with an anomaly when
# /etc/ocamlfind.conf is missing, as on a machine without OCaml (seen on an H100, 2026-11-26)
printf 'path="%s"\ndestdir="%s"\n' "$ROOT/rocq/lib" "$ROOT/rocq/lib" > "$ROOT/rocq/ocamlfind.conf"
export OCAMLFIND_CONF="$ROOT/rocq/ocamlfind.conf"
if [[ -d "$ROOT/vllm" ]]; then
  # FlashInfer is not carried; vLLM 0.25's sampler imports it unless told not to (seen on an H100, 2026-11-26)
  export PYTHONPATH="$ROOT/vllm:$PYTHONPATH" VLLM_USE_FLASHINFER_SAMPLER=0
fi
"""


def write_scripts(folders: list[Path]) -> None:
    """Put ``stash.sh`` and ``activate.sh`` (naming every piece of the bundle) into each call folder."""
    pieces = " ".join(sorted(path.name for folder in folders for path in folder.iterdir()))
    for folder in folders:
        (folder / "stash.sh").write_text(STASH_SH)
        (folder / "activate.sh").write_text(ACTIVATE_SH.format(pieces=pieces))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    wheels = commands.add_parser("wheels", help="download the closure of requirements as wheels")
    wheels.add_argument("requirements", nargs="+")
    wheels.add_argument("--out", type=Path, required=True)
    wheels.add_argument("--have", default="", help="names the machine already has (space-separated)")
    wheels.add_argument("--have-file", type=Path, help="a file of such names (spaces, commas or lines)")
    wheels.add_argument("--skip", default="", help="names to leave out although required (space-separated)")
    wheels.add_argument("--override", action="append", default=[], metavar="NAME==VERSION",
                        help="take this version whatever the requirements say (repeatable)")
    packer = commands.add_parser("pack", help="split and place files into call-sized folders")
    packer.add_argument("files", nargs="+", type=Path)
    packer.add_argument("--out", type=Path, required=True)
    packer.add_argument("--max-mib", type=float, default=54.0)
    args = parser.parse_args()

    if args.command == "pack":
        missing = [str(path) for path in args.files if not path.is_file()]
        if missing or args.max_mib <= 0:
            parser.error(f"pack: not a file: {', '.join(missing)}" if missing else "--max-mib must be positive")
        folders = pack(args.files, args.out, args.max_mib)
        write_scripts(folders)
        for folder in folders:
            total = sum(path.stat().st_size for path in folder.iterdir())
            print(f"{folder}: {total / MIB:.1f} MiB ({' '.join(sorted(p.name for p in folder.iterdir()))})")
        return 0

    have = set(args.have.split())
    if args.have_file:
        have |= set(re.split(r"[\s,]+", args.have_file.read_text().strip()))
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        found = resolve(args.requirements, have, set(args.skip.split()), args.out, args.override)
    except ValueError as error:
        print(f"gpu_bundle.py wheels: {error}", file=sys.stderr)
        return 1
    print(" ".join(sorted(path.name for path in found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
