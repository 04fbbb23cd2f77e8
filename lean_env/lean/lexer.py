"""A tokenizer that reads Lean 4 source text the way Lean's own parser does.
Pure functions, no I/O.

Why it exists.  The Lean pre-filter (:mod:`lean_env.lean.checks`) refuses
proof texts that contain banned keywords (``sorry``, ``#eval``, ``run_tac``...).
Such a check is only as good as its reading of the text: wherever it decides
"this is a comment" or "this is a string" and Lean decides otherwise, a
keyword reaches Lean unseen.  So this module follows Lean's lexer function by
function, and wherever it cannot know Lean's reading for certain it says so
(``Lexed.problem``) and the caller refuses the text.  It never guesses in the
permissive direction.

What it mirrors (Lean 4 ``src/Lean/Parser/Basic.lean`` unless said otherwise,
read at the current master; where the supported releases, v4.9 on, read a
text differently in a way that matters, the text is refused):

* ``whitespace``: blanks are exactly space, tab, CR and LF (``Char.isWhitespace``;
  Lean rejects a tab or a lone CR there, which only makes a text invalid);
  ``--`` starts a line comment, ``/-`` a nested block comment
  (``finishCommentBlock``), but ``/--`` and ``/-!`` are doc-comment *tokens*
  (their text is read the same nested way, by ``commentBody``).
* ``tokenFnAux``, the order in which a token start is tried: ``"`` string
  (``strLitFnAux``), ``'`` char literal unless the next char is ``'``
  (``charLitFnAux``), digit (``numberFnAux``), backtick name literal
  (``nameLitAux``), ``r"``/``r#"`` raw string (``rawStrLitFnAux``), then
  identifier or symbol (``identFnAux`` / the token table).
* ``identFnAux``: parts are ``«...»`` escapes or ``isIdFirst isIdRest*``
  runs, joined by ``.`` only when the char after the dot starts a part
  (``isIdCont``).  A ``«`` therefore starts a part only at a token start or
  after such a dot: ``sorry«x»`` is the keyword ``sorry`` and then the name
  ``«x»``.
* ``isIdFirst`` / ``isIdRest`` / ``isLetterLike`` / ``isSubScriptAlnum``
  (``src/Init/Meta.lean``, later ``src/Init/Meta/Defs.lean``).  ``Char.isAlpha``
  is ASCII only, and ``!`` and ``?`` continue an identifier (``s!``, ``exact?``).
* ``quotedCharCoreFn``: the escapes ``\\\\ \\" \\' \\r \\n \\t \\xHH \\uHHHH`` and,
  in strings, a gap (``\\`` newline blanks).  Anything else is a Lean error.
* ``decimalNumberFn`` / ``binNumberFn`` / ``octalNumberFn`` / ``hexNumberFn`` /
  ``takeDigitsFn``: ``_`` separators, ``2.`` and ``2.5e-3`` scientific
  literals; and ``fieldIdxFn`` for ``h.1`` (digits only).
* ``interpolatedStr`` (``src/Lean/Parser/StrInterpolation.lean``): a string
  whose ``{...}`` parts are *terms*.  Whether a string is interpolated depends
  on the syntax around it (``s!``, ``m!``, ``throwError``, ``trace[...]``, and
  any user ``syntax ... interpolatedStr(term)``), which a lexer cannot know in
  general, so any string containing ``{`` and any string after an
  interpolating form is a problem.

What Lean knows and this module does not: the token table (every symbol and
keyword that the imports declare, Mathlib's ``''``, ``⁻¹'`` or ``#``).
Symbols are therefore read one character at a time, and the two places where
a longer Lean token could change what follows are refused when they matter:
a comment opener glued to the token before it (``<--``: Lean reads ``<-``
then ``-``; a library token may also start with letters, like Mathlib's
``C(``; and error recovery skips runs of non-blank characters) and
a ``'`` glued to a symbol that could also start a char literal (``⁻¹'"'``).
Characters that are identifier characters in some supported Lean releases and
not in others (Latin-1 letters, ``ⱼ``) are refused in code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

#: token kinds
IDENT = "ident"                  # ``h.sorry``, ``«my lemma»``, ``sorry`` (keywords too)
NAME_LITERAL = "name_literal"    # ```Nat.succ``
NUMBER = "number"                # ``42``, ``0x1F``, ``1_000``
SCIENTIFIC = "scientific"        # ``2.``, ``2.5e3``
FIELD_INDEX = "field_index"      # the ``1`` of ``h.1``
STRING = "string"                # ``"..."``
RAW_STRING = "raw_string"        # ``r"..."``, ``r#"..."#``
CHAR = "char"                    # ``'a'``, ``'\\n'``
SYMBOL = "symbol"                # one character, or ``@[`` / ``''``
LINE_COMMENT = "line_comment"    # ``-- ...`` (without the newline)
BLOCK_COMMENT = "block_comment"  # ``/- ... -/``
DOC_COMMENT = "doc_comment"      # ``/-- ... -/`` and ``/-! ... -/``: tokens for Lean

#: comments Lean skips as blanks (doc comments are tokens and are not in it)
COMMENTS = frozenset({LINE_COMMENT, BLOCK_COMMENT})
#: literal tokens whose text is data, not code, when Lean parses normally
LITERALS = frozenset({STRING, RAW_STRING, CHAR})

#: identifiers after which Lean's own syntax reads the next string as
#: interpolated: the core parsers whose argument is
#: ``(interpolatedStr(term) <|> term)`` or ``interpolatedStr(term)``
#: (``throwError``, ``throwErrorAt``, the ``throwNamed*``/``logNamed*`` family,
#: ``dbg_trace``), and, conservatively, the logging functions that take a
#: message (``logInfo``...).  Every identifier ending in ``!`` counts as well
#: (``s!``, ``m!``, ``f!``, ``println!``, ``panic!``, ``assert!``,
#: ``reportIssue!``...), and so does ``trace[cls]`` (see
#: :func:`_interpolating_before`); the *tactic* ``trace "msg"`` takes a plain
#: string and is not listed.  No list can name the ``syntax ...
#: interpolatedStr(term)`` of every library, which is why a ``{`` in any string
#: is refused as well.
INTERPOLATING = frozenset({
    "throwError", "throwErrorAt", "throwNamedError", "throwNamedErrorAt", "throwErrorAt'",
    "logNamedError", "logNamedErrorAt", "logNamedWarning", "logNamedWarningAt",
    "logInfo", "logInfoAt", "logWarning", "logWarningAt", "logError", "logErrorAt",
    "dbg_trace", "dbgTrace", "dbg_trace_if_shares",
})


@dataclass(frozen=True)
class Part:
    """One component of an identifier: ``Nat``, ``succ``, or ``my lemma`` of ``«my lemma»``."""

    text: str
    #: written between ``«`` and ``»``
    escaped: bool
    #: where the part's text starts (after the ``«`` of an escaped part)
    offset: int


@dataclass(frozen=True)
class Token:
    """A token: its kind (one of the constants above), its exact text, where it starts."""

    kind: str
    text: str
    offset: int
    #: the components of an identifier or name literal; empty for other kinds
    parts: tuple[Part, ...] = ()

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


@dataclass(frozen=True)
class Lexed:
    """The tokens of a text and the first thing that could not be read for certain."""

    tokens: tuple[Token, ...]
    #: ``unterminated_comment``, ``interpolated_string``, ... or ``None``
    problem: Optional[str] = None
    #: where ``problem`` was found
    problem_offset: Optional[int] = None
    #: whether reading stopped at the problem (the tokens end there); an
    #: interpolated string is read on as a plain string, which is one reading
    #: of it, so that the banned tokens around it can still be named
    fatal: bool = False

    @property
    def code(self) -> tuple[Token, ...]:
        """The tokens Lean parses: everything but comments (doc comments included)."""
        return tuple(t for t in self.tokens if t.kind not in COMMENTS)


# -- character classes (src/Init/Meta.lean: isLetterLike, isSubScriptAlnum, isIdFirst, isIdRest) ----------

def is_letter_like(c: str) -> bool:
    """Lean's ``isLetterLike``: the non-ASCII characters that may start an identifier."""
    v = ord(c)
    return ((0x3B1 <= v <= 0x3C9 and v != 0x3BB)                    # lower Greek but λ
            or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))    # upper Greek but Π and Σ
            or 0x3CA <= v <= 0x3FB                                  # Coptic
            or 0x1F00 <= v <= 0x1FFE                                # polytonic Greek
            or 0x2100 <= v <= 0x214F                                # letter-like block (ℕ, ℝ, ℓ)
            or 0x1D49C <= v <= 0x1D59F)                             # script, double-struck, Fraktur


