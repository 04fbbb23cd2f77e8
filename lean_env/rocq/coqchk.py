"""What ``coqchk`` prints and which options it shares with ``coqtop``: read
by the axiom census (:mod:`lean_env.rocq.census`) and the audit
(:mod:`lean_env.rocq.audit`).  Anything in an unexpected form is a
:class:`CensusError`, so an unknown format can only make a census untaken or
an audit fail, never a proof valid."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

#: headings of coqchk's context summary, with the label used for their entries
_SUMMARY_SECTIONS = {
    "Axioms": "axiom",
    "Constants/Inductives relying on type-in-type": "type-in-type",
    "Constants/Inductives relying on unsafe (co)fixpoints": "unsafe fixpoint",
    "Inductives whose positivity is assumed": "assumed positivity",
}
_PREDICATIVE = "Set is predicative"

_INTERN = re.compile(r"^\[intern (.+) \.\.\.$", re.M)
_CHECKED = "Modules were successfully checked"
#: coqchk options that change what it loads or how it checks; the others are coqtop's only
_COQCHK_OPTIONS = {"-R": 2, "-Q": 2, "-coqlib": 1, "-impredicative-set": 0, "-indices-matter": 0}


class CensusError(RuntimeError):
    """The census could not be taken (the backend then keeps checking every
    proof with ``Print Assumptions``)."""


@dataclass(frozen=True)
class Census:
    """What the census found in one set of libraries."""

    #: axioms and parameters (qualified names)
    axioms: tuple[str, ...] = ()
    #: everything else ``Print Assumptions`` could report, as ``kind: name``
    unsafe: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        """No proof in this environment can depend on anything: ``Print
        Assumptions`` would answer "Closed under the global context"."""
        return not self.axioms and not self.unsafe

    def describe(self) -> str:
        found = [*self.axioms, *self.unsafe]
        return "clean" if not found else f"{len(found)} findings: " + ", ".join(found[:5])


def parse_summary(text: str) -> Census:
    """Read the ``CONTEXT SUMMARY`` that ``coqchk -o`` prints last.  Every
    section must be there and say ``<none>`` or list names, one per indented
    line; a section we do not know makes the census unclean."""
    at = text.rfind("CONTEXT SUMMARY")
    if at < 0:
        raise CensusError("coqchk printed no context summary")
    lines = text[at:].splitlines()
    if len(lines) < 2 or set(lines[1].strip()) != {"="}:
        raise CensusError("the context summary has no underline")
    theory = ""
    listed: dict[str, list[str]] = {}
    empty: set[str] = set()
    current: Optional[str] = None
    for line in lines[2:]:
        if not line.strip():
            continue
        if line.startswith("* "):
            heading, sep, rest = line[2:].partition(":")
            current, rest = heading.strip(), rest.strip()
            if not sep or current in listed:
                raise CensusError(f"unexpected summary heading {line!r}")
            listed[current] = []
            if current == "Theory":
                theory = rest
            elif rest == "<none>":
                empty.add(current)
            elif rest:
                listed[current].append(rest)
            continue
        if current is None or current == "Theory" or current in empty or not line[0].isspace():
            raise CensusError(f"unexpected summary line {line!r}")
        listed[current].extend(line.split())
    missing = {"Theory", *_SUMMARY_SECTIONS} - set(listed)
    if missing:
        raise CensusError(f"the context summary lacks {sorted(missing)}")
    if any(not names and heading not in empty for heading, names in listed.items() if heading != "Theory"):
        raise CensusError("a summary section is neither <none> nor a list of names")
    unsafe = [] if theory == _PREDICATIVE else [f"theory: {theory}"]
    for heading, names in listed.items():
        if heading not in ("Theory", "Axioms"):
            unsafe.extend(f"{_SUMMARY_SECTIONS.get(heading, heading)}: {name}" for name in names)
    return Census(axioms=tuple(listed["Axioms"]), unsafe=tuple(unsafe))


def parse_trace(text: str) -> set[str]:
    """The ``.vo`` files coqchk interned, from its (non-silent) trace; raises
    :class:`CensusError` unless it also reports success."""
    if _CHECKED not in text:
        raise CensusError(f"coqchk did not report success: {text[-500:]!r}")
    return {os.path.realpath(path) for path in _INTERN.findall(text)}


def coqchk_options(extra_args: tuple[str, ...]) -> list[str]:
    """The options of coqtop's ``extra_args`` that coqchk shares (load paths
    and checking flags); the others are coqtop's only."""
    options, i = [], 0
    while i < len(extra_args):
        arity = _COQCHK_OPTIONS.get(extra_args[i])
        if arity is not None and i + arity < len(extra_args):
            options.extend(extra_args[i:i + 1 + arity])
            i += 1 + arity
        else:
            i += 1
    return options
