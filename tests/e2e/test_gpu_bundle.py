"""tools/gpu_bundle.py (the closure of wheels, the call-sized folders) and tools/gpu_bundle.sh's arguments.

The closure is tested with a fake index (``fetch``/``read_metadata`` stand-ins for pip and a
wheel's METADATA); building a real bundle downloads hundreds of MB and is run by hand
(benchmarks/README.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.paths import REPO

sys.path.insert(0, str(REPO / "tools"))

import gpu_bundle  # noqa: E402


class FakeIndex:
    """A stand-in for PyPI: each package's versions (newest last) and their requirements."""

    def __init__(self, requires: dict[str, list[str]], versions: dict[str, list[str]] | None = None):
        self.requires = requires
        self.versions = versions or {}
        self.fetched: list[str] = []

    def fetch(self, spec: str, directory: Path) -> Path:
        self.fetched.append(spec)
        requirement = Requirement(spec)
        offered = [v for v in self.versions.get(requirement.name, ["1.0"]) if requirement.specifier.contains(v)]
        return directory / f"{requirement.name}-{offered[-1]}-py3-none-any.whl"

    def read_metadata(self, wheel: Path) -> str:
        return "\n".join(f"Requires-Dist: {line}" for line in self.requires[wheel.name.split("-")[0]])

    def resolve(self, roots: list[str], **options) -> list[str]:
        options.setdefault("have", set())
        options.setdefault("skip", set())
        wheels = gpu_bundle.resolve(roots, out=Path("/nowhere"), fetch=self.fetch, read_metadata=self.read_metadata,
                                    **options)
        return sorted("-".join(path.name.split("-")[:2]) for path in wheels)


def test_closure_follows_requirements_and_leaves_out_what_the_machine_has():
    index = FakeIndex({
        "app": ["lib_a>=1", "Lib_B", "numpy", "winonly; sys_platform == 'win32'", "docs; extra == 'docs'",
                "old; python_version < '3.10'"],
        "lib_a": ["lib_c"], "Lib_B": ["lib_c", "kernels"], "lib_c": [],
    })
    assert index.resolve(["app"], have={"numpy"}, skip={"kernels"}) == \
        ["Lib_B-1.0", "app-1.0", "lib_a-1.0", "lib_c-1.0"]
    assert len(index.fetched) == 4  # lib_c asked for twice, fetched once


def test_closure_follows_extras_asked_for_later():
    index = FakeIndex({"app": ["cluster", "cluster[train]"], "cluster": ["core", "trainer; extra == 'train'"],
                       "core": [], "trainer": []}, versions={"cluster": ["99.0"]})
    assert index.resolve(["app", "cluster<100"]) == ["app-1.0", "cluster-99.0", "core-1.0", "trainer-1.0"]


def test_a_requirement_rejecting_the_chosen_version_is_a_conflict_unless_overridden():
    index = FakeIndex({"engine": ["ffi==0.1.9", "grammar"], "grammar": ["ffi>=0.1.11"], "ffi": []},
                      versions={"ffi": ["0.1.9", "0.1.15"]})
    with pytest.raises(ValueError, match=r"grammar 1.0 needs ffi>=0.1.11, but ffi 0.1.9 was chosen"):
        index.resolve(["engine"])
    assert index.resolve(["engine"], overrides=["ffi==0.1.15"]) == ["engine-1.0", "ffi-0.1.15", "grammar-1.0"]


def test_pin_prefers_this_environments_accepted_version():
    installed = gpu_bundle.installed_version("packaging")
    assert gpu_bundle.pin(Requirement("packaging>=1")) == f"packaging=={installed}"
    assert gpu_bundle.pin(Requirement("packaging<1")) == "packaging<1"  # this version not accepted
    assert gpu_bundle.pin(Requirement("surely-not-installed-xyz>=2")) == "surely-not-installed-xyz>=2"


def test_pack_fills_each_folder_to_the_limit_and_the_pieces_join_back(tmp_path):
    mib = gpu_bundle.MIB
    files = []
    for name, size in {"big.tar.xz": int(2.5 * mib), "mid.tar.xz": int(0.6 * mib), "small.tar.xz": 1000}.items():
        files.append(tmp_path / name)
        files[-1].write_bytes(os.urandom(size))
    folders = gpu_bundle.pack(files, tmp_path / "out", max_mib=1.0)
    assert [folder.name for folder in folders] == ["call1", "call2", "call3", "call4"]  # 3.1 MiB in all
    sizes = [sum(path.stat().st_size for path in folder.iterdir()) for folder in folders]
    assert sizes[:3] == [mib] * 3
    pieces = sorted((folder / name for folder in folders for name in (p.name for p in folder.iterdir())),
                    key=lambda path: path.name)
    assert [path.name for path in pieces] == ["big.tar.xz.part-00", "big.tar.xz.part-01", "big.tar.xz.part-02",
                                              "mid.tar.xz.part-00", "mid.tar.xz.part-01", "small.tar.xz"]
    for original in files:
        joined = b"".join(path.read_bytes() for path in pieces if path.name.startswith(original.name))
        assert joined == original.read_bytes()