def is_subscript_alnum(c: str) -> bool:
    """Lean's ``isSubScriptAlnum``: ``₀``-``₉``, ``ₐ``-``ₜ``, ``ᵢ``-``ᵪ``."""
    v = ord(c)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A


def is_version_dependent(c: str) -> bool:
    """Characters that the newest Lean releases added to ``isLetterLike`` /
    ``isSubScriptAlnum`` (Latin-1 and Latin Extended-A letters, ``ⱼ``) and
    that older supported releases do not read as identifier characters (``ⁿ``
    was one in early Lean 4).  ``sorryé`` is one identifier for the first and
    the keyword ``sorry`` for the second, so no reading of them is certain."""
    v = ord(c)
    return (0xC0 <= v <= 0xFF and v not in (0xD7, 0xF7)) or 0x100 <= v <= 0x17F or v in (0x2C7C, 0x207F)


def is_ascii_digit(c: str) -> bool:
    """Lean's ``Char.isDigit`` (ASCII only: ``²`` and ``٣`` are not digits)."""
    return "0" <= c <= "9"


def is_id_first(c: str) -> bool:
    """Lean's ``isIdFirst``: ASCII letter, ``_`` or letter-like."""
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or c == "_" or is_letter_like(c)


def is_id_rest(c: str) -> bool:
    """Lean's ``isIdRest``: ``isIdFirst``, ASCII digits, ``'``, ``!``, ``?`` and subscripts."""
    return is_id_first(c) or is_ascii_digit(c) or c in "'!?" or is_subscript_alnum(c)


