"""A small tokenizer for Lean 4 and Rocq statements.

It is not a parser.  It knows just enough to tell apart comments, string
literals, identifiers, numbers and symbols, so that the extractors can search
code with comments blanked out and the normaliser can rename bound variables.

Both languages:
* identifiers include dotted names (``Finset.range``, ``hx.le``) as one token;
  a dot followed by a digit (``p.1``) is not part of the name;
* block comments nest (``/- -/`` in Lean, ``(* *)`` in Rocq); an unterminated
  comment or string runs to the end of the text rather than failing.
Rocq only: a ``.`` followed by whitespace, a comment or the end of the text
is a sentence end, token kind ``"end"`` (so removing comments never creates
or destroys a sentence end).

Nothing here raises on any input string.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from sgs.method.roles.language import Language

# Lean 4's identifier characters (Lean's own ``isLetterLike`` and
# ``isSubScriptAlnum``): ASCII letters, Greek without λ, Π and Σ (which are
# syntax), Coptic, polytonic Greek, the letter-like block (ℕ, ℝ, ℤ...) and
# mathematical script/double-struck letters.
_LEAN_LETTER = (
    "A-Za-z_"
    "\u03b1-\u03ba\u03bc-\u03c9"  # α..ω without λ (U+03BB)
    "\u0391-\u039f\u03a1\u03a4-\u03a9"  # Α..Ω without Π (U+03A0) and Σ (U+03A3)
    "\u03ca-\u03fb\u1f00-\u1ffe\u2100-\u214f"
    "\U0001d49c-\U0001d59f"
)
_LEAN_REST = _LEAN_LETTER + "0-9'!?\u2080-\u209c\u1d62-\u1d6a"
_LEAN_PART = rf"(?:[{_LEAN_LETTER}][{_LEAN_REST}]*|«[^»]*»?)"
_LEAN_IDENT = re.compile(rf"{_LEAN_PART}(?:\.{_LEAN_PART})*")

# Rocq: a Unicode letter or underscore, then letters, digits, _ and '.
# λ is left out: with the Utf8 notations it is ``fun``.
_ROCQ_PART = r"(?:(?!λ)[^\W\d][\w']*)"
_ROCQ_IDENT = re.compile(rf"{_ROCQ_PART}(?:\.{_ROCQ_PART})*")

_LEAN_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|[0-9][0-9_]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_ROCQ_NUMBER = re.compile(r"[0-9][0-9_]*")
_LEAN_CHAR = re.compile(r"'(?:\\.|[^\\'\n])'")
_LEAN_HASH_COMMAND = re.compile(r"#[A-Za-z_]\w*")

# Multi-character symbols, longest first so that ``<->`` wins over ``<-``.
_LEAN_SYMBOLS = sorted(
    [":=", "::", "->", "<-", "<->", "=>", "<=", ">=", "!=", "==", "&&", "||", "++",
     "..", "...", "^^", "∃!", "∀ᶠ", "∃ᶠ", "Σ'", "<;>", "|>.", "|>", "<|", ">>=", "⁻¹"],
    key=len, reverse=True)
_ROCQ_SYMBOLS = sorted(
    [":=", "::", "->", "<-", "<->", "=>", "<=", ">=", "<>", "/\\", "\\/", "++", "..",
     "||", "&&", "|-", ":>", "=?", "<=?", "<?", "==>"],
    key=len, reverse=True)


class Token(NamedTuple):
    """One token: ``kind`` is ``ident``, ``number``, ``string``, ``symbol`` or
    (Rocq) ``end``; ``start``/``end`` index the source text; ``newline_before``
    says whether a line break separates it from the previous token."""

    kind: str
    text: str
    start: int
    end: int
    newline_before: bool


def _comment_end(text: str, i: int, language: Language) -> int | None:
    """If a comment starts at ``i``, the index just past it, else None."""
    if language is Language.LEAN:
        if text.startswith("--", i):
            newline = text.find("\n", i)
            return len(text) if newline < 0 else newline
        opener, closer = "/-", "-/"
    else:
        opener, closer = "(*", "*)"
    if not text.startswith(opener, i):
        return None
    depth, j = 0, i
    while j < len(text):
        if text.startswith(opener, j):
            depth, j = depth + 1, j + 2
        elif text.startswith(closer, j):
            depth, j = depth - 1, j + 2
            if depth == 0:
                return j
        else:
            j += 1
    return len(text)


def _string_end(text: str, i: int, language: Language) -> int:
    """Index just past the string literal that opens at ``text[i] == '"'``.
    Lean escapes with a backslash, Rocq by doubling the quote."""
    j = i + 1
    while j < len(text):
        c = text[j]
        if language is Language.LEAN and c == "\\":
            j += 2
        elif c == '"':
            if language is Language.ROCQ and text.startswith('""', j):
                j += 2
            else:
                return j + 1
        else:
            j += 1
    return len(text)


def _scan(text: str, language: Language):
    """Yield ``(kind, start, end)`` for every comment and token, in order."""
    lean = language is Language.LEAN
    ident = _LEAN_IDENT if lean else _ROCQ_IDENT
    number = _LEAN_NUMBER if lean else _ROCQ_NUMBER
    symbols = _LEAN_SYMBOLS if lean else _ROCQ_SYMBOLS
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        end = _comment_end(text, i, language)
        if end is not None:
            yield "comment", i, end
            i = end
            continue
        if c == '"':
            end = _string_end(text, i, language)
            yield "string", i, end
            i = end
            continue
        match = ident.match(text, i)
        if match:
            yield "ident", i, match.end()
            i = match.end()
            continue
        match = number.match(text, i)
        if match:
            yield "number", i, match.end()
            i = match.end()
            continue
        if lean:
            match = _LEAN_CHAR.match(text, i) or _LEAN_HASH_COMMAND.match(text, i)
            if match:
                yield ("string" if c == "'" else "symbol"), i, match.end()
                i = match.end()
                continue
        elif c == "." and (i + 1 == n or text[i + 1].isspace() or text.startswith("(*", i + 1)):
            yield "end", i, i + 1
            i += 1
            continue
        width = next((len(s) for s in symbols if text.startswith(s, i)), 1)
        yield "symbol", i, i + width
        i += width


def tokenize(text: str, language: Language) -> list[Token]:
    """The tokens of ``text``, comments dropped."""
    tokens: list[Token] = []
    previous_end = 0
    for kind, start, end in _scan(text, language):
        if kind == "comment":
            continue
        tokens.append(Token(kind, text[start:end], start, end, "\n" in text[previous_end:start]))
        previous_end = end
    return tokens


def mask_comments(text: str, language: Language) -> str:
    """``text`` with every comment character replaced by a space (line breaks
    kept), so offsets in the result are offsets in ``text``.  Searching the
    masked text finds code only, never words inside comments."""
    pieces, last = [], 0
    for kind, start, end in _scan(text, language):
        if kind == "comment":
            pieces.append(text[last:start])
            pieces.append(re.sub(r"[^\n]", " ", text[start:end]))
            last = end
    pieces.append(text[last:])
    return "".join(pieces)


def strip_comments(text: str, language: Language) -> str:
    """``text`` without comments: each comment becomes one space (so the
    tokens on either side stay apart), trailing spaces are trimmed from every
    line and blank lines are dropped."""
    pieces, last = [], 0
    for kind, start, end in _scan(text, language):
        if kind == "comment":
            pieces.extend((text[last:start], " "))
            last = end
    pieces.append(text[last:])
    lines = (line.rstrip() for line in "".join(pieces).splitlines())
    return "\n".join(line for line in lines if line.strip())
