"""Extract the statement from a Conjecturer output, and give it a fresh name.

Lean 4: take the LAST Lean block (tag ``lean4`` or ``lean``).  Outside
comments it must hold exactly one ``:= by``, followed by nothing or by
``sorry``.  The text before it must be one named ``theorem``/``lemma``
declaration and no other command.  The result is that declaration with
comments removed, ending in `` := by``.

Rocq: take the LAST block tagged ``coq`` (or ``rocq``).  Its first sentence
must be ``Theorem name ... : ... .`` (or ``Lemma``); it may be followed by a
placeholder proof (``Admitted.``, or ``Proof. ... Qed.``/``Admitted.``/
``Defined.``), which is dropped.  The result is that sentence with comments
removed, ending in ``.``.

Comments are removed because the statement is shown to the Guide: a comment
is an easy channel for the Conjecturer to talk the Guide into a high score.
The theorem's name is a similar channel (and could collide with a target's),
so the loop renames every kept conjecture with :func:`rename_theorem` and
:func:`conjecture_name`.
"""

from __future__ import annotations

import hashlib
import re

from sgs.method.roles.fences import blocks_tagged
from sgs.method.roles.language import LEAN_BY, Language
from sgs.method.roles.lexer import Token, mask_comments, strip_comments, tokenize
from sgs.method.roles.normalize import canonical_form
from sgs.method.roles.result import Extraction, Failure, has_bad_characters, screen_output

#: Every conjecture name starts with this; no D3k target name does.
CONJECTURE_NAME_PREFIX = "sgs_conjecture_"

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ROCQ_PROOF_ENDS = frozenset({"Qed", "Admitted", "Defined"})
_ROCQ_OTHER_COMMANDS = Language.ROCQ.command_keywords - {"Proof", *_ROCQ_PROOF_ENDS}


def extract_conjecture(output: str, language: Language | str) -> Extraction[str]:
    """The theorem statement of one Conjecturer output, or why there is none."""
    language = Language(language)
    failure = screen_output(output)
    if failure:
        return Extraction.fail(failure)
    blocks = blocks_tagged(output, language.fence_tags)
    if not blocks:
        return Extraction.fail(Failure.NO_CODE_BLOCK)
    if not blocks[-1].closed:
        return Extraction.fail(Failure.UNCLOSED_BLOCK)
    code = blocks[-1].content
    if language is Language.LEAN:
        result = _lean_statement(code)
    else:
        result = _rocq_statement(code)
    if result.ok and has_bad_characters(result.value):
        return Extraction.fail(Failure.BAD_CHARACTERS)
    return result


def _lean_statement(code: str) -> Extraction[str]:
    masked = mask_comments(code, Language.LEAN)
    bys = list(LEAN_BY.finditer(masked))
    if not bys:
        return Extraction.fail(Failure.MISSING_BY)
    if len(bys) > 1:
        return Extraction.fail(Failure.SEVERAL_BY, f"{len(bys)} ':= by'")
    after = masked[bys[0].end():].strip()
    if after not in ("", "sorry"):
        return Extraction.fail(Failure.TRAILING_TEXT, "the statement is followed by a proof")
    statement = strip_comments(code[:bys[0].start()], Language.LEAN).strip()
    tokens = tokenize(statement, Language.LEAN)
    failure = _check_declaration(tokens, Language.LEAN)
    if failure:
        return failure
    # A Lean command can only start at a keyword that cannot be a name, so any
    # such keyword after the head means a second command.
    commands = [t.text for t in tokens[2:] if t.text in Language.LEAN.command_keywords]
    if commands:
        return Extraction.fail(Failure.SEVERAL_STATEMENTS, f"'{commands[0]}' after the theorem")
    return Extraction.success(f"{statement} := by")


def _rocq_statement(code: str) -> Extraction[str]:
    tokens = tokenize(code, Language.ROCQ)
    failure = _check_declaration(tokens, Language.ROCQ)
    if failure:
        return failure
    sentences = _sentences(tokens)
    first = sentences[0]
    if first[-1].kind != "end":
        return Extraction.fail(Failure.NOT_A_THEOREM, "the statement does not end with '.'")
    failure = _check_placeholder_proof(sentences[1:])
    if failure:
        return failure
    return Extraction.success(strip_comments(code[first[0].start:first[-1].end], Language.ROCQ))


def _sentences(tokens: list[Token]) -> list[list[Token]]:
    """Rocq tokens split after each sentence end; the last sentence may lack one."""
    sentences, current = [], []
    for token in tokens:
        current.append(token)
        if token.kind == "end":
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return sentences


def _check_declaration(tokens: list[Token], language: Language) -> Extraction | None:
    """The failure, if ``tokens`` do not open with a named theorem (a theorem
    keyword further on means something else came first)."""
    texts = [t.text for t in tokens]
    if not texts or texts[0] not in language.theorem_keywords:
        if any(text in language.theorem_keywords for text in texts):
            return Extraction.fail(Failure.SEVERAL_STATEMENTS, "text before the theorem")
        return Extraction.fail(Failure.NOT_A_THEOREM)
    if len(tokens) < 2 or tokens[1].kind != "ident":
        return Extraction.fail(Failure.MISSING_NAME)
    return None


def _check_placeholder_proof(sentences: list[list[Token]]) -> Extraction | None:
    """The failure, if the Rocq sentences after the statement are not empty,
    ``Admitted.``, or ``Proof. ... Qed./Admitted./Defined.``."""
    if not sentences:
        return None
    heads = [sentence[0].text for sentence in sentences]
    # a Rocq command can only start a sentence, so only the heads matter
    complete = sentences[-1][-1].kind == "end"
    if heads == ["Admitted"] and complete and len(sentences[0]) == 2:
        return None
    if heads[0] == "Proof" and len(heads) > 1 and heads[-1] in _ROCQ_PROOF_ENDS and complete:
        if not any(head in Language.ROCQ.command_keywords for head in heads[1:-1]):
            return None
    if any(head in _ROCQ_OTHER_COMMANDS for head in heads):
        return Extraction.fail(Failure.SEVERAL_STATEMENTS)
    return Extraction.fail(Failure.TRAILING_TEXT, "more than a placeholder proof follows")


def rename_theorem(statement: str, name: str, language: Language | str) -> str:
    """``statement`` with its declaration head rewritten to ``theorem <name>``
    (Rocq: ``Theorem <name>``).  Meant for statements that
    :func:`extract_conjecture` returned; raises ``ValueError`` when
    ``statement`` has no named theorem head or ``name`` is not a plain name."""
    language = Language(language)
    if not _PLAIN_NAME.fullmatch(name):
        raise ValueError(f"not a plain theorem name: {name!r}")
    tokens = tokenize(statement, language)
    if len(tokens) < 2 or tokens[0].text not in language.theorem_keywords or tokens[1].kind != "ident":
        raise ValueError("the statement does not start with a named theorem")
    keyword = "theorem" if language is Language.LEAN else "Theorem"
    return f"{statement[:tokens[0].start]}{keyword} {name}{statement[tokens[1].end:]}"


def conjecture_name(statement: str, language: Language | str) -> str:
    """A fresh name for a conjecture: the prefix plus a hash of the statement's
    canonical form, so statements equal up to renaming get the same name and
    no name can be a target's."""
    digest = hashlib.sha256(canonical_form(statement, language).encode("utf-8", "surrogatepass"))
    return CONJECTURE_NAME_PREFIX + digest.hexdigest()[:16]
