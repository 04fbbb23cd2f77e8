#!/usr/bin/env python3
"""Build and check the shipped Rocq target set, ``sgs/data/rocq_targets.jsonl``.

The targets are written as compact tables, one per topic, in
``tools/rocq_targets.toml`` (:data:`TABLES`; its header comment gives the row
format and the difficulty scale), so the set can be reviewed and regenerated.
Each row is ``[name, difficulty, proposition, tactics]``; the target's id is
``<topic prefix>_<name>`` and its statement is ``Theorem <id> : <proposition>.``.
:func:`load_topics` reads the file and names any row of the wrong shape.  A few
families of concrete facts (``12 * 13 + 7 = 163``, ``Nat.gcd 84 36 = 12``) are
generated here from number tables, with the values computed in Python and
confirmed by Rocq, and appended to their topics (:data:`FAMILIES`).

About a fifth of the targets are held out for evaluation (:func:`assign_held_out`):
inside each topic the targets are ordered by difficulty and then by a hash of
their id, and every fifth one is held out, so the split is deterministic and
spread over topics and difficulties.

Nothing is taken on trust.  :func:`schema_problems` checks the records and
puts every text through the verifier's own policy (:mod:`lean_env.rocq.checks`),
so each reference proof is one the production backend would accept.
:func:`check_targets` then compiles all targets sharing a header in ONE
``coqc`` run.  The file holds, for every target and each in its own module so
that no target can use another:

* the statement, checked to be a proposition and closed with ``Admitted.``
  (what the verifier does to a conjecture), and
* the statement with its reference proof.

A last ``Print Assumptions``, over a definition that mentions every reference
proof, must answer "Closed under the global context"; when it does not, a
second run asks about each proof to name the ones that use an axiom.  When
``coqc`` stops on an error, the error's line names the target; it is recorded
as failed and the rest are compiled again.

:func:`build_targets` takes any topic tables and :func:`check_targets` any
records of this schema, so derived sets (such as simpler lemmas per target for
a warm-start corpus) can reuse both.

Usage::

    python tools/make_rocq_targets.py             # build, check, write the file
    python tools/make_rocq_targets.py --no-rocq   # build and write without Rocq
    python tools/make_rocq_targets.py --verify    # check the shipped file only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from lean_env.rocq import (  # noqa: E402  (needs the repository on the path)
    PROP_CHECK,
    RocqTextError,
    validate_header,
    validate_proof,
    validate_statement,
)

#: where the generated set is shipped (package data of ``sgs``)
OUTPUT = REPO_ROOT / "sgs" / "data" / "rocq_targets.jsonl"

#: the one header every target shares, so the verifier needs a single warm state
HEADER = "Require Import Arith Lia List Bool.\nImport ListNotations."

#: keys of one JSONL record, in the order they are written
FIELDS = ("id", "header", "statement", "proof", "difficulty", "topic", "held_out")

#: every ``HELD_OUT_PERIOD``-th target of a topic is held out (a fifth)
HELD_OUT_PERIOD = 5

#: a target id: a Coq identifier without ``__`` (reserved by extraction) and
#: without primes, so it is also a plain Python/JSON-friendly name
ID_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")

#: what ``Print Assumptions`` says about a theorem that uses no axiom
CLOSED = "Closed under the global context"

#: the topic tables: one TOML table per topic, its id prefix and its rows
TABLES = Path(__file__).resolve().with_name("rocq_targets.toml")


# ---------------------------------------------------------------------------
# Families of concrete facts: the values are computed here and Rocq confirms
# them.  Each yields rows like those of the tables file (:data:`TABLES`).

def arith_facts() -> Iterator[tuple[str, int, str, str]]:
    """Closed arithmetic identities proved by computation."""
    for name, text, value in [
        ("eval_mul_add", "12 * 13 + 7", 12 * 13 + 7),
        ("eval_nested", "(17 + 8) * (9 - 4)", (17 + 8) * (9 - 4)),
        ("eval_pow2", "2 ^ 10", 2 ** 10),
        ("eval_pow3", "3 ^ 5 + 1", 3 ** 5 + 1),
        ("eval_div", "1000 / 7", 1000 // 7),
        ("eval_truncated_sub", "5 - 9 + 3", max(5 - 9, 0) + 3),
    ]:
        yield name, 1, f"{text} = {value}", "reflexivity."


def number_facts() -> Iterator[tuple[str, int, str, str]]:
    """Concrete gcd, modulo, divisibility and parity facts."""
    for a, b in [(84, 36), (35, 64), (91, 65)]:
        yield f"gcd_{a}_{b}", 1, f"Nat.gcd {a} {b} = {math.gcd(a, b)}", "reflexivity."
    for a, b in [(100, 7), (123, 10), (77, 11)]:
        yield f"mod_{a}_{b}", 1, f"{a} mod {b} = {a % b}", "reflexivity."
    for d, n in [(7, 91), (12, 144), (6, 45), (9, 100)]:
        if n % d == 0:
            yield f"divides_{d}_{n}", 1, f"Nat.divide {d} {n}", f"exists {n // d}. reflexivity."
        else:
            yield f"not_divides_{d}_{n}", 2, f"~ Nat.divide {d} {n}", "intros [k Hk]. lia."
    for n in (42, 57):
        parity = "Even" if n % 2 == 0 else "Odd"
        yield f"{parity.lower()}_{n}", 1, f"Nat.{parity} {n}", f"exists {n // 2}. reflexivity."
    yield "not_even_15", 2, "~ Nat.Even 15", "intros [k Hk]. lia."


def list_facts() -> Iterator[tuple[str, int, str, str]]:
    """Computations on concrete lists of naturals."""
    def coq(values: Sequence[int]) -> str:
        return "[" + "; ".join(str(v) for v in values) + "]"

    xs = [3, 1, 4, 1, 5]
    yield "eval_rev", 1, f"rev {coq(xs)} = {coq(xs[::-1])}", "reflexivity."
    yield "eval_map_succ", 1, f"map S {coq(xs)} = {coq([x + 1 for x in xs])}", "reflexivity."
    yield "eval_sum", 1, f"list_sum {coq(xs)} = {sum(xs)}", "reflexivity."
    yield "eval_seq", 1, f"seq 4 3 = {coq(range(4, 7))}", "reflexivity."
    yield "eval_firstn", 1, f"firstn 2 {coq(xs)} = {coq(xs[:2])}", "reflexivity."
    yield "eval_nth", 1, f"nth 2 {coq(xs)} 0 = {xs[2]}", "reflexivity."
    yield "eval_filter_even", 1, (f"filter Nat.even {coq(range(8))} = "
                                  f"{coq([x for x in range(8) if x % 2 == 0])}"), "reflexivity."


#: which topic each family of concrete facts is appended to
FAMILIES: dict[str, Callable[[], Iterable[tuple[str, int, str, str]]]] = {
    "arith": arith_facts,
    "lists": list_facts,
    "number_theory": number_facts,
}


# ---------------------------------------------------------------------------
# The topic tables


@dataclass(frozen=True)
class Topic:
    """One table of targets: its name (the JSON ``topic``) and id prefix."""

    name: str
    prefix: str
    rows: tuple[tuple[str, int, str, str | None], ...]


class TableError(ValueError):
    """A topic table that does not have the documented shape."""


#: the items of a row, each with the type it must have
_ROW_FIELDS = (("name", str, "a string"), ("difficulty", int, "an integer"),
               ("proposition", str, "a string"), ("tactics", str, "a string"))


def _row(where: str, index: int, row: object) -> tuple[str, int, str, str | None]:
    """One row of a table, checked: ``[name, difficulty, proposition, tactics]``,
    or the first three only for a target without a reference proof."""
    label = f"{where} row {index}"
    if isinstance(row, list) and row and isinstance(row[0], str):
        label += f" ({row[0]})"
    if not isinstance(row, list) or len(row) not in (3, 4):
        raise TableError(f"{label}: expected [name, difficulty, proposition, tactics], got {row!r}")
    for (field, kind, described), value in zip(_ROW_FIELDS, row):
        if not isinstance(value, kind) or isinstance(value, bool):
            raise TableError(f"{label}: the {field} must be {described}, got {value!r}")
    name, difficulty, prop = row[:3]
    return name, difficulty, prop, row[3] if len(row) == 4 else None


def load_topics(path: Path = TABLES,
                families: Mapping[str, Callable[[], Iterable[tuple]]] = FAMILIES) -> tuple[Topic, ...]:
    """The topics of a tables file, in file order, each with the generated
    family of ``families`` named after it appended to its rows.  A table or row
    of the wrong shape raises :class:`TableError` naming the file and the row."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise TableError(f"{path}: not valid TOML: {err}") from err
    topics = []
    for name, table in data.items():
        where = f"{path}: [{name}]"
        if not isinstance(table, dict) or set(table) != {"prefix", "rows"}:
            got = sorted(table) if isinstance(table, dict) else repr(table)
            raise TableError(f"{where}: expected a table with 'prefix' and 'rows', got {got}")
        prefix, rows = table["prefix"], table["rows"]
        if not isinstance(prefix, str) or not isinstance(rows, list):
            raise TableError(f"{where}: 'prefix' must be a string and 'rows' an array")
        checked = [_row(where, i, row) for i, row in enumerate(rows, start=1)]
        family = families.get(name)
        topics.append(Topic(name, prefix, tuple(checked) + (tuple(family()) if family else ())))
    unknown = set(families) - set(data)
    if unknown:
        raise TableError(f"{path}: no table for the topics of the families {sorted(unknown)}")
    return tuple(topics)


