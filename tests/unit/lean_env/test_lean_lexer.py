"""The tokenizer that reads proof text as Lean's lexer does
(``lean_env/lean/lexer.py``), and a property-based test of the pre-filter
built on it.

The token streams below are worked out by hand from Lean's parser functions
(``src/Lean/Parser/Basic.lean``: ``whitespace``, ``tokenFnAux``,
``identFnAux``, ``strLitFnAux``, ``charLitFnAux``, ``rawStrLitFnAux``,
``numberFnAux``, ``fieldIdxFn``); no Lean runs here.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lean_env.lean import lexer
from lean_env.lean.checks import Rejection, check_body
from lean_env.lean.lexer import Part, tokenize


def stream(text: str) -> list[tuple[str, str, int]]:
    lexed = tokenize(text)
    assert lexed.problem is None, lexed
    return [(t.kind, t.text, t.offset) for t in lexed.tokens]


# -- token streams --------------------------------------------------------------------------

@pytest.mark.parametrize("text, tokens", [
    # a dotted name is one token; a keyword after a name's dot is a field, not the keyword
    ("exact h.sorry", [("ident", "exact", 0), ("ident", "h.sorry", 6)]),
    # `«` starts a name part only at a token start or after a dot: keyword, then a quoted name
    ("sorry«x»", [("ident", "sorry", 0), ("ident", "«x»", 5)]),
    ("Nat.«my lemma».x", [("ident", "Nat.«my lemma».x", 0)]),
    # an ASCII dot not glued to a name: a bullet (or leading dot), then the keyword
    (".sorry", [("symbol", ".", 0), ("ident", "sorry", 1)]),
    # `!` and `?` continue a name but cannot start one
    ("s!\"x\" exact?", None),
    ("(!\"ab\".isEmpty)", [("symbol", "(", 0), ("symbol", "!", 1), ("string", '"ab"', 2), ("symbol", ".", 6),
                           ("ident", "isEmpty", 7), ("symbol", ")", 14)]),
    # projections read digits only; `2.` is a scientific literal and `sorry` a token of its own
    ("h.1.2", [("ident", "h", 0), ("symbol", ".", 1), ("field_index", "1", 2), ("symbol", ".", 3),
               ("field_index", "2", 4)]),
    ("2.sorry", [("scientific", "2.", 0), ("ident", "sorry", 2)]),
    ("2.5e-3 0x1F 1_000 0b101 7", [("scientific", "2.5e-3", 0), ("number", "0x1F", 7), ("number", "1_000", 12),
                                   ("number", "0b101", 18), ("number", "7", 24)]),
    # literals: a char literal holding a quote, an escaped quote, a raw string ended by `"#`
    ("'\"' \"a\\\"b\" r#\"x\"y\"#", [("char", "'\"'", 0), ("string", '"a\\"b"', 4), ("raw_string", 'r#"x"y"#', 11)]),
    ("'\\n' '\\x41' '\\u0041'", [("char", "'\\n'", 0), ("char", "'\\x41'", 5), ("char", "'\\u0041'", 12)]),
    # `r` starts a raw string only at a token start
    ('xr"a"', [("ident", "xr", 0), ("string", '"a"', 2)]),
    # comments: line, nested block, and doc comments (tokens for Lean)
    ("-- c\n/- a /- b -/ c -/ /-- d -/", [("line_comment", "-- c", 0), ("block_comment", "/- a /- b -/ c -/", 5),
                                          ("doc_comment", "/-- d -/", 23)]),
    ('/- "unclosed string -/ x', [("block_comment", '/- "unclosed string -/', 0), ("ident", "x", 23)]),
    # Mathlib's image and preimage notations, card notation, attributes, name literals
    ("f '' s", [("ident", "f", 0), ("symbol", "''", 2), ("ident", "s", 5)]),
    ("f ⁻¹' s", [("ident", "f", 0), ("symbol", "⁻", 2), ("symbol", "¹", 3), ("symbol", "'", 4),
                 ("ident", "s", 6)]),
    ("#sᶜ", [("symbol", "#", 0), ("ident", "s", 1), ("symbol", "ᶜ", 2)]),
    ("@[simp]", [("symbol", "@[", 0), ("ident", "simp", 2), ("symbol", "]", 6)]),
    ("`Nat.succ", [("name_literal", "`Nat.succ", 0)]),
    # letter-like and subscript characters (isLetterLike, isSubScriptAlnum); λ, Π, Σ are not letters
    ("hε₁ ℕ λ", [("ident", "hε₁", 0), ("ident", "ℕ", 4), ("symbol", "λ", 6)]),
    # a non-breaking space is no blank for Lean
    ("a\u00a0b", [("ident", "a", 0), ("symbol", "\u00a0", 1), ("ident", "b", 2)]),
])
def test_token_streams(text, tokens):
    if tokens is None:
        assert [t.text for t in tokenize(text).tokens] == ["s!", '"x"', "exact?"]
    else:
        assert stream(text) == tokens


def test_identifier_parts_and_offsets():
    [token] = tokenize("Nat.«my lemma».x").tokens
    assert token.parts == (Part("Nat", False, 0), Part("my lemma", True, 5), Part("x", False, 15))


@pytest.mark.parametrize("text, problem, fatal", [
    ('exact "abc', "unterminated_string", True),
    ('exact r#"abc"', "unterminated_string", True),
    ("simp /- x /- y -/", "unterminated_comment", True),
    ("exact «x", "unterminated_identifier", True),
    ("exact 'ab'", "bad_char_literal", True),
    ('exact "\\q"', "bad_escape", True),
    ('exact "\\x4"', "bad_escape", True),
    ("exact 0x", "bad_number", True),
    ("exact 2e", "bad_number", True),
    ("exact 1_", "bad_number", True),
    ("exact h <-- c", "ambiguous_comment", True),
    ("exact 2--c", "ambiguous_comment", True),
    ("exact f ⁻¹'\"' x", "ambiguous_quote", True),
    ("exact h.2e-5", "ambiguous_number", True),
    ("exact sorryé", "version_dependent_char", True),
    # interpolation: read on as a plain string, but never certain
    ('have := s! "x"', "interpolated_string", False),
    ('have := m! /- c -/ "x"', "interpolated_string", False),
    ('exact throwError "x"', "interpolated_string", False),
    ('exact trace[Meta.debug] "x"', "interpolated_string", False),
    ('exact foo "{x}"', "interpolated_string", False),
])
def test_what_cannot_be_read_for_certain(text, problem, fatal):
    lexed = tokenize(text)
    assert (lexed.problem, lexed.fatal) == (problem, fatal)


def test_character_classes():
    assert lexer.is_id_first("ℕ") and lexer.is_id_first("α") and lexer.is_id_first("_")
    assert not lexer.is_id_first("λ") and not lexer.is_id_first("Π") and not lexer.is_id_first("Σ")
    assert lexer.is_id_rest("₁") and lexer.is_id_rest("!") and lexer.is_id_rest("?") and lexer.is_id_rest("'")
    assert not lexer.is_id_first("1") and not lexer.is_id_rest("ᶜ") and not lexer.is_id_rest("«")
    assert lexer.is_version_dependent("é") and not lexer.is_version_dependent("×")


# -- the pre-filter on generated texts ----------------------------------------------------------
#
# Each generated proof text is built from fragments whose reading by Lean is
# known by construction: filler tactics and "noise" (literals and comments
# holding quotes, comment openers and escapes, closed for Lean), and banned
# words put either where Lean reads them as code (`live`) or where Lean never
# does (inside comments).  Fragments are joined by blanks or an indented line
# break, so no fragment changes how Lean reads its neighbours.

#: banned words of every kind: tactic keywords, commands, `#commands`, banned names
KEYWORDS = ["sorry", "admit", "native_decide", "run_tac", "set_option", "theorem", "run_cmd", "#eval", "#exit",
            "sorryAx", "include_str", "stop", "by_elab", "set_library_suggestions", "macro"]

#: how a live word is written: Lean reads the word as code in each of these
LIVE = ["{k}", "({k})", ".{k}", "· {k}", "{k}«x»", "«x»{k}", "'a'{k}", "\"s\"{k}", "r#\"q\"#{k}", "/- c -/{k}",
        "(2){k}", "!{k}", "<;>{k}", "{k}-- trailing\n  ", "h.1 {k}", "'\"' {k}", "(f 2'\"'){k}"]

#: how a dead word is written: only inside comments
DEAD = ["-- {k}\n  ", "/- {k} -/", "/- /- {k} -/ \" -/", "-- \"{k}\"\n  "]

#: words that may stand in string literals (they run nothing even where Lean reads literal text as code)
IN_STRINGS = ["exact \"{k}\"".format(k=k) for k in ("sorry", "admit", "stop")] + ["exact \"@[simp]\""]

#: closed fragments that hold characters a careless reader trips over
NOISE = ["norm_num", "simp [h]", "omega", "exact 'a'", "exact '\"'", "exact \"x--y\"", "exact \"\\\"-/\"",
         "exact r#\"a\"b\"#", "exact «my name»", "exact (!\"ab\".isEmpty)", "-- it's \"quoted\"\n  ",
         "/- a ' b \" c -/", "exact #s", "exact f '' s", "exact h.sorry", "exact sorry_lemma", "exact «a -- b»"]

#: closed fragments that some readers other than Lean's mistake for the start of a string
DESYNC = ["(f 2'\"')", "(!r\"\\\")", "(!'\"')", "r#\"\"#", "«\"»"]

SEPARATORS = st.sampled_from([" ", "\n  ", " ; "])


def build(fragments: list[str], separators: list[str]) -> str:
    text = "  "
    for fragment, separator in zip(fragments, separators):
        text += fragment + separator
    return text


@st.composite
def live_texts(draw) -> str:
    before = draw(st.lists(st.sampled_from(NOISE + DESYNC + [d.format(k=k) for d in DEAD for k in KEYWORDS]),
                           max_size=6))
    word = draw(st.sampled_from(KEYWORDS))
    live = draw(st.sampled_from(LIVE)).format(k=word)
    after = draw(st.lists(st.sampled_from(NOISE + DESYNC), max_size=4))
    fragments = before + [live] + after
    return build(fragments, draw(st.lists(SEPARATORS, min_size=len(fragments), max_size=len(fragments))))


@st.composite
def dead_texts(draw) -> str:
    fragments = draw(st.lists(st.sampled_from(NOISE + IN_STRINGS + [d.format(k=k) for d in DEAD for k in KEYWORDS]),
                              min_size=1, max_size=8))
    fragments.append("norm_num")  # a proof has a tactic
    return build(fragments, draw(st.lists(SEPARATORS, min_size=len(fragments), max_size=len(fragments))))


@settings(max_examples=400, deadline=None, derandomize=True)
@given(live_texts())
def test_a_word_lean_reads_as_code_is_always_refused(text):
    assert isinstance(check_body(text), Rejection), text


#: commands that run code or change the syntax, and where Lean may read them after a parse error:
#: ``parseCommand`` then tries a command at every character, inside literals and names too
RECOVERY_WORDS = ["#eval", "run_cmd", "set_option", "macro", "elab", "initialize", "open", "attribute", "syntax"]
RECOVERY_CONTEXTS = ['"{k} x"', '"a{k}"', "«a {k}»", "x_{k}", "h.{k}", "r#\"{k}\"#", "/-- {k} -/"]


@st.composite
def recovery_texts(draw) -> str:
    word = draw(st.sampled_from(RECOVERY_WORDS))
    hidden = draw(st.sampled_from(RECOVERY_CONTEXTS)).format(k=word)
    noise = draw(st.lists(st.sampled_from(NOISE), max_size=4))
    fragments = ["exact (", *noise, hidden]  # the unclosed parenthesis is the parse error
    return build(fragments, draw(st.lists(SEPARATORS, min_size=len(fragments), max_size=len(fragments))))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(recovery_texts())
def test_a_command_lean_may_read_after_a_parse_error_is_refused(text):
    assert isinstance(check_body(text), Rejection), text


@settings(max_examples=200, deadline=None, derandomize=True)
@given(dead_texts())
def test_words_only_inside_comments_or_harmless_in_strings_are_accepted(text):
    result = check_body(text)
    assert isinstance(result, str), (text, result)


#: pieces glued together at random: anything may come out, including unreadable text
PIECES = (NOISE + DESYNC + KEYWORDS + ["\"" + k + "\"" for k in KEYWORDS] + ["«" + k + "»" for k in KEYWORDS]
          + ["'", "\"", "«", "/-", "-/", "--", "!", "r#", "\n", "`", "."])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(PIECES), max_size=12))
def test_any_mixture_is_judged_without_crashing(pieces):
    text = "".join(pieces)
    assert isinstance(check_body(text), (str, Rejection))
    lexed = tokenize(text)
    # tokens come in order and never overlap
    ends = [0] + [t.end for t in lexed.tokens]
    assert all(t.offset >= end for t, end in zip(lexed.tokens, ends))
