"""Markdown code blocks in model output.

Rules (chosen to be simple and predictable on untrusted text):
* a fence is any run of three or more backticks, anywhere in a line;
* fences pair up in order: the first opens a block, the next closes it, and
  so on; a final fence with no partner opens a block that is never closed
  (typically an output cut off at ``max_tokens``);
* the tag is the word written right after the opening fence, lower-cased;
* the content runs from just after the tag (or from the next line, when the
  rest of the opening line is blank) to the closing fence.

Proof code never contains three backticks, so pairing fences in order is
exact for well-formed outputs; prose that mentions a fence inline
(say, "answer in a ```lean4 block") shifts the pairing and makes the output
malformed, which the extractors report rather than guess around.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"`{3,}")
_TAG = re.compile(r"[A-Za-z0-9_+.#-]*")
_BLANK_TO_EOL = re.compile(r"[ \t\r\f\v]*\n")


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its tag, its content and whether it was closed."""

    tag: str
    content: str
    closed: bool


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block in ``text``, in order."""
    fences = list(_FENCE.finditer(text))
    blocks = []
    for k in range(0, len(fences), 2):
        opener = fences[k]
        tag = _TAG.match(text, opener.end())
        start = tag.end()
        blank = _BLANK_TO_EOL.match(text, start)
        if blank:
            start = blank.end()
        closer = fences[k + 1] if k + 1 < len(fences) else None
        end = closer.start() if closer else len(text)
        blocks.append(CodeBlock(tag.group().lower(), text[start:end], closer is not None))
    return blocks


def blocks_tagged(text: str, tags: frozenset[str]) -> list[CodeBlock]:
    """The blocks of ``text`` whose tag is one of ``tags``."""
    return [block for block in code_blocks(text) if block.tag in tags]
