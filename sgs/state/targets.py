"""Reading the target statements a run tries to prove (``targets`` config node).

Two file formats, told apart by the prover language:

* Rocq (``sgs/data/rocq_targets.jsonl``): JSONL records with ``id``,
  ``header``, ``statement`` (``Theorem name : ... .``) and ``held_out``; other
  keys (reference ``proof``, ``difficulty``, ``topic``) are ignored.  Targets
  traced from a Rocq project (``tools/trace_rocq_targets.py``) add
  ``load_path`` (checked as hostile input: :mod:`lean_env.rocq.load_path`)
  and ``project`` (the build directory and the digest of its sources): the
  directory must still hold the version of the project the targets were
  traced from, or the file is refused (:func:`check_project`).
* Lean: records with ``id``, ``header`` and ``theorem`` (the statement up to
  ``:= by``), as a JSON list, as JSONL, as Parquet, or as the D3k file's
  ``{"target_statements": {id: record}}`` mapping; ``tools/trace_targets.py``
  writes this format (plus where each theorem came from: ``url``,
  ``commit``, ``file_path``, ``full_name``, ``start``, ``end``);
  ``hf://owner/name`` reads a hub data set holding one such file or the
  Parquet shards of a ``train`` split.
* LeanDojo Benchmark 4 (Lean): a JSON list (or JSONL) of entries with
  ``url``, ``commit``, ``file_path``, ``full_name``, ``start``, ``end`` and
  ``traced_tactics``, told apart by those keys and no ``header``.  The entries
  hold no statement text: each is read from its ``file_path`` in
  ``targets.lean_repo_dir`` (a checkout of the traced repository) and
  converted by :mod:`sgs.state.leandojo` (``id`` the full name; ``theorem``
  the source's signature, renamed to the full name, ending in ``:= by``;
  ``header`` the file's imports and the ``open`` / ``universe`` /
  ``variable`` / ``set_option`` commands in force).  Entries that cannot be
  stated on their own are skipped, each with a reason, and counted
  (:class:`TargetSet`); ``limit`` counts targets, not entries.

A target is held out (never trained on, never counted in the cumulative solve
rate) when its record says so, when its id is in ``held_out_ids``, or when the
hash of its id falls under ``held_out_fraction``: the split depends on the ids
only, so it is the same on every machine and every resume.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sgs.config import HUB_SCHEME, TargetsConfig, resolve_source_path
from lean_env.rocq.load_path import LoadPathError, parse_load_path
from sgs.state.leandojo import Skipped, convert_benchmark, is_benchmark_entry, reason_counts
from sgs.state.rocq_project import source_digest
from sgs.state.records import Target

class TargetError(ValueError):
    """The target source cannot be read or holds a malformed record."""


@dataclass(frozen=True)
class TargetSet:
    """The targets of a source, and the records that did not become targets."""

    targets: list[Target]
    #: what the source holds, in words ("targets", "LeanDojo Benchmark 4 entries")
    kind: str
    #: the LeanDojo entries skipped, each with its reason
    skipped: list[Skipped]

    def summary(self, source: str) -> str:
        """One line: how many targets (held out) from where, and what was skipped."""
        held = sum(t.held_out for t in self.targets)
        line = f"targets: {len(self.targets)} ({held} held out) from {source} ({self.kind})"
        if self.skipped:
            line += f"; {len(self.skipped)} entries skipped ({reason_counts(self.skipped)})"
        return line


def load_targets(config: TargetsConfig, language: str) -> list[Target]:
    """The run's targets, in source order, ``limit`` applied, held-out flags set."""
    return read_targets(config, language).targets


def read_targets(config: TargetsConfig, language: str) -> TargetSet:
    """:func:`load_targets` with what was skipped on the way."""
    rows = _source_rows(config.source)
    skipped: list[Skipped] = []
    if rows and is_benchmark_entry(rows[0]):
        kind = "LeanDojo Benchmark 4 entries"
        targets, skipped = _benchmark_targets(rows, config, language)
    else:
        kind = "targets"
        targets = [_to_target(row, language, f"{config.source} record {index}") for index, row in enumerate(rows)]
        for project in {json.dumps(row["project"], sort_keys=True) for row in rows
                        if isinstance(row, dict) and "project" in row}:
            check_project(json.loads(project), config.source)
    if config.limit is not None:
        targets = targets[: config.limit]
    if not targets:
        reasons = f" ({len(skipped)} entries skipped: {reason_counts(skipped)})" if skipped else ""
        raise TargetError(f"targets.source={config.source!r} holds no targets{reasons}")
    held_ids = set(config.held_out_ids)
    targets = [
        Target(
            id=t.id,
            header=t.header,
            statement=t.statement,
            held_out=t.held_out or t.id in held_ids or held_out_by_hash(t.id, config.held_out_fraction),
            load_path=t.load_path,
        )
        for t in targets
    ]
    return TargetSet(targets, kind, skipped)