#: Lean's ``Char.isWhitespace``; no other Unicode blank separates tokens
WHITESPACE = frozenset(" \t\r\n")
_HEX = frozenset("0123456789abcdefABCDEF")


class _Stop(Exception):
    """Raised inside the reader when the text cannot be read on for certain."""

    def __init__(self, problem: str, offset: int) -> None:
        super().__init__(problem)
        self.problem = problem
        self.offset = offset


# -- the pieces of the reader ---------------------------------------------------------------

def comment_end(text: str, j: int) -> int:
    """Where a block comment whose body starts at ``j`` ends (just after its
    closing ``-/``), following ``finishCommentBlock``: ``/-`` nests, ``-/``
    unnests, strings and quotes mean nothing inside.  -1 when unterminated."""
    n, nesting = len(text), 1
    while j < n:
        c = text[j]
        j += 1
        if c == "-" and j < n and text[j] == "/":
            j += 1
            nesting -= 1
            if nesting == 0:
                return j
        elif c == "/" and j < n and text[j] == "-":
            j += 1
            nesting += 1
    return -1


def _escape_end(text: str, j: int, in_string: bool) -> int:
    """The end of the escape whose character after ``\\`` is at ``j``
    (``quotedCharCoreFn``)."""
    n = len(text)
    if j >= n:
        raise _Stop("unterminated_string" if in_string else "bad_char_literal", j)
    c = text[j]
    if c in "\\\"'rnt":
        return j + 1
    if c in "xu":
        digits = 2 if c == "x" else 4
        if all(k < n and text[k] in _HEX for k in range(j + 1, j + 1 + digits)):
            return j + 1 + digits
        raise _Stop("bad_escape", j)
    if in_string and c == "\n":
        # A string gap (``stringGapFn``): blanks holding exactly one newline.
        k, newlines = j, 0
        while k < n and text[k] in WHITESPACE:
            newlines += text[k] == "\n"
            k += 1
        if newlines != 1:
            raise _Stop("bad_escape", j)
        return k
    raise _Stop("bad_escape", j)


