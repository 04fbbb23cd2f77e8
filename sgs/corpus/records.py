"""The corpus's record format (pure: no Rocq, no processes).

A corpus directory holds one *shard* per source file,
``<out>/<library>/<file>.jsonl.gz`` (``stdlib/Bool/Bool.v.jsonl.gz``): gzip'd
JSON lines, the first ``{"file": FileRecord}`` (what happened to the file),
then one ``{"theorem": TheoremRecord}`` per proof, its steps inside it.  One
file per shard is what makes the extraction resumable: a shard is written
whole under a temporary name and renamed, so a shard that exists is a file
that is finished (or failed, with its error), and a killed run loses at most
the file it was replaying.

Goals are kept as Rocq printed them (``coqtop -emacs``: the focused goal with
its hypotheses, the other goals' conclusions), which is also what the tactic
environment (:class:`lean_env.envs.TacticEnv`) shows a prover;
:func:`sgs.corpus.rocq_text.parse_goals` splits that text into goals and
hypotheses.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

#: bumped when a record changes meaning; a shard of another version is not "finished"
FORMAT_VERSION = 1
SHARD_SUFFIX = ".jsonl.gz"


@dataclass
class Mention:
    """A name a tactic mentions that resolves to a global object."""

    #: as written in the tactic (``Nat.add_comm``)
    name: str
    #: ``Constant`` (lemmas and definitions), ``Inductive``, ``Constructor``, ``Notation``, ...
    kind: str
    #: the fully qualified name it resolved to (``Coq.Arith.PeanoNat.Nat.add_comm``)
    path: str


@dataclass
class Step:
    """One sentence of a proof: a tactic, a bullet or a brace."""

    #: the sentence as written in the source (comments inside it kept)
    tactic: str
    #: ``tactic``, ``bullet`` (``-``, ``+``, ``*``) or ``brace`` (``{``, ``}``, ``2: {``)
    kind: str
    #: the goals before the step, as Rocq printed them ("" when it printed none yet)
    goals: str
    #: number of goals before the step (the display's count; 0 for "No more goals.")
    num_goals: int
    #: line of the sentence in the source file
    line: int
    #: global objects the tactic names (``Locate`` in the same session, just before the step)
    mentions: list[Mention] = field(default_factory=list)
    #: wall seconds coqtop took for the step
    seconds: float = 0.0

    @property
    def lemmas(self) -> list[str]:
        """The constants (lemmas and definitions) the step mentions, fully qualified."""
        return [m.path for m in self.mentions if m.kind == "Constant"]


@dataclass
class TheoremRecord:
    """One proof: what it proves, its whole script, and its steps."""

    library: str
    #: source file, relative to the library's root (``Bool/Bool.v``)
    file: str
    #: the name Rocq gave the open proof (the prompt's name)
    name: str
    #: line of the statement in the source file
    line: int
    #: the sentence that opened the proof (``Lemma foo : ...``), as written
    statement: str
    #: everything after the statement up to and including its closing sentence, as written
    proof: str
    #: the closing sentence's first word: ``Qed``, ``Defined``, ``Admitted``, ``Abort``, ``Save``, or
    #: ``Proof`` for ``Proof term.``
    ending: str
    #: ``train``, ``valid`` or ``test`` (the file's)
    split: str
    #: the steps, in order; only proofs that end in ``Qed``/``Defined`` keep them
    steps: list[Step] = field(default_factory=list)
    #: wall seconds for the whole proof
    seconds: float = 0.0
    #: standard library only: plain ``coqc``'s ground truth of the tool's case for this theorem
    #: (``closed``, ``axioms``, ``rejected``, ...; None: no case, e.g. a theorem in a section)
    truth: Optional[str] = None
    #: standard library only: the case as a self-contained task (header, statement, proof)
    case: Optional[dict] = None

    @property
    def closed(self) -> bool:
        """A finished proof (``Qed``/``Defined``); in the standard library also
        one that plain ``coqc`` found closed under the global context."""
        if self.ending not in ("Qed", "Defined"):
            return False
        return self.truth in (None, "closed") if self.library == "stdlib" else True


@dataclass
class FileRecord:
    """What happened to one source file."""

    library: str
    file: str
    #: the module the file was replayed as (``Coq.Bool.Bool``)
    module: str
    split: str
    #: ``ok``: every sentence ran; ``failed``: replay stopped at ``failed_line`` (the
    #: theorems before it are kept)
    status: str
    error: str = ""
    failed_line: int = 0
    #: proofs given up because a tactic failed (``name:line: error``); the file went on
    failed_proofs: list[str] = field(default_factory=list)
    sentences: int = 0
    sentences_run: int = 0
    #: proofs replayed (every ending)
    theorems: int = 0
    #: of them, proofs ended by ``Qed``/``Defined`` (the ones whose steps are kept)
    finished: int = 0
    #: standard library: of them, those whose case plain ``coqc`` found closed
    stdlib_closed: int = 0
    steps: int = 0
    #: steps that mention at least one constant (a lemma or definition)
    steps_with_lemmas: int = 0
    seconds: float = 0.0
    coq_version: str = ""
    #: ISO date-time the shard was written (UTC)
    extracted_at: str = ""
    format_version: int = FORMAT_VERSION


# -- JSON -----------------------------------------------------------------------

def theorem_from_dict(raw: dict) -> TheoremRecord:
    steps = [Step(**{**s, "mentions": [Mention(**m) for m in s.get("mentions", [])]}) for s in raw.get("steps", [])]
    return TheoremRecord(**{**raw, "steps": steps})


def file_from_dict(raw: dict) -> FileRecord:
    return FileRecord(**raw)


def shard_path(out: Path, library: str, file: str) -> Path:
    """``<out>/<library>/<file>.jsonl.gz``."""
    return Path(out) / library / (file + SHARD_SUFFIX)


def encode_shard(meta: FileRecord, theorems: list[TheoremRecord]) -> bytes:
    lines = [json.dumps({"file": dataclasses.asdict(meta)}, ensure_ascii=False)]
    lines += [json.dumps({"theorem": dataclasses.asdict(t)}, ensure_ascii=False) for t in theorems]
    # mtime=0: the same records give the same bytes
    return gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0)


def write_shard(path: Path, meta: FileRecord, theorems: list[TheoremRecord]) -> int:
    """Write a shard whole, under a temporary name first, so a reader (or a
    resumed run) never sees half of one; returns its size in bytes."""
    data = encode_shard(meta, theorems)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    tmp.replace(path)
    return len(data)


def _lines(path: Path) -> Iterator[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def read_meta(path: Path) -> Optional[FileRecord]:
    """The shard's file record; None when the shard is unreadable or of
    another format version (it will be extracted again)."""
    try:
        first = next(_lines(path))
        meta = file_from_dict(first["file"])
    except (OSError, EOFError, StopIteration, KeyError, TypeError, ValueError, io.UnsupportedOperation):
        return None
    return meta if meta.format_version == FORMAT_VERSION else None


def read_theorems(path: Path) -> Iterator[TheoremRecord]:
    for raw in _lines(path):
        if "theorem" in raw:
            yield theorem_from_dict(raw["theorem"])


def shards(out: Path) -> list[Path]:
    """Every shard under a corpus directory, sorted."""
    return sorted(p for p in Path(out).rglob("*" + SHARD_SUFFIX) if not p.name.startswith("."))
