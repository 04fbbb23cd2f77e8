"""Every file of the chosen libraries, replayed into per-file shards, resumably.

A run lists the files of each library, skips every file whose shard is
already there (finished or failed: a failure is a result, recorded with its
error; ``retry_failed`` replays those again), and replays the rest ``jobs``
at a time, writing each file's shard as soon as it is done.  Killing the run
loses at most the files in progress; the same command resumes.

The corpus directory also holds ``corpus.json``, the settings every shard was
made with (the split's seed and ratios): resuming with other settings would
mix two corpora, so it is refused.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from sgs.corpus.records import FORMAT_VERSION, FileRecord, read_meta, shard_path, write_shard
from sgs.corpus import replay
from sgs.corpus.rocq_text import error_line
from sgs.corpus.sources import Library
from sgs.corpus.split import DEFAULT_RATIOS, split_of

SETTINGS_FILE = "corpus.json"


class ExtractError(ValueError):
    """The run cannot start (the command exits 2)."""


@dataclass
class Summary:
    """What one run did."""

    replayed: int = 0
    failed: int = 0
    skipped: int = 0
    theorems: int = 0
    steps: int = 0
    bytes: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


def prepare_out(out: Path, seed: int, ratios: tuple[float, float, float] = DEFAULT_RATIOS) -> None:
    """Create the corpus directory and record its settings; ExtractError when it
    cannot be written or was made with other settings."""
    settings = {"format_version": FORMAT_VERSION, "seed": seed, "ratios": list(ratios)}
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write_probe"
        probe.write_text("", "utf-8")
        probe.unlink()
    except OSError as e:
        raise ExtractError(f"cannot write to --out {out}: {e.strerror or e}") from e
    stored = out / SETTINGS_FILE
    if stored.exists():
        try:
            before = json.loads(stored.read_text("utf-8"))
        except (OSError, ValueError) as e:
            raise ExtractError(f"{stored} is unreadable ({e}); remove it or use another --out") from e
        if before != settings:
            raise ExtractError(f"{out} holds a corpus made with {before}, not {settings}: "
                               "use the same settings to resume, or another --out")
    else:
        stored.write_text(json.dumps(settings, indent=1) + "\n", "utf-8")


def run(out: Path, libraries: Sequence[Library], *, patterns: Sequence[str] = (), jobs: int = 1,
        coqtop: str = "coqtop", seed: int = 0, step_timeout: float = 120.0, file_timeout: float = 3600.0,
        retry_failed: bool = False, log: Callable[[str], None] = print) -> Summary:
    """Replay every file of ``libraries`` (matching ``patterns``) not yet in ``out``."""
    exe = shutil.which(coqtop)
    if exe is None:
        raise ExtractError(f"{coqtop} not found: install Rocq 8.16 (tools/setup.sh, or apt-get install coq)")
    prepare_out(out, seed)
    version = replay.coq_version(exe)
    todo: list[tuple[Library, str]] = []
    summary = Summary()
    for library in libraries:
        files = library.files(patterns)
        waiting = 0
        for file in files:
            shard = shard_path(out, library.name, file)
            meta = read_meta(shard) if shard.exists() else None
            if meta is not None and not (retry_failed and meta.status == "failed"):
                summary.skipped += 1
                continue
            todo.append((library, file))
            waiting += 1
        log(f"{library.name}: {len(files)} files under {library.root}, {len(files) - waiting} already done, "
            f"{waiting} to replay")
    started = time.monotonic()
    lock = threading.Lock()

    def one(item: tuple[Library, str]) -> None:
        library, file = item
        split = split_of(library.name, file, seed)
        try:
            meta, theorems = replay.replay_file(library, file, coqtop=exe, split=split, step_timeout=step_timeout,
                                         file_timeout=file_timeout, coq_version=version)
        except Exception as e:     # a bug of ours on one file must not end the run: record it like a failure
            meta = FileRecord(library=library.name, file=file, module=library.module_of(file), split=split,
                              status="failed", error=f"internal error: {type(e).__name__}: {e}"[:4000],
                              coq_version=version)
            theorems = []
        size = write_shard(shard_path(out, library.name, file), meta, theorems)
        with lock:
            summary.replayed += 1
            summary.theorems += meta.theorems
            summary.steps += meta.steps
            summary.bytes += size
            if meta.status != "ok":
                summary.failed += 1
                summary.failures.append(f"{library.name}/{file}:{meta.failed_line}: {error_line(meta.error)}")
            done = summary.replayed
        first_error = f" -- line {meta.failed_line}: {error_line(meta.error)[:200]}" if meta.error else ""
        given_up = f", {len(meta.failed_proofs)} proofs given up" if meta.failed_proofs else ""
        log(f"[{done}/{len(todo)}] {library.name}/{file}: {meta.status}, {meta.theorems} theorems{given_up}, "
            f"{meta.steps} steps, {meta.seconds:.1f} s, {size / 1024:.0f} KiB{first_error}")

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for _ in pool.map(one, todo):
            pass
    summary.seconds = time.monotonic() - started
    return summary
