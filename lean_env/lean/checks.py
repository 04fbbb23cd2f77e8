"""When is a Lean proof valid: the static pre-filter of untrusted text and the
verdict read from the REPL's answers (SPEC §3.2).  Pure functions, no I/O.
The banned words and the two passes that look for them live in
:mod:`lean_env.lean.banned`, the shared vocabulary in :mod:`lean_env.lean.policy`.

Untrusted text (a model's tactic body, a conjectured statement, a single
tactic) is checked before any prover time is spent on it:

* it must be valid Unicode, free of control characters and not too long;
* the body is normalised (line ends, tabs to two spaces, trailing blanks) and,
  when its first line of code sits at column 0, indented by two spaces (from
  Lean v4.31 a tactic block at column 0 below ``:= by`` is a parse error);
* it must be read, for certain, the way Lean reads it: the tokenizer of
  :mod:`lean_env.lean.lexer` follows Lean's own lexer, and anything it cannot
  read with certainty (an unterminated comment, an interpolated string, a
  comment opener glued to a symbol...) refuses the text (``syntax:<what>``);
* after normalisation no token may start at column 0: such a line ends the
  tactic block and would be elaborated as new commands (``leaves_block``);
* no banned token may appear (``banned:<token>``), checked twice:

  1. on the token stream: a keyword counts when an identifier token *is* it
     (``sorry``, ``run_cmd``), or starts with it (``sorry.x``); a banned name
     (``sorryAx``, ``ofReduceBool``...) counts as any component, also
     ``«quoted»``; ``#`` glued to a name other than one letter is a command
     (``#eval``; ``#s`` is Mathlib's card notation); ``@[`` and ``eval%``;
  2. on the raw text, crudely: every occurrence of a banned word as a
     substring must be in an allowed form, judged from the characters around
     it and from two independent readings of where comments and literals are
     (the tokenizer's and the simple scanner :func:`mask_comments_and_literals`).
     An occurrence that either reading does not allow refuses the text, so a
     disagreement between the two readings refuses rather than passes.

Why literals are not free for all.  After a parse error Lean does not stop:
``parseCommand`` tries to parse a command at every following character, so
text inside a string, a char literal or a ``«quoted»`` name, and the end of
an identifier (``x_run_cmd`` holds ``run_cmd``), can start a command.  Only
comments are skipped whole.  So inside literals only ``sorry``, ``admit``,
``stop`` and ``@[`` may appear (they run nothing and close no goal there), and
a command keyword may end an identifier only when it is harmless as the start
of a command (``Set.mem_def``, ``h_local``: :data:`SUFFIX_OK`).

The keyword lists are a policy, and no list of Lean's extensible command
syntax can be complete; what makes the check sound is structural: the body is
spliced strictly after the trusted statement, so later commands cannot change
the theorem, the column-0 rule keeps ordinary lines inside the tactic block,
and the axiom whitelist catches any unsound shortcut.  The lists exist to stop
code that would run (``#eval``, ``run_cmd``, new syntax, ``include_str``) and
could, for instance, clear the message log.

``native_decide`` (and ``native``, as in ``decide +native``) is rejected by the
pre-filter: it trusts the compiler, which the axiom check would also catch
(``Lean.ofReduceBool`` up to v4.28, ``*._native.*`` auxiliary axioms from
v4.29), but rejecting it up front costs no Lean time and gives a clear reason.

After Lean has run, a proof is valid iff its command produced no
error-severity message and no sorry, and ``#print axioms`` of the theorem
lists only allowed axioms (default ``propext``, ``Classical.choice``,
``Quot.sound``).  Validity is never decided by searching message texts, except
for parsing the one line ``#print axioms`` prints; without that line the check
fails closed.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Optional, Union

from lean_env.lean import lexer
from lean_env.lean.banned import (
    AESOP_TACTICS, BANNED_NAMES, BANNED_PREFIXES, COMMAND_KEYWORDS, LITERAL_OK, PROOF_KEYWORDS, SKIP_RECOVERY,
    SUFFIX_OK, Masked, find_banned, lexical_rejection, mask_comments_and_literals, syntax_rejection)
from lean_env.lean.lexer import Lexed, tokenize
from lean_env.lean.policy import DEFAULT_ALLOWED_AXIOMS, CheckPolicy, PreparedProof, Rejection
from lean_env.lean.protocol import CommandResponse, Message

#: bump whenever a change here can turn a verdict around (part of cache keys)
CHECKS_VERSION = "4"


#: the leading keywords a trusted statement may use (``example`` is renamed)
STATEMENT_KEYWORDS = ("theorem", "lemma", "example")
#: the name given to an ``example`` so that ``#print axioms`` can find it
EXAMPLE_NAME = "sgs_example_target"

_WORD = re.compile(r"#?[^\W\d][\w'!?]*")
_NAME_PART = r"(?:«[^»\n]*»|[^\W\d][\w'!?]*)"
_DECLARED_NAME = re.compile(rf"\s+({_NAME_PART}(?:\.{_NAME_PART})*)")
_AXIOM_LINE = re.compile(
    r"'[^']*' (?:depends on axioms: \[(?P<axioms>[^\]]*)\]|(?P<none>does not depend on any axioms))")
#: characters allowed although Unicode calls them control characters
_ALLOWED_CONTROL = frozenset("\n\t\r")


# -- untrusted input -------------------------------------------------------------

def check_text(text: object, max_chars: int) -> Optional[Rejection]:
    """Basic hygiene of an untrusted text: a ``str``, not too long, valid
    Unicode, no control characters but newline, tab and carriage return, and
    no invisible format characters (bidi controls, zero-width joiners)."""
    if not isinstance(text, str):
        return Rejection("bad_input", (f"expected text, got {type(text).__name__}",))
    if len(text) > max_chars:
        return Rejection("too_long", (f"{len(text)} characters, at most {max_chars} accepted",))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return Rejection("bad_encoding", (f"not valid Unicode at character {e.start}",))
    for k, ch in enumerate(text):
        category = unicodedata.category(ch)
        if ch not in _ALLOWED_CONTROL and category == "Cc":
            return Rejection("control_char", (f"control character U+{ord(ch):04X} at character {k}",))
        if category == "Cf":
            # Bidi overrides and zero-width characters make text read differently from how Lean
            # parses it ("Trojan Source", CVE-2021-42574); no proof needs them.
            return Rejection("format_char", (f"invisible format character U+{ord(ch):04X} at character {k}",))
    return None


def normalize_body(body: str) -> str:
    """Line ends to ``\\n``, tabs to two spaces, trailing blanks and blank
    edge lines removed; indented by two spaces when the first line of code
    starts at column 0 (comments do not count as code)."""
    text = body.replace("\r\n", "\n").replace("\r", "\n").replace("\t", "  ")
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    joined = "\n".join(lines)
    lexed = tokenize(joined)
    if lexed.code:
        first = lexed.code[0].offset
        at_column_zero = first == joined.rfind("\n", 0, first) + 1
    else:  # nothing readable: let the crude scanner decide; check_body refuses such a body anyway
        code_lines = mask_comments_and_literals(joined).code.split("\n")
        first_code = next((line for line in code_lines if line.strip()), "")
        at_column_zero = bool(first_code) and not first_code[0].isspace()
    if at_column_zero:
        lines = ["  " + line if line else line for line in lines]
    return "\n".join(lines)


def _has_code(lexed: Lexed) -> bool:
    """Whether a text holds anything but comments (doc comments count as
    comments here: no tactic is one); unreadable text counts as code."""
    return lexed.fatal or any(t.kind != lexer.DOC_COMMENT for t in lexed.code)


def check_body(body: object, policy: CheckPolicy = CheckPolicy()) -> Union[str, Rejection]:
    """Pre-filter an untrusted tactic body; the normalised body, or why not."""
    rejection = check_text(body, policy.max_body_chars)
    if rejection is not None:
        return rejection
    assert isinstance(body, str)
    normalized = normalize_body(body)
    lexed = tokenize(normalized)
    if not _has_code(lexed):
        return Rejection("empty", ("the proof body has no tactic",))
    rejection = lexical_rejection(normalized, lexed, policy, "a proof", column_zero=True)
    return normalized if rejection is None else rejection


def check_tactic(tactic: object, policy: CheckPolicy = CheckPolicy()) -> Optional[Rejection]:
    """Pre-filter one untrusted tactic for tactic mode (a ProofStep is parsed
    as a tactic, so only the text hygiene and the banned tokens apply)."""
    rejection = check_text(tactic, policy.max_body_chars)
    if rejection is not None:
        return rejection
    assert isinstance(tactic, str)
    lexed = tokenize(tactic)
    if not _has_code(lexed):
        return Rejection("empty", ("the tactic is empty",))
    return lexical_rejection(tactic, lexed, policy, "a proof")


# -- statements ----------------------------------------------------------------

def _leading_declaration(statement: str) -> Optional[tuple[str, int, int]]:
    """``(keyword, keyword_start, after_keyword)`` of the first theorem /
    lemma / example keyword of ``statement``."""
    code = mask_comments_and_literals(statement).code
    for m in _WORD.finditer(code):
        word = m.group()
        follows_dot = m.start() > 0 and code[m.start() - 1] == "."
        if word in STATEMENT_KEYWORDS and not follows_dot:
            return word, m.start(), m.end()
    return None


def _ends_with_by(statement: str) -> bool:
    code = mask_comments_and_literals(statement).code.rstrip()
    return bool(re.search(r":=\s*by$", code))


def theorem_name(statement: str) -> Optional[str]:
    """The declared name of a ``theorem NAME`` / ``lemma NAME`` statement
    (``None`` for ``example`` or when there is none)."""
    found = _leading_declaration(statement)
    if found is None or found[0] == "example":
        return None
    m = _DECLARED_NAME.match(statement, found[2])
    return m.group(1) if m else None


def check_trusted_statement(statement: object, policy: CheckPolicy = CheckPolicy()) -> Optional[Rejection]:
    """A dataset statement must be text declaring a theorem, lemma or example
    and end with ``:= by``; anything else cannot take a tactic body."""
    rejection = check_text(statement, policy.max_statement_chars)
    if rejection is not None:
        return Rejection("bad_statement", rejection.messages)
    assert isinstance(statement, str)
    if _leading_declaration(statement) is None:
        return Rejection("bad_statement", ("the statement declares no theorem",))
    if not _ends_with_by(statement):
        return Rejection("bad_statement", ("the statement does not end with `:= by`",))
    return None


def named_statement(statement: str) -> Union[tuple[str, str], Rejection]:
    """A statement that passed :func:`check_trusted_statement`, ready for
    ``#print axioms``: ``(statement, name)``.  An ``example`` becomes
    ``theorem sgs_example_target``."""
    found = _leading_declaration(statement)
    if found is None:
        return Rejection("bad_statement", ("the statement declares no theorem",))
    keyword, start, end = found
    if keyword == "example":
        return statement[:start] + f"theorem {EXAMPLE_NAME}" + statement[end:], EXAMPLE_NAME
    name = theorem_name(statement)
    if name is None:
        return Rejection("bad_statement", (f"no name after `{keyword}`",))
    return statement, name


def prepare_proof(statement: object, body: object, policy: CheckPolicy = CheckPolicy()
                  ) -> Union[PreparedProof, Rejection]:
    """Pre-filter ``body`` and splice it under the trusted ``statement``."""
    rejection = check_trusted_statement(statement, policy)
    if rejection is not None:
        return rejection
    assert isinstance(statement, str)
    named = named_statement(statement)
    if isinstance(named, Rejection):
        return named
    checked = check_body(body, policy)
    if isinstance(checked, Rejection):
        return checked
    text, name = named
    return PreparedProof(command=text.rstrip() + "\n" + checked, name=name, body=checked)


def check_conjecture(statement: object, policy: CheckPolicy = CheckPolicy()) -> Union[str, Rejection]:
    """Pre-filter an untrusted statement (a conjecture): exactly one
    ``theorem NAME ... := by`` / ``lemma NAME ... := by`` and nothing else.
    Returns the theorem's name."""
    rejection = check_text(statement, policy.max_statement_chars)
    if rejection is not None:
        return rejection
    assert isinstance(statement, str)
    lexed = tokenize(statement)
    if lexed.fatal:
        return syntax_rejection(lexed)
    first = next((t for t in lexed.code if t.kind != lexer.DOC_COMMENT), None)
    if first is None or first.kind != lexer.IDENT or first.text not in ("theorem", "lemma"):
        return Rejection("bad_statement", ("a conjecture must start with `theorem` or `lemma`",))
    rejection = lexical_rejection(statement, lexed, policy, "a statement", skip=first)
    if rejection is not None:
        return rejection
    if not _ends_with_by(statement):
        return Rejection("bad_statement", ("a conjecture must end with `:= by`",))
    name = theorem_name(statement)
    if name is None:
        return Rejection("bad_statement", ("no theorem name",))
    return name


