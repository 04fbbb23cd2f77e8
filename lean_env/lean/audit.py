"""The Lean audit: a second opinion on a proof the REPL accepted.

The REPL checks a proof in a long-lived process that branches every proof from
one header environment and has answered thousands of other commands; a bug in
that path (an environment reused wrongly, an answer misread) could accept a
proof that is not one.  The audit re-checks the proof through Lean's batch
compiler instead, in one fresh scratch directory
(:func:`lean_env.sandbox.run_batch`: new processes, the REPL's resource
limits, no network):

    <lake_command> -d <project_dir> env lean -o Audited.olean Audited.lean
    <lake_command> -d <project_dir> env lean --run SgsAxiomCheck.lean NONCE olean Audited.olean THEOREM

where ``Audited.lean`` is the header, the trusted statement and the proof body
exactly as the REPL received it (pre-filtered and normalised).  The second
command is the trusted axiom checker (:mod:`lean_env.lean.axiom_check`): it
reads the compiled module as data, replays its constants through the kernel
and lists the theorem's axioms, so nothing the proof does while it is
compiled (new syntax for ``#print axioms``, printed look-alike lines) reaches
the answer.  The proof agrees when the compile exits 0 and prints no error,
and the checker answers for this theorem with only allowed axioms (``sorryAx``
never is).

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

from lean_env.lean.axiom_check import checker_command, judge_report, new_nonce
from lean_env.lean.checks import PreparedProof
from lean_env.lean.config import LeanConfig
from lean_env.sandbox import CommandResult, run_batch
from lean_env.verdict import Status

#: the file the audit compiles, and the module it compiles to
AUDIT_FILE = "Audited.lean"
AUDIT_OLEAN = "Audited.olean"
#: the largest file the compiler may write (its .olean of one theorem is far smaller)
AUDIT_FILE_SIZE_BYTES = 256 << 20
#: how much of a failing compile's output a verdict keeps
_TAIL_CHARS = 1_500
#: ``FILE:LINE:COL: error`` as Lean's command line prints error messages
_ERROR_LINE = re.compile(r"^[^\n:]*:\d+:\d+: error\b", re.MULTILINE)


@dataclass(frozen=True)
class AuditOutcome:
    """What the audit concluded: ``valid`` with reason ``ok`` when it agrees."""

    status: Status
    reason: str
    messages: tuple[str, ...] = ()


def audit_source(header: str, prepared: PreparedProof) -> str:
    """The text of ``Audited.lean``: the header and the spliced proof."""
    return f"{header.rstrip()}\n\n{prepared.command}\n"


def audit_commands(config: LeanConfig, nonce: str, theorem: str) -> Optional[list[list[str]]]:
    """The compile, then the axiom checker on what it compiled; ``None``
    without a project directory (``lake env`` needs the project's search path)."""
    if not config.project_dir:
        return None
    lake = shlex.split(config.lake_command)
    compile_module = [*lake, "-d", config.project_dir, "env", "lean", "-o", AUDIT_OLEAN, AUDIT_FILE]
    check_axioms = checker_command(config.lake_command, config.project_dir, nonce, "olean", AUDIT_OLEAN, theorem)
    return [compile_module, check_axioms]


def judge(results: list[CommandResult], nonce: str, theorem: str, allowed: frozenset[str]) -> AuditOutcome:
    """Read the finished batch: the compile's errors, then the checker's answer."""
    compiled = results[0]
    output = compiled.stdout + compiled.stderr
    tail = (output[-_TAIL_CHARS:],) if output else ()
    if compiled.returncode is None:
        return AuditOutcome(Status.TIMEOUT, "audit_timeout", tail)
    if compiled.returncode != 0 or _ERROR_LINE.search(output):
        return AuditOutcome(Status.INVALID, "audit_compile_failed", tail)
    if len(results) < 2:
        return AuditOutcome(Status.INVALID, "audit_axioms_unknown", ("the axiom checker did not run",))
    report = judge_report(results[1], nonce, theorem, allowed)
    if report.status is Status.VALID:
        return AuditOutcome(Status.VALID, "ok", report.messages)
    if report.status is Status.TIMEOUT:
        return AuditOutcome(Status.TIMEOUT, "audit_timeout", report.messages)
    if report.offending:
        return AuditOutcome(Status.INVALID, f"audit_axioms:{','.join(report.offending)}", report.messages)
    return AuditOutcome(Status.INVALID, "audit_axioms_unknown", report.messages)


def audit_proof(config: LeanConfig, header: str, prepared: PreparedProof, timeout: float) -> AuditOutcome:
    """Compile the proof and check its axioms in a fresh sandbox, and judge it."""
    nonce = new_nonce()
    commands = audit_commands(config, nonce, prepared.name)
    if commands is None:
        return AuditOutcome(Status.SYSTEM_ERROR, "audit_unavailable",
                            ("the Lean audit needs LeanConfig.project_dir (lake env runs in the project)",))
    limits = dataclasses.replace(config.limits(), file_size_bytes=AUDIT_FILE_SIZE_BYTES)
    try:
        results = run_batch(commands, files={AUDIT_FILE: audit_source(header, prepared)},
                            deadline=time.monotonic() + timeout, env=config.child_env(), limits=limits,
                            name="lean-audit")
    except FileNotFoundError as error:
        return AuditOutcome(Status.SYSTEM_ERROR, "audit_unavailable", (str(error),))
    return judge(results, nonce, prepared.name, frozenset(config.allowed_axioms))
