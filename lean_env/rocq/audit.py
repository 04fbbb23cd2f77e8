"""The Rocq audit: a second opinion on a proof the coqtop session accepted.

The session checks a proof sentence by sentence in a long-lived ``coqtop``
that has seen thousands of other proofs; a bug in that path (a sentence split
wrongly, a state not rolled back, a reply misread) could accept a proof that
is not one.  The audit re-checks the proof through a path that shares none of
that machinery, in one fresh scratch directory (:func:`lean_env.sandbox.run_batch`,
new processes, the session's resource limits, no network):

1. ``coqc`` compiles the whole file ``Audited.v`` (header, statement and
   proof, exactly the sentences the session ran) as module
   ``SgsAudit.Audited``;
2. ``coqchk -o -norec SgsAudit.Audited`` re-checks the compiled ``.vo``
   with the independent kernel checker and prints its context summary:
   nothing declared in our module may be an axiom (an ``Admitted`` theorem
   is one) or rely on an unsafe fixpoint, type-in-type or assumed
   positivity (the libraries the header loads are the axiom census's
   business, :mod:`lean_env.rocq.census`);
3. a second ``coqc`` run compiles ``AssumptionsQuery.v``, which only loads
   the header and the compiled module and prints ``Print Assumptions`` of the
   theorem; it may list only ``RocqConfig.allowed_axioms``.  Requiring a
   compiled file runs none of the proof's tactics, so nothing the proof
   prints can pose as this answer;
4. a third ``coqc`` run compiles ``TermQuery.v``, which prints the compiled
   theorem's body under the term check's own printing settings
   (:mod:`lean_env.rocq.term_check`): ``coqchk`` shares the kernel's guard
   checker, so a fixpoint of Coq 8.16's known guard bugs built without the
   word ``fix`` (Ltac2's unsafe term API) passes 1-3, and only what the term
   contains shows it.  Fixpoints that may be library copies are looked up in
   one more batch (``Locate``, then ``Print`` of the candidates, under the
   header alone), as the session's check does.

Entry point: :func:`audit_proof` (used by
:meth:`lean_env.rocq.backend.RocqBackend.audit`); :func:`judge` is the pure
part that reads the first three commands' results, :func:`judge_term` the
fourth's.  Reasons: ``ok``, ``audit_compile_failed``, ``audit_coqchk_failed``,
``audit_axioms:<names>``, ``audit_known_bug:<feature>``, ``audit_timeout``,
``audit_tactic_libraries_change_statement``,
``audit_unavailable`` (``audit_text_rejected`` is the backend's, for text its
normal checks refuse).
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from typing import Sequence

from lean_env.rocq.coqchk import CensusError, coqchk_options, parse_summary, parse_trace
from lean_env.rocq.checks import Sentence, Statement
from lean_env.rocq.config import RocqConfig
from lean_env.rocq.output import parse_assumptions
from lean_env.rocq.tactic_libraries import CHANGED, meaning_source
from lean_env.rocq.term_check import (
    PRINT_SETTINGS, located_constants, lookup_names, nothing_to_look_for, objection, printed_body, scan_term, tokens,
    unexplained_fixpoints)
from lean_env.sandbox import CommandResult, run_batch
from lean_env.verdict import Status

#: logical library the scratch directory is mapped to (``-Q . SgsAudit``)
AUDIT_LIBRARY = "SgsAudit"
#: the compiled proof file and its module
AUDIT_MODULE = "Audited"
#: the file that asks for the theorem's assumptions
QUERY_MODULE = "AssumptionsQuery"
#: the file that prints the theorem's body for the term check
TERM_MODULE = "TermQuery"
#: the file that compares the statement's term with and without the tactic libraries
MEANING_MODULE = "MeaningQuery"
#: the files that look up library fixpoints: ``Locate`` of their names, ``Print`` of the constants
LOCATE_MODULE, LIBRARY_MODULE = "LocateQuery", "LibraryQuery"
#: the largest file a command may write: a proof's .vo is far smaller, and a
#: hostile proof must not fill the disk
AUDIT_FILE_SIZE_BYTES = 256 << 20
#: how much of a failing command's output a verdict keeps
_TAIL_CHARS = 1_500
#: where one ``Print <constant>`` answer starts in a batch of them
_PRINT_ANSWER = re.compile(r"^(?=\S+ = ?$)", re.MULTILINE)


@dataclass(frozen=True)
class AuditOutcome:
    """What the audit concluded: ``valid`` with reason ``ok`` when it agrees."""

    status: Status
    reason: str
    messages: tuple[str, ...] = ()


def audit_source(header: Sequence[Sentence], statement: Statement, body: Sequence[Sentence]) -> str:
    """The text of ``Audited.v``: the checked sentences, one per line."""
    return "\n".join([*(s.text for s in header), statement.sentence.text, *(s.text for s in body)]) + "\n"


def query_source(header: Sequence[Sentence], theorem: str) -> str:
    """The text of ``AssumptionsQuery.v`` for theorem ``theorem``.  The
    header comes first so that axioms are named as in the session (where
    ``allowed_axioms`` such as ``classic`` are written as its imports show
    them)."""
    qualified = f"{AUDIT_LIBRARY}.{AUDIT_MODULE}.{theorem}"
    return "\n".join([*(s.text for s in header), f"Require {AUDIT_LIBRARY}.{AUDIT_MODULE}.",
                      f"Print Assumptions {qualified}."]) + "\n"


def term_source(header: Sequence[Sentence], theorem: str) -> str:
    """The text of ``TermQuery.v``: the compiled theorem's body, printed
    under the term check's settings."""
    qualified = f"{AUDIT_LIBRARY}.{AUDIT_MODULE}.{theorem}"
    return "\n".join([*(s.text for s in header), f"Require {AUDIT_LIBRARY}.{AUDIT_MODULE}.", *PRINT_SETTINGS,
                      f"Print {qualified}."]) + "\n"


