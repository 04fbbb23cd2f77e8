"""Known soundness bugs of Rocq 8.16.1 that proof text can reach, and what
the checks refuse because of them.

Rocq keeps a list of its critical bugs (``dev/doc/critical-bugs.md`` in
rocq-prover/rocq).  Debian ships Coq 8.16.1 and nothing newer, so every entry
whose impacted versions include 8.16.1 is a way a model could be paid for a
proof of ``False``.  Most entries need commands a proof body may not contain
(``Module``, ``Inductive``, ``Register``, ``Set Definitional UIP``, sections,
hand-made ``.vo`` files): :mod:`lean_env.rocq.commands` already refuses those.
The entries a proof body *can* reach fall into two classes, one row each of
:data:`BUG_CLASSES`:

* ``fixpoints``: the kernel's guard checker (the termination check of
  ``fix``/``cofix``) accepts non-terminating fixpoints in 8.16 (rocq#20413,
  #20455, #20555, #21839; newer reports keep coming: #21682, #21683, #21701).
  ``coqchk`` shares the guard checker, so the audit does not catch them.  A
  proof body writes a fixpoint with the ``fix``/``cofix`` terms and tactics,
  refused here; induction principles of the libraries are already checked
  constants.  It can also build one without the words (Ltac2's
  ``Constr.Unsafe.make``, Ltac ``context`` patterns on a library's body),
  which the check of the finished term refuses
  (:mod:`lean_env.rocq.term_check`).
* ``vm_reduction``: the bytecode VM (and ``native_compute``, which this
  backend runs as the VM) computes some primitive-integer operations wrongly
  in 8.16 (``addmuldiv`` with a shift of 64 or more, rocq#19402) and has an
  unfixed buffer overflow on huge closures (rocq#13439).  A proof reaches the
  VM through ``vm_compute``, ``native_compute``, ``Compute`` and the cast
  ``<:``/``<<:``.  ``coqchk`` has no VM, so the audit would catch these, but
  only for the proofs it samples.  Ltac2 reaches the VM as ``Std.vm``,
  ``Std.native``, ``Std.eval_vm`` and ``Std.eval_native``, refused too.
  Library tactics that use the VM on terms they build themselves (``lia``
  checks its certificate with a ``<:`` cast) stay allowed: their terms are
  not the proof author's.

Words are a first, cheap pass: a proof can build a term without writing the
words (Ltac2's ``Constr.Unsafe.make`` makes a ``fix``).  What the finished
proof term contains is checked after ``Qed`` (:mod:`lean_env.rocq.term_check`).

``RocqConfig.allow_bug_prone_features`` names the classes a deployment
trusts anyway (for instance a project whose proofs are full of ``fix``).
The refusal reason is ``known_bug:<class>`` and its message names the bugs
and the setting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional


@dataclass(frozen=True)
class BugClass:
    """Proof text that reaches one family of known prover bugs."""

    #: the value of ``RocqConfig.allow_bug_prone_features`` that allows it
    name: str
    #: words (outside comments and strings) that reach the bugs
    words: frozenset[str]
    #: symbols (outside comments and strings) that reach the bugs
    symbols: tuple[str, ...]
    #: the critical-bug entries it stands for (``rocq#NNNNN``)
    bugs: tuple[str, ...]
    #: what the bugs do, for the refusal message
    summary: str
    #: regular expressions (on the same code) that reach the bugs
    patterns: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """The verdict reason of text that uses the class."""
        return f"known_bug:{self.name}"


BUG_CLASSES: tuple[BugClass, ...] = (
    BugClass(
        name="fixpoints",
        words=frozenset({"fix", "cofix"}),
        symbols=(),
        bugs=("rocq#20413", "rocq#20455", "rocq#20555", "rocq#21839"),
        summary="Coq 8.16's guard checker accepts some non-terminating fixpoints, which prove False",
    ),
    BugClass(
        name="vm_reduction",
        # Ltac2 reaches the VM under other names: Std.eval_vm/eval_native (reduction
        # functions) and Std.vm/Std.native (the tactics behind its vm_compute notation)
        words=frozenset({"vm_compute", "native_compute", "Compute", "eval_vm", "eval_native"}),
        symbols=("<:", "<<:"),
        bugs=("rocq#19402", "rocq#13439", "rocq#16891"),
        summary="Coq 8.16's bytecode VM computes some primitive-integer operations wrongly",
        patterns=(r"(?<![\w'])Std\s*\.\s*(?:vm|native)(?![\w'])",),
    ),
)

#: every ``known_bug:...`` reason the checks can give
REJECTION_REASONS = frozenset(bug_class.reason for bug_class in BUG_CLASSES)
#: the values ``allow_bug_prone_features`` accepts
FEATURE_NAMES = tuple(bug_class.name for bug_class in BUG_CLASSES)

_SYMBOLS = {bug_class.name: re.compile("|".join([*(re.escape(s) for s in bug_class.symbols), *bug_class.patterns]))
            for bug_class in BUG_CLASSES if bug_class.symbols or bug_class.patterns}


def find_bug_prone(code: str, words: Iterable[str], allowed: frozenset[str]) -> Optional[BugClass]:
    """The first class not in ``allowed`` that ``code`` (comments blanked,
    strings emptied) or its ``words`` reach, or ``None``."""
    present = set(words)
    for bug_class in BUG_CLASSES:
        if bug_class.name in allowed:
            continue
        symbols = _SYMBOLS.get(bug_class.name)
        if present & bug_class.words or (symbols is not None and symbols.search(code)):
            return bug_class
    return None


def refusal_detail(bug_class: BugClass, text: str) -> str:
    """The message of a refusal: which bugs, and how to allow the feature."""
    return (f"{text[:80]!r} uses {' / '.join(sorted(bug_class.words | set(bug_class.symbols)))}: "
            f"{bug_class.summary} ({', '.join(bug_class.bugs)}); refused unless "
            f"allow_bug_prone_features includes {bug_class.name!r}")
