"""The lemmas a project left ``Admitted``, each as a target checked in its own context.

A fill target is found the way the tracer finds a target
(:func:`sgs.state.rocq_declarations.find_declarations`, which splits the file
as Coq's lexer does, so an ``Admitted.`` inside a comment or a string is no
sentence): its header is the file's text before it, with the blocks around it
closed or inlined, and inside a section its statement is generalised over the
section's variables.  Which variables matters here more than for tracing:
the written proof must give the lemma the type the admitted one had, or the
lemmas after it that use it stop building.  Coq 8.16 generalises an
``Admitted`` lemma over *every* variable of its sections (checked with
``coqc``), and one with ``Proof using X`` over ``X`` and what the statement
names; so the target is stated over exactly those, and the written proof
opens with ``Proof using All.`` or its own ``Proof using X.``.

The forms (``form`` of a target):

* ``statement``: ``Admitted.`` right after the statement;
* ``proof``: ``Proof. Admitted.``; ``proof using``: ``Proof using x y. Admitted.``;
* ``partial``: tactics (an ``admit.``, say) before ``Admitted.``, only with
  ``admits=True`` (``--admits``); the whole script is replaced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lean_env.rocq.checks import RocqTextError, split_sentences
from sgs.state.rocq_declarations import IDENT, find_declarations, project_axioms

__all__ = ["FillTarget", "NotFillable", "find_admitted", "readable_using", "allowed_names", "written_proof"]

#: ``Proof using`` clauses whose generalisation this module can state: names, ``Type``, ``All``, or
#: none (``Proof using.``: the statement's own variables only)
_SIMPLE_USING = re.compile(rf"(?:{IDENT}\s*)*")
_PROOF_USING = re.compile(r"Proof\s+using\b\s*(.*?)\s*\.", re.S)


def readable_using(sentence: str) -> bool:
    """Whether the ``Proof using ...`` ``sentence``'s clause is one this module can state."""
    using = _PROOF_USING.fullmatch(" ".join(sentence.split()))
    return using is not None and bool(_SIMPLE_USING.fullmatch(using.group(1)))


@dataclass(frozen=True)
class FillTarget:
    """An admitted lemma to prove."""

    #: the file, relative to the project, and the line of the statement
    file: str
    line: int
    name: str
    #: logical path and name (``SearchTrees.Adding.insert_l``): the task id
    id: str
    #: what the verifier checks a proof under
    header: str
    statement: str
    #: ``statement``, ``proof``, ``proof using`` or ``partial`` (see the module docstring)
    form: str
    #: the text the proof replaces in the file: offsets of its first and after its last character
    span: tuple[int, int]
    #: the sentence the written proof opens with (``Proof.``, ``Proof using All.``, the lemma's own ``Proof using``)
    opening: str
    #: the blocks around it, in words (``section S``); empty at the top level
    context: str = ""


@dataclass(frozen=True)
class NotFillable:
    """An admitted lemma that cannot be stated at the top level, and why."""

    file: str
    line: int
    name: str
    id: str
    reason: str


def find_admitted(text: str, file: str, module: str, *, admits: bool = False
                  ) -> tuple[list[FillTarget], list[NotFillable]]:
    """The admitted lemmas of one file (``module``: its logical name).  A
    lemma with tactics before its ``Admitted.`` counts only with ``admits``.
    Raises :class:`RocqTextError` when the file cannot be split into sentences."""
    found, skipped = find_declarations(text, admitted=True)
    targets: list[FillTarget] = []
    problems = [NotFillable(file, s.line, s.name, ".".join((module, *s.path, s.name)), s.reason)
                for s in skipped if s.ending == "Admitted"]
    for declaration in found:
        if declaration.ending != "Admitted":
            continue
        target_id = ".".join((module, *declaration.path, declaration.name))
        start, end = declaration.proof_span
        sentences = split_sentences(text[start:end], trusted=True)
        opener = sentences[0].code if re.match(r"Proof\b", sentences[0].code) else ""
        body = sentences[1:] if opener else sentences
        form = ("partial" if len(body) > 1 else "proof using" if opener.startswith("Proof using")
                else "proof" if opener else "statement")
        if form == "partial" and not admits:
            continue
        in_section = any(part.startswith("section ") for part in declaration.context.split(", "))
        using = _PROOF_USING.fullmatch(" ".join(opener.split()))
        statements = (declaration.statement, *declaration.alternatives)
        if not in_section:
            statement, opening = declaration.statement, sentences[0].text if using else "Proof."
        elif using is None:
            # as Coq generalises an Admitted lemma: over every variable of its sections
            statement, opening = statements[-1], "Proof using All."
        elif _SIMPLE_USING.fullmatch(using.group(1)):
            statement = statements[-1] if using.group(1) == "All" else statements[0]
            opening = sentences[0].text
        else:
            problems.append(NotFillable(file, declaration.line, declaration.name, target_id,
                                        f"Proof using {using.group(1)}: only a list of names, Type or All is read"))
            continue
        targets.append(FillTarget(file, declaration.line, declaration.name, target_id, declaration.header,
                                  statement, form, (start, end), opening, declaration.context))
    return targets, problems


def written_proof(target: FillTarget, proof: str) -> str:
    """A checked proof (``Proof. ... Qed.``) as it goes into the file: opened
    with the target's own opening, so a lemma in a section keeps its type."""
    if not proof.startswith("Proof."):
        raise ValueError(f"a checked proof starts with 'Proof.', got {proof[:30]!r}")
    return target.opening + proof[len("Proof."):]


def allowed_names(files: dict[str, tuple[str, str]], targets: list[FillTarget]) -> tuple[str, ...]:
    """What a proof may rely on besides the standard library, as ``Print
    Assumptions`` may print it: every admitted lemma of the project (it stays
    usable while the others are tried) and the project's own ``Axiom``s and
    ``Parameter``s (a functor's parameters' fields included), each under every
    qualified form Coq may print (``name``, ``File.name``, ``Root.File.name``,
    ``Top.name`` for one in the same file, ``X.name`` for a parameter ``X``).
    ``files``: file -> (logical module, text).  A short name is allowed
    whatever declares it, so a library axiom named like one of the project's
    would pass too: the price of per-run names (docs/fill.md)."""
    names: set[str] = set()

    def qualified(path: str) -> None:
        parts = path.split(".")
        for i in range(len(parts)):
            names.add(".".join(parts[i:]))
            if i:
                names.add("Top." + ".".join(parts[i:]))

    for target in targets:
        qualified(target.id)
    # a functor's parameters, whose fields a header declares with Declare Module
    parameters = {match for target in targets
                  for match in re.findall(rf"^Declare Module ({IDENT}) :", target.header, re.M)}
    for module, text in files.values():
        try:
            axioms = project_axioms(text)
        except RocqTextError:
            continue
        for name in axioms:
            qualified(f"{module}.{name}")
            names.update(f"{parameter}.{name}" for parameter in parameters)
    return tuple(sorted(names))
