"""The summary of a corpus directory: files, theorems and steps per library
and split, sizes on disk, and the time the replay took.

It reads only each shard's first line (the file record carries the counts),
so it is quick on a corpus of any size, and it can run while an extraction
is writing more shards.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Mapping, Optional

from sgs.corpus.records import read_meta, shards
from sgs.corpus.split import SPLITS


@dataclass
class Row:
    files: int = 0
    failed: int = 0
    #: proofs given up because a tactic failed under replay (their files went on)
    given_up: int = 0
    theorems: int = 0
    finished: int = 0
    stdlib_closed: int = 0
    steps: int = 0
    steps_with_lemmas: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def add(self, other: "Row") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def collect(out: Path) -> tuple[dict[tuple[str, str], Row], int]:
    """Rows by (library, split), and the number of unreadable shards."""
    rows: dict[tuple[str, str], Row] = collections.defaultdict(Row)
    unreadable = 0
    for path in shards(out):
        meta = read_meta(path)
        if meta is None:
            unreadable += 1
            continue
        rows[(meta.library, meta.split)].add(Row(
            files=1, failed=int(meta.status != "ok"), given_up=len(meta.failed_proofs), theorems=meta.theorems,
            finished=meta.finished, stdlib_closed=meta.stdlib_closed, steps=meta.steps,
            steps_with_lemmas=meta.steps_with_lemmas,
            bytes=path.stat().st_size, seconds=meta.seconds))
    return dict(rows), unreadable


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def render(rows: Mapping[tuple[str, str], Row], unreadable: int = 0,
           totals: Optional[Mapping[str, int]] = None) -> str:
    """A plain-text table: one line per library and split, a total per library
    (with the files the library has, when ``totals`` gives them), and the
    corpus's total with its throughput."""
    header = (f"{'library':<16} {'split':<6} {'files':>11} {'failed':>6} {'gave up':>7} {'theorems':>8} "
              f"{'finished':>8} {'closed':>6} {'steps':>8} {'w/lemma':>8} {'size':>10} {'hours':>6} {'s/file':>6} "
              f"{'steps/s':>7}")
    lines = [header, "-" * len(header)]

    def line(library: str, split: str, row: Row, files: str) -> str:
        per_file = row.seconds / row.files if row.files else 0.0
        rate = row.steps / row.seconds if row.seconds else 0.0
        return (f"{library:<16} {split:<6} {files:>11} {row.failed:>6} {row.given_up:>7} {row.theorems:>8} "
                f"{row.finished:>8} {row.stdlib_closed:>6} {row.steps:>8} {row.steps_with_lemmas:>8} "
                f"{_size(row.bytes):>10} "
                f"{row.seconds / 3600:>6.2f} {per_file:>6.1f} {rate:>7.1f}")

    everything = Row()
    for library in sorted({lib for lib, _ in rows}):
        total = Row()
        for split in SPLITS:
            if (library, split) in rows:
                lines.append(line(library, split, rows[(library, split)], str(rows[(library, split)].files)))
                total.add(rows[(library, split)])
        of = f"{total.files}/{totals[library]}" if totals and library in totals else str(total.files)
        lines.append(line(library, "all", total, of))
        everything.add(total)
    lines.append("-" * len(header))
    lines.append(line("total", "all", everything, str(everything.files)))
    if unreadable:
        lines.append(f"{unreadable} unreadable shard(s) (another format version, or damaged): "
                     "a run with the same --out replays them")
    lines.append("gave up: proofs whose replay failed (admitted, the file went on); "
                 "closed: standard-library proofs whose case plain coqc finds closed (tools/rocq_stdlib_corpus.py); "
                 "finished: proofs ended by Qed/Defined (their steps are kept); hours, s/file, steps/s: replay time")
    return "\n".join(lines)