def _benchmark_targets(rows: list, config: TargetsConfig, language: str) -> tuple[list[Target], list[Skipped]]:
    """The targets of a LeanDojo Benchmark 4 file, read from ``config.lean_repo_dir``."""
    first = rows[0]
    if language != "lean":
        raise TargetError(f"{config.source}: LeanDojo Benchmark 4 entries hold Lean theorems, but the prover "
                          f"checks {language}; use prover=lean")
    if config.lean_repo_dir is None:
        raise TargetError(f"{config.source} is a LeanDojo Benchmark 4 file, whose entries hold no statement text; "
                          f"set targets.lean_repo_dir to a checkout of {first.get('url')} at commit "
                          f"{first.get('commit')} (each statement and header are read from its file_path there)")
    checkout = Path(config.lean_repo_dir).expanduser()
    if not checkout.is_dir():
        raise TargetError(f"targets.lean_repo_dir={config.lean_repo_dir!r} is not a directory")
    try:
        lean_targets, skipped = convert_benchmark(rows, config.source, checkout)
    except ValueError as error:
        raise TargetError(str(error)) from None
    return [Target(id=t.id, header=t.header, statement=t.theorem) for t in lean_targets], skipped


def held_out_by_hash(target_id: str, fraction: float) -> bool:
    """Whether the hash of ``target_id`` puts it in the held-out ``fraction``."""
    if fraction <= 0.0:
        return False
    digest = hashlib.sha256(target_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def _source_rows(source: str) -> list[dict]:
    if source.startswith(HUB_SCHEME):
        return _hub_rows(source[len(HUB_SCHEME):])
    path = resolve_source_path(source)
    if path is None or not path.is_file():
        raise TargetError(f"targets file not found: {source!r} ({path})")
    return read_rows(path)


def read_rows(path: Path) -> list[dict]:
    """The records of a local target file (JSON list, JSONL, Parquet or the D3k
    mapping), or :class:`TargetError` naming the file and what is wrong with it."""
    if path.suffix == ".parquet":
        return parquet_rows(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise TargetError(f"{path}: not UTF-8 text (byte {error.start})") from None
    if path.suffix == ".jsonl":
        return [parse_json(line, f"{path}:{lineno}") for lineno, line in enumerate(text.splitlines(), 1) if line.strip()]
    data = parse_json(text, str(path))
    if isinstance(data, dict) and isinstance(data.get("target_statements"), dict):
        return list(data["target_statements"].values())  # the D3k file
    if isinstance(data, list):
        return data
    raise TargetError(f"{path}: expected a JSON list of targets or a 'target_statements' mapping")


def _hub_rows(repo_id: str) -> list[dict]:
    """The records of a Hugging Face data set repository: its one JSON(L)
    file, or else the Parquet shards of its ``train`` split (the layout
    ``datasets``' ``push_to_hub`` writes, ``data/train-00000-of-00001.parquet``,
    which ``load_dataset(repo_id)["train"]`` reads).  Downloaded, or read from
    the local hub cache (``HF_HUB_CACHE``; with ``HF_HUB_OFFLINE=1`` only from
    there)."""
    from huggingface_hub import snapshot_download

    try:
        directory = Path(snapshot_download(repo_id, repo_type="dataset",
                                           allow_patterns=["*.json", "*.jsonl", "*.parquet"]))
    except Exception as error:  # offline, DNS, HTTP, unknown repository: all end the same way for the user
        raise TargetError(
            f"could not download the hub data set {repo_id!r}: {type(error).__name__}: {error}\n"
            f"Without access to the Hugging Face hub, download it elsewhere and pass its JSON(L) or Parquet "
            f"file with targets.source=PATH") from None
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".parquet"))
    json_files = [p for p in files if p.suffix != ".parquet"]
    train_shards = [p for p in files if p.suffix == ".parquet"
                    and (p.name.startswith("train") or p.parent.name == "train")]
    if len(json_files) == 1:
        return read_rows(json_files[0])
    if not json_files and train_shards:
        return [row for shard in train_shards for row in parquet_rows(shard)]
    names = ", ".join(str(p.relative_to(directory)) for p in files) or "none"
    raise TargetError(f"hub data set {repo_id!r}: expected one JSON(L) file or the Parquet shards of a "
                      f"'train' split, found {names}; download it and pass the file to use as targets.source")