TOPICS = load_topics()


# ---------------------------------------------------------------------------
# Building the records


def render_proof(tactics: str | None) -> str | None:
    """``Proof.``, the tactics indented by two spaces, ``Qed.``."""
    if tactics is None:
        return None
    body = textwrap.indent(textwrap.dedent(tactics).strip(), "  ")
    return f"Proof.\n{body}\nQed."


def build_targets(topics: Iterable[Topic] = TOPICS) -> list[dict]:
    """Every target as a JSON-ready record, in table order, held-out split applied."""
    targets = []
    for topic in topics:
        for name, difficulty, prop, tactics in topic.rows:
            target_id = f"{topic.prefix}_{name}"
            targets.append({
                "id": target_id,
                "header": HEADER,
                "statement": f"Theorem {target_id} : {prop}.",
                "proof": render_proof(tactics),
                "difficulty": difficulty,
                "topic": topic.name,
                "held_out": False,
            })
    assign_held_out(targets)
    return targets


def _id_hash(target_id: str) -> str:
    return hashlib.sha256(target_id.encode()).hexdigest()


def assign_held_out(targets: list[dict]) -> None:
    """Mark every :data:`HELD_OUT_PERIOD`-th target of each topic as held out,
    counting in (difficulty, id hash) order so the split covers every
    difficulty; the choice depends only on ids, topics and difficulties."""
    by_topic: dict[str, list[dict]] = {}
    for target in targets:
        by_topic.setdefault(target["topic"], []).append(target)
    for members in by_topic.values():
        ordered = sorted(members, key=lambda t: (t["difficulty"], _id_hash(t["id"])))
        for i, target in enumerate(ordered):
            target["held_out"] = i % HELD_OUT_PERIOD == HELD_OUT_PERIOD // 2