# -- verdicts from REPL answers --------------------------------------------------

def rendered(messages: tuple[Message, ...], limit: int = 20, width: int = 2000) -> tuple[str, ...]:
    """Messages as short strings for a verdict (errors first, bounded size)."""
    ordered = sorted(messages, key=lambda m: not m.is_error)
    return tuple(m.render()[:width] for m in ordered[:limit])


def judge_command(response: CommandResponse) -> Optional[Rejection]:
    """A proof command is acceptable iff no error message and no sorry."""
    if response.errors:
        return Rejection("prover_error", rendered(response.messages))
    if response.sorries:
        return Rejection("sorry", rendered(response.messages) or ("the proof contains sorry",))
    return None


def parse_axioms(response: CommandResponse) -> Optional[tuple[str, ...]]:
    """The axioms listed by one ``#print axioms`` answer; ``None`` unless
    there is no error and exactly one axioms line."""
    if response.errors:
        return None
    found = [m for msg in response.messages for m in [_AXIOM_LINE.search(msg.data)] if m]
    if len(found) != 1:
        return None
    line = found[0]
    if line.group("none"):
        return ()
    return tuple(a.strip() for a in line.group("axioms").split(",") if a.strip())


def judge_axioms(response: CommandResponse, allowed: frozenset[str] = DEFAULT_ALLOWED_AXIOMS) -> Optional[Rejection]:
    """The axioms check; fails closed when the answer has no axioms line."""
    axioms = parse_axioms(response)
    if axioms is None:
        return Rejection("axioms_unknown", rendered(response.messages) or ("`#print axioms` printed nothing",))
    if "sorryAx" in axioms:
        return Rejection("sorry", (f"the proof depends on sorryAx: {', '.join(axioms)}",))
    extra = [a for a in axioms if a not in allowed]
    if extra:
        return Rejection("axioms", (f"the proof depends on disallowed axioms: {', '.join(extra)}",))
    return None


__all__ = [
    "AESOP_TACTICS", "BANNED_NAMES", "BANNED_PREFIXES", "CHECKS_VERSION", "COMMAND_KEYWORDS", "DEFAULT_ALLOWED_AXIOMS",
    "EXAMPLE_NAME", "LITERAL_OK", "PROOF_KEYWORDS", "SKIP_RECOVERY", "SUFFIX_OK",
    "CheckPolicy", "Masked", "PreparedProof", "Rejection", "check_body", "check_conjecture", "check_tactic",
    "check_text", "check_trusted_statement", "find_banned", "judge_axioms", "judge_command", "mask_comments_and_literals",
    "named_statement", "normalize_body", "parse_axioms", "prepare_proof", "rendered", "theorem_name",
]
