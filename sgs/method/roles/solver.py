"""Extract the proof body from a Solver output.

The body is all the verifier takes from the Solver: it is spliced under the
ORIGINAL statement (SPEC §1.4, §3.2), so whatever statement the model wrote
above its proof is never trusted and never checked here.  Whether the body
stays inside its proof (no new commands, no ``sorry``) is the verifier's
call, not the extractor's.

Lean 4: the output must hold exactly one Lean block (tag ``lean4`` or
``lean``; both name Lean 4 here).  The body is the text after the first
``:= by`` outside comments, up to the closing fence, trailing whitespace
trimmed.  Its leading line break and indentation are kept: from Lean v4.31 a
tactic block must be indented below ``:= by``.

Rocq: exactly one block tagged ``coq`` (or ``rocq``).  The body is the text
from the first ``Proof.`` through the last ``Qed.``, both outside comments.
"""

from __future__ import annotations

import re

from sgs.method.roles.fences import blocks_tagged
from sgs.method.roles.language import LEAN_BY, Language
from sgs.method.roles.lexer import mask_comments
from sgs.method.roles.result import Extraction, Failure, has_bad_characters, screen_output

# A sentence keyword: not the tail of a longer name (MyProof.), and the dot
# ends the sentence (followed by whitespace or the end of the block).
_ROCQ_PROOF = re.compile(r"(?<![\w'.])Proof\.(?=\s|$)")
_ROCQ_QED = re.compile(r"(?<![\w'.])Qed\.(?=\s|$)")


def extract_proof(output: str, language: Language | str) -> Extraction[str]:
    """The proof body of one Solver output, or why there is none."""
    language = Language(language)
    failure = screen_output(output)
    if failure:
        return Extraction.fail(failure)
    blocks = blocks_tagged(output, language.fence_tags)
    if not blocks:
        return Extraction.fail(Failure.NO_CODE_BLOCK)
    if len(blocks) > 1:
        return Extraction.fail(Failure.SEVERAL_BLOCKS, f"{len(blocks)} blocks")
    if not blocks[0].closed:
        return Extraction.fail(Failure.UNCLOSED_BLOCK)
    code = blocks[0].content
    if language is Language.LEAN:
        result = _lean_body(code)
    else:
        result = _rocq_body(code)
    if result.ok and has_bad_characters(result.value):
        return Extraction.fail(Failure.BAD_CHARACTERS)
    return result


def _lean_body(code: str) -> Extraction[str]:
    masked = mask_comments(code, Language.LEAN)
    by = LEAN_BY.search(masked)
    if by is None:
        return Extraction.fail(Failure.MISSING_BY)
    if not masked[by.end():].strip():
        return Extraction.fail(Failure.EMPTY_BODY)
    return Extraction.success(code[by.end():].rstrip())


def _rocq_body(code: str) -> Extraction[str]:
    masked = mask_comments(code, Language.ROCQ)
    proof = _ROCQ_PROOF.search(masked)
    if proof is None:
        return Extraction.fail(Failure.MISSING_PROOF)
    qed = None
    for qed in _ROCQ_QED.finditer(masked, proof.end()):
        pass
    if qed is None:
        return Extraction.fail(Failure.MISSING_QED)
    if not masked[proof.end():qed.start()].strip():
        return Extraction.fail(Failure.EMPTY_BODY)
    return Extraction.success(code[proof.start():qed.end()])