def lookup_source(header: Sequence[Sentence], command: str, names: Sequence[str]) -> str:
    """A file that runs ``command`` (``Locate`` or ``Print``) on each of
    ``names`` under the header and the term check's printing settings."""
    return "\n".join([*(s.text for s in header), *PRINT_SETTINGS, *(f"{command} {n}." for n in names)]) + "\n"


def _coqc(config: RocqConfig) -> list[str]:
    # -native-compiler no: as in the session, native_compute must not compile OCaml
    return [config.coqc, "-q", "-native-compiler", "no", *config.extra_args, "-Q", ".", AUDIT_LIBRARY]


def commands(config: RocqConfig) -> list[list[str]]:
    """The four command lines, in order: compile, coqchk, assumptions, term."""
    coqc = _coqc(config)
    return [
        [*coqc, f"{AUDIT_MODULE}.v"],
        [config.coqchk, "-o", *coqchk_options(config.extra_args), "-Q", ".", AUDIT_LIBRARY, "-norec",
         f"{AUDIT_LIBRARY}.{AUDIT_MODULE}"],
        [*coqc, f"{QUERY_MODULE}.v"],
        [*coqc, f"{TERM_MODULE}.v"],
    ]


def audit_proof(config: RocqConfig, header: Sequence[Sentence], statement: Statement, body: Sequence[Sentence],
                timeout: float, *, own_header: bool = False, libraries: Sequence[Sentence] = ()) -> AuditOutcome:
    """Compile, coqchk and query one proof whose text passed the checks;
    ``timeout`` seconds of wall clock for all three commands.  ``own_header``:
    the header is a project file's text, which may declare axioms of its own
    in the compiled module (see :func:`judge`).  ``libraries``: the tactic
    libraries, loaded after the header, after ``coqc`` has compared the
    statement's term with and without them
    (:mod:`lean_env.rocq.tactic_libraries`)."""
    deadline = time.monotonic() + timeout
    limits = dataclasses.replace(config.limits(), file_size_bytes=AUDIT_FILE_SIZE_BYTES)
    if libraries:
        try:
            meaning = run_batch([[*_coqc(config), f"{MEANING_MODULE}.v"]],
                                files={f"{MEANING_MODULE}.v": meaning_source(header, statement, libraries)},
                                deadline=deadline, env=config.child_env(), limits=limits, name="rocq-audit-meaning")
        except FileNotFoundError as e:
            return AuditOutcome(Status.SYSTEM_ERROR, "audit_unavailable", (str(e),))
        if not meaning or meaning[0].timed_out:
            return AuditOutcome(Status.TIMEOUT, "audit_timeout", ("the meaning query did not finish in time",))
        if not meaning[0].ok:
            return AuditOutcome(Status.INVALID, f"audit_{CHANGED}", _failure("the meaning query", meaning[0]))
        header = [*header, *libraries]
    files = {f"{AUDIT_MODULE}.v": audit_source(header, statement, body),
             f"{QUERY_MODULE}.v": query_source(header, statement.name),
             f"{TERM_MODULE}.v": term_source(header, statement.name)}
    try:
        results = run_batch(commands(config), files=files, deadline=deadline, env=config.child_env(),
                            limits=limits, name="rocq-audit")
    except FileNotFoundError as e:
        return AuditOutcome(Status.SYSTEM_ERROR, "audit_unavailable", (str(e),))
    outcome = judge(results, frozenset(config.allowed_axioms), theorem=statement.name if own_header else None)
    if outcome.status is not Status.VALID:
        return outcome
    axioms = parse_assumptions(results[2].stdout).axioms
    allowed = frozenset(config.allow_bug_prone_features)
    printed = results[3] if len(results) > 3 else None
    if printed is not None and printed.timed_out:
        return AuditOutcome(Status.TIMEOUT, "audit_timeout", ("the term query did not finish before the deadline",))
    if printed is None or not printed.ok:
        return AuditOutcome(Status.INVALID, "audit_compile_failed", _failure("the term query", printed))
    names = lookup_names(tokens(printed.stdout))
    bodies: list[list[str]] | None = []
    if names and "fixpoints" not in allowed:
        bodies = _library_fixpoints(config, header, names, limits, deadline)
        if bodies is None:
            return AuditOutcome(Status.TIMEOUT, "audit_timeout", ("the library look-ups did not finish in time",))
    return judge_term(printed.stdout, axioms, allowed, bodies)