def test_pack_command_refuses_a_missing_file(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "tools" / "gpu_bundle.py"), "pack", "--out", str(tmp_path),
                           str(tmp_path / "absent.tar.xz")], capture_output=True, text=True)
    assert done.returncode == 2
    assert "not a file" in done.stderr and "absent.tar.xz" in done.stderr


@pytest.mark.parametrize("args, message", [
    (["--vllm"], "--vllm needs a version"),
    (["--call-mib", "100"], "--call-mib needs a whole number"),
    (["--call-mib", "abc"], "--call-mib needs a whole number"),
    (["--bogus"], "unknown option --bogus"),
])
def test_bundle_script_refuses_bad_arguments(args, message):
    done = subprocess.run(["bash", str(REPO / "tools" / "gpu_bundle.sh"), *args], capture_output=True, text=True)
    assert done.returncode == 2
    assert message in done.stderr


def test_bundle_script_help_names_every_option():
    done = subprocess.run(["bash", str(REPO / "tools" / "gpu_bundle.sh"), "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for option in ("--vllm VERSION", "--call-mib N", "stash.sh", "activate.sh", "make gpu-check"):
        assert option in done.stdout


def _archive(path: Path, files: dict[str, str | bytes]) -> Path:
    """A small tar.xz holding ``files`` (relative name -> content)."""
    import io
    import tarfile

    with tarfile.open(path, "w:xz") as archive:
        for name, text in files.items():
            data = text.encode() if isinstance(text, str) else text
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            archive.addfile(info, io.BytesIO(data))
    return path


def test_the_bundle_is_carried_call_by_call_and_activated_in_the_last(tmp_path):
    """The flow on a lent machine: each call stashes its folder, activate.sh names what is missing
    until every piece is there, then joins the split archive, unpacks and sets the environment."""
    rocq = _archive(tmp_path / "rocq.tar.xz", {"bin/coqc": "#!/bin/sh\necho 'The Coq Proof Assistant (bundled)'\n"})
    python = _archive(tmp_path / "python.tar.xz", {"bundled_probe.py": "WHERE = 'bundle'\n"})
    # incompressible content, so that the vLLM archive must be split over two calls
    vllm = _archive(tmp_path / "vllm.tar.xz", {"vllm_probe.py": "SIZE = 1\n", "noise.bin": os.urandom(1_500_000)})
    folders = gpu_bundle.pack([rocq, python, vllm], tmp_path / "bundle", max_mib=1.0)
    gpu_bundle.write_scripts(folders)
    assert len(folders) == 2 and any(".part-01" in p.name for f in folders for p in f.iterdir())
    root = tmp_path / "machine"
    env = {**os.environ, "SGS_BUNDLE_ROOT": str(root), "PYTHONPATH": ""}
    activate = (f"source {folders[-1]}/activate.sh && coqc && echo PYTHONPATH=$PYTHONPATH "
                "&& echo SAMPLER=$VLLM_USE_FLASHINFER_SAMPLER && echo FINDLIB=$OCAMLFIND_CONF")

    early = subprocess.run(["bash", "-c", activate], env=env, capture_output=True, text=True)
    assert early.returncode == 1 and "not carried yet" in early.stderr
    assert all(p.name in early.stderr for p in folders[0].iterdir() if ".tar.xz" in p.name)

    subprocess.run(["bash", str(folders[0] / "stash.sh")], env=env, check=True)
    done = subprocess.run(["bash", "-c", activate], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "The Coq Proof Assistant (bundled)" in done.stdout
    assert f"PYTHONPATH={root}/vllm:{root}/python" in done.stdout and "SAMPLER=0" in done.stdout
    assert (root / "vllm" / "vllm_probe.py").read_text() == "SIZE = 1\n"
    assert (root / "python" / "bundled_probe.py").exists()
    # coqtop's plugins are found through findlib, whose configuration the machine may lack
    assert f"FINDLIB={root}/rocq/ocamlfind.conf" in done.stdout
    assert f'path="{root}/rocq/lib"' in (root / "rocq" / "ocamlfind.conf").read_text()
