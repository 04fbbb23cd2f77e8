"""The supervised warm-start corpus: (prompt, completion) pairs for the three roles.

A model trained from scratch (the tiny default model) cannot take part in
self-play until it knows the output formats and a few proof habits, so it is
first fine-tuned on a fixed corpus.  The shipped Rocq corpus,
``sgs/data/warmstart_rocq.jsonl``, is generated and checked by
``tools/make_warmstart.py``; its docstring says what the corpus holds and how
the Guide's scores were assigned.

The file is JSONL, one object per line with exactly these keys:

* ``role``: ``solver``, ``conjecturer`` or ``guide``;
* ``prompt``: the rendered prompt text, as :class:`sgs.method.roles.PromptSet`
  renders it for the loop (the chat template is applied later, by whoever
  tokenizes it);
* ``completion``: the expected model output, which the role's extractor
  (:func:`~sgs.method.roles.extract_proof`, :func:`~sgs.method.roles.extract_conjecture`,
  :func:`~sgs.method.roles.extract_guide_scores`) must parse;
* ``source``: the target or lemma id the line was made from;
* ``meta``: a JSON object of free-form details (kind, topic, scores...).

:func:`load_corpus` validates every line and names the file and line of the
first problem; :func:`corpus_fingerprint` identifies a corpus by content, so
a fine-tuned model can be cached against it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sgs.config import resolve_source_path
from sgs.method.roles import Extraction, Language, Role, extract_conjecture, extract_guide_scores, extract_proof

#: the shipped Rocq corpus, as a package source (see :func:`corpus_path`)
DEFAULT_CORPUS = "pkg://sgs/data/warmstart_rocq.jsonl"

#: the keys of one corpus line, in the order the generator writes them
FIELDS = ("role", "prompt", "completion", "source", "meta")

_EXTRACTORS: dict[Role, Callable[[str, Language], Extraction]] = {
    Role.SOLVER: extract_proof,
    Role.CONJECTURER: extract_conjecture,
    Role.GUIDE: lambda output, language: extract_guide_scores(output),
}


class CorpusError(ValueError):
    """The corpus file is missing, unreadable or holds a malformed line."""


@dataclass(frozen=True)
class WarmstartExample:
    """One line of the corpus; ``meta`` is read-only."""

    role: Role
    prompt: str
    completion: str
    source: str
    meta: Mapping[str, Any]


def corpus_path(source: str | os.PathLike = DEFAULT_CORPUS) -> Path:
    """The local file behind ``source``: a path, or ``pkg://<package>/<path>``
    for a file shipped inside a package."""
    if isinstance(source, str):
        path = resolve_source_path(source)
        if path is None:
            raise CorpusError(f"warm-start corpus {source!r} is not a local file")
        return path
    return Path(source)


def load_corpus(source: str | os.PathLike = DEFAULT_CORPUS,
                language: Language | str = Language.ROCQ) -> list[WarmstartExample]:
    """Every example of the corpus at ``source``, in file order.

    Raises :class:`CorpusError` naming the file and the line (1-based) of the
    first problem: invalid JSON, missing or unknown keys, an unknown role, an
    empty text, a ``meta`` that is not an object, or a completion that the
    role's extractor for ``language`` cannot parse.  Blank lines are skipped;
    a file without any example is an error too.
    """
    path = corpus_path(source)
    language = Language(language)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CorpusError(f"{path}: cannot read the warm-start corpus: {error}") from error
    examples = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            examples.append(_parse_line(line, language, f"{path}:{number}"))
    if not examples:
        raise CorpusError(f"{path}: the warm-start corpus holds no example")
    return examples


def _parse_line(line: str, language: Language, where: str) -> WarmstartExample:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise CorpusError(f"{where}: not valid JSON: {error.msg}") from error
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [key for key in FIELDS if key not in record]
    unknown = sorted(key for key in record if key not in FIELDS)
    if missing or unknown:
        raise CorpusError(f"{where}: keys must be {', '.join(FIELDS)}"
                          + (f"; missing {', '.join(missing)}" if missing else "")
                          + (f"; unknown {', '.join(unknown)}" if unknown else ""))
    try:
        role = Role(record["role"])
    except ValueError:
        raise CorpusError(f"{where}: role {record['role']!r} is not one of "
                          f"{', '.join(r.value for r in Role)}") from None
    for key in ("prompt", "completion", "source"):
        if not isinstance(record[key], str) or not record[key].strip():
            raise CorpusError(f"{where}: {key} must be a non-empty string")
    if not isinstance(record["meta"], dict):
        raise CorpusError(f"{where}: meta must be a JSON object")
    extraction = _EXTRACTORS[role](record["completion"], language)
    if not extraction.ok:
        raise CorpusError(f"{where}: the {role.value} completion does not parse "
                          f"({extraction.failure.value}{': ' + extraction.detail if extraction.detail else ''})")
    return WarmstartExample(role, record["prompt"], record["completion"], record["source"],
                            MappingProxyType(record["meta"]))


def corpus_fingerprint(source: str | os.PathLike = DEFAULT_CORPUS) -> str:
    """SHA-256 (hex) of the corpus file's bytes: any edit changes it, so a
    fine-tuned model cached under it is never reused for another corpus."""
    path = corpus_path(source)
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as error:
        raise CorpusError(f"{path}: cannot read the warm-start corpus: {error}") from error


def pairs_by_role(examples: Iterable[WarmstartExample]) -> dict[Role, list[tuple[str, str]]]:
    """The ``(prompt, completion)`` pairs of each role, in corpus order; every
    role has an entry, possibly empty."""
    pairs: dict[Role, list[tuple[str, str]]] = {role: [] for role in Role}
    for example in examples:
        pairs[example.role].append((example.prompt, example.completion))
    return pairs
