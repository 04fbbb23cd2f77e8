"""Plain ``coqc``'s verdict on the standard-library corpus
(:mod:`tools.rocq_stdlib_corpus`): the ground truth every case is checked
against.  For every source file and header, ONE ``coqc`` run compiles the
header and all of its cases, each followed by ``Redirect "sgs_case_<k>"
Print Assumptions sgs_case_<k>.``, so each accepted case leaves a file with its
assumptions; when ``coqc`` stops on an error, the failing case is recorded as
rejected and the cases after it are compiled again.  Results are cached on
disk (:func:`cache_dir`), keyed by the ``coqc`` version, the standard
library's location and the compiled text."""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Optional, Sequence

from lean_env.verdict import ProofTask

CLOSED = "Closed under the global context"

#: ground-truth statuses of a case
TruthStatus = Literal["closed", "axioms", "rejected", "timeout", "header_error"]


@dataclass(frozen=True)
class Case:
    """One theorem of the standard library as a verifier task."""

    #: ``sgs_case_<k>``: the renamed theorem (unique within its source file)
    name: str
    #: the source file, relative to the ``theories`` directory (``Arith/PeanoNat.v``)
    source: str
    #: the line of the declaration in the source
    line: int
    #: the theorem's name in the standard library
    original: str
    header: str
    statement: str
    proof: str

    @property
    def key(self) -> str:
        """A unique name for reports: ``Arith/PeanoNat.v:512:add_comm`` (a
        file may reuse a name in another module)."""
        return f"{self.source}:{self.line}:{self.original}"

    def task(self) -> ProofTask:
        return ProofTask(id=self.key, header=self.header, statement=self.statement, proof=self.proof)


def coq_lib(coqc: str = "coqc") -> Path:
    """The standard library's directory (``coqc -where``)."""
    out = subprocess.run([coqc, "-where"], capture_output=True, text=True, check=True, timeout=60).stdout
    return Path(out.strip())


def coqc_version(coqc: str = "coqc") -> str:
    out = subprocess.run([coqc, "-v"], capture_output=True, text=True, check=True, timeout=60).stdout
    m = re.search(r"version (\S+)", out)
    return m.group(1) if m else out.strip()


# -- ground truth -----------------------------------------------------------------

@dataclass(frozen=True)
class Truth:
    """What ``coqc`` said about one case."""

    status: TruthStatus
    #: the assumptions (``axioms``) or the error (``rejected``)
    detail: str = ""


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/sgs/rocq_stdlib_corpus`` (default ``~/.cache/sgs/...``)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "sgs" / "rocq_stdlib_corpus"


_ERROR_AT = re.compile(r'File "[^"]*", line (\d+), characters \d+-\d+:\n(?:Error|Anomaly)')


def _render(header: str, cases: Sequence[Case]) -> tuple[str, list[tuple[int, int]]]:
    """The file ``coqc`` compiles and each case's line range in it."""
    text = header + "\n"
    spans = []
    for case in cases:
        block = f"\n{case.statement}\n{case.proof}\nRedirect \"{case.name}\" Print Assumptions {case.name}.\n"
        first = text.count("\n") + 2
        text += block
        spans.append((first, text.count("\n")))
    return text, spans


def _compile_group(coqc: str, header: str, cases: Sequence[Case], timeout: float) -> dict[str, Truth]:
    """Compile ``cases`` under ``header`` with ``coqc``, rerunning after each
    failure; returns every case's truth."""
    results: dict[str, Truth] = {}
    todo = list(cases)
    while todo:
        with tempfile.TemporaryDirectory(prefix="sgs_stdlib_") as tmp:
            text, spans = _render(header, todo)
            Path(tmp, "sgs_corpus.v").write_text(text, "utf-8")
            try:
                done = subprocess.run([coqc, "-q", "sgs_corpus.v"], cwd=tmp, capture_output=True, text=True,
                                      timeout=timeout)
                output: Optional[str] = done.stdout + done.stderr
                rc = done.returncode
            except subprocess.TimeoutExpired:
                output, rc = None, -1
            answered = 0
            for case in todo:
                out = Path(tmp, f"{case.name}.out")
                if not out.exists():
                    break
                said = out.read_text("utf-8", "replace").strip()
                results[case.name] = Truth("closed") if said == CLOSED else Truth("axioms", said)
                answered += 1
        rest = todo[answered:]
        if not rest:
            break
        if rc == 0:   # cannot happen: every case prints its assumptions
            for case in rest:
                results[case.name] = Truth("rejected", "coqc accepted the file but printed nothing")
            break
        if output is None:     # timed out: blame the case only when it ran first
            if answered == 0:
                results[rest[0].name] = Truth("timeout", f"coqc ran over {timeout} s")
                todo = rest[1:]
            else:
                todo = rest
            continue
        errors = [int(m.group(1)) for m in _ERROR_AT.finditer(output)]
        if errors and errors[-1] < spans[0][0]:
            for case in todo:
                results[case.name] = Truth("header_error", output[-2000:])
            break
        # coqc works in order: the first case that printed nothing is the one that failed
        results[rest[0].name] = Truth("rejected", output[-2000:])
        todo = rest[1:]
    return results


def _group_key(version: str, lib: Path, header: str, cases: Sequence[Case]) -> str:
    text, _ = _render(header, cases)
    return hashlib.sha256(json.dumps([version, str(lib.resolve()), text]).encode()).hexdigest()


def ground_truth(cases: Sequence[Case], *, coqc: str = "coqc", jobs: int = 1, timeout: float = 300.0,
                 cache: Optional[Path] = None, progress: Callable[[str], None] | None = None) -> dict[str, Truth]:
    """Every case's :class:`Truth` by :attr:`Case.key`: one ``coqc`` run per
    source file and header (plus one per failure), ``jobs`` at a time, each
    group's result cached in ``cache`` (default :func:`cache_dir`)."""
    coqc = shutil.which(coqc) or coqc
    version = coqc_version(coqc)
    lib = coq_lib(coqc)
    cache = cache_dir() if cache is None else cache
    cache.mkdir(parents=True, exist_ok=True)
    groups: dict[tuple[str, str], list[Case]] = collections.defaultdict(list)
    for case in cases:
        groups[(case.source, case.header)].append(case)

    def run(item: tuple[tuple[str, str], list[Case]]) -> dict[str, Truth]:
        (source, header), members = item
        stored = cache / f"{_group_key(version, lib, header, members)}.json"
        if stored.exists():
            raw = json.loads(stored.read_text("utf-8"))
            truths = {name: Truth(*value) for name, value in raw.items()}
        else:
            started = time.monotonic()
            truths = _compile_group(coqc, header, members, timeout)
            tmp = stored.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps({n: [t.status, t.detail] for n, t in truths.items()}), "utf-8")
            tmp.replace(stored)
            if progress:
                progress(f"{source}: {len(members)} cases, {time.monotonic() - started:.1f} s")
        return {case.key: truths[case.name] for case in members}

    results: dict[str, Truth] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for part in pool.map(run, groups.items()):
            results.update(part)
    return results