def to_jsonl(targets: Iterable[Mapping]) -> str:
    """One JSON object per line, keys in :data:`FIELDS` order."""
    return "".join(json.dumps({k: t[k] for k in FIELDS}) + "\n" for t in targets)


def load_jsonl(path: Path) -> list[dict]:
    """Read a target file written by :func:`to_jsonl`."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------------------
# Checks without Rocq


def schema_problems(targets: Sequence[Mapping]) -> list[str]:
    """Everything wrong with the records' shape, one message per problem
    (empty when the set is well formed).  Includes the verifier's own text
    policy for headers, statements and proofs."""
    problems = []
    seen: set[str] = set()
    for i, target in enumerate(targets):
        where = f"record {i} ({target.get('id')!r})"
        if list(target) != list(FIELDS):
            problems.append(f"{where}: keys {list(target)} are not {list(FIELDS)}")
            continue
        target_id = target["id"]
        if not isinstance(target_id, str) or not ID_PATTERN.fullmatch(target_id):
            problems.append(f"{where}: id is not a plain Coq identifier")
            continue
        if target_id in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(target_id)
        if type(target["difficulty"]) is not int or target["difficulty"] not in (1, 2, 3, 4):
            problems.append(f"{where}: difficulty {target['difficulty']!r} is not 1-4")
        if not isinstance(target["topic"], str) or not target["topic"]:
            problems.append(f"{where}: topic must be a non-empty string")
        if not isinstance(target["held_out"], bool):
            problems.append(f"{where}: held_out must be a boolean")
        try:
            validate_header(target["header"])
            statement = validate_statement(target["statement"])
            if statement.name != target_id:
                problems.append(f"{where}: the statement declares {statement.name!r}")
            if target["proof"] is not None:
                validate_proof(target["proof"])
        except RocqTextError as e:
            problems.append(f"{where}: refused by the verifier's text checks: {e}")
    return problems


# ---------------------------------------------------------------------------
# Checks with Rocq


@dataclass(frozen=True)
class Failure:
    """One target that Rocq did not accept (``target_id`` is ``None`` when the
    failure could not be pinned on a target, e.g. a broken header)."""

    target_id: str | None
    detail: str


@dataclass(frozen=True)
class _Block:
    """Where one target's text sits in a check file (1-based, inclusive)."""

    target_id: str
    first_line: int
    last_line: int


