"""What ``python -m sgs.fill`` reports: one JSON line per admitted lemma, a
summary line, and a page a person reads (``report.md`` beside the lines).

A line: ``file``, ``line``, ``name``, ``id``, ``form`` (how it was admitted),
``status`` (``proved``, ``not_proved``, ``error``), ``reason`` (for
``error``: why nothing could be tried), ``proof`` (the script as written into
the file, when proved), ``prover`` (the round that found it: ``automation``,
``sauto``, ``sample``, ``search``), ``checkpoint`` (the model checkpoint that
proposed the proof, in the rounds that use one: the shipped prover or the
``--adapt``ed one), ``needs_hammer`` (the proof uses CoqHammer's tactics,
so the file must load them), ``not_written`` (with ``--write``: why a proof the
checker accepted was left out of the files: the build's error in its file),
``seconds`` (spent on it, every round together).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Iterable, Optional, Sequence

__all__ = ["Row", "counts", "summary_line", "jsonl", "markdown"]

STATUSES = ("proved", "not_proved", "error")


@dataclass(frozen=True)
class Row:
    file: str
    line: int
    name: str
    id: str
    form: str
    status: str
    seconds: float = 0.0
    reason: Optional[str] = None
    proof: Optional[str] = None
    prover: Optional[str] = None
    checkpoint: Optional[str] = None
    needs_hammer: bool = False
    not_written: Optional[str] = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if (self.status == "proved") != (self.proof is not None):
            raise ValueError(f"{self.id}: a proof goes with status proved and only with it")
        if (self.status == "error") != bool(self.reason):
            raise ValueError(f"{self.id}: a reason goes with status error and only with it")
        if self.not_written and self.status != "proved":
            raise ValueError(f"{self.id}: only a proof can be left unwritten")

    def to_json(self) -> dict:
        return {key: value for key, value in asdict(self).items()
                if value is not None and not (key == "needs_hammer" and not value)}


def counts(rows: Iterable[Row]) -> dict[str, int]:
    """Lemmas per status."""
    rows = list(rows)
    return {status: sum(row.status == status for row in rows) for status in STATUSES}


def summary_line(rows: Iterable[Row], seconds: float, adaptation: Optional[str] = None) -> str:
    """``proved N of M`` and the rest of the count, for stdout; with ``--adapt``,
    what the adaptation cost (``adaptation``: its stages in words)."""
    rows = list(rows)
    count = counts(rows)
    line = (f"proved {count['proved']} of {len(rows)} admitted lemmas "
            f"({count['not_proved']} not proved, {count['error']} errors) in {seconds:.0f} s")
    return line + (f"; adaptation: {adaptation}" if adaptation else "")


def jsonl(rows: Iterable[Row]) -> bytes:
    return b"".join((json.dumps(row.to_json(), ensure_ascii=False) + "\n").encode("utf-8") for row in rows)


def _by(row: Row) -> str:
    if row.checkpoint:
        return f"{row.prover} (`{_cell(row.checkpoint)}`)"
    return row.prover or ""


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown(rows: Iterable[Row], *, project: str, command: str, when: str, seconds: float,
             settings: dict, write: Optional[str] = None, adaptation: Sequence[str] = ()) -> str:
    """The readable report: the summary, a table of every lemma, the proofs found, and
    what ``--write`` did (``write``: one sentence, or None without ``--write``);
    ``adaptation``: one line per stage of ``--adapt`` (what it cost)."""
    rows = list(rows)
    lines = [f"# sgs.fill: {project}", "",
             f"`{command}`, {when}.", "",
             f"**{summary_line(rows, seconds)}.**", "",
             ", ".join(f"{key}: {value}" for key, value in settings.items()) + ".", ""]
    if adaptation:
        lines += ["## Adaptation (`--adapt`)", "", *(f"- {line}" for line in adaptation), ""]
    if write is not None:
        lines += [f"--write: {write}", ""]
    lines += ["| file | line | lemma | status | by | seconds |", "|---|---|---|---|---|---|"]
    for row in rows:
        status = (f"error: {_cell(row.reason or '')}" if row.status == "error"
                  else "proved, not written" if row.not_written else row.status)
        lines.append(f"| {_cell(row.file)} | {row.line} | `{_cell(row.name)}` | {status} | "
                     f"{_by(row)} | {row.seconds:.1f} |")
    proved = [row for row in rows if row.proof is not None]
    if proved:
        lines += ["", "## Proofs found", ""]
        for row in proved:
            note = " (uses CoqHammer's tactics: the file must load `From Hammer Require Import Tactics.`)" \
                if row.needs_hammer else ""
            if row.not_written:
                note += f"; not written: it does not build in its file ({_cell(row.not_written)})"
            lines += [f"`{row.id}` ({row.file}, line {row.line}){note}:", "", "```coq", row.proof or "", "```", ""]
    return "\n".join(lines).rstrip() + "\n"
