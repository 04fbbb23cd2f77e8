"""One source file through a real ``coqtop``, sentence by sentence.

The file's sentences (split as the verifier splits text,
:func:`lean_env.rocq.checks.split_sentences`, in its lenient mode where the
strict one refuses a library file) are sent in order to one ``coqtop
-emacs`` session (:class:`lean_env.rocq.session.RocqSession`, the verifier's
own driver, in its sandbox), so every proof runs where its author ran it,
after the file's earlier definitions and lemmas.  The prompt after each
sentence says whether a proof is open; ``-emacs`` prints the goals after each
sentence of a proof, so the goals before a tactic are simply the last ones
printed.  Before each tactic, every identifier in it that may name a lemma
(:func:`sgs.corpus.rocq_text.tactic_identifiers`, less the hypotheses' names)
is asked about with ``Locate Term`` in the same state, once per proof.

A tactic that fails gives its proof up (``Admitted``, recorded in the file's
``failed_proofs``; the library's proofs all went through when it was built,
so this is rare).  A command outside a proof that fails, a sentence over its
time bound, or a dead ``coqtop`` ends the file: it is recorded as ``failed``
with the error and its line, and the proofs finished before it are kept.
"""

from __future__ import annotations

import bisect
import datetime
import os
import re
import subprocess
import time
from typing import Optional

from lean_env.rocq.checks import RocqTextError, Sentence, split_sentences
from lean_env.rocq.output import Reply
from lean_env.rocq.session import RocqSession, SessionError
from lean_env.sandbox import Limits
from sgs.corpus import truth as stdlib_truth
from sgs.corpus.records import FileRecord, Mention, Step, TheoremRecord
from sgs.corpus.rocq_text import (
    error_line,
    goal_count,
    goal_display,
    hypothesis_names,
    parse_locate,
    tactic_identifiers,
)
from sgs.corpus.sources import Library

#: how a proof's first sentence may look when it is not the proof itself (``Proof term.``)
_PROOF_HEAD = re.compile(r"Proof\s*\.|Proof\s+(?:using|with)\b.*", re.S)
#: sentences that close a proof
_CLOSING = re.compile(r"(Qed|Defined|Admitted|Abort|Save)\b")
#: commands that may appear inside a proof without being a step of it (queries, settings)
_NOT_STEPS = frozenset({
    "Show", "Check", "Print", "Search", "SearchAbout", "SearchPattern", "SearchRewrite", "About", "Locate",
    "Eval", "Compute", "Set", "Unset", "Opaque", "Transparent", "Hint", "Arguments", "Implicit",
    "Typeclasses", "Local", "Global", "Test", "Pwd", "Timeout", "Fail", "Succeed",
})


class _FileFailed(Exception):
    def __init__(self, error: str, line: int) -> None:
        super().__init__(error)
        self.error, self.line = error, line


class _Lines:
    """Offset -> line number, without counting newlines again for every sentence."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def __call__(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)


def _env() -> dict[str, str]:
    """coqtop's environment: where it finds itself and its libraries, nothing else."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "COQLIB", "COQPATH", "OCAMLPATH")}
    env["LANG"] = "C.UTF-8"
    return env


def _limits() -> Limits:
    # Library files are trusted text: the sandbox is there to keep one runaway file from
    # taking the machine (memory), not against hostile input; coqtop writes nothing.
    return Limits(address_space_bytes=8 << 30, cpu_seconds=None, isolate_network=True,
                  max_output_bytes=64 << 20)


def _head(code: str) -> str:
    m = re.match(r"(?:#\[[^\]]*\]\s*)*([^\W\d][\w']*)", code)
    return m.group(1) if m else ""


class _OpenProof:
    """The proof being replayed."""

    def __init__(self, name: str, statement: Sentence, line: int, goals: str) -> None:
        self.name, self.statement, self.line = name, statement, line
        self.goals = goals
        self.steps: list[Step] = []
        #: ``Locate`` answers in this proof (nothing is declared inside a proof, so they hold)
        self.located: dict[str, Optional[tuple[str, str]]] = {}
        self.started = time.monotonic()


def replay_file(library: Library, file: str, *, coqtop: str, split: str, step_timeout: float = 120.0,
                file_timeout: float = 3600.0, coq_version: str = "") -> tuple[FileRecord, list[TheoremRecord]]:
    """Replay ``file`` of ``library``; never raises for the file's sake (a failure is in the record)."""
    started = time.monotonic()
    meta = FileRecord(library=library.name, file=file, module=library.module_of(file), split=split,
                      status="ok", coq_version=coq_version)
    theorems: list[TheoremRecord] = []
    try:
        text = (library.root / file).read_text("utf-8")
        try:
            sentences = split_sentences(text)
        except RocqTextError:
            sentences = split_sentences(text, trusted=True)
    except (OSError, UnicodeDecodeError, RocqTextError) as e:
        meta.status, meta.error = "failed", f"unreadable: {e}"
        sentences, text = [], ""
    meta.sentences = len(sentences)
    if sentences:
        cases = stdlib_truth.stdlib_cases(library.root, file) if library.name == "stdlib" else {}
        session: Optional[RocqSession] = None
        try:
            session = RocqSession(library.coqtop_argv(coqtop, file), env=_env(), limits=_limits(),
                                  name="corpus")
            session.wait_ready(time.monotonic() + step_timeout)
            _run_sentences(session, library, file, text, sentences, meta, theorems, cases, split,
                           step_timeout, started + file_timeout)
        except _FileFailed as e:
            meta.status, meta.error, meta.failed_line = "failed", e.error[:4000], e.line
        except SessionError as e:
            meta.status, meta.error = "failed", f"coqtop: {e}"[:4000]
        finally:
            if session is not None:
                session.kill()
    meta.theorems = len(theorems)
    meta.finished = sum(t.ending in ("Qed", "Defined") for t in theorems)
    meta.stdlib_closed = sum(t.truth == "closed" for t in theorems)
    meta.steps = sum(len(t.steps) for t in theorems)
    meta.steps_with_lemmas = sum(bool(s.lemmas) for t in theorems for s in t.steps)
    meta.seconds = round(time.monotonic() - started, 3)
    meta.extracted_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return meta, theorems


