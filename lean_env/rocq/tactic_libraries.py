"""Tactic libraries: libraries the checker loads after a task's own header.

A run may name ``Require`` sentences (``RocqConfig.tactic_libraries``, such
as ``From Hammer Require Import Tactics.``) that the checker runs after every
task's header and before its statement, so that proofs may use those
libraries' tactics (CoqHammer's ``sauto``) under headers that never load
them.  Everything downstream treats them as part of the header: the session
loads header and libraries as one, the axiom census identifies the libraries
coqtop has loaded after both (so its key and its ``coqchk`` run cover them),
and the audit compiles them into its files.

Loading a library must not change what the statement means.  A
``Require Import`` can: a notation (mathcomp's ``ssrnat`` rebinds ``+`` in
``nat_scope`` to ``addn``), a scope it opens (``QArith`` opens ``Q_scope``,
so ``1 + 1 = 2`` becomes a statement about rationals), a coercion
(``ssrbool``'s ``is_true`` makes ``b -> b`` well-typed for a boolean ``b``),
implicit arguments, type-class instances and canonical structures all change
the term a statement's text elaborates to.  So, once per (header, statement,
libraries), :func:`meaning_changed` elaborates the statement twice in one
coqtop and compares the terms in Coq itself:

1. at the state right after the header, the statement is declared under a
   fresh name (:data:`BEFORE`) and ``Admitted``;
2. the libraries are loaded;
3. the statement is declared again (:data:`AFTER`) and ``Admitted``;
4. ``constr_eq`` compares the two declared types: syntactic equality up to
   alpha-conversion and casts, with the universe levels of the two
   declarations unified (each declaration makes fresh ones).  Both names
   are resolved by the kernel, so two constants that merely print alike
   (a library's ``app`` beside the standard one) differ.

The statement is unchanged when both declarations succeed and the types are
equal; it is refused (``tactic_libraries_change_statement``) when they
differ or when only one of the two elaborates (a statement that needs the
libraries to parse would be read in a scope its author never had).  When
neither elaborates the answer is the statement's own error
(``statement_error``).

What the comparison cannot see: what the libraries change besides the
statement's term.  Hints, instances and tactic notations change how proofs
are found, never what they prove; typing flags a library exports (``Unset
Guard Checking``) are the census's check (c), and ``Print Assumptions`` sees
every axiom or unsafe declaration a proof reaches, the libraries' included.
A library cannot change a constant that already exists.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from lean_env.rocq.checks import RocqTextError, Sentence, Statement, skip_comment, split_sentences
from lean_env.rocq.output import Reply

#: the names the two elaborations are declared under (the session goes back
#: to the header's state afterwards, so they never meet a proof)
BEFORE = "sgs_meaning_before_tactic_libraries"
AFTER = "sgs_meaning_after_tactic_libraries"

#: Ltac comparing the two declared types, between ``Goal True.`` and ``Abort.``
COMPARE = f"let a := type of @{BEFORE} in let b := type of @{AFTER} in constr_eq a b."

#: the reason of a statement whose meaning the libraries change
CHANGED = "tactic_libraries_change_statement"


@dataclass(frozen=True)
class Meaning:
    """What the comparison found (``None`` from :func:`meaning_changed`: unchanged)."""

    #: ``invalid`` or ``system_error``
    status: str
    #: ``tactic_libraries_change_statement``, ``statement_error``, ``header_error``
    #: or ``tactic_libraries_error``
    reason: str
    messages: tuple[str, ...] = ()


def library_sentences(libraries: Sequence[str]) -> tuple[Sentence, ...]:
    """The configured ``Require`` sentences (validated by
    :class:`~lean_env.rocq.config.RocqConfig`) as header sentences."""
    return tuple(sentence for text in libraries for sentence in split_sentences(text.strip()))


def renamed(statement: Statement, name: str) -> str:
    """The statement's text declaring ``name`` instead of its own name
    (comments between the keyword and the name are skipped as Coq skips them)."""
    text = statement.sentence.text
    if not text.startswith(statement.keyword):
        raise RocqTextError("statement_shape", f"the statement does not start with {statement.keyword!r}")
    i = len(statement.keyword)
    while i < len(text):
        if text[i].isspace():
            i += 1
        elif text.startswith("(*", i):
            i = skip_comment(text, i)
        else:
            break
    end = i + len(statement.name)
    if text[i:end] != statement.name:
        raise RocqTextError("statement_shape", f"cannot find the name {statement.name!r} in the statement")
    return f"{text[:i]}{name}{text[end:]}"


def meaning_changed(run: Callable[[str], Reply], statement: Statement,
                    libraries: Sequence[Sentence]) -> Optional[Meaning]:
    """Steps 1-4 of the module docstring, with ``run`` sending one sentence to
    a session standing right after the task's header (the caller goes back to
    that state afterwards).  ``None`` when the libraries leave the statement's
    term unchanged."""
    before = _declare(run, renamed(statement, BEFORE))
    for sentence in libraries:
        reply = run(sentence.text)
        if not reply.ok:
            return Meaning("system_error", "tactic_libraries_error",
                           (f"{sentence.text!r} failed after the header: {reply.message}",))
    after = _declare(run, renamed(statement, AFTER))
    if before is not None and after is not None:
        return Meaning("invalid", "statement_error", (before.replace(BEFORE, statement.name),))
    if before is not None or after is not None:
        which = "with" if before is not None else "without"
        return Meaning("invalid", CHANGED, (f"the statement elaborates only {which} the tactic libraries "
                                            f"{' '.join(s.text for s in libraries)}: {before or after}",))
    if not run("Goal True.").ok:
        return Meaning("system_error", "tactic_libraries_error", ("'Goal True.' failed",))
    compared = run(COMPARE)
    if not compared.ok:
        return Meaning("invalid", CHANGED, (f"the statement elaborates to another term after "
                                            f"{' '.join(s.text for s in libraries)}: {compared.message}",))
    return None


def meaning_source(header: Sequence[Sentence], statement: Statement, libraries: Sequence[Sentence]) -> str:
    """The same comparison as a file for ``coqc`` (the audit's): it compiles
    only when both elaborations succeed and their terms are equal."""
    return "\n".join([*(s.text for s in header), renamed(statement, BEFORE), "Admitted.",
                      *(s.text for s in libraries), renamed(statement, AFTER), "Admitted.",
                      "Goal True.", COMPARE, "Abort."]) + "\n"


def _declare(run: Callable[[str], Reply], sentence: str) -> Optional[str]:
    """Declare one copy of the statement with ``Admitted``; ``None`` when it
    elaborated, else Coq's message."""
    opened = run(sentence)
    if not opened.ok or not opened.prompt.pending:
        return opened.message or "the statement did not elaborate"
    closed = run("Admitted.")
    if not closed.ok or not closed.prompt.top_level:
        return closed.message or "the statement could not be closed"
    return None


class MeaningCache:
    """Answers of :func:`meaning_changed` per (header, statement, libraries);
    the oldest are forgotten beyond ``size``.  Only verdicts are kept (never a
    ``system_error``)."""

    def __init__(self, size: int = 4096) -> None:
        self._answers: collections.OrderedDict[tuple, Optional[Meaning]] = collections.OrderedDict()
        self._size = size

    @staticmethod
    def key(header: Sequence[Sentence], statement: Statement, libraries: Sequence[Sentence]) -> tuple:
        return (tuple(s.text for s in header), statement.sentence.text, tuple(s.text for s in libraries))

    def get(self, key: tuple) -> tuple[bool, Optional[Meaning]]:
        """(known, answer)."""
        if key not in self._answers:
            return False, None
        self._answers.move_to_end(key)
        return True, self._answers[key]

    def put(self, key: tuple, answer: Optional[Meaning]) -> None:
        if answer is not None and answer.status == "system_error":
            return
        self._answers[key] = answer
        while len(self._answers) > self._size:
            self._answers.popitem(last=False)

