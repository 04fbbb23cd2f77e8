"""Which Rocq 8.16 vernacular commands may appear between ``Proof.`` and ``Qed.``.

:data:`COMMANDS` has one row per command (or command form) of Coq 8.16.1,
named by the keywords it starts with, and says whether a proof may use it:

* **allowed**: queries that only print (``Show``, ``Check``, ``Search``,
  ``About``, ``Locate`` of a name, ``Print`` of a name, ``Eval``, ...;
  ``Compute`` and ``Eval vm_compute`` run the VM, which
  :mod:`lean_env.rocq.known_bugs` refuses by default),
  ``Open Scope``/``Close Scope`` (the statement is already elaborated and
  the next proof starts from the header's state again), ``Unshelve`` (it only makes shelved goals visible again; they must
  still be proved before ``Qed``) and ``Guarded``/``Unfocused`` (they only
  check the proof state);
* **rejected**: everything that changes the environment (declarations,
  notations, hints, instances, options, ``Require``), the proof state outside
  tactics (``Undo``, ``Focus``, ``Abort``, ``Admitted``, nested proofs), the
  document (``Reset``, ``Back``, ``BackTo``), the file system, the host's
  paths or loaded code (``Pwd``, ``Print LoadPath``, ``Cd``, ``Load``, ``Declare ML Module``, ``Extraction "file"``,
  ``Redirect``, ``Print Universes "file"``), the checker's flags (``Unset
  Guard Checking``, attributes such as ``#[bypass_check(guard)]``), or wraps
  another command (``Fail``, ``Succeed``, ``Time``, ``Timeout``).

A sentence's command is the longest row whose keywords start it
(:func:`classify`); a capitalised sentence start that is no row is refused
too (``unknown_command``), so the table only has to be right about what it
allows.  ``tests/integration/lean_env/test_rocq_commands.py`` checks the
table against the grammar real ``coqtop`` prints (``Print Grammar
vernac.``) with every plugin-bearing library installed loaded (Ltac2's
commands are the ``Ltac2`` row, CoqHammer's each have one), so a command of
the installed Rocq and its libraries cannot be left unclassified.

Rejection reasons are ``banned:<keywords>`` (``banned:Unset Guard Checking``,
``banned:Drop``, ``banned:Declare ML Module``): a finite set, one per
rejected row, never built from the untrusted text.  They become metric keys
(``verifier/rejected/<reason>``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Command:
    """One row of the table."""

    #: the keywords the command starts with (``("Print", "Assumptions")``)
    words: tuple[str, ...]
    #: whether a proof body may contain it
    allowed: bool
    #: why (shown to the model in the rejection message)
    why: str
    #: how reasons and messages name it, when not by its keywords
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or " ".join(self.words)

    @property
    def reason(self) -> str:
        """The verdict reason of a proof that uses it (rejected rows only)."""
        return f"banned:{self.name}"


def _rows(allowed: bool, why: str, *names: str) -> list[Command]:
    return [Command(tuple(name.split()), allowed, why) for name in names]


_PRINTS = "a query: it only prints"
_ENVIRONMENT = "changes the global environment"
_PROOF_STATE = "changes the proof state outside tactics"
_DOCUMENT = "moves the document to another state"
_FILES = "touches the file system or loads code"
_FLAGS = "changes options or checking flags"
_WRAPPER = "wraps another command and changes what its failure means"
_ATTRIBUTE = "an attribute prefix: it changes how the next command is checked or declared"
_NOTATION = "changes how terms are parsed or printed"
_CLOSES = "closes or abandons the proof (only a final Qed. or Defined. may)"

#: every vernacular command of Rocq 8.16 that can appear inside a proof
COMMANDS: tuple[Command, ...] = tuple([
    # -- queries that only print ------------------------------------------
    *_rows(True, _PRINTS,
           "Show", "Show Proof", "Show Existentials", "Show Universes", "Show Conjectures", "Show Intro",
           "Show Intros", "Show Match", "Show Obligation Tactic", "Show Ltac Profile", "Show Ltac Profile CutOff",
           "Show Lia Profile", "Show Zify", "Show Zify BinOpSpec", "Show Zify UnOpSpec", "Show Zify BinRel",
           "Show Zify CstOp", "Show Zify UnOp", "Show Zify BinOp", "Show Zify InjTyp", "Show Extraction",
           "Show Goal",
           "Check", "Compute", "Eval", "Type", "About", "Search", "SearchPattern", "SearchRewrite", "Locate",
           "Locate Ltac", "Inspect", "Test", "Preterm", "Preterm of", "Obligations", "Obligations of",
           "Print", "Print Assumptions", "Print Opaque Dependencies", "Print Transparent Dependencies",
           "Print All Dependencies", "Print Term", "Print Ltac", "Print Ltac Signatures", "Print Module", "Print Ltac2",
           "Print Module Type", "Print Namespace", "Print Table", "Print Firstorder Solver",
           "Print Equivalent Keys", "Print Rewrite HintDb", "Print Fields", "Print Rings", "Print Hint View",
           "Print Extraction Blacklist", "Print Extraction Inline"),
    *_rows(False, "writes the universe graph to a file when given a file name",
           "Print Universes", "Print Sorted Universes"),
    *_rows(False, "reports where files are on the host", "Locate File", "Locate Library", "Pwd", "Print LoadPath",
           "Print ML Path"),
    *_rows(True, "only checks the proof state", "Guarded", "Unfocused"),
    *_rows(True, "makes shelved goals visible again; they must still be proved before Qed", "Unshelve"),
    *_rows(True, "runs a tactic and prints the hypotheses it used", "infoH"),
    # the statement is elaborated already, and every proof starts again from the
    # header's state, so a scope opened here only changes how this proof reads
    *_rows(True, "changes how this proof's own terms are read", "Open Scope", "Close Scope", "Local Open Scope",
           "Local Close Scope"),
    # -- control prefixes ---------------------------------------------------
    *_rows(False, _WRAPPER, "Fail", "Succeed", "Time", "Timeout", "Redirect"),
    # -- the proof itself ---------------------------------------------------
    *_rows(False, _CLOSES, "Qed", "Defined", "Save", "Admitted", "Abort"),
    *_rows(False, "only the first sentence may be Proof", "Proof", "Proof Mode"),
    *_rows(False, _PROOF_STATE, "Undo", "Restart", "Focus", "Unfocus", "Optimize Proof",
           "Optimize Heap", "Goal"),
    *_rows(False, _DOCUMENT, "Reset", "Back", "BackTo"),
    *_rows(False, "leaves or stops the toplevel", "Drop", "Quit"),
    *_rows(False, "declares obligations' proofs or admits them", "Obligation", "Obligation Tactic",
           "Next Obligation", "Solve Obligation", "Solve Obligations", "Solve All Obligations",
           "Admit Obligations"),
    # -- checking flags and options ------------------------------------------
    *_rows(False, _FLAGS, "Set", "Unset", "Add", "Remove", "Debug", "Export Set", "Export Unset"),
    *_rows(False, "turns off the kernel's termination (guard) check",
           "Unset Guard Checking"),
    *_rows(False, "turns off the kernel's positivity check", "Unset Positivity Checking"),
    *_rows(False, "turns off universe consistency checks", "Unset Universe Checking"),
    Command(("#[",), False, _ATTRIBUTE, label="#[attributes]"),
    *_rows(False, _ATTRIBUTE, "Local", "Global", "Polymorphic", "Monomorphic", "Cumulative",
           "NonCumulative", "Private", "Program"),
    # -- files and code -------------------------------------------------------
    *_rows(False, _FILES, "Cd", "Load", "Declare ML Module", "Add LoadPath", "Add Rec LoadPath", "Add ML Path",
           "Remove LoadPath", "Require", "From", "Extraction", "Separate Extraction", "Recursive Extraction",
           "Extract", "Comments"),
    # -- declarations ---------------------------------------------------------
    *_rows(False, _ENVIRONMENT,
           "Theorem", "Lemma", "Fact", "Remark", "Corollary", "Proposition", "Property",
           "Definition", "Example", "SubClass", "Let", "Fixpoint", "CoFixpoint", "Function",
           "Axiom", "Axioms", "Parameter", "Parameters", "Hypothesis", "Hypotheses", "Variable", "Variables",
           "Conjecture", "Conjectures", "Context", "Inductive", "CoInductive", "Variant", "Record",
           "Structure", "Class", "Instance", "Existing", "Declare", "Derive", "Scheme", "Combined Scheme",
           "Functional", "Generate graph", "Register", "Primitive", "Universe", "Universes", "Constraint",
           "Module", "Section", "End", "Include", "Import", "Export", "Collection", "Canonical", "Coercion",
           "Identity Coercion", "Create HintDb", "Hint", "Ltac", "Ltac2", "Tactic Notation",
           "Typeclasses", "Opaque", "Transparent", "Strategy", "Arguments", "Implicit", "Generalizable",
           "Prenex Implicits", "Import Prenex Implicits"),
    # -- commands of plugins a header may load ---------------------------------
    # CoqHammer (``From Hammer Require Import Hammer.``): they print or change the
    # plugin's state and write feature files; a capitalised word with an underscore
    # is otherwise read as a library's Ltac name, so each needs its row
    *_rows(False, "a CoqHammer command: it changes the plugin's state, writes files or runs provers",
           "Hammer_cleanup", "Hammer_features", "Hammer_features_cached", "Hammer_objects", "Hammer_print",
           "Hammer_transl", "Hammer_version"),
    *_rows(False, _NOTATION, "Notation", "Infix", "Reserved", "Format Notation", "String Notation",
           "Number Notation", "Open", "Close", "Delimit", "Undelimit", "Bind"),
])

_BY_WORDS = {row.words: row for row in COMMANDS}
assert len(_BY_WORDS) == len(COMMANDS), "duplicate rows in COMMANDS"
_LONGEST = max(len(row.words) for row in COMMANDS)
_HEAD_WORD = re.compile(r"#\[|[^\W\d][\w']*")


def head_words(code: str) -> tuple[str, ...]:
    """The first few words of a sentence (``#[`` counts as a word), the way
    :func:`classify` compares them with the table's keywords."""
    words: list[str] = []
    at = 0
    while len(words) < _LONGEST:
        m = _HEAD_WORD.match(code, at)
        if m is None:
            break
        words.append(m.group(0))
        at = m.end()
        while at < len(code) and code[at] in " \t\r\n":
            at += 1
        if words[-1] == "#[":
            break
    return tuple(words)


def classify(words: tuple[str, ...]) -> Optional[Command]:
    """The longest row whose keywords start ``words``, or ``None``."""
    for n in range(min(len(words), _LONGEST), 0, -1):
        row = _BY_WORDS.get(words[:n])
        if row is not None:
            return row
    return None


#: every rejection reason a table row can produce
REJECTION_REASONS = frozenset(row.reason for row in COMMANDS if not row.allowed)