def _library_fixpoints(config: RocqConfig, header: Sequence[Sentence], names: Sequence[str], limits,
                       deadline: float) -> list[list[str]] | None:
    """The bodies of the library constants the term's fixpoints are named
    after (what ``unfold`` copies into a term); ``None`` when the look-ups
    ran out of time."""
    located = run_batch([[*_coqc(config), f"{LOCATE_MODULE}.v"]],
                        files={f"{LOCATE_MODULE}.v": lookup_source(header, "Locate", names)},
                        deadline=deadline, env=config.child_env(), limits=limits, name="rocq-audit-locate")
    if not located or located[0].timed_out:
        return None
    constants = sorted(set(located_constants(located[0].stdout, own_module=AUDIT_LIBRARY)))
    if not constants:
        return []
    shown = run_batch([[*_coqc(config), f"{LIBRARY_MODULE}.v"]],
                      files={f"{LIBRARY_MODULE}.v": lookup_source(header, "Print", constants)},
                      deadline=deadline, env=config.child_env(), limits=limits, name="rocq-audit-library")
    if not shown or shown[0].timed_out:
        return None
    # one `Print` answer per constant, each starting with a line `name = `; each read as the session reads one
    return [body for answer in _PRINT_ANSWER.split(shown[0].stdout) if (body := printed_body(answer))]


