"""The two proof languages SGS speaks, and the few facts about each that prompt
rendering and output parsing need.

Lean 4 is the production prover; Rocq (Coq 8.16) is the second backend that
runs on every machine, CI included (SPEC §3.3).
"""

from __future__ import annotations

import enum
import re

#: Where a Lean 4 tactic proof begins: ``:= by`` (any whitespace between,
#: ``by`` as a whole word).
LEAN_BY = re.compile(r":=\s*by\b")


class Language(str, enum.Enum):
    """A proof language.  Being a ``str`` enum, ``Language("lean")`` parses a
    config value and ``Language.LEAN == "lean"`` holds."""

    LEAN = "lean"
    ROCQ = "rocq"

    @property
    def fence_tags(self) -> frozenset[str]:
        """Markdown fence tags (lower-cased) that mark a code block in this
        language.  ``lean`` counts as Lean 4 (no Lean 3 is in play), and
        ``rocq`` as Coq (the language's new name)."""
        return _FENCE_TAGS[self]

    @property
    def theorem_keywords(self) -> frozenset[str]:
        """Keywords that open the single statement a Conjecturer may write."""
        return _THEOREM_KEYWORDS[self]

    @property
    def command_keywords(self) -> frozenset[str]:
        """Keywords that start a top-level command (a declaration, an import,
        an evaluation...): none may appear inside a conjecture's statement."""
        return _COMMAND_KEYWORDS[self]


_FENCE_TAGS = {
    Language.LEAN: frozenset({"lean4", "lean"}),
    Language.ROCQ: frozenset({"coq", "rocq"}),
}

_THEOREM_KEYWORDS = {
    Language.LEAN: frozenset({"theorem", "lemma"}),
    Language.ROCQ: frozenset({"Theorem", "Lemma"}),
}

_COMMAND_KEYWORDS = {
    Language.LEAN: frozenset({
        "theorem", "lemma", "def", "example", "axiom", "axioms", "instance", "abbrev",
        "structure", "inductive", "class", "opaque", "variable", "universe", "namespace",
        "section", "end", "import", "open", "export", "set_option", "attribute",
        "noncomputable", "private", "protected", "partial", "unsafe", "macro",
        "macro_rules", "syntax", "elab", "elab_rules", "notation", "infix", "infixl",
        "infixr", "prefix", "postfix", "mutual", "deriving", "initialize", "run_cmd",
        "run_elab", "run_meta", "#eval", "#check", "#print", "#exit", "#reduce",
        "#synth", "#help", "#lint",
    }),
    Language.ROCQ: frozenset({
        "Theorem", "Lemma", "Corollary", "Proposition", "Fact", "Remark", "Example",
        "Definition", "Fixpoint", "CoFixpoint", "Function", "Program", "Let",
        "Axiom", "Axioms", "Parameter", "Parameters", "Hypothesis", "Hypotheses",
        "Variable", "Variables", "Conjecture", "Context", "Inductive", "CoInductive",
        "Record", "Structure", "Class", "Instance", "Existing", "Require", "Import",
        "Export", "From", "Section", "Module", "End", "Ltac", "Ltac2", "Tactic",
        "Notation", "Infix", "Reserved", "Arguments", "Set", "Unset", "Local",
        "Global", "Open", "Close", "Scope", "Hint", "Create", "Declare", "Eval",
        "Compute", "Check", "Print", "Search", "About", "Locate", "Goal", "Opaque",
        "Transparent", "Extraction", "Drop", "Back", "Reset", "Abort", "Admitted",
        "Qed", "Defined", "Proof", "Timeout", "Fail", "Time", "Redirect",
    }),
}