def string_end(text: str, j: int) -> int:
    """The end of a string literal whose body starts at ``j`` (``strLitFnAux``)."""
    n = len(text)
    while True:
        if j >= n:
            raise _Stop("unterminated_string", j)
        c = text[j]
        if c == '"':
            return j + 1
        j = _escape_end(text, j + 1, in_string=True) if c == "\\" else j + 1


def char_end(text: str, j: int) -> Optional[int]:
    """The end of a char literal whose body starts at ``j`` (just after the
    opening ``'``), or ``None`` when there is none (``charLitFnAux``: one
    character or escape, then ``'``)."""
    n = len(text)
    if j >= n:
        return None
    if text[j] == "\\":
        try:
            j = _escape_end(text, j + 1, in_string=False)
        except _Stop:
            return None
    else:
        j += 1
    return j + 1 if j < n and text[j] == "'" else None


def is_raw_string_start(text: str, j: int) -> bool:
    """``isRawStrLitStart``, with ``j`` just after the ``r``: ``#*"``."""
    while j < len(text) and text[j] == "#":
        j += 1
    return j < len(text) and text[j] == '"'


def raw_string_end(text: str, j: int) -> int:
    """The end of a raw string, ``j`` just after its ``r`` (``rawStrLitFnAux``:
    it ends at the first ``"`` followed by as many ``#`` as it opened with)."""
    n, hashes = len(text), 0
    while text[j] == "#":
        hashes, j = hashes + 1, j + 1
    j += 1  # the opening quote
    while True:
        if j >= n:
            raise _Stop("unterminated_string", j)
        c = text[j]
        j += 1
        if c != '"':
            continue
        if hashes == 0:
            return j
        closing = 0  # ``closingState``: count the hashes after a quote
        while True:
            if j >= n:
                raise _Stop("unterminated_string", j)
            c = text[j]
            j += 1
            if c == "#":
                closing += 1
                if closing == hashes:
                    return j
            elif c == '"':
                closing = 0
            else:
                break


def _take_digits(text: str, j: int, is_digit, need_digit: bool) -> int:
    """``takeDigitsFn``: digits with ``_`` separators; a ``_`` must be followed by a digit."""
    n = len(text)
    while True:
        if j >= n:
            if need_digit:
                raise _Stop("bad_number", j)
            return j
        c = text[j]
        if c == "_":
            need_digit, j = True, j + 1
        elif is_digit(c):
            need_digit, j = False, j + 1
        elif need_digit:
            raise _Stop("bad_number", j)
        else:
            return j


def number_end(text: str, i: int) -> tuple[int, str]:
    """``numberFnAux`` at a digit: ``(end, NUMBER or SCIENTIFIC)``."""
    n = len(text)
    if text[i] == "0" and i + 1 < n and text[i + 1] in "bBoOxX":
        base = text[i + 1].lower()
        is_digit = {"b": lambda c: c in "01", "o": lambda c: "0" <= c <= "7", "x": lambda c: c in _HEX}[base]
        return _take_digits(text, i + 2, is_digit, need_digit=True), NUMBER
    j = _take_digits(text, i + 1, is_ascii_digit, need_digit=False)
    if j >= n or text[j] not in ".eE":
        return j, NUMBER
    # ``parseScientific``: an optional ``.digits`` (a bare ``2.`` counts), then an optional exponent.
    if text[j] == ".":
        j += 1
        if j < n and is_ascii_digit(text[j]):
            j = _take_digits(text, j, is_ascii_digit, need_digit=False)
    if j < n and text[j] in "eE":
        j += 1
        if j < n and text[j] in "+-":
            j += 1
        if not (j < n and is_ascii_digit(text[j])):
            raise _Stop("bad_number", j)
        j = _take_digits(text, j, is_ascii_digit, need_digit=False)
    return j, SCIENTIFIC


