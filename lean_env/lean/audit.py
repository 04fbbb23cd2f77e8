"""The Lean audit: a second opinion on a proof the REPL accepted.

The REPL checks a proof in a long-lived process that branches every proof from
one header environment and has answered thousands of other commands; a bug in
that path (an environment reused wrongly, an answer misread) could accept a
proof that is not one.  The audit re-checks the proof through Lean's batch
compiler instead, in one fresh scratch directory
(:func:`lean_env.sandbox.run_batch`: a new process, the REPL's resource limits,
no network):

    <lake_command> -d <project_dir> env lean Audited.lean

where ``Audited.lean`` is the header, the trusted statement, the proof body
exactly as the REPL received it (pre-filtered and normalised), and
``#print axioms <theorem>``.  The proof agrees when ``lean`` exits 0, prints
no error, and prints exactly one axioms line naming only allowed axioms
(``sorryAx`` never is).  As with the REPL, nothing but that one line is read
from Lean's messages, and its absence fails closed.

Entry point: :func:`audit_proof` (used by :meth:`LeanBackend.audit`);
:func:`judge` is the pure part.  Reasons: ``ok``, ``audit_compile_failed``,
``audit_axioms:<names>``, ``audit_axioms_unknown``, ``audit_timeout``,
``audit_unavailable`` (no ``lake``, or no project directory to run it in).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import time
from dataclasses import dataclass
from typing import Optional

from lean_env.lean.checks import PreparedProof
from lean_env.lean.config import LeanConfig
from lean_env.sandbox import CommandResult, run_batch
from lean_env.verdict import Status

#: the file the audit compiles
AUDIT_FILE = "Audited.lean"
#: the largest file the compiler may write (its .olean of one theorem is far smaller)
AUDIT_FILE_SIZE_BYTES = 256 << 20
#: how much of a failing compile's output a verdict keeps
_TAIL_CHARS = 1_500
#: ``FILE:LINE:COL: error`` as Lean's command line prints error messages
_ERROR_LINE = re.compile(r"^[^\n:]*:\d+:\d+: error\b", re.MULTILINE)
#: the ``#print axioms`` answer, whose list Lean wraps over indented lines when long
_AXIOMS = re.compile(r"'[^'\n]*' (?:depends on axioms: \[(?P<axioms>[^\]]*)\]|(?P<none>does not depend on any axioms))")


@dataclass(frozen=True)
class AuditOutcome:
    """What the audit concluded: ``valid`` with reason ``ok`` when it agrees."""

    status: Status
    reason: str
    messages: tuple[str, ...] = ()


def audit_source(header: str, prepared: PreparedProof) -> str:
    """The text of ``Audited.lean``: header, the spliced proof, the axioms query."""
    return f"{header.rstrip()}\n\n{prepared.command}\n\n#print axioms {prepared.name}\n"


def compile_command(config: LeanConfig) -> Optional[list[str]]:
    """``<lake_command> -d <project_dir> env lean Audited.lean``, or ``None``
    without a project directory (``lake env`` needs the project's search path)."""
    if not config.project_dir:
        return None
    return [*shlex.split(config.lake_command), "-d", config.project_dir, "env", "lean", AUDIT_FILE]


def judge(result: CommandResult, allowed: frozenset[str]) -> AuditOutcome:
    """Read one finished compile: errors, then the one axioms line."""
    output = result.stdout + result.stderr
    tail = (output[-_TAIL_CHARS:],) if output else ()
    if result.returncode is None:
        return AuditOutcome(Status.TIMEOUT, "audit_timeout", tail)
    if result.returncode != 0 or _ERROR_LINE.search(output):
        return AuditOutcome(Status.INVALID, "audit_compile_failed", tail)
    found = list(_AXIOMS.finditer(result.stdout))
    if len(found) != 1:
        return AuditOutcome(Status.INVALID, "audit_axioms_unknown", tail)
    listed = "" if found[0].group("none") else found[0].group("axioms")
    axioms = {name.strip() for name in listed.split(",") if name.strip()}
    unexpected = sorted(axioms - (allowed - {"sorryAx"}))
    if unexpected:
        return AuditOutcome(Status.INVALID, f"audit_axioms:{','.join(unexpected)}", tail)
    return AuditOutcome(Status.VALID, "ok")


def audit_proof(config: LeanConfig, header: str, prepared: PreparedProof, timeout: float) -> AuditOutcome:
    """Compile the proof with ``lake env lean`` in a fresh sandbox and judge it."""
    argv = compile_command(config)
    if argv is None:
        return AuditOutcome(Status.SYSTEM_ERROR, "audit_unavailable",
                            ("the Lean audit needs LeanConfig.project_dir (lake env runs in the project)",))
    limits = dataclasses.replace(config.limits(), file_size_bytes=AUDIT_FILE_SIZE_BYTES)
    try:
        [result] = run_batch([argv], files={AUDIT_FILE: audit_source(header, prepared)},
                             deadline=time.monotonic() + timeout, env=config.child_env(), limits=limits,
                             name="lean-audit")
    except FileNotFoundError as error:
        return AuditOutcome(Status.SYSTEM_ERROR, "audit_unavailable", (str(error),))
    return judge(result, frozenset(config.allowed_axioms))
