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
   prints can pose as this answer.

Entry point: :func:`audit_proof` (used by
:meth:`lean_env.rocq.backend.RocqBackend.audit`); :func:`judge` is the pure
part that reads the three commands' results.  Reasons: ``ok``,
``audit_compile_failed``, ``audit_coqchk_failed``, ``audit_axioms:<names>``,
``audit_timeout``, ``audit_unavailable`` (``audit_text_rejected`` is the
backend's, for text its normal checks refuse).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Sequence

from lean_env.rocq.coqchk import CensusError, coqchk_options, parse_summary, parse_trace
from lean_env.rocq.checks import Sentence, Statement
from lean_env.rocq.config import RocqConfig
from lean_env.rocq.output import parse_assumptions
from lean_env.sandbox import CommandResult, run_batch
from lean_env.verdict import Status

#: logical library the scratch directory is mapped to (``-Q . SgsAudit``)
AUDIT_LIBRARY = "SgsAudit"
#: the compiled proof file and its module
AUDIT_MODULE = "Audited"
#: the file that asks for the theorem's assumptions
QUERY_MODULE = "AssumptionsQuery"
#: the largest file a command may write: a proof's .vo is far smaller, and a
#: hostile proof must not fill the disk
AUDIT_FILE_SIZE_BYTES = 256 << 20
#: how much of a failing command's output a verdict keeps
_TAIL_CHARS = 1_500


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


def commands(config: RocqConfig) -> list[list[str]]:
    """The three command lines, in order: compile, coqchk, query."""
    load = ["-Q", ".", AUDIT_LIBRARY]
    # -native-compiler no: as in the session, native_compute must not compile OCaml
    coqc = [config.coqc, "-q", "-native-compiler", "no", *config.extra_args, *load]
    return [
        [*coqc, f"{AUDIT_MODULE}.v"],
        [config.coqchk, "-o", *coqchk_options(config.extra_args), *load, "-norec", f"{AUDIT_LIBRARY}.{AUDIT_MODULE}"],
        [*coqc, f"{QUERY_MODULE}.v"],
    ]


def audit_proof(config: RocqConfig, header: Sequence[Sentence], statement: Statement, body: Sequence[Sentence],
                timeout: float, *, own_header: bool = False) -> AuditOutcome:
    """Compile, coqchk and query one proof whose text passed the checks;
    ``timeout`` seconds of wall clock for all three commands.  ``own_header``:
    the header is a project file's text, which may declare axioms of its own
    in the compiled module (see :func:`judge`)."""
    limits = dataclasses.replace(config.limits(), file_size_bytes=AUDIT_FILE_SIZE_BYTES)
    files = {f"{AUDIT_MODULE}.v": audit_source(header, statement, body),
             f"{QUERY_MODULE}.v": query_source(header, statement.name)}
    try:
        results = run_batch(commands(config), files=files, deadline=time.monotonic() + timeout,
                            env=config.child_env(), limits=limits, name="rocq-audit")
    except FileNotFoundError as e:
        return AuditOutcome(Status.SYSTEM_ERROR, "audit_unavailable", (str(e),))
    return judge(results, frozenset(config.allowed_axioms), theorem=statement.name if own_header else None)


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
