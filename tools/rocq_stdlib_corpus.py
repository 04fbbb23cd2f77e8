#!/usr/bin/env python3
"""A corpus of real, correct Rocq proofs: the Coq standard library's own.

Issue 29 (item 3) asks that correct proofs pass.  The standard library's
``.v`` sources ship with Debian's ``coq`` package (under ``coqc -where``/
``theories``), and its proofs are correct by construction, written by people
who never saw our checks.  This tool turns them into :class:`Case` tasks
(header, statement, proof) the verifier can check, and establishes with plain
``coqc`` which of those tasks are really correct proofs of closed theorems.

**Extraction** (:func:`extract_file`).  Each source is split into sentences
with :func:`lean_env.rocq.checks.split_sentences` (the verifier's own
splitter, exact where it accepts the text); where it refuses a file (``..``
in notations, comments right after symbols) its ``trusted`` mode, which reads
those constructs as Coq's lexer does, is used instead.
Walking the sentences, every theorem-like declaration (``Lemma``, ``Theorem``,
``Fact``, ``Remark``, ``Corollary``, ``Proposition``, ``Example``) whose
interactive proof ends with ``Qed.`` or ``Defined.`` becomes a case:

* header: the file's ``Require`` sentences seen so far (as written), then
  ``Require Import <the file's module>.``, then, in file order, the
  ``Import``/``Export`` sentences and ``Open Scope``/``Close Scope`` sentences
  still in force at the theorem, ``Import`` of every module that encloses
  it and of every ``Module Import``/``Module Export`` closed before it; only
  sentences the verifier's header check accepts are kept;
* statement: the declaration, renamed ``sgs_case_<k>`` (``k`` counts the
  file's cases), without ``Local``/``#[local]``/``#[global]``;
* proof: the original text from ``Proof.`` to ``Qed.``/``Defined.``, comments
  and layout included (``Proof.`` is added when the original has none).

Skipped, with the reason counted: theorems inside a section with
``Variable``/``Hypothesis``/``Context``/``Let`` (the statement outside the
section would be another one), inside a functor or a module type, mutual
theorems (``with``), proofs given as ``Proof term.`` or ended with
``Admitted``/``Abort``, other attributes (``Program``, ``#[universes(...)]``),
and declarations whose proof cannot be delimited.

**Ground truth** (:func:`ground_truth`).  For every source file and header,
ONE ``coqc`` run compiles the header and all of its cases, each followed by
``Redirect "sgs_case_<k>" Print Assumptions sgs_case_<k>.``, so each accepted
case leaves a file with its assumptions.  When ``coqc`` stops on an error, the
error's line names the failing case, which is recorded as rejected, and the
cases after it are compiled again.  A case is *closed* when ``coqc`` accepted
it and answered "Closed under the global context".  Results are cached on
disk (:func:`cache_dir`), keyed by the ``coqc`` version, the standard
library's location and the compiled text (which carries the source's text).

**Checking** (:func:`check_cases`): the cases through the project's
:class:`~lean_env.rocq.RocqBackend`, ordered by header so that each header
is loaded once.

Usage::

    python tools/rocq_stdlib_corpus.py                  # extract, ground truth, counts
    python tools/rocq_stdlib_corpus.py --check          # ... and the verifier's verdicts
    python tools/rocq_stdlib_corpus.py --files 'Arith/*' --check --jobs 2
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import fnmatch
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Literal, Mapping, Sequence

if __package__ in (None, ""):   # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lean_env.arguments import positive_float  # noqa: E402
from lean_env.rocq.checks import (  # noqa: E402
    THEOREM_KEYWORDS,
    RocqTextError,
    Sentence,
    has_mutual_with,
    split_sentences,
    validate_header,
)
from tools.rocq_stdlib_truth import Case, coq_lib, ground_truth  # noqa: E402

#: the keywords a case's declaration may start with (``Property`` becomes ``Theorem``)
_DECLARATION_KEYWORDS = (*THEOREM_KEYWORDS, "Property")
_IDENT = r"[^\W\d][\w']*"
_QUALID = r"[^\W\d][\w'.]*"
#: ``Lemma name`` after attributes, on the comment-free code of a sentence
_DECLARATION = re.compile(
    rf"((?:#\[[^\]]*\]\s*|(?:Local|Global|Polymorphic|Monomorphic|Program|Cumulative|NonCumulative)\s+)*)"
    rf"({'|'.join(_DECLARATION_KEYWORDS)})\s+({_IDENT})(?=[\s(\[{{`:])")
#: attributes a case may have; they only decide whether the name is exported
_HARMLESS_ATTRIBUTES = {"Local", "Global", "#[local]", "#[global]", "#[ local ]", "#[ global ]"}
#: what a sentence that declares anything starts with (ends the search for a proof)
_DECLARATION_WORDS = frozenset({
    *_DECLARATION_KEYWORDS, "Definition", "Fixpoint", "CoFixpoint", "Inductive", "CoInductive", "Record",
    "Structure", "Class", "Instance", "Section", "End", "Module", "Require", "From", "Variable", "Variables",
    "Hypothesis", "Hypotheses", "Context", "Let", "Axiom", "Parameter", "Notation", "Infix", "Ltac",
    "Hint", "Arguments", "Declare", "Scheme", "Function", "Program",
})
#: declarations that make a section's theorems depend on section variables
_SECTION_LOCALS = frozenset({"Variable", "Variables", "Hypothesis", "Hypotheses", "Context", "Let",
                             "Parameter", "Parameters"})
_SCOPE = re.compile(rf"(?:(?:Local|Global|#\[\s*(?:local|global)\s*\])\s+)?(Open|Close)\s+(?:Local\s+)?Scope\s+"
                    rf"({_QUALID})\s*\.")
_IMPORT = re.compile(rf"(?:Import|Export)(?:\s+{_QUALID})+\s*\.")
_REQUIRE = re.compile(rf"(?:From\s+{_QUALID}\s+)?Require(?:\s+(?:Import|Export))?(?:\s+{_QUALID})+\s*\.")
_MODULE = re.compile(rf"Module\s+(?:(Import|Export)\s+)?(?:(Type)\s+)?({_IDENT})(.*)", re.S)
_WITH_DEFINITION = re.compile(rf"\bwith\s+(?:Definition|Module)\s+{_QUALID}[^:]*:=")
_SECTION = re.compile(rf"Section\s+({_IDENT})\s*\.")
_END = re.compile(rf"End\s+({_IDENT})\s*\.")
_CLOSING = re.compile(r"(Qed|Defined|Admitted|Abort|Save)\b")
_PROOF_HEAD = re.compile(r"Proof\s*\.|Proof\s+(?:using|with)\b.*", re.S)

@dataclass
class Extraction:
    """What :func:`extract` found."""

    cases: list[Case] = field(default_factory=list)
    #: skip reason -> count
    skipped: collections.Counter = field(default_factory=collections.Counter)
    #: skip reason -> a few ``file:line name`` examples
    skipped_examples: dict[str, list[str]] = field(default_factory=dict)
    #: source files split by the lenient splitter (the verifier's refused them)
    lenient_files: list[str] = field(default_factory=list)
    #: header-like sentences left out of headers because the header check refuses them
    dropped_header_sentences: collections.Counter = field(default_factory=collections.Counter)

    def skip(self, reason: str, where: str) -> None:
        self.skipped[reason] += 1
        examples = self.skipped_examples.setdefault(reason, [])
        if len(examples) < 3:
            examples.append(where)


# -- locating the sources ----------------------------------------------------

def source_files(theories: Path, patterns: Sequence[str] = ()) -> list[Path]:
    """The ``.v`` files under ``theories`` (relative paths, sorted), those
    matching one of ``patterns`` (``fnmatch`` on the relative path) when given."""
    files = sorted(p.relative_to(theories) for p in theories.rglob("*.v"))
    if patterns:
        files = [p for p in files if any(fnmatch.fnmatch(str(p), pat) for pat in patterns)]
    return files


def module_of(relative: Path) -> str:
    """``Arith/PeanoNat.v`` -> ``Coq.Arith.PeanoNat``."""
    return ".".join(("Coq", *relative.with_suffix("").parts))


# -- extraction ---------------------------------------------------------------

@dataclass
class _Frame:
    """An open section or module."""

    kind: Literal["section", "module", "functor", "module_type"]
    name: str
    #: a section that declares variables, hypotheses or local definitions
    has_locals: bool = False
    #: the number of header operations in force when it opened
    ops_before: int = 0
    #: ``Import <module>.``, for a ``Module Import``/``Module Export`` (in force after its ``End``)
    imported_after: str = ""


def _flat(code: str) -> str:
    return " ".join(code.split())


def _head(code: str) -> str:
    """The first word of a sentence after its attributes."""
    m = re.match(r"(?:#\[[^\]]*\]\s*|(?:Local|Global|Polymorphic|Monomorphic|Program)\s+)*([^\W\d][\w']*)", code)
    return m.group(1) if m else ""


def _header_ok(sentence: str) -> bool:
    try:
        validate_header(sentence)
    except RocqTextError:
        return False
    return True


def extract_file(theories: Path, relative: Path, found: Extraction) -> None:
    """Append the cases of one source file to ``found`` (and count what is skipped)."""
    text = (theories / relative).read_text("utf-8")
    source = str(relative)
    try:
        sentences = split_sentences(text)
    except RocqTextError:
        try:
            sentences = split_sentences(text, trusted=True)
        except RocqTextError as e:
            found.skip("file_unsplittable", f"{source}: {e}")
            return
        found.lenient_files.append(source)
    module = module_of(relative)
    requires: list[str] = []
    ops: list[str] = []             # Import/Export and scope sentences, in file order
    frames: list[_Frame] = []
    count = 0

    def line_of(s: Sentence) -> int:
        return text.count("\n", 0, s.start) + 1

    i = 0
    while i < len(sentences):
        s = sentences[i]
        i += 1
        if s.kind != "command":
            continue
        code = _flat(s.code)
        head = _head(code)
        if _REQUIRE.fullmatch(code):
            if _header_ok(code):
                requires.append(code)
            else:
                found.dropped_header_sentences["Require"] += 1
            continue
        if _IMPORT.fullmatch(code):
            ops.append(code)
            continue
        scope = _SCOPE.fullmatch(code)
        if scope:
            ops.append(f"{scope.group(1)} Scope {scope.group(2)}.")
            continue
        if code.startswith(("Import", "Export")):
            found.dropped_header_sentences[code.split()[0] + " (other form)"] += 1
            continue
        section = _SECTION.fullmatch(code)
        if section:
            frames.append(_Frame("section", section.group(1), ops_before=len(ops)))
            continue
        end = _END.fullmatch(code)
        if end:
            if not frames or frames[-1].name != end.group(1):
                found.skip("file_structure", f"{source}:{line_of(s)} unmatched {code!r}")
                return
            closed = frames.pop()
            del ops[closed.ops_before:]
            if closed.imported_after:
                ops.append(closed.imported_after)
            continue
        module_m = _MODULE.fullmatch(code)
        if module_m and head == "Module":
            importing, is_type, name, rest = module_m.groups()
            if ":=" in _WITH_DEFINITION.sub("", rest):
                continue                       # Module M := ... (no body)
            kind = "module_type" if is_type else "functor" if rest.lstrip().startswith(("(", "[")) else "module"
            frames.append(_Frame(kind, name, ops_before=len(ops)))
            if kind == "module" and all(f.kind == "module" for f in frames[:-1] if f.kind != "section"):
                path = ".".join([module, *(f.name for f in frames if f.kind == "module")])
                ops.append(f"Import {path}.")
                if importing:
                    frames[-1].imported_after = f"Import {path}."
            continue
        if head in _SECTION_LOCALS and frames and frames[-1].kind == "section":
            frames[-1].has_locals = True
            continue
        declaration = _DECLARATION.match(code)
        if declaration is None:
            continue
        # a theorem-like declaration: find its proof
        attributes, keyword, original = declaration.groups()
        where = f"{source}:{line_of(s)} {original}"
        body_start = i
        status, last = _proof_span(sentences, i)
        i = last + 1
        if status != "ok":
            found.skip(status, where)
            continue
        outer = [f for f in frames if f.kind != "module"]
        if any(f.kind == "section" and f.has_locals for f in frames):
            found.skip("section_variables", where)
            continue
        if any(f.kind == "functor" for f in outer):
            found.skip("functor", where)
            continue
        if any(f.kind == "module_type" for f in outer):
            found.skip("module_type", where)
            continue
        extra = [a for a in re.findall(r"#\[[^\]]*\]|\w+", attributes) if a not in _HARMLESS_ATTRIBUTES]
        if extra:
            found.skip(f"attribute:{extra[0]}", where)
            continue
        if has_mutual_with(code[declaration.end():]):
            found.skip("mutual", where)
            continue
        renamed = _rename(s.text, keyword, original, count)
        if renamed is None:
            found.skip("statement_unparsed", where)
            continue
        first, closing = sentences[body_start], sentences[last]
        proof = text[first.start:closing.start + len(closing.text)]
        if not _PROOF_HEAD.fullmatch(_flat(first.code)):
            proof = "Proof.\n" + proof
        header = "\n".join([*requires, f"Require Import {module}.", *ops])
        if not _header_ok(header):
            found.skip("header_rejected", where)
            continue
        found.cases.append(Case(name=f"sgs_case_{count}", source=source, line=line_of(s), original=original,
                                header=header, statement=renamed, proof=proof))
        count += 1
    if frames:
        found.skip("file_structure", f"{source}: unclosed {frames[-1].kind} {frames[-1].name}")


def _proof_span(sentences: Sequence[Sentence], i: int) -> tuple[str, int]:
    """For the declaration whose proof starts at ``sentences[i]``: ``("ok",
    j)`` where ``sentences[j]`` is the ``Qed.``/``Defined.`` ending it, or why
    there is no such proof and the index of the last sentence that belongs
    to the declaration."""
    if i >= len(sentences):
        return "no_proof", i - 1
    first = _flat(sentences[i].code)
    if sentences[i].kind == "command" and first.startswith("Proof") and not _PROOF_HEAD.fullmatch(first):
        return "proof_term", i
    for j in range(i, len(sentences)):
        s = sentences[j]
        if s.kind != "command":
            continue
        code = _flat(s.code)
        closing = _CLOSING.match(code)
        if closing and re.fullmatch(r"\w+(?:\s+[\w']+)?\s*\.", code):
            if re.fullmatch(r"(?:Qed|Defined)\s*\.", code):
                return "ok", j
            return {"Admitted": "admitted", "Abort": "aborted"}.get(closing.group(1), "closing:" + code), j
        if _head(code) in _DECLARATION_WORDS and not code.startswith("Proof"):
            return "no_proof", i - 1
    return "no_proof", i - 1


def _rename(text: str, keyword: str, original: str, k: int) -> str | None:
    """The declaration with its attributes dropped and its name replaced."""
    m = re.match(rf"(?:#\[[^\]]*\]\s*|(?:Local|Global)\s+)*{keyword}\s+{re.escape(original)}(?=[\s(\[{{`:])", text)
    if m is None:
        return None
    kept = keyword if keyword in THEOREM_KEYWORDS else "Theorem"
    return f"{kept} sgs_case_{k}{text[m.end():]}"


def extract(theories: Path, files: Iterable[Path]) -> Extraction:
    found = Extraction()
    for relative in files:
        extract_file(theories, relative, found)
    return found


# -- checking ---------------------------------------------------------------------

def check_cases(backend, cases: Sequence[Case], timeout: float = 120.0,
                progress: Callable[[int], None] | None = None) -> dict[str, "object"]:
    """Each case's verdict from ``backend`` (a :class:`~lean_env.rocq.RocqBackend`),
    by :attr:`Case.key`; cases are checked grouped by header."""
    verdicts = {}
    ordered = sorted(cases, key=lambda c: (c.header, c.source, c.line))
    for k, case in enumerate(ordered):
        verdicts[case.key] = backend.check_proof(case.task(), timeout)
        if progress and k % 200 == 199:
            progress(k + 1)
    return verdicts


# -- command line -----------------------------------------------------------------

def _print_counts(title: str, counter: Mapping[str, int], examples: Mapping[str, list[str]] | None = None) -> None:
    print(f"{title}: {sum(counter.values())}")
    for reason, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:6d}  {reason}")
        for example in (examples or {}).get(reason, [])[:3]:
            print(f"            {example}")


#: ``allow_bug_prone_features`` of the permissive settings
BUG_PRONE_FEATURES = ("fixpoints", "vm_reduction")


def _check_with(cases: Sequence[Case], allow: tuple[str, ...]) -> dict:
    from lean_env.rocq import RocqBackend, RocqConfig

    backend = RocqBackend(RocqConfig(axiom_census=False, timeout=120, allow_bug_prone_features=allow),
                          worker="stdlib-corpus")
    try:
        return check_cases(backend, cases, progress=lambda k: print(f"  checked {k}", flush=True))
    finally:
        backend.close()


def _print_verdicts(title: str, cases: Sequence[Case], verdicts: Mapping) -> None:
    reasons = collections.Counter(verdicts[c.key].reason for c in cases)
    examples: dict[str, list[str]] = collections.defaultdict(list)
    for case in cases:
        v = verdicts[case.key]
        if v.reason != "ok" and len(examples[v.reason]) < 3:
            examples[v.reason].append(f"{case.key} :: {' | '.join(v.messages)[:300]!r}")
    _print_counts(title, reasons, examples)


def _verdict_json(verdict) -> dict:
    return {"status": str(verdict.status), "reason": verdict.reason, "messages": verdict.messages,
            "seconds": round(verdict.seconds, 3)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", nargs="*", default=[], help="fnmatch patterns of sources (Arith/*.v)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="coqc runs at a time")
    parser.add_argument("--timeout", type=positive_float, default=300.0, help="seconds per coqc run")
    parser.add_argument("--check", action="store_true",
                        help="also check every closed case with the verifier's default settings, and the "
                             "refused ones again with the bug-prone features allowed")
    parser.add_argument("--json", type=Path, help="write cases, truths and verdicts here")
    args = parser.parse_args(argv)

    started = time.monotonic()
    theories = coq_lib() / "theories"
    files = source_files(theories, args.files)
    found = extract(theories, files)
    extracted_s = time.monotonic() - started
    print(f"{len(files)} source files under {theories}; {len(found.lenient_files)} split leniently")
    print(f"extracted {len(found.cases)} cases in {extracted_s:.1f} s")
    _print_counts("skipped", found.skipped, found.skipped_examples)
    _print_counts("header-like sentences left out of headers", found.dropped_header_sentences)

    truth_started = time.monotonic()
    truths = ground_truth(found.cases, jobs=args.jobs, timeout=args.timeout, progress=print)
    statuses = collections.Counter(t.status for t in truths.values())
    print(f"ground truth in {time.monotonic() - truth_started:.1f} s")
    _print_counts("coqc", statuses)
    closed = [c for c in found.cases if truths[c.key].status == "closed"]

    verdicts: dict = {}
    again: dict = {}
    if args.check:
        check_started = time.monotonic()
        verdicts = _check_with(closed, ())
        _print_verdicts(f"verdicts with the default settings ({time.monotonic() - check_started:.1f} s)",
                        closed, verdicts)
        refused = [c for c in closed if verdicts[c.key].reason != "ok"]
        if refused:
            again_started = time.monotonic()
            again = _check_with(refused, BUG_PRONE_FEATURES)
            _print_verdicts(f"the refused ones again with allow_bug_prone_features={list(BUG_PRONE_FEATURES)} "
                            f"({time.monotonic() - again_started:.1f} s)", refused, again)
    print(f"total {time.monotonic() - started:.1f} s")
    if args.json:
        args.json.write_text(json.dumps([
            {**dataclasses.asdict(c), "truth": dataclasses.asdict(truths[c.key]),
             **({"verdict": _verdict_json(verdicts[c.key])} if c.key in verdicts else {}),
             **({"permissive_verdict": _verdict_json(again[c.key])} if c.key in again else {})}
            for c in found.cases], indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
