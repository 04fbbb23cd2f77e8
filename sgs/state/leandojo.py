"""Targets from theorems LeanDojo traced: from a traced repository
(``tools/trace_targets.py``) or from a LeanDojo Benchmark 4 file
(``targets.source``, read by :mod:`sgs.state.targets`).  Pure text work on
the theorem's source file; nothing here runs Lean or imports ``lean_dojo``.

What LeanDojo records of a theorem: its repository ``url`` and ``commit``,
its ``file_path`` in that repository, its ``full_name`` and its ``start`` and
``end`` in the file (1-based line and column; ``start`` is the ``theorem`` /
``lemma`` keyword, after any docstring, attribute or modifier; ``end`` is one
past its last character).  A traced repository also gives where the proof
starts (``TracedTheorem.locate_proof()``); for a benchmark entry the proof
starts at the ``:=`` that ends the signature, found by scanning the source
(``:=`` inside brackets, and the one that each ``let`` / ``have`` at bracket
depth 0 owns, do not count).

How a theorem becomes a target (``id``, ``header``, ``theorem``):

* ``id`` is the full name (``_private.<module>.0.`` removed for private ones);
* ``theorem`` is the source text from the keyword to the proof with comments
  blanked, ``lemma`` written as ``theorem``, the declared name replaced by the
  full name (Lean opens the name's namespace for a declaration named
  ``A.B.c``, so names relative to an enclosing ``namespace A.B`` still
  resolve), and `` := by`` appended whatever the original proof was;
* ``header`` is the file's ``import`` lines, then every ``open``,
  ``universe``, ``variable``, ``include``, ``omit`` and ``set_option`` command
  in force at the theorem (at file level or in an enclosing ``namespace`` /
  ``section`` not yet closed, plus an ``open ... in`` just before it), in
  source order, taken out of their namespaces.

A theorem that cannot be stated on its own is skipped with a reason:
``not_a_theorem`` (the source there is no ``theorem`` / ``lemma``),
``name_mismatch`` (it declares another name: a checkout at another commit?),
``no_statement`` (a proof by equations or ``where``: no ``:=`` ends the
signature), ``file_local_name`` (the statement mentions a name declared
earlier in the same file, which the header cannot import),
``file_local_notation`` (it uses a notation declared earlier in the file),
``mutual_block``, ``prelude_file``, ``bad_position``, ``source_missing`` /
``bad_file_path`` (benchmark entries whose file is not in the checkout) and
``statement_rejected`` (the result is not what the Lean verifier accepts as
a statement).  ``no_sorry`` marks theorems left out because only those with
``sorry`` in their proofs were asked for.  Not detected: anonymous
instances and attributes declared earlier in the file, and header commands
whose names meant something else inside their namespace; such a target's
statement fails to elaborate, and every proof of it is refused.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lean_env.lean.checks import check_trusted_statement, mask_comments_and_literals

#: the keys of a LeanDojo Benchmark 4 entry that say where its theorem is
#: (LeanDojo's ``scripts/generate-benchmark-lean4.ipynb``, ``export_proofs``;
#: entries also carry ``traced_tactics``, which targets do not need)
BENCHMARK_KEYS = ("url", "commit", "file_path", "full_name", "start", "end")
#: commands whose effect lasts to the end of their scope and that a statement may need
SCOPE_COMMANDS = frozenset({"open", "universe", "variable", "include", "omit", "set_option"})
#: commands that declare a name a later statement of the same file may mention
DECLARATIONS = frozenset({"def", "abbrev", "theorem", "lemma", "structure", "class", "inductive", "instance",
                          "opaque", "axiom", "irreducible_def", "coinductive"})
#: commands that add notation (their quoted tokens are what a statement would contain)
NOTATIONS = frozenset({"notation", "notation3", "infix", "infixl", "infixr", "prefix", "postfix", "macro",
                       "syntax"})
_NAME = r"(?:«[^»\n]*»|[^\W\d][\w'!?]*)(?:\.(?:«[^»\n]*»|[^\W\d][\w'!?]*))*"
_WORD = re.compile(r"[^\W\d][\w'!?]*")
_ATTRIBUTE = r"@\[[^\]\n]*\]"
_MODIFIER = r"(?:private|protected|noncomputable|partial|unsafe|nonrec)"
#: the declaration at a theorem's start: LeanDojo's span of a Mathlib ``lemma``
#: includes its docstring (blanked in the masked text), attributes and modifiers
_DECLARED = re.compile(rf"\s*(?:{_ATTRIBUTE}\s*)*(?:{_MODIFIER}\s+)*(theorem|lemma)\s+({_NAME})")
#: a command's head on its line: attributes, modifiers, the keyword, the name after it
_COMMAND_HEAD = re.compile(rf"(?:{_ATTRIBUTE}[ \t]*)*(?:(?:{_MODIFIER}|local|scoped)[ \t]+)*"
                           rf"(?P<keyword>[^\W\d][\w'!?]*)(?:[ \t]+(?P<name>{_NAME}))?")
#: a line holding only attributes and modifiers (the command goes on below it)
_ATTRIBUTES_ONLY = re.compile(rf"(?:{_ATTRIBUTE}|{_MODIFIER})(?:[ \t]+(?:{_ATTRIBUTE}|{_MODIFIER}))*")
#: trailing attributes and modifiers of a command that prefixes the next one (``open A in @[simp]``)
_TRAILING_MODIFIERS = re.compile(rf"(?:\s*(?:{_ATTRIBUTE}|\b{_MODIFIER}\b))*\s*$")
_PRIVATE = re.compile(r"^_private\..*?\.0\.(.+)$")
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_OPENERS, _CLOSERS = "([{⟨⦃⟪⁅", ")]}⟩⦄⟫⁆"


@dataclass(frozen=True)
class Skipped:
    """A theorem that did not become a target, and why."""

    full_name: str
    file_path: str
    #: one of the reason codes in the module docstring
    reason: str
    #: the detail, in words
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"full_name": self.full_name, "file_path": self.file_path, "reason": self.reason,
                "detail": self.detail}


@dataclass(frozen=True)
class TheoremLocation:
    """Where LeanDojo found a theorem (the fields of a Benchmark 4 entry)."""

    url: str
    commit: str
    #: the file, relative to the repository
    file_path: str
    full_name: str
    #: 1-based (line, column) of the declaration (its keyword, or a ``lemma``'s docstring)
    start: tuple[int, int]
    #: 1-based (line, column) one past the declaration's last character
    end: tuple[int, int]

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "commit": self.commit, "file_path": self.file_path, "full_name": self.full_name,
                "start": list(self.start), "end": list(self.end)}


@dataclass(frozen=True)
class LeanTarget:
    """A target in the project's Lean format, with where it came from."""

    id: str
    header: str
    #: the statement, ending in ``:= by``
    theorem: str
    location: TheoremLocation

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "header": self.header, "theorem": self.theorem, **self.location.to_json()}