def parquet_rows(path: Path, error: type[Exception] | None = None) -> list[dict]:
    """The rows of a Parquet table as dicts, or ``error`` (default
    :class:`TargetError`) naming the file when it cannot be read."""
    import pyarrow.parquet as pq  # a Ray dependency; only Parquet files need it

    try:
        return pq.read_table(path).to_pylist()
    except Exception as reason:  # pyarrow raises several unrelated types for a damaged file
        raise (error or TargetError)(
            f"{path}: not a readable Parquet table ({type(reason).__name__}: {reason})") from None


def parse_json(text: str, where: str, error: type[Exception] | None = None) -> Any:
    """``json.loads(text)``, or ``error`` (default :class:`TargetError`) saying
    where the text came from and why it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as reason:
        raise (error or TargetError)(f"{where}: not valid JSON ({reason})") from None


def _to_target(row: dict, language: str, where: str) -> Target:
    if not isinstance(row, dict):
        raise TargetError(f"{where}: expected an object, got {type(row).__name__}")
    key = "statement" if language == "rocq" else "theorem"
    statement = row.get(key, row.get("statement"))
    for name, value in (("id", row.get("id")), ("header", row.get("header")), (key, statement)):
        if not isinstance(value, str):
            raise TargetError(f"{where}: field {name!r} must be a string, got {value!r}")
    if language == "lean":
        statement = _strip_placeholder(statement)
    held_out = row.get("held_out", False)
    if not isinstance(held_out, bool):
        raise TargetError(f"{where}: field 'held_out' must be a boolean, got {held_out!r}")
    load_path: tuple[tuple[str, str, str], ...] = ()
    if "load_path" in row:
        if language != "rocq":
            raise TargetError(f"{where}: a load path is a Rocq notion, but the prover checks {language}")
        try:
            load_path = tuple((e.flag, e.directory, e.name) for e in parse_load_path(row["load_path"]))
        except LoadPathError as error:
            raise TargetError(f"{where}: {error}") from None
    return Target(id=row["id"], header=row["header"], statement=statement, held_out=held_out, load_path=load_path)


def check_project(project: Any, source: str) -> None:
    """The ``project`` record of traced Rocq targets: its build directory must
    exist and hold the sources it was traced from (same digest); otherwise
    the headers may no longer match the compiled libraries."""
    if not (isinstance(project, dict) and isinstance(project.get("dir"), str)
            and isinstance(project.get("digest"), str)):
        raise TargetError(f"{source}: field 'project' must be {{'dir': ..., 'digest': ...}}, got {project!r:.200}")
    directory = Path(project["dir"])
    if not directory.is_dir():
        raise TargetError(f"{source}: the project build directory {directory} does not exist; trace the project "
                          f"again (tools/trace_rocq_targets.py)")
    if source_digest(directory) != project["digest"]:
        raise TargetError(f"{source} was traced from another version of the project in {directory} (its sources "
                          f"changed since); trace the project again (tools/trace_rocq_targets.py)")


def _strip_placeholder(statement: str) -> str:
    """A Lean statement ends at ``:= by``; drop a ``sorry`` left after it."""
    text = statement.rstrip()
    return text[: -len("sorry")].rstrip() if text.endswith("sorry") else text


def corpus_texts(targets: Iterable[Target]) -> list[str]:
    """Tokenizer training text for the tiny model: each target's header and statement."""
    return [f"{t.header}\n{t.statement}" for t in targets]


T = TypeVar("T")


def seeded_subsample(items: Sequence[T], size: int | None, seed: int | str) -> list[T]:
    """All of ``items`` (``size`` None or not smaller), else ``size`` of them
    chosen by ``seed``, kept in their order."""
    if size is None or size >= len(items):
        return list(items)
    return [items[i] for i in sorted(random.Random(seed).sample(range(len(items)), size))]


def batch_targets(targets: Sequence[Target], batch_size: int | None, seed: int, iteration: int) -> list[Target]:
    """The iteration's training targets: all of them, or a seeded subsample of
    ``batch_size`` (kept in source order), the same on every resume."""
    return seeded_subsample([t for t in targets if not t.held_out], batch_size, f"{seed}/{iteration}")