@dataclass(frozen=True)
class _CheckFile:
    """A generated ``.v`` file and what is needed to read ``coqc``'s answer."""

    text: str
    blocks: list[_Block]
    #: module holding a reference proof -> the target it proves
    references: dict[str, str]


#: module and definition that mention every reference proof, so that one
#: ``Print Assumptions`` covers them all
_ALL_MODULE = "AllReferences"
_ALL_NAME = "proofs"


def _check_file(header: str, targets: Sequence[Mapping], *, each: bool) -> _CheckFile:
    """The ``.v`` text that checks ``targets`` under ``header``.

    ``Print Assumptions`` walks the whole dependency graph (``lia``'s library
    included) on every call, so by default it runs once, on a definition that
    mentions every reference proof; with ``each`` a ``Locate``/``Print
    Assumptions`` pair follows every reference proof instead, to name the
    target that uses an axiom.
    """
    lines = header.splitlines()
    blocks = []
    references: dict[str, str] = {}
    for i, target in enumerate(targets):
        first = len(lines) + 1
        lines += [f"Module Statement{i}.", target["statement"], "Proof.", PROP_CHECK, "Admitted.",
                  f"End Statement{i}."]
        if target["proof"] is not None:
            module = f"Reference{i}"
            references[module] = target["id"]
            lines += [f"Module {module}.", target["statement"], *target["proof"].splitlines(), f"End {module}."]
            if each:
                lines += [f"Locate {module}.{target['id']}.", f"Print Assumptions {module}.{target['id']}."]
        blocks.append(_Block(target["id"], first, len(lines)))
    if references and not each:
        # unused lets keep every proof in the term at a constant type (a
        # tuple of the proofs takes seconds to elaborate)
        mentions = [f"  let _ := {module}.{target_id} in" for module, target_id in references.items()]
        lines += [f"Module {_ALL_MODULE}.", f"Definition {_ALL_NAME} : unit :=", *mentions, "  tt.",
                  f"End {_ALL_MODULE}.", f"Locate {_ALL_MODULE}.{_ALL_NAME}.",
                  f"Print Assumptions {_ALL_MODULE}.{_ALL_NAME}."]
    return _CheckFile("\n".join(lines) + "\n", blocks, references)


_ERROR_LINE = re.compile(r'File "[^"]*", line (\d+), characters')
_LOCATED = re.compile(rf"Constant \S*?\b(Reference\d+|{_ALL_MODULE})\.\w+")


def _assumption_answers(stdout: str) -> dict[str, list[str]]:
    """``Print Assumptions`` answers by module: each follows the ``Locate``
    line (``Constant <path>.<module>.<name>``) that names its theorem."""
    answers: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        located = _LOCATED.fullmatch(line.strip())
        if located:
            current = answers.setdefault(located.group(1), [])
        elif current is not None and line.strip():
            current.append(line.strip())
    return answers