@dataclass(frozen=True)
class _Command:
    """One command of a source file: a line of code at column 0 (after any
    lines holding only attributes and modifiers) and the indented lines after it."""

    start: int
    #: where the next command starts (or the end of the file)
    end: int
    #: the command's keyword, after attributes and modifiers
    keyword: str
    #: the name right after the keyword (``def NAME``, ``namespace NAME``), if any
    name: str | None


class LeanSourceFile:
    """One Lean source file, read once for all of its theorems: the text, its
    masks and its commands."""

    def __init__(self, text: str) -> None:
        self.text = text.replace("\r\n", "\n")
        #: comments blanked, literals kept: the text statements and headers are cut from
        self.uncommented = mask_comments_and_literals(self.text, literals=False).code
        #: comments and literals blanked: the text searched for tokens
        self.masked = mask_comments_and_literals(self.text).code
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        self.commands = self._commands()
        self._texts: dict[int, str] = {}

    def command_text(self, command: _Command, until: int) -> str:
        """The command's text, comments blanked, cut at ``until``."""
        if until < command.end:
            return _tidy(self.uncommented[command.start:until])
        if command.start not in self._texts:
            self._texts[command.start] = _tidy(self.uncommented[command.start:command.end])
        return self._texts[command.start]

    def offset(self, line: int, column: int) -> int | None:
        """The index of a 1-based (line, column), or None outside the file."""
        if not 1 <= line <= len(self.line_starts) or column < 1:
            return None
        index = self.line_starts[line - 1] + column - 1
        line_end = self.line_starts[line] - 1 if line < len(self.line_starts) else len(self.text)
        return index if index <= line_end else None

    def _commands(self) -> list[_Command]:
        found: list[tuple[int, str, str | None]] = []
        pending: int | None = None  # the start of a run of attribute-only lines
        for start in self.line_starts:
            if start >= len(self.masked) or self.masked[start] in " \t\n":
                continue
            m = _COMMAND_HEAD.match(self.masked, start)
            if m is None:
                line = self.masked[start:].partition("\n")[0]
                attributes_only = _ATTRIBUTES_ONLY.fullmatch(line.rstrip())
                pending = (start if pending is None else pending) if attributes_only else None
                continue
            keyword = m.group("keyword")
            found.append((start if pending is None else pending, keyword, m.group("name")))
            pending = None
        ends = [start for start, _, _ in found[1:]] + [len(self.text)]
        return [_Command(start, end, keyword, name) for (start, keyword, name), end in zip(found, ends)]


