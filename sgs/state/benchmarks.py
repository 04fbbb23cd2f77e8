"""Benchmark problem sets for ``python -m sgs.evaluate`` (pure loading and validation).

A benchmark is named by the ``evaluation.benchmark`` string:

=================  ==========================================================
``minif2f-test``   miniF2F's 244 test problems in Lean 4, from the hub data
                   set ``cat-searcher/minif2f-lean4`` (``test.jsonl``)
``proofnet-test``  ProofNet's 186 test problems in Lean 4, from the hub data
                   set ``UDACA/proofnet-lean4`` (``proofnet/test.jsonl``)
``rocq-held-out``  the held-out targets shipped in ``sgs/data/rocq_targets.jsonl``
``jsonl:PATH``     a JSONL file of problems, one ``{"id", "statement",
                   "header"?}`` object per line
``PATH``           the same, or a JSON list (``.json``) or a Parquet table
                   (``.parquet``) of such records
=================  ==========================================================

The hub sets are downloaded (and cached) with ``huggingface_hub``.  On a
machine without access to the hub, download the file elsewhere and pass it
as ``evaluation.benchmark_file``: any copy in the hub layouts works, as
JSONL, JSON or Parquet, including files that hold every split (rows whose
``split`` is not the benchmark's are skipped).

The hub layouts differ in field names, so a record may spell its fields as
``id`` or ``name``; ``statement``, ``formal_statement`` or ``theorem``; and
``header`` (optional: empty when absent).  Other fields (informal statements,
goals) are ignored.  Lean statements are brought to the form the verifier
takes, ending in ``:= by``: a trailing ``sorry`` is dropped and a bare ``:=``
(ProofNet's layout) gets ``by``.

Every record is checked before any model runs: its fields' types, unique ids,
and its statement and header with the verifier's own text checks for the
prover's language (:mod:`lean_env.lean.checks`, :mod:`lean_env.rocq.checks`).
A statement that fails them but passes the other language's checks is
reported as a language mismatch.  Errors name the file and line (JSONL) or
item (JSON, Parquet).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import huggingface_hub

from lean_env.lean.checks import check_text, check_trusted_statement
from lean_env.rocq.checks import RocqTextError, check_characters, split_sentences, validate_header, validate_statement
from lean_env.rocq.config import RocqConfig
from lean_env.rocq.load_path import LoadPathError, parse_load_path
from sgs.config.benchmark_names import (
    HUB_BENCHMARKS, JSONL_PREFIX, NAMED_BENCHMARKS, ROCQ_HELD_OUT, HubBenchmark, benchmark_problems, resolve_name)
from sgs.config import ROCQ_TARGETS, ProofLanguage, TargetsConfig, resolve_source_path
from sgs.state.records import Target
from sgs.state.targets import TargetError, load_targets, parquet_rows, parse_json

#: Longest Lean header accepted (the Lean backend's own limit).
LEAN_MAX_HEADER_CHARS = 1_000_000

# Field names a record may use, tried in this order.
ID_FIELDS = ("id", "name")
STATEMENT_FIELDS = ("statement", "formal_statement", "theorem")


class BenchmarkError(ValueError):
    """A benchmark that cannot be loaded: unknown name, unreadable file,
    malformed record, wrong language, or a hub download that failed."""


@dataclass(frozen=True)
class Benchmark:
    """A loaded, validated set of problems."""

    name: str
    """The benchmark as the user named it (``minif2f-test``, ``jsonl:probs.jsonl``, ...)."""
    language: str
    """The proof language every statement was checked for."""
    source: str
    """The file the problems were read from (for a hub benchmark, its copy in the hub cache)."""
    problems: tuple[Target, ...]
    """The problems in source order, ``limit`` applied."""


# --------------------------------------------------------------------------
# Naming
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------


def load_benchmark(benchmark: str | None, language: str, *, benchmark_file: str | None = None,
                   limit: int | None = None) -> Benchmark:
    """Read and check the problems of ``benchmark`` for ``language``.

    ``benchmark_file`` replaces a named benchmark's source (the hub file, or
    the shipped Rocq targets); ``limit`` keeps the first N problems (every
    record is checked all the same).  Raises :class:`BenchmarkError`.
    """
    problems = benchmark_problems(benchmark, benchmark_file, language)
    if problems:
        raise BenchmarkError("; ".join(problems))
    name = resolve_name(benchmark, language)
    if name == ROCQ_HELD_OUT:
        source, records = _rocq_held_out(benchmark_file)
    elif name in HUB_BENCHMARKS:
        hub = HUB_BENCHMARKS[name]
        path = Path(benchmark_file).expanduser() if benchmark_file is not None else _download(hub)
        source, records = str(path), _in_split(_read_records(path, jsonl=None), hub.split)
    else:
        jsonl = name.startswith(JSONL_PREFIX)
        path = Path(name[len(JSONL_PREFIX):] if jsonl else name).expanduser()
        if not jsonl and not path.is_file():
            raise BenchmarkError(f"benchmark file not found: {path} (evaluation.benchmark is a file unless it is "
                                 f"one of {', '.join(NAMED_BENCHMARKS)})")
        source, records = str(path), _read_records(path, jsonl=jsonl or None)

    seen: dict[str, str] = {}
    targets = []
    for where, record in records:
        target = to_problem(record, where, language)
        if target.id in seen:
            raise BenchmarkError(f"{where}: id {target.id!r} appears twice (first at {seen[target.id]})")
        seen[target.id] = where
        targets.append(target)
    if not targets:
        raise BenchmarkError(f"benchmark {name!r} ({source}) holds no problems")
    return Benchmark(name=name, language=language, source=source, problems=tuple(targets[:limit]))


def _rocq_held_out(benchmark_file: str | None) -> tuple[str, list[tuple[str, Any]]]:
    """The held-out targets of the Rocq target file, as records."""
    source = benchmark_file if benchmark_file is not None else ROCQ_TARGETS
    try:
        targets = load_targets(TargetsConfig(source=source), "rocq")
    except TargetError as error:
        raise BenchmarkError(str(error)) from None
    path = str(resolve_source_path(source))
    # Numbered as sgs.state.targets numbers records in its own errors.
    return path, [(f"{path} record {index}", t.to_json()) for index, t in enumerate(targets) if t.held_out]


def _download(hub: HubBenchmark) -> Path:
    """The hub file of ``hub``, downloaded or from the local hub cache."""
    try:
        return Path(huggingface_hub.hf_hub_download(hub.repo_id, hub.filename, repo_type="dataset"))
    except Exception as error:  # offline, DNS, HTTP, missing file: all end the same way for the user
        raise BenchmarkError(
            f"could not download benchmark {hub.name!r} ({hub.filename} of the hub data set {hub.repo_id}): "
            f"{type(error).__name__}: {error}\nWithout access to the Hugging Face hub, download that file "
            f"elsewhere and pass it with evaluation.benchmark_file=PATH"
        ) from None


def _in_split(records: list[tuple[str, Any]], split: str) -> list[tuple[str, Any]]:
    """The records of ``split``; records that say no split are kept."""
    return [(where, r) for where, r in records if not isinstance(r, dict) or r.get("split", split) == split]


def _read_records(path: Path, *, jsonl: bool | None) -> list[tuple[str, Any]]:
    """``(where, record)`` for every record of a JSONL, JSON-list or Parquet
    file; ``jsonl=None`` tells the format from the file's suffix."""
    if not path.is_file():
        raise BenchmarkError(f"benchmark file not found: {path}")
    if path.suffix == ".parquet" and not jsonl:
        return list(_parquet_records(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise BenchmarkError(f"{path}: cannot be read as UTF-8 text ({error})") from None
    if jsonl or (jsonl is None and path.suffix != ".json"):
        return [(f"{path}:{lineno}", parse_json(line, f"{path}:{lineno}", BenchmarkError))
                for lineno, line in enumerate(text.splitlines(), 1) if line.strip()]
    data = parse_json(text, str(path), BenchmarkError)
    if not isinstance(data, list):
        raise BenchmarkError(f"{path}: expected a JSON list of problems, got {type(data).__name__}")
    return [(f"{path}: item {index}", record) for index, record in enumerate(data, 1)]


def _parquet_records(path: Path) -> Iterator[tuple[str, Any]]:
    for index, row in enumerate(parquet_rows(path, BenchmarkError), 1):
        yield f"{path}: row {index}", row


# --------------------------------------------------------------------------
# One record
# --------------------------------------------------------------------------


def to_problem(record: Any, where: str, language: str) -> Target:
    """One record as a checked problem for ``language``; ``where`` names it in errors."""
    if not isinstance(record, dict):
        raise BenchmarkError(f"{where}: expected a JSON object, got {type(record).__name__}")
    problem_id = _first_field(record, ID_FIELDS, where)
    # bool is an int subclass; a true/false id is a mistake, not the number 1/0.
    if isinstance(problem_id, int) and not isinstance(problem_id, bool):
        problem_id = str(problem_id)
    if not isinstance(problem_id, str) or not problem_id.strip():
        raise BenchmarkError(f"{where}: the id must be a non-empty string or an integer, got {problem_id!r}")
    statement = _first_field(record, STATEMENT_FIELDS, where)
    if not isinstance(statement, str) or not statement.strip():
        raise BenchmarkError(f"{where}: the statement must be a non-empty string, got {statement!r}")
    header = record.get("header")
    if header is None:  # absent, or null in a table where other rows have one
        header = ""
    if not isinstance(header, str):
        raise BenchmarkError(f"{where}: 'header' must be a string, got {header!r}")

    load_path: tuple[tuple[str, str, str], ...] = ()
    if language == "rocq" and record.get("load_path") is not None:
        try:
            load_path = tuple((e.flag, e.directory, e.name) for e in parse_load_path(record["load_path"]))
        except LoadPathError as error:
            raise BenchmarkError(f"{where}: {error}") from None
    text = problem_text(statement, header, language, project_header=bool(load_path))
    if text.other_language is not None:
        raise BenchmarkError(f"{where}: problem {problem_id!r} is a {text.other_language} statement, "
                             f"but prover.language={language!r}")
    if text.problem is not None:
        raise BenchmarkError(f"{where}: problem {problem_id!r} is not a {language} problem: {text.problem}")
    return Target(id=problem_id, header=header, statement=text.statement, load_path=load_path)


@dataclass(frozen=True)
class ProblemText:
    """A statement as the verifier takes it, and what the verifier's text checks say of it."""

    statement: str
    """The statement (Lean: ending in ``:= by``, see :func:`lean_statement`)."""
    problem: str | None
    """Why the text checks refuse the statement or the header (``<reason>: <details>``), or None."""
    other_language: str | None
    """The other proof language, when the refused text passes its checks (the two were mixed up)."""


def problem_text(statement: str, header: str, language: str, *, project_header: bool = False) -> ProblemText:
    """``statement`` and ``header`` through the verifier's own text checks for ``language``
    (:mod:`lean_env.lean.checks`, :mod:`lean_env.rocq.checks`), before any prover runs.
    ``project_header``: a Rocq problem with a load path, whose header is a project
    file's text (any sentences, as the verifier takes it)."""
    if language == "lean":
        statement = lean_statement(statement)
    problem = _text_problem(statement, header, language, project_header)
    if problem is None:
        return ProblemText(statement, None, None)
    other = next(lang for lang in ProofLanguage if lang != language)
    converted = lean_statement(statement) if other == "lean" else statement
    return ProblemText(statement, problem, other if _text_problem(converted, header, other) is None else None)


def lean_statement(statement: str) -> str:
    """A Lean statement ending in ``:= by``, as the verifier takes it: a
    trailing ``sorry`` is dropped and a bare trailing ``:=`` gets ``by``."""
    text = statement.rstrip()
    if text.endswith("sorry"):
        text = text[: -len("sorry")].rstrip()
    return text + " by" if text.endswith(":=") else text


def _first_field(record: dict, names: tuple[str, ...], where: str) -> Any:
    for name in names:
        if name in record and record[name] is not None:
            return record[name]
    raise BenchmarkError(f"{where}: missing field {' or '.join(map(repr, names))}")


def _text_problem(statement: str, header: str, language: str, project_header: bool = False) -> str | None:
    """Why the verifier's text checks for ``language`` refuse ``statement`` or
    ``header`` (``<reason>: <details>``), or None when they pass."""
    if language == "lean":
        rejection = check_trusted_statement(statement) or check_text(header, LEAN_MAX_HEADER_CHARS)
        return None if rejection is None else f"{rejection.reason}: {'; '.join(rejection.messages)}"
    try:
        validate_statement(statement)
        if project_header:
            split_sentences(check_characters(header, max_chars=RocqConfig.max_project_header_chars, what="header"),
                            trusted=True)
        else:
            validate_header(header)
    except RocqTextError as error:
        return str(error)
    return None
