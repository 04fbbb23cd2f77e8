"""The axioms of a Lean proof, read where the proof cannot reach.

``#print axioms`` runs in the environment the proof built, so a proof that
adds syntax or elaboration rules (through a banned keyword the pre-filter
missed) can make it print anything, in the REPL and in a compiled file alike.
The axiom check therefore comes from a separate process whose whole program
is fixed and elaborated before it reads anything of the proof's:
``SgsAxiomCheck.lean`` (beside this file) loads the proof's constants as data,
sends each to the kernel again (``Environment.replay``, as lean4checker
does) and collects the theorem's axioms itself.

Two sources of constants:

* ``pickle``: after the REPL accepted the proof, the REPL's own
  ``{"pickleTo": FILE, "env": N}`` writes the imports and the constants added
  after them (REPL code, not the proof's, writes the file);
* ``olean``: the audit compiles the proof with ``lean -o`` and the checker
  reads the compiled module.

The checker prints one line ``SGS-AXIOMS <nonce> <json>``; the nonce is drawn
after the proof ran, so no earlier output of the proof can pass for it.
:func:`judge_report` is the pure reading of that answer.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from lean_env.sandbox import CommandResult
from lean_env.verdict import Status

#: the trusted checker program, run with ``lean --run``
CHECKER_SOURCE = Path(__file__).with_name("SgsAxiomCheck.lean")
#: how the checker's one answer line starts
REPORT_PREFIX = "SGS-AXIOMS"
_REPORT = re.compile(rf"^{REPORT_PREFIX} (\S+) (.*)$", re.MULTILINE)
_TAIL_CHARS = 1_500


@dataclass(frozen=True)
class AxiomReport:
    """What the checker concluded about one theorem: ``valid``/``ok`` when its
    axioms are all allowed."""

    status: Status
    reason: str
    messages: tuple[str, ...] = ()
    #: the axioms that made it invalid (``sorryAx`` is never allowed)
    offending: tuple[str, ...] = ()


def new_nonce() -> str:
    """A fresh, unguessable token for one checker run."""
    return secrets.token_hex(16)


def checker_command(lake_command: str, project_dir: str, nonce: str, mode: str, file: str,
                    theorem: str) -> list[str]:
    """``<lake> -d <project> env lean --run SgsAxiomCheck.lean NONCE MODE FILE THEOREM``.
    The checker runs from its installed path, outside any directory a proof's
    process may write to."""
    if mode not in ("pickle", "olean"):
        raise ValueError(f"checker mode must be pickle or olean, got {mode!r}")
    return [*shlex.split(lake_command), "-d", project_dir, "env", "lean", "--run", str(CHECKER_SOURCE),
            nonce, mode, file, theorem]


def judge_report(result: CommandResult, nonce: str, theorem: str, allowed: frozenset[str]) -> AxiomReport:
    """Read one finished checker run.  Exactly one ``SGS-AXIOMS`` line with our
    nonce and a well-formed answer for our theorem, or the check fails closed."""
    output = result.stdout + result.stderr
    tail = (output[-_TAIL_CHARS:],) if output.strip() else ()
    if result.returncode is None:
        return AxiomReport(Status.TIMEOUT, "timeout", ("the axiom checker did not finish in time", *tail))
    lines = _REPORT.findall(result.stdout)
    if len(lines) != 1 or lines[0][0] != nonce:
        return AxiomReport(Status.INVALID, "axioms_unknown",
                           (f"the axiom checker printed {len(lines)} answer lines, expected one with this "
                            "check's nonce", *tail))
    answer = _decode(lines[0][1])
    if answer is None:
        return AxiomReport(Status.INVALID, "axioms_unknown", ("the axiom checker's answer is malformed", *tail))
    if "error" in answer:
        # the proof's environment did not replay through the kernel, or lacks the theorem
        return AxiomReport(Status.INVALID, "axioms_replay_failed", (str(answer["error"])[:_TAIL_CHARS],))
    axioms = answer["axioms"]
    if answer["theorem"] != theorem:
        return AxiomReport(Status.INVALID, "axioms_unknown",
                           (f"the axiom checker answered for {answer['theorem']!r}, not {theorem!r}",))
    offending = tuple(sorted({a for a in axioms if a not in allowed or a == "sorryAx"}))
    if "sorryAx" in offending:
        return AxiomReport(Status.INVALID, "sorry", (f"the proof depends on sorryAx: {', '.join(axioms)}",),
                           offending)
    if offending:
        return AxiomReport(Status.INVALID, "axioms",
                           (f"the proof depends on disallowed axioms: {', '.join(offending)}",), offending)
    listed = ", ".join(axioms) if axioms else "none"
    return AxiomReport(Status.VALID, "ok", (f"axioms (separate checker): {listed}",))


def _decode(text: str) -> Optional[dict]:
    """The checker's JSON: ``{"error": str}`` or ``{"theorem": str, "axioms":
    [str], ...}``; ``None`` for anything else."""
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    if isinstance(answer.get("error"), str):
        return answer
    axioms = answer.get("axioms")
    if (isinstance(answer.get("theorem"), str) and isinstance(axioms, list)
            and all(isinstance(a, str) for a in axioms)):
        return answer
    return None


__all__ = ["CHECKER_SOURCE", "REPORT_PREFIX", "AxiomReport", "checker_command", "judge_report", "new_nonce"]