@dataclass(frozen=True)
class TheoremSource:
    """A theorem LeanDojo found, with its source file."""

    location: TheoremLocation
    file: LeanSourceFile = field(repr=False)
    #: 1-based (line, column) where the proof starts, when the tracer knows
    #: it; None: found by scanning for the ``:=`` that ends the signature
    proof_start: tuple[int, int] | None = None


def target_id(full_name: str) -> str:
    """The full name without the ``_private.<module>.0.`` prefix of a private declaration."""
    m = _PRIVATE.match(full_name)
    return m.group(1) if m else full_name


def convert(source: TheoremSource, only_sorry: bool = False) -> LeanTarget | Skipped:
    """The target stated by ``source``, or why it cannot be one."""
    file, where = source.file, source.location

    def skip(reason: str, detail: str) -> Skipped:
        return Skipped(where.full_name, where.file_path, reason, detail)

    start, end = file.offset(*where.start), file.offset(*where.end)
    if start is None or end is None or end <= start:
        return skip("bad_position", f"start {list(where.start)} / end {list(where.end)} lie outside the file")
    name = target_id(where.full_name)
    declared = _DECLARED.match(file.masked, start)
    if declared is None:
        head = file.masked[start:start + 40].split()
        return skip("not_a_theorem", f"the source at line {where.start[0]} starts with {' '.join(head[:2])!r}")
    written = file.text[declared.start(2):declared.end(2)]
    if written.removeprefix("_root_.") != name and not name.endswith("." + written):
        return skip("name_mismatch", f"the source at line {where.start[0]} declares {written!r}, not {name!r} "
                                     f"(is the file from commit {where.commit}?)")
    proof = _proof_start(file, declared.end(), end, source.proof_start)
    if proof is None:
        return skip("no_statement", "no `:=` ends the signature (a proof by equations or `where`)")
    signature = file.uncommented[declared.end(2):proof].rstrip()
    signature = signature.removesuffix(":=").rstrip()
    if only_sorry and not re.search(r"(?<![\w.'])sorry(?![\w'!?])", file.masked[proof:end]):
        return skip("no_sorry", "its proof has no `sorry`")
    scope = _scope_at(file, start)
    if isinstance(scope, str):
        return skip(*scope.split(":", 1))
    imports, commands, names, notations = scope
    masked_signature = file.masked[declared.end(2):proof]
    mentioned = {part for word in re.findall(_NAME, masked_signature) for part in word.split(".")}
    local = sorted(mentioned & names)
    if local:
        return skip("file_local_name", f"the statement mentions `{local[0]}`, declared earlier in "
                                       f"{where.file_path}; the header can import only the file's imports")
    used = sorted(t for t in notations if t in signature)
    if used:
        return skip("file_local_notation", f"the statement uses the notation {used[0]!r} declared earlier in "
                                           f"{where.file_path}")
    statement = f"theorem {name}{_tidy(signature)} := by"
    rejection = check_trusted_statement(statement)
    if rejection is not None:
        return skip("statement_rejected", "; ".join(rejection.messages))
    header = "\n".join(imports) + ("\n\n" + "\n".join(commands) if commands else "") + "\n"
    return LeanTarget(id=name, header=header, theorem=statement, location=where)