def _compile(coqc: str, text: str, timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="rocq_targets_") as tmp:
        path = Path(tmp) / "RocqTargetsCheck.v"
        path.write_text(text, encoding="utf-8")
        return subprocess.run([coqc, "-q", path.name], cwd=tmp, capture_output=True, text=True,
                              timeout=timeout, check=False)


def _check_group(coqc: str, header: str, group: Sequence[Mapping], timeout: float) -> list[Failure]:
    """Check targets sharing ``header``: one ``coqc`` run when all is well."""
    failures: list[Failure] = []
    pending = list(group)
    each = False
    while pending:
        check = _check_file(header, pending, each=each)
        result = _compile(coqc, check.text, timeout)
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()
            located = _ERROR_LINE.search(output)
            line = int(located.group(1)) if located else 0
            culprit = next((b for b in check.blocks if b.first_line <= line <= b.last_line), None)
            if culprit is None:
                return failures + [Failure(None, f"coqc failed outside any target: {output[-600:]}")]
            failures.append(Failure(culprit.target_id, output[located.start():][:600]))
            pending = [t for t in pending if t["id"] != culprit.target_id]
            continue
        answers = _assumption_answers(result.stdout)
        if not each and check.references and answers.get(_ALL_MODULE) != [CLOSED]:
            each = True  # some proof uses an axiom: run again to find which
            continue
        if each:
            for module, target_id in check.references.items():
                answer = answers.get(module)
                if answer != [CLOSED]:
                    detail = "no Print Assumptions answer" if answer is None else " ".join(answer)[:300]
                    failures.append(Failure(target_id, f"assumptions: {detail}"))
        break
    return failures


def check_targets(targets: Sequence[Mapping], coqc: str | None = None, timeout: float = 600.0) -> list[Failure]:
    """Check with Rocq that every statement elaborates to a proposition and
    every reference proof is accepted with assumptions closed under the global
    context.

    Targets sharing a header are compiled in one ``coqc`` run; after a failure
    the offending target is dropped and the rest compiled again, so a clean
    set costs one run per header.  Returns the failures (empty when all is
    well).  The texts are assumed to have passed :func:`schema_problems` (a
    statement that closed its module early could hide what follows it).
    """
    coqc = coqc or shutil.which("coqc")
    if coqc is None:
        raise FileNotFoundError("coqc is not installed")
    by_header: dict[str, list[Mapping]] = {}
    for target in targets:
        by_header.setdefault(target["header"], []).append(target)
    failures: list[Failure] = []
    for header, group in by_header.items():
        failures += _check_group(coqc, header, group, timeout)
    return failures


# ---------------------------------------------------------------------------
# Command line


def _report(problems: Sequence[str], failures: Sequence[Failure]) -> bool:
    for problem in problems:
        print(f"schema: {problem}", file=sys.stderr)
    for failure in failures:
        print(f"rocq: {failure.target_id}: {failure.detail}", file=sys.stderr)
    return not problems and not failures


def _summary(targets: Sequence[Mapping]) -> str:
    held = sum(t["held_out"] for t in targets)
    topics: dict[str, int] = {}
    for t in targets:
        topics[t["topic"]] = topics.get(t["topic"], 0) + 1
    difficulties = {d: sum(t["difficulty"] == d for t in targets) for d in (1, 2, 3, 4)}
    return (f"{len(targets)} targets, {held} held out; topics {topics}; difficulties {difficulties}; "
            f"{sum(t['proof'] is not None for t in targets)} with reference proofs")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the JSONL")
    parser.add_argument("--no-rocq", action="store_true", help="skip the Rocq check")
    parser.add_argument("--verify", action="store_true",
                        help="check the existing output file instead of writing it")
    parser.add_argument("--coqc", default=None, help="coqc binary (default: from PATH)")
    args = parser.parse_args(argv)

    targets = load_jsonl(args.output) if args.verify else build_targets()
    problems = schema_problems(targets)
    failures = [] if args.no_rocq or problems else check_targets(targets, coqc=args.coqc)
    if not _report(problems, failures):
        return 1
    if not args.verify:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(to_jsonl(targets), encoding="utf-8")
        print(f"wrote {args.output}")
    print(_summary(targets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
