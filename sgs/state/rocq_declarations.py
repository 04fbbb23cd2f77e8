"""The theorem-like declarations of one Rocq source file, and which of them
can become targets.

:func:`find_declarations` splits a ``.v`` file into sentences the way Coq's
lexer does (:func:`lean_env.rocq.checks.split_sentences`, in its mode for
trusted library text), follows the ``Section`` and ``Module`` blocks, and
returns every ``Theorem``/``Lemma``/``Remark``/``Fact``/``Corollary``/
``Proposition``/``Example`` with its proof, or the reason it cannot be a
target.  A target is checked at the top level of coqtop's ``Top`` module
right after its header, the file's text before the declaration, so a
declaration is skipped when that state would misrepresent it:

* ``in a section with variables``: the theorem depends on the section's
  ``Variable``/``Hypothesis``/``Context``/``Let``, which
  ``Print Assumptions`` lists while the section is open;
* ``in a section``: inside an open section the theorem is ``Top.S.name``, not
  ``Top.name``;
* ``in a module``, ``in a functor or module type``: the same, and a functor's
  parameters are assumptions too;
* ``Program``: obligations are solved by commands, not by a proof;
* ``attributes or a locality``: ``#[...]``, ``Local``, ``Polymorphic``, ...
  change the declaration, and a task statement starts with its keyword;
* ``proof given as a term`` (``:= term`` or ``Proof term.``),
  ``not proved (Admitted)``, ``not proved (Abort)``, ``proof saved under
  another name (Save)``, ``no end of proof``.

The proof is the source text from ``Proof.`` to ``Qed.``/``Defined.``,
comments included; a proof that starts directly with tactics gets
``Proof.`` in front (as Coq itself allows).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lean_env.rocq.checks import THEOREM_KEYWORDS, Sentence, split_sentences

_ATTRIBUTES = re.compile(r"#\[.*?\]\s*", re.S)
_LOCALITY = frozenset({"Local", "Global", "Polymorphic", "Monomorphic", "Cumulative", "NonCumulative", "Private"})
_SECTION_VARIABLES = frozenset({"Variable", "Variables", "Hypothesis", "Hypotheses", "Context", "Let",
                                "Implicit"})
_PROOF_END = re.compile(r"(Qed|Defined|Admitted|Abort|Save)\b")


@dataclass(frozen=True)
class Declaration:
    """A theorem-like declaration with a proof, that can be checked at top level."""

    keyword: str
    name: str
    #: 1-based line of the statement's first character
    line: int
    #: offset of the statement in the file: the header is the text before it
    start: int
    #: the statement sentence, exactly as in the source
    statement: str
    #: the human proof, ``Proof.`` to ``Qed.``/``Defined.``
    proof: str


@dataclass(frozen=True)
class SkippedDeclaration:
    """A theorem-like declaration that is not a target, and why."""

    name: str
    line: int
    reason: str


@dataclass
class _Block:
    """An open ``Section`` or ``Module`` block."""

    #: ``section``, ``module``, ``functor or module type``
    kind: str
    #: whether a section declared variables or hypotheses
    has_variables: bool = False


def find_declarations(text: str) -> tuple[list[Declaration], list[SkippedDeclaration]]:
    """The declarations of ``text`` (a whole ``.v`` file) that can be targets,
    and those that cannot, each with its reason (see the module docstring).
    Raises :class:`lean_env.rocq.checks.RocqTextError` when the file cannot
    be split into sentences."""
    sentences = split_sentences(text, trusted=True)
    found: list[Declaration] = []
    skipped: list[SkippedDeclaration] = []
    blocks: list[_Block] = []
    i = 0
    while i < len(sentences):
        sentence = sentences[i]
        i += 1
        words = _head_words(sentence)
        if not words:
            continue
        _follow_blocks(words, sentence.code, blocks)
        keyword, name, prefixed = _declared(words)
        if keyword is None:
            continue
        line = text.count("\n", 0, sentence.start) + 1
        if _has_body(sentence.code):
            proof, ending = None, "term"   # no proof sentences follow
        else:
            proof, i, ending = _proof_after(sentences, i, text)
        reason = _reason_to_skip(sentence, blocks, prefixed, proof, ending)
        if reason is not None:
            skipped.append(SkippedDeclaration(name, line, reason))
        else:
            assert proof is not None
            found.append(Declaration(keyword, name, line, sentence.start, sentence.text, proof))
    return found, skipped


def _head_words(sentence: Sentence) -> list[str]:
    """The sentence's words, attributes (``#[...]``) kept as one word ``#[]``."""
    code = sentence.code
    attributes = _ATTRIBUTES.match(code)
    words = code[attributes.end():].split() if attributes else code.split()
    return (["#[]"] if attributes else []) + words


