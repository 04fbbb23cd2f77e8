"""When is a Lean proof valid: the static pre-filter of untrusted text and the
verdict read from the REPL's answers (SPEC §3.2).  Pure functions, no I/O.

Untrusted text (a model's tactic body, a conjectured statement, a single
tactic) is checked before any prover time is spent on it:

* it must be valid Unicode, free of control characters and not too long;
* the body is normalised (line ends, tabs to two spaces, trailing blanks) and,
  when its first line of code sits at column 0, indented by two spaces (from
  Lean v4.31 a tactic block at column 0 below ``:= by`` is a parse error);
* after normalisation no line of code may start at column 0: such a line ends
  the tactic block and would be elaborated as new commands;
* no banned token may appear.  Tokens are read after comments and string /
  character literals are blanked out, so ``-- sorry`` or ``"sorry"`` are fine
  and ``sorry_lemma`` is an identifier, not ``sorry``.  Lean commands may start
  at any column once the tactic block has ended, so every command keyword is
  banned, not only column-0 ones.  Keywords count only as whole tokens that do
  not follow a ``.`` (``Filter.Eventually.exists`` is a name); names that
  smuggle in axioms, unsafe code or unchecked declarations (``sorryAx``,
  ``ofReduceBool``, ``unsafeCast``, ``addDecl``, ``skipKernelTC``...) count
  anywhere, also when written as a ``«quoted»`` name.  Every
  ``#command`` (``#`` then a lower-case word of two or more letters: ``#eval``,
  ``#exit``, ``#print``) is banned; ``#s``, Mathlib's ``Finset.card`` notation on
  a one-letter name, is not.  Attributes (``@[...]``) are banned: on a
  ``let rec`` or ``where`` declaration a proof could otherwise attach
  ``@[init]``, ``@[csimp]``, ``@[export]``... to code of its own.

The keyword lists are a policy, and no list of Lean's extensible command
syntax can be complete; what makes the check sound is structural: the body is
spliced strictly after the trusted statement, so later commands cannot change
the theorem, the column-0 rule keeps ordinary lines inside the tactic block,
and the axiom whitelist catches any unsound shortcut.  The lists exist to stop
code that would run after the theorem (``#eval``, ``run_cmd``, new syntax)
and could, for instance, clear the message log.

``native_decide`` (and ``native``, as in ``decide +native``) is rejected by the
pre-filter: it trusts the compiler, which the axiom check would also catch
(``Lean.ofReduceBool`` up to v4.28, ``*._native.*`` auxiliary axioms from
v4.29), but rejecting it up front costs no Lean time and gives a clear reason.

Interpolated strings (``s!"..{code}.."``) are rejected rather than parsed:
their ``{...}`` parts are code, and no proof needs them.

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
from dataclasses import dataclass
from typing import Optional, Union

from lean_env.lean.protocol import CommandResponse, Message

#: bump whenever a change here can turn a verdict around (part of cache keys)
CHECKS_VERSION = "3"

#: axioms a valid proof may depend on
DEFAULT_ALLOWED_AXIOMS: frozenset[str] = frozenset({"propext", "Classical.choice", "Quot.sound"})

#: tokens that start a new command or modify one: banned as whole tokens
#: that do not follow a ``.``.  Any ``#command`` is banned separately.
COMMAND_KEYWORDS: frozenset[str] = frozenset({
    # declarations
    "theorem", "lemma", "def", "example", "abbrev", "instance", "axiom", "structure", "class",
    "inductive", "coinductive", "mutual", "opaque", "alias", "irreducible_def", "deriving",
    # declaration modifiers
    "noncomputable", "private", "protected", "partial", "unsafe", "local", "scoped",
    # scoping and options
    "namespace", "section", "end", "open", "export", "variable", "universe", "include", "omit",
    "set_option", "attribute", "import", "seal", "unseal",
    # syntax extension and metaprogramming
    "macro", "macro_rules", "syntax", "elab", "elab_rules", "notation", "notation3", "infix", "infixl",
    "infixr", "prefix", "postfix", "declare_syntax_cat", "initialize", "builtin_initialize",
    "run_cmd", "run_elab", "run_meta", "simproc", "dsimproc", "simproc_decl", "dsimproc_decl",
    "builtin_simproc", "builtin_dsimproc", "register_simp_attr", "register_option",
    "register_builtin_option", "register_label_attr", "declare_config_elab", "declare_simp_like_tactic",
    "initialize_simps_projections", "gen_injective_theorems", "grind_pattern", "add_decl_doc",
    "library_note", "assert_not_exists", "suppress_compilation", "compile_inductive", "unif_hint",
})

#: tokens that run arbitrary code inside a proof, close goals without proof
#: (``stop`` is ``repeat sorry``) or trust the compiler (``bv_decide`` and
#: ``bv_check`` check their certificate with ``Lean.ofReduceBool``)
PROOF_KEYWORDS: frozenset[str] = frozenset({
    "sorry", "admit", "stop", "run_tac", "by_elab", "native_decide", "native", "implemented_by", "extern",
    "bv_decide", "bv_decide?", "bv_check",
})

#: names banned as any name component, also ``«quoted»``: unsound axioms, the
#: compiler's unsafe axioms and casts, and the metaprogramming entry points
#: that add declarations, replace the environment, skip the kernel or make sorry
BANNED_NAMES: frozenset[str] = frozenset({
    "sorryAx", "ofReduceBool", "ofReduceNat", "trustCompiler", "reduceBool", "reduceNat",
    "lcProof", "lcCast", "lcUnreachable", "unsafeCast", "unsafeBaseIO", "unsafeIO", "unsafeEIO",
    "addDecl", "addDeclCore", "addDeclWithoutChecking", "addAndCompile", "setEnv", "modifyEnv",
    "skipKernelTC", "byAsSorry", "proofAsSorry", "terminalTacticsAsSorry", "mkSorry", "admitGoal",
})

#: the leading keywords a trusted statement may use (``example`` is renamed)
STATEMENT_KEYWORDS = ("theorem", "lemma", "example")
#: the name given to an ``example`` so that ``#print axioms`` can find it
EXAMPLE_NAME = "sgs_example_target"

_WORD = re.compile(r"#?[^\W\d][\w'!?]*")
_NAME_PART = r"(?:«[^»\n]*»|[^\W\d][\w'!?]*)"
_DECLARED_NAME = re.compile(rf"\s+({_NAME_PART}(?:\.{_NAME_PART})*)")
_CHAR_LITERAL = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'")
_RAW_STRING = re.compile(r'r(#*)"')
_AXIOM_LINE = re.compile(
    r"'[^']*' (?:depends on axioms: \[(?P<axioms>[^\]]*)\]|(?P<none>does not depend on any axioms))")
#: characters allowed although Unicode calls them control characters
_ALLOWED_CONTROL = frozenset("\n\t\r")


@dataclass(frozen=True)
class Rejection:
    """Why a text or an answer is not accepted.  ``reason`` is the short
    machine-readable classification that ends up in ``Verdict.reason``."""

    #: e.g. ``banned:sorry``, ``leaves_block``, ``prover_error``, ``axioms``
    reason: str
    #: human-readable details (Lean messages, the offending token)
    messages: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckPolicy:
    """The knobs of the checks (built from ``LeanConfig``)."""

    #: axioms a valid proof may depend on
    allowed_axioms: frozenset[str] = DEFAULT_ALLOWED_AXIOMS
    #: tokens banned in addition to the built-in lists (same matching rules
    #: as the keywords: whole tokens not following a ``.``)
    extra_banned: frozenset[str] = frozenset()
    #: longest accepted proof body or tactic, in characters
    max_body_chars: int = 100_000
    #: longest accepted statement, in characters
    max_statement_chars: int = 20_000

    def fingerprint(self) -> str:
        """A stable text that changes whenever the policy does (for cache keys)."""
        return "|".join([",".join(sorted(self.allowed_axioms)), ",".join(sorted(self.extra_banned)),
                         str(self.max_body_chars), str(self.max_statement_chars)])


@dataclass(frozen=True)
class PreparedProof:
    """A body that passed the pre-filter, spliced under its statement."""

    #: the command sent to the REPL: statement, newline, normalised body
    command: str
    #: the theorem's name as written (``#print axioms`` is asked about it)
    name: str
    #: the normalised body alone
    body: str


# -- lexical analysis ---------------------------------------------------------

@dataclass(frozen=True)
class Masked:
    """Source text with comments and literals blanked (same length, same line
    breaks) and the first lexical problem found, if any."""

    #: the text with comments and literals replaced by spaces
    code: str
    #: ``unterminated_comment``, ``interpolated_string``, ... or ``None``
    problem: Optional[str] = None
    #: the names written between ``«`` and ``»`` in code, in order
    quoted: tuple[str, ...] = ()


def mask_comments_and_literals(text: str, literals: bool = True) -> Masked:
    """Blank out comments, string and character literals, keeping newlines so
    lines and columns are unchanged.  ``«quoted»`` identifiers become runs of
    ``_`` (still one identifier token).  Reports unterminated comments,
    strings and quoted identifiers, and interpolated strings, as problems.
    With ``literals=False`` only comments are blanked: literals and quoted
    identifiers are read past (a ``--`` inside a string is no comment) and
    kept as they are."""
    out = list(text)
    problem: Optional[str] = None
    quoted: list[str] = []
    n = len(text)

    def blank(start: int, end: int, fill: str = " ", comment: bool = False) -> None:
        if not comment and not literals:
            return
        for k in range(start, min(end, n)):
            if out[k] != "\n":
                out[k] = fill

    def follows_identifier(k: int) -> bool:
        return k > 0 and (text[k - 1].isalnum() or text[k - 1] in "_'!?")

    i = 0
    while i < n:
        c = text[i]
        if text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j, comment=True)
            i = j
        elif text.startswith("/-", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/-", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("-/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            if depth:
                problem = problem or "unterminated_comment"
            blank(i, j, comment=True)
            i = j
        elif c == "«":
            j = text.find("»", i)
            if j < 0 or "\n" in text[i:j]:
                problem = problem or "unterminated_identifier"
                j = n if j < 0 else j
            quoted.append(text[i + 1:j])
            blank(i, j + 1, "_")
            i = j + 1
        elif c == "r" and not follows_identifier(i) and (m := _RAW_STRING.match(text, i)):
            closing = '"' + m.group(1)
            j = text.find(closing, m.end())
            if j < 0:
                problem = problem or "unterminated_string"
                j = n
            blank(i, j + len(closing))
            i = j + len(closing)
        elif c == '"':
            if i > 0 and text[i - 1] == "!":
                problem = problem or "interpolated_string"
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                problem = problem or "unterminated_string"
            blank(i, j + 1)
            i = j + 1
        elif c == "'" and not follows_identifier(i) and (m := _CHAR_LITERAL.match(text, i)):
            blank(i, m.end())
            i = m.end()
        else:
            i += 1
    return Masked("".join(out), problem, tuple(quoted))


def _tokens(code: str) -> list[tuple[str, bool]]:
    """``(word, follows_dot)`` for every identifier-like word of masked code."""
    return [(m.group(), m.start() > 0 and code[m.start() - 1] == ".") for m in _WORD.finditer(code)]


def find_banned(code: str, policy: CheckPolicy = CheckPolicy(), quoted: tuple[str, ...] = ()) -> Optional[str]:
    """The first banned token in masked ``code``, or ``None``.  ``quoted`` are
    the ``«quoted»`` names the masking blanked (``Masked.quoted``): one that
    spells a banned name or proof keyword is banned as well."""
    keywords = COMMAND_KEYWORDS | PROOF_KEYWORDS | policy.extra_banned
    for word, follows_dot in _tokens(code):
        if word.startswith("#"):
            # ``#eval``, ``#exit``, ``#print``...; a single letter after ``#``
            # is Mathlib's card notation (``#s``), not a command
            if len(word) > 2 and word[1].islower():
                return word
            continue
        if not follows_dot and word in keywords:
            return word
        if word in BANNED_NAMES:
            return word
    for name in quoted:
        if name in BANNED_NAMES or name in PROOF_KEYWORDS or name in policy.extra_banned:
            return name
    if re.search(r"(?<![\w.])eval%", code):
        return "eval%"
    if "@[" in code:
        # attributes: `@[init]`, `@[csimp]`, `@[export ..]` on a `let rec` or `where` declaration
        return "@["
    return None


def _banned_message(token: str, where: str) -> str:
    if token == "@[":
        return f"attributes (`@[...]`) are not allowed in {where}"
    return f"`{token}` is not allowed in {where}"


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
    code_lines = mask_comments_and_literals("\n".join(lines)).code.split("\n")
    first_code = next((line for line in code_lines if line.strip()), "")
    if first_code and not first_code[0].isspace():
        lines = ["  " + line if line else line for line in lines]
    return "\n".join(lines)


def check_body(body: object, policy: CheckPolicy = CheckPolicy()) -> Union[str, Rejection]:
    """Pre-filter an untrusted tactic body; the normalised body, or why not."""
    rejection = check_text(body, policy.max_body_chars)
    if rejection is not None:
        return rejection
    assert isinstance(body, str)
    normalized = normalize_body(body)
    masked = mask_comments_and_literals(normalized)
    if not masked.code.strip():
        return Rejection("empty", ("the proof body has no tactic",))
    if masked.problem is not None:
        return Rejection(f"syntax:{masked.problem}", (f"rejected before Lean: {masked.problem}",))
    for number, line in enumerate(masked.code.split("\n"), start=1):
        if line.strip() and not line[0].isspace():
            return Rejection("leaves_block", (f"line {number} of the proof starts at column 0 and "
                                              "would end the tactic block",))
    banned = find_banned(masked.code, policy, masked.quoted)
    if banned is not None:
        return Rejection(f"banned:{banned}", (_banned_message(banned, "a proof"),))
    return normalized


def check_tactic(tactic: object, policy: CheckPolicy = CheckPolicy()) -> Optional[Rejection]:
    """Pre-filter one untrusted tactic for tactic mode (a ProofStep is parsed
    as a tactic, so only the text hygiene and the banned tokens apply)."""
    rejection = check_text(tactic, policy.max_body_chars)
    if rejection is not None:
        return rejection
    assert isinstance(tactic, str)
    masked = mask_comments_and_literals(tactic)
    if not masked.code.strip():
        return Rejection("empty", ("the tactic is empty",))
    if masked.problem is not None:
        return Rejection(f"syntax:{masked.problem}", (f"rejected before Lean: {masked.problem}",))
    banned = find_banned(masked.code, policy, masked.quoted)
    if banned is not None:
        return Rejection(f"banned:{banned}", (_banned_message(banned, "a proof"),))
    return None


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
    masked = mask_comments_and_literals(statement)
    if masked.problem is not None:
        return Rejection(f"syntax:{masked.problem}", (f"rejected before Lean: {masked.problem}",))
    code = masked.code.strip()
    first = _WORD.match(code)
    if first is None or first.group() not in ("theorem", "lemma"):
        return Rejection("bad_statement", ("a conjecture must start with `theorem` or `lemma`",))
    banned = find_banned(code[first.end():], policy, masked.quoted)
    if banned is not None:
        return Rejection(f"banned:{banned}", (_banned_message(banned, "a statement"),))
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
    "BANNED_NAMES", "CHECKS_VERSION", "COMMAND_KEYWORDS", "DEFAULT_ALLOWED_AXIOMS", "EXAMPLE_NAME", "PROOF_KEYWORDS",
    "CheckPolicy", "Masked", "PreparedProof", "Rejection", "check_body", "check_conjecture", "check_tactic",
    "check_text", "check_trusted_statement", "find_banned", "judge_axioms", "judge_command", "mask_comments_and_literals",
    "named_statement", "normalize_body", "parse_axioms", "prepare_proof", "rendered", "theorem_name",
]