def _run_sentences(session: RocqSession, library: Library, file: str, text: str, sentences: list[Sentence],
                   meta: FileRecord, theorems: list[TheoremRecord], cases: dict, split: str,
                   step_timeout: float, file_deadline: float) -> None:
    line_of = _Lines(text)
    proof: Optional[_OpenProof] = None

    def run(sentence_text: str, line: int) -> Reply:
        if time.monotonic() > file_deadline:
            raise _FileFailed("file_timeout: the file ran over its time bound", line)
        try:
            return session.run(sentence_text, time.monotonic() + step_timeout)
        except SessionError as e:
            raise _FileFailed(f"coqtop: {e}", line) from e

    # after a proof failed, its remaining sentences are skipped up to its closing one
    skipping = False
    for s in sentences:
        line = line_of(s.start)
        code = " ".join(s.code.split())
        head = _head(code) if s.kind == "command" else ""
        closing = s.kind == "command" and (_CLOSING.match(code) is not None or
                                            (head == "Proof" and not _PROOF_HEAD.fullmatch(code)))
        if skipping:
            skipping = not closing
            continue
        if proof is None:
            reply = run(s.text, line)
            if not reply.ok:
                raise _FileFailed(reply.message, line)
            meta.sentences_run += 1
            if reply.prompt.pending:       # the sentence opened a proof
                proof = _OpenProof(reply.prompt.proof, s, line, goal_display(reply.output) or "")
            continue

        is_step = s.kind != "command" or not (closing or head == "Proof" or head in _NOT_STEPS)
        mentions: list[Mention] = []
        if is_step and s.kind == "command":
            mentions = _mentions(proof, code, run, line)
        before = time.monotonic()
        reply = run(s.text, line)
        seconds = time.monotonic() - before
        if not reply.ok:
            # One proof that no longer goes through (an example written for another version
            # of a library) need not cost the file: it is given up as its author could have,
            # admitted, so that the lemmas after it, which may use it, still run.
            meta.failed_proofs.append(f"{proof.name}:{line}: {error_line(reply.message)}"[:500])
            given_up = run("Admitted.", line)
            if not given_up.ok or given_up.prompt.pending:
                raise _FileFailed(reply.message, line)
            proof = None
            skipping = not closing
            continue
        meta.sentences_run += 1
        if is_step:
            kind = "tactic" if s.kind == "command" else s.kind
            proof.steps.append(Step(tactic=s.text, kind=kind, goals=proof.goals, num_goals=goal_count(proof.goals),
                                    line=line, mentions=mentions, seconds=round(seconds, 4)))
        shown = goal_display(reply.output)
        if shown is not None:
            proof.goals = shown
        if len(reply.prompt.pending) > 1:
            raise _FileFailed("a proof opened inside a proof (nested proofs are not replayed)", line)
        if not reply.prompt.pending:       # the sentence closed the proof
            theorems.append(_finish(proof, s, text, library, file, split, cases, line))
            proof = None


def _mentions(proof: _OpenProof, code: str, run, line: int) -> list[Mention]:
    """The global objects a tactic names, asked with ``Locate Term`` before it runs."""
    local = hypothesis_names(proof.goals)
    mentions = []
    for name in tactic_identifiers(code):
        if name in local:
            continue
        if name not in proof.located:
            proof.located[name] = parse_locate(run(f"Locate Term {name}.", line).output, name)
        found = proof.located[name]
        if found is not None:
            mentions.append(Mention(name=name, kind=found[0], path=found[1]))
    return mentions


def _finish(proof: _OpenProof, closing: Sentence, text: str, library: Library, file: str, split: str,
            cases: dict, line: int) -> TheoremRecord:
    code = " ".join(closing.code.split())
    ending = _head(code)
    statement_end = proof.statement.start + len(proof.statement.text)
    script = text[statement_end:closing.start + len(closing.text)].strip()
    case = stdlib_truth.match(cases, proof.name, proof.line)
    return TheoremRecord(
        library=library.name, file=file, name=proof.name, line=proof.line, statement=proof.statement.text,
        proof=script, ending=ending, split=split,
        # an admitted or aborted proof may hold `admit`s: its steps are no example to learn from
        steps=proof.steps if ending in ("Qed", "Defined") else [],
        seconds=round(time.monotonic() - proof.started, 3),
        truth=case.truth if case else None, case=case.task if case else None)


def coq_version(coqtop: str) -> str:
    """``coqtop -v``'s version (``8.16.1``), recorded in every file record."""
    out = subprocess.run([coqtop, "-v"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"version (\S+)", out)
    return m.group(1) if m else out.strip()[:100]