def _proof_start(file: LeanSourceFile, after_name: int, end: int, known: tuple[int, int] | None) -> int | None:
    """The index just past the ``:=`` that ends the signature, or None."""
    if known is not None:
        index = file.offset(*known)
        if index is None:
            return None
        before = file.masked[after_name:index].rstrip()
        return after_name + len(before) if before.endswith(":=") else None
    depth, owed = 0, 0  # bracket depth; `:=` owed to a `let` / `have` at depth 0
    code = file.masked
    i = after_name
    while i < end:
        c = code[i]
        word = _WORD.match(code, i) if not (code[i - 1].isalnum() or code[i - 1] in "_.'!?") else None
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth = max(depth - 1, 0)
        elif depth == 0 and code.startswith(":=", i):
            if owed == 0:
                return i + 2
            owed -= 1
            i += 1
        elif depth == 0 and word is not None:
            if word.group() in ("let", "have"):
                owed += 1
            elif word.group() == "where":
                return None
            i = word.end() - 1
        elif depth == 0 and c == "|" and _starts_equation(file, i):
            return None
        i += 1
    return None


def _starts_equation(file: LeanSourceFile, index: int) -> bool:
    """Whether the ``|`` at ``index`` opens a line ``| pattern => ...`` (an
    equation; an absolute value ``|x|`` opening a line has no ``=>``)."""
    line_start = file.line_starts[bisect.bisect_right(file.line_starts, index) - 1]
    line_end = file.masked.find("\n", index)
    return not file.masked[line_start:index].strip() and "=>" in file.masked[index:line_end if line_end >= 0 else None]


def _scope_at(file: LeanSourceFile, start: int) -> tuple[list[str], list[str], set[str], set[str]] | str:
    """What is in force at index ``start``: the imports, the scope commands
    (in source order), the last components of the names and the notation
    tokens declared before it; or ``"reason:detail"`` when the theorem cannot
    leave its file."""
    imports: list[str] = []
    scopes: list[tuple[str, list[tuple[int, str]]]] = [("file", [])]
    names: set[str] = set()
    notations: set[str] = set()
    prefix_in: list[str] = []  # `open A in` (and the like) right before the theorem
    for command in file.commands:
        if command.start >= start:
            break
        keyword = command.keyword
        if keyword in SCOPE_COMMANDS:
            own = _TRAILING_MODIFIERS.sub("", file.masked[command.start:min(command.end, start)])
            if m := re.search(r"(?<![\w.'])in$", own):
                prefix_in.append(file.command_text(command, command.start + m.start()))
                continue
        prefix_in = []
        if keyword == "prelude":
            return "prelude_file:the file starts with `prelude` (no standard library to import)"
        if keyword == "import":
            imports.append(file.command_text(command, start))
        elif keyword in ("namespace", "section", "mutual"):
            scopes.append((keyword, []))
        elif keyword == "end" and len(scopes) > 1:
            scopes.pop()
        elif keyword in SCOPE_COMMANDS:
            scopes[-1][1].append((command.start, file.command_text(command, start)))
        elif keyword in DECLARATIONS and command.name:
            names.add(command.name.split(".")[-1])
        elif keyword in NOTATIONS:
            notations.update(t.strip() for t in _STRING.findall(file.command_text(command, start)) if t.strip())
    if any(kind == "mutual" for kind, _ in scopes):
        return "mutual_block:the theorem is part of a `mutual` block"
    in_force = sorted(entry for _, entries in scopes for entry in entries)
    return imports, [text for _, text in in_force] + prefix_in, names, notations


def _bracket_end(text: str, opening: int) -> int:
    """The index just past the bracket that closes the one at ``opening``."""
    depth = 0
    for i in range(opening, len(text)):
        if text[i] in _OPENERS:
            depth += 1
        elif text[i] in _CLOSERS:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _tidy(text: str) -> str:
    """Lines without trailing blanks, no blank lines at either end."""
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n").rstrip()