def ident_end(text: str, i: int) -> tuple[int, tuple[Part, ...]]:
    """``identFnAux`` at a ``«`` or an ``isIdFirst`` character: the end and the parts."""
    n, parts, j = len(text), [], i
    while True:
        if text[j] == "«":
            close = text.find("»", j + 1)
            if close < 0:
                raise _Stop("unterminated_identifier", j)
            parts.append(Part(text[j + 1:close], True, j + 1))
            j = close + 1
        else:
            k = j + 1
            while k < n and is_id_rest(text[k]):
                k += 1
            parts.append(Part(text[j:k], False, j))
            j = k
        # ``isIdCont``: a dot continues the name only if a part starts right after it.
        if j + 1 < n and text[j] == "." and (is_id_first(text[j + 1]) or text[j + 1] == "«"):
            j += 1
            continue
        return j, tuple(parts)


# -- interpolation ---------------------------------------------------------------------------

def _interpolating_before(tokens: list[Token]) -> bool:
    """Whether a string that follows ``tokens`` (comments between allowed, as
    Lean allows blanks and comments between tokens) sits where a Lean syntax
    reads an interpolated string: after an identifier ending in ``!`` (``s!``,
    ``m!``, ``panic!``...) or named in :data:`INTERPOLATING`, or after the
    ``]`` of ``trace[cls]`` / ``aesop_trace![opt]`` (a ``[`` glued to a name)."""
    k = len(tokens) - 1
    while k >= 0 and tokens[k].kind in COMMENTS:
        k -= 1
    if k < 0:
        return False
    last = tokens[k]
    if last.kind == IDENT:
        return last.text.endswith("!") or last.parts[-1].text in INTERPOLATING
    if last.kind == SYMBOL and last.text == "]":
        # Find the matching ``[`` (a bounded walk: a trace class is a short name).
        depth = 0
        for j in range(k, max(-1, k - _BRACKET_WINDOW), -1):
            t = tokens[j]
            if t.kind == SYMBOL and t.text == "]":
                depth += 1
            elif t.kind == SYMBOL and t.text in ("[", "@["):
                depth -= 1
                if depth == 0:
                    return j > 0 and tokens[j - 1].kind == IDENT and tokens[j - 1].end == t.offset
        return True  # no ``[`` near enough to tell: count it as interpolating
    return False


#: how many tokens back the ``]`` of ``trace[cls]`` is matched
_BRACKET_WINDOW = 200


# -- the reader ------------------------------------------------------------------------------------