def _follow_blocks(words: list[str], code: str, blocks: list[_Block]) -> None:
    """Open or close a ``Section``/``Module`` block for this sentence."""
    first = words[0]
    if first == "Section":
        blocks.append(_Block("section"))
    elif first == "Module" and ":=" not in code:
        rest = words[1:]
        if rest and rest[0] in ("Import", "Export"):
            rest = rest[1:]
        functor = bool(rest) and (rest[0] == "Type" or "(" in " ".join(rest[1:]).split(":")[0])
        blocks.append(_Block("functor or module type" if functor else "module"))
    elif first == "End" and blocks:
        blocks.pop()
    elif first in _SECTION_VARIABLES and blocks and blocks[-1].kind == "section":
        blocks[-1].has_variables = True


def _declared(words: list[str]) -> tuple[str | None, str, bool]:
    """``(keyword, name, prefixed)`` when the sentence declares a theorem
    (``prefixed``: attributes, a locality or ``Program`` come first)."""
    prefixed = False
    while words and (words[0] in _LOCALITY or words[0] in ("#[]", "Program")):
        words = words[1:]
        prefixed = True
    if len(words) >= 2 and words[0] in THEOREM_KEYWORDS:
        name = re.match(r"[^\W\d][\w']*", words[1])
        return words[0], name.group(0) if name else words[1], prefixed
    return None, "", prefixed


def _has_body(code: str) -> bool:
    """Whether a statement ends in ``:= term``: a ``:=`` outside brackets
    that is not a ``let``'s."""
    depth = 0
    open_lets = 0
    for token in re.findall(r"[^\W\d][\w']*|:=|[()\[\]{}]", code):
        if token in "([{":
            depth += 1
        elif token in ")]}":
            depth -= 1
        elif depth == 0 and token == "let":
            open_lets += 1
        elif depth == 0 and token == ":=":
            if open_lets == 0:
                return True
            open_lets -= 1
    return False


def _proof_after(sentences: list[Sentence], i: int, text: str) -> tuple[str | None, int, str]:
    """The proof text from sentence ``i`` up to the one that ends it, the
    index after that one, and the ending word (``""``: none before the end of
    the file; ``term``: a ``Proof <term>.`` sentence ends it at once)."""
    first = i
    if first < len(sentences) and re.fullmatch(r"Proof\s+(?!using\b|with\b)\S.*", sentences[first].code, re.S):
        return None, first + 1, "term"
    nested = 0   # theorems stated inside this proof (Coq allows it), each with its own end
    while i < len(sentences):
        words = _head_words(sentences[i])
        end = _PROOF_END.match(sentences[i].code)
        i += 1
        if _declared(words)[0] is not None and not _has_body(sentences[i - 1].code):
            nested += 1
        elif end and nested:
            nested -= 1
        elif end:
            last = sentences[i - 1]
            proof = text[sentences[first].start:last.start + len(last.text)]
            if not sentences[first].code.startswith("Proof"):
                proof = "Proof.\n" + proof
            return proof, i, end.group(1)
    return None, i, ""


def _reason_to_skip(statement: Sentence, blocks: list[_Block], prefixed: bool, proof: str | None,
                    ending: str) -> str | None:
    if "Program" in statement.code.split()[:3]:
        return "Program"
    if any(block.kind == "functor or module type" for block in blocks):
        return "in a functor or module type"
    if any(block.kind == "module" for block in blocks):
        return "in a module"
    if any(block.has_variables for block in blocks):
        return "in a section with variables"
    if blocks:
        return "in a section"
    if prefixed:
        return "attributes or a locality"
    if ending == "term":
        return "proof given as a term"
    if ending == "":
        return "no end of proof"
    if ending in ("Admitted", "Abort"):
        return f"not proved ({ending})"
    if ending == "Save":
        return "proof saved under another name (Save)"
    return None