def is_benchmark_entry(row: object) -> bool:
    """Whether a record looks like a LeanDojo Benchmark 4 entry (not a target)."""
    return isinstance(row, dict) and all(key in row for key in BENCHMARK_KEYS) and "header" not in row


def benchmark_source(entry: dict, where: str, checkout: Path, files: dict[Path, LeanSourceFile | str]
                     ) -> TheoremSource | Skipped:
    """The theorem a LeanDojo Benchmark 4 entry points at, read from ``checkout``
    (a copy of the traced repository at the entry's commit); ``files`` caches
    the files read (or why one cannot be).  Raises ``ValueError`` naming ``where`` for a malformed entry."""
    for key in ("url", "commit", "file_path", "full_name"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise ValueError(f"{where}: field {key!r} must be a non-empty string, got {entry.get(key)!r}")
    positions = []
    for key in ("start", "end"):
        value = entry.get(key)
        if not (isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value)):
            raise ValueError(f"{where}: field {key!r} must be [line, column], got {value!r}")
        positions.append((value[0], value[1]))
    relative = Path(entry["file_path"])
    if relative.is_absolute() or ".." in relative.parts or relative.suffix != ".lean":
        return Skipped(entry["full_name"], entry["file_path"], "bad_file_path",
                       "file_path must be a relative path to a .lean file inside the repository")
    path = checkout / relative
    if path not in files:
        try:
            files[path] = LeanSourceFile(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as error:
            files[path] = "does not exist" if isinstance(error, FileNotFoundError) else f"cannot be read ({error})"
    file = files[path]
    if isinstance(file, str):
        return Skipped(entry["full_name"], entry["file_path"], "source_missing", f"{path} {file}")
    location = TheoremLocation(entry["url"], entry["commit"], entry["file_path"], entry["full_name"], *positions)
    return TheoremSource(location, file)


def convert_benchmark(entries: list, where: str, checkout: Path, only_sorry: bool = False
                      ) -> tuple[list[LeanTarget], list[Skipped]]:
    """The targets of LeanDojo Benchmark 4 ``entries`` (read from ``where``),
    their sources read from ``checkout``, and the entries skipped.  Raises
    ``ValueError`` naming the entry for a malformed one."""
    files: dict[Path, LeanSourceFile | str] = {}

    def results() -> Iterable[LeanTarget | Skipped]:
        for index, entry in enumerate(entries):
            entry_where = f"{where} entry {index}"
            if not is_benchmark_entry(entry):
                raise ValueError(f"{entry_where}: not a LeanDojo Benchmark 4 entry "
                                 f"(one needs {', '.join(BENCHMARK_KEYS)})")
            source = benchmark_source(entry, entry_where, checkout, files)
            yield source if isinstance(source, Skipped) else convert(source, only_sorry)

    return collect(results())


def collect(results: Iterable[LeanTarget | Skipped]) -> tuple[list[LeanTarget], list[Skipped]]:
    """Targets and skipped theorems apart; a target whose id came before is
    skipped as ``duplicate_id``."""
    targets: list[LeanTarget] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    for result in results:
        if isinstance(result, LeanTarget) and result.id in seen:
            result = Skipped(result.location.full_name, result.location.file_path, "duplicate_id",
                             f"{result.id} appears twice")
        if isinstance(result, LeanTarget):
            seen.add(result.id)
            targets.append(result)
        else:
            skipped.append(result)
    return targets, skipped


def traced_theorem_source(theorem: Any, file: LeanSourceFile) -> TheoremSource:
    """The :class:`TheoremSource` of a ``lean_dojo.TracedTheorem`` whose file is ``file``
    (the text of ``theorem.traced_file.lean_file``)."""
    proof_start, _ = theorem.locate_proof()
    location = TheoremLocation(theorem.repo.url, theorem.repo.commit, str(theorem.file_path),
                               theorem.theorem.full_name, tuple(theorem.start), tuple(theorem.end))
    return TheoremSource(location, file, tuple(proof_start))


def reason_counts(skipped: Iterable[Skipped]) -> str:
    """``"no_statement 2, file_local_name 1"``: the reasons, most frequent first."""
    return ", ".join(f"{reason} {n}" for reason, n in Counter(s.reason for s in skipped).most_common())