def tokenize(text: str) -> Lexed:
    """Read ``text`` as Lean does.  Stops at the first thing it cannot read
    for certain (``Lexed.fatal``); an interpolated string is noted and read on."""
    tokens: list[Token] = []
    problem: Optional[tuple[str, int]] = None
    n, i = len(text), 0

    def glued_to_symbol(at: int) -> bool:
        # A longer Lean token could have started at that symbol and swallowed what follows.
        return bool(tokens) and tokens[-1].kind == SYMBOL and tokens[-1].end == at

    def glued_to_token(at: int) -> bool:
        # The same for a comment opener, after any token but a comment: a token of the table may
        # also start with letters (``C(``, ``trace[``), and Lean's error recovery skips runs of
        # non-blank characters (``skipUntilWsOrDelim``) and may stop inside a comment glued to one.
        return bool(tokens) and tokens[-1].kind not in COMMENTS and tokens[-1].end == at

    def glued_to_field_base(at: int) -> bool:
        # ``h.1``, ``(p).2``, ``⟨a, b⟩.1``: a ``.`` glued to something a projection can follow.
        if len(tokens) < 2 or tokens[-1].text != "." or tokens[-1].end != at:
            return False
        base = tokens[-2]
        return base.end == tokens[-1].offset and (
            base.kind in (IDENT, FIELD_INDEX, NAME_LITERAL) or base.text in (")", "]", "}", "⟩", "»"))

    try:
        while i < n:
            c = text[i]
            if c in WHITESPACE:
                i += 1
            elif text.startswith("--", i) or text.startswith("/-", i):
                if glued_to_token(i):
                    # ``<--``, ``//-``: if the symbol with its ``-`` or ``/`` is a Lean token, this is no comment.
                    raise _Stop("ambiguous_comment", i)
                if c == "-":
                    end = text.find("\n", i)
                    end = n if end < 0 else end
                    tokens.append(Token(LINE_COMMENT, text[i:end], i))
                else:
                    doc = i + 2 < n and text[i + 2] in "-!"
                    end = comment_end(text, i + (3 if doc else 2))
                    if end < 0:
                        raise _Stop("unterminated_comment", i)
                    tokens.append(Token(DOC_COMMENT if doc else BLOCK_COMMENT, text[i:end], i))
                i = end
            elif c == '"':
                end = string_end(text, i + 1)
                token = Token(STRING, text[i:end], i)
                if problem is None and ("{" in token.text or _interpolating_before(tokens)):
                    problem = ("interpolated_string", i)
                tokens.append(token)
                i = end
            elif c == "'" and not (i + 1 < n and text[i + 1] == "'"):
                end = char_end(text, i + 1)
                if glued_to_symbol(i):
                    # ``f ⁻¹' s`` (Mathlib's preimage token) or a char literal after a symbol?
                    if end is not None:
                        raise _Stop("ambiguous_quote", i)
                    tokens.append(Token(SYMBOL, "'", i))
                    i += 1
                    continue
                if end is None:
                    raise _Stop("bad_char_literal", i)
                tokens.append(Token(CHAR, text[i:end], i))
                i = end
            elif c == "'":
                # ``''``: never a char literal (``tokenFnAux``); Mathlib's image notation ``f '' s``.
                tokens.append(Token(SYMBOL, "''", i))
                i += 2
            elif is_ascii_digit(c):
                if glued_to_field_base(i):
                    # ``fieldIdxFn``: digits only (``h.2e5`` is ``h.2`` applied to ``e5``).
                    end = i
                    while end < n and is_ascii_digit(text[end]):
                        end += 1
                    if end + 1 < n and text[end] in "eE" and text[end + 1] in "+-":
                        # a number read here would swallow the sign: the two readings part ways
                        raise _Stop("ambiguous_number", end)
                    tokens.append(Token(FIELD_INDEX, text[i:end], i))
                else:
                    end, kind = number_end(text, i)
                    tokens.append(Token(kind, text[i:end], i))
                i = end
            elif c == "`" and i + 1 < n and (is_id_first(text[i + 1]) or text[i + 1] == "«"):
                end, parts = ident_end(text, i + 1)
                tokens.append(Token(NAME_LITERAL, text[i:end], i, parts))
                i = end
            elif c == "r" and is_raw_string_start(text, i + 1):
                end = raw_string_end(text, i + 1)
                tokens.append(Token(RAW_STRING, text[i:end], i))
                i = end
            elif c == "«" or is_id_first(c):
                end, parts = ident_end(text, i)
                tokens.append(Token(IDENT, text[i:end], i, parts))
                i = end
            elif is_version_dependent(c):
                raise _Stop("version_dependent_char", i)
            elif text.startswith("@[", i):
                tokens.append(Token(SYMBOL, "@[", i))
                i += 2
            else:
                tokens.append(Token(SYMBOL, c, i))
                i += 1
    except _Stop as stop:
        return Lexed(tuple(tokens), stop.problem, stop.offset, fatal=True)
    if problem is not None:
        return Lexed(tuple(tokens), problem[0], problem[1])
    return Lexed(tuple(tokens))


__all__ = [
    "BLOCK_COMMENT", "CHAR", "COMMENTS", "DOC_COMMENT", "FIELD_INDEX", "IDENT", "INTERPOLATING", "LINE_COMMENT",
    "LITERALS", "Lexed", "NAME_LITERAL", "NUMBER", "Part", "RAW_STRING", "SCIENTIFIC", "STRING", "SYMBOL", "Token",
    "WHITESPACE", "comment_end", "is_id_first", "is_id_rest", "is_letter_like", "is_subscript_alnum",
    "is_version_dependent", "tokenize",
]