def judge_term(printed: str, axioms: tuple[str, ...], allowed_features: frozenset[str],
               library_bodies: list[list[str]]) -> AuditOutcome:
    """The term check on the compiled theorem's printed body: the same
    decision as the session's (:func:`lean_env.rocq.term_check.objection`)."""
    if nothing_to_look_for(axioms, allowed_features):
        return AuditOutcome(Status.VALID, "ok")
    found = scan_term(printed)
    if found.fixpoints and "fixpoints" not in allowed_features:
        found = dataclasses.replace(found, fixpoints=unexplained_fixpoints(tokens(printed), library_bodies))
    refused = objection(found, axioms, allowed_features)
    if refused is not None:
        return AuditOutcome(Status.INVALID, f"audit_{refused.reason}", (refused.message,))
    return AuditOutcome(Status.VALID, "ok")


def judge(results: Sequence[CommandResult], allowed_axioms: frozenset[str], *,
          theorem: str | None = None) -> AuditOutcome:
    """Read the results of :func:`commands` (as far as they ran).  With
    ``theorem``, coqchk's findings in the compiled module count only for the
    theorem itself (an ``Admitted`` one is an axiom): the other declarations
    are the trusted header's, and whether the theorem relies on any of them
    is what the ``Print Assumptions`` query answers."""
    names = ("coqc", "coqchk", "the Print Assumptions query")
    for name, result in zip(names, results):
        if result.timed_out:
            return AuditOutcome(Status.TIMEOUT, "audit_timeout", (f"{name} did not finish before the deadline",))
    compiled, checked, queried = (list(results) + [None, None, None])[:3]
    if compiled is None or not compiled.ok:
        return AuditOutcome(Status.INVALID, "audit_compile_failed", _failure("coqc", compiled))
    if checked is None or not checked.ok:
        return AuditOutcome(Status.INVALID, "audit_coqchk_failed", _failure("coqchk", checked))
    # coqchk prints its banner on stdout, its trace and summary on stderr
    report = checked.stdout + checked.stderr
    try:
        parse_trace(report)
        summary = parse_summary(report)
    except CensusError as e:
        return AuditOutcome(Status.INVALID, "audit_coqchk_failed", (str(e), report[-_TAIL_CHARS:]))
    ours = f"{AUDIT_LIBRARY}.{AUDIT_MODULE}."

    def counts(name: str) -> bool:
        return name == ours + theorem if theorem is not None else name.startswith(ours)

    found = [name for name in summary.axioms if counts(name)]
    # unsafe entries read "<kind>: <qualified name>"
    found += [entry.rsplit(": ", 1)[-1] for entry in summary.unsafe if counts(entry.rsplit(": ", 1)[-1])]
    if found:
        short = sorted({name[len(AUDIT_LIBRARY) + 1:] for name in found})
        return AuditOutcome(Status.INVALID, "audit_axioms:" + ",".join(short),
                            (f"coqchk: the compiled proof relies on {', '.join(short)}",))
    if queried is None or not queried.ok:
        return AuditOutcome(Status.INVALID, "audit_compile_failed", _failure("Print Assumptions", queried))
    assumptions = parse_assumptions(queried.stdout)
    if not assumptions.acceptable(allowed_axioms):
        objected = sorted({*(a for a in assumptions.axioms if a not in allowed_axioms),
                           *(entry.split()[0] for entry in assumptions.other if entry.split())})
        return AuditOutcome(Status.INVALID, "audit_axioms:" + ",".join(objected),
                            (f"Print Assumptions: {queried.stdout.strip()[:_TAIL_CHARS]}",))
    return AuditOutcome(Status.VALID, "ok")


def _failure(name: str, result: CommandResult | None) -> tuple[str, ...]:
    if result is None:
        return (f"{name} did not run",)
    output = (result.stderr + result.stdout).strip()
    return (f"{name} exited with status {result.returncode}: {output[-_TAIL_CHARS:]}",)
