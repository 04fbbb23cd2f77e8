"""The banned words of a Lean proof text, and the two independent passes that
look for them (:mod:`lean_env.lean.checks` explains why two, and what each
guarantees): the token stream of :mod:`lean_env.lean.lexer`, then the raw
text read twice (by the lexer's regions and by the simple scanner below), so
that a disagreement between readings refuses rather than passes."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Optional, Sequence

from lean_env.lean import lexer
from lean_env.lean.lexer import Lexed, Token, is_id_first, is_id_rest, tokenize
from lean_env.lean.policy import CheckPolicy, Rejection

# Where the lists come from (read in November 2026).  Lean core: every
# ``@[builtin_command_parser]`` of src/Lean/Parser/Command.lean at the current
# master (which has the module system's ``public``/``meta``/``nonrec`` and
# ``with_weak_namespace``), cross-checked against the identifier-like entries of
# the Init/Std/Lean token table of a recent toolchain (a list a third-party
# project derived mechanically with ``Lean.Parser.getTokenTable``: it adds
# ``set_library_suggestions``, ``test_extern``, ``reprove``, ``binder_predicate``,
# the ``declare_*``/``register_*`` commands, ``include_str``, ``idbg``...); names
# that earlier releases used and later ones renamed stay listed
# (``set_premise_selector``).  Mathlib and its dependencies (Batteries, Aesop,
# ProofWidgets, LeanSearchClient): the commands of Mathlib/Tactic/*.lean and
# Mathlib/Util/*.lean (``irreducible_def``, ``alias``, ``notation3``, ``lemma``,
# ``initialize_simps_projections``, ``assert_not_exists``, ``library_note``,
# ``suppress_compilation``, ``compile_inductive``, ``unset_option``, ``whatsnew``,
# ``count_heartbeats``, ``proof_wanted``, ``register_hint``, ``sudo``,
# ``extend_docs``, ``mk_iff_of_inductive_prop``, ``recall``, ``variable?``...),
# Aesop's rule-set commands and ProofWidgets' ``show_panel_widgets``.  Every
# ``#command`` of any of them is covered by the ``#`` rule; every
# ``register_*``, ``declare_*`` and ``builtin_*`` name by :data:`BANNED_PREFIXES`.

#: tokens that start a new command or modify one: banned as whole tokens
#: (and as the first component of a name).  Any ``#command`` is banned separately.
COMMAND_KEYWORDS: frozenset[str] = frozenset({
    # declarations
    "theorem", "lemma", "def", "example", "abbrev", "instance", "axiom", "structure", "class",
    "inductive", "coinductive", "mutual", "opaque", "alias", "irreducible_def", "deriving",
    "proof_wanted", "theorem_wanted", "def_wanted", "instance_wanted",
    # declaration modifiers (``public``/``meta``/``nonrec``: the module system, Lean v4.2x)
    "noncomputable", "private", "protected", "public", "meta", "partial", "nonrec", "unsafe", "local", "scoped",
    # scoping and options
    "namespace", "section", "end", "open", "export", "variable", "variable?", "variables", "universe", "include",
    "omit",
    "set_option", "unset_option", "sudo", "attribute", "import", "seal", "unseal", "with_weak_namespace",
    "end_local_scope", "in_module", "unlock_limits",
    # syntax extension and metaprogramming
    "macro", "macro_rules", "syntax", "elab", "elab_rules", "notation", "notation3", "infix", "infixl",
    "infixr", "prefix", "postfix", "binder_predicate", "declare_syntax_cat", "initialize", "builtin_initialize",
    "run_cmd", "run_elab", "run_meta", "simproc", "dsimproc", "simproc_decl", "dsimproc_decl",
    "cbv_simproc", "cbv_simproc_decl", "cbv_eval", "grind_propagator", "grind_pattern", "grind_annotated",
    "init_grind_norm", "init_quot", "register_simp_attr", "register_option", "register_builtin_option",
    "register_label_attr", "declare_config_elab", "declare_simp_like_tactic", "initialize_simps_projections",
    "gen_injective_theorems", "add_decl_doc", "library_note", "assert_not_exists", "assert_not_imported",
    "suppress_compilation", "unsuppress_compilation", "compile_inductive", "compile_def", "unif_hint",
    "set_library_suggestions", "set_premise_selector", "test_extern", "reprove", "docs_to_verso",
    "recommended_spelling", "tactic_extension", "deprecated_module", "deprecated_syntax", "norm_cast_add_elim",
    "mk_iff_of_inductive_prop", "extend_docs", "whatsnew", "count_heartbeats", "guard_min_heartbeats",
    "insert_to_additive_translation", "insert_to_dual_translation", "add_aesop_rules", "erase_aesop_rules", "recall",
    "declare_aesop_rule_sets", "show_panel_widgets", "widget_module", "elab_stx_quot", "leading_parser",
    "trailing_parser", "deprecate",
})

#: tokens that run arbitrary code inside a proof (``run_tac``, ``by_elab``,
#: ``idbg``), read files (``include_str``), reach the network (``polyrith``
#: asks an online Sage server), close goals without proof
#: (``stop`` is ``repeat sorry``) or trust the compiler (``bv_decide`` and
#: ``bv_check`` check their certificate with ``Lean.ofReduceBool``)
PROOF_KEYWORDS: frozenset[str] = frozenset({
    "sorry", "admit", "stop", "run_tac", "by_elab", "native_decide", "native", "implemented_by", "extern",
    "bv_decide", "bv_decide?", "bv_check", "include_str", "idbg", "polyrith",
})

#: names banned as any name component, also ``«quoted»``: unsound axioms, the
#: compiler's unsafe axioms and casts, and the metaprogramming entry points
#: that add declarations, replace the environment, skip the kernel, make sorry
#: or evaluate code
BANNED_NAMES: frozenset[str] = frozenset({
    "sorryAx", "ofReduceBool", "ofReduceNat", "trustCompiler", "reduceBool", "reduceNat",
    "lcProof", "lcCast", "lcUnreachable", "unsafeCast", "unsafeBaseIO", "unsafeIO", "unsafeEIO",
    "addDecl", "addDeclCore", "addDeclWithoutChecking", "addAndCompile", "setEnv", "modifyEnv",
    "skipKernelTC", "byAsSorry", "proofAsSorry", "terminalTacticsAsSorry", "mkSorry", "admitGoal",
    "evalConst", "evalConstCheck", "evalExpr", "evalTerm", "enableInitializersExecution",
})

#: name prefixes of commands that register or declare things (``register_try?_tactic``,
#: ``declare_uint_theorems``, ``builtin_simproc_decl``...): banned as the start of a name
BANNED_PREFIXES: tuple[str, ...] = ("register_", "declare_", "builtin_")

#: banned words that may appear inside string and char literals and ``«quoted»``
#: names: they neither run code nor change anything even where a parse error
#: makes Lean read literal text as commands (``"sorry".length`` is legitimate)
LITERAL_OK: frozenset[str] = frozenset({"sorry", "admit", "stop", "@["})

#: command keywords that may end an identifier (``Set.mem_def``, ``h_local``,
#: ``hx.end``): after a parse error Lean may start a command there, and these
#: commands run nothing and change no syntax, and the tokens after them are
#: the same tokens the checks read anyway
SUFFIX_OK: frozenset[str] = frozenset({
    "def", "theorem", "lemma", "example", "abbrev", "instance", "structure", "class", "inductive", "alias",
    "end", "section", "variable", "universe", "local", "scoped", "private", "protected", "public",
    "noncomputable", "meta", "partial", "nonrec", "unsafe", "mutual", "deriving", "include", "omit",
})

#: commands whose declared name Lean's parser recovers from by skipping
#: characters up to a blank or a delimiter (``recover declId skipUntilWsOrDelim``
#: in src/Lean/Parser/Command.lean; Mathlib's ``lemma``, Mathlib/Tactic/Lemma.lean, has none):
#: started after a parse error at the end of a name (``x_def``), they may stop
#: inside a literal, so the token after such a name must not give them the chance
SKIP_RECOVERY: tuple[str, ...] = ("def", "theorem", "opaque", "axiom", "inductive", "coinductive")
#: where ``skipUntilWsOrDelim`` stops
_SKIP_STOP = frozenset(" \t\r\n():{}|")

#: tactics whose ``(add unsafe 50% apply foo)`` clauses use ``unsafe`` as an
#: Aesop rule phase, not as the declaration modifier
AESOP_TACTICS: frozenset[str] = frozenset({"aesop", "aesop?", "aesop_cat", "aesop_cat?"})

_CHAR_LITERAL = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'")
_RAW_STRING = re.compile(r'r(#*)"')


# -- the simple scanner: the second reading of comments and literals ---------------

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
    #: ``(start, end, "comment" | "literal" | "escape")`` for every comment,
    #: literal and ``«quoted»`` name, in order
    regions: tuple[tuple[int, int, str], ...] = ()


def mask_comments_and_literals(text: str, literals: bool = True) -> Masked:
    """Blank out comments, string and character literals, keeping newlines so
    lines and columns are unchanged.  ``«quoted»`` identifiers become runs of
    ``_`` (still one identifier token).  Reports unterminated comments,
    strings and quoted identifiers, and interpolated strings, as problems.
    With ``literals=False`` only comments are blanked: literals and quoted
    identifiers are read past (a ``--`` inside a string is no comment) and
    kept as they are.

    This is a deliberately simple scanner, written independently of
    :mod:`lean_env.lean.lexer`: the banned-word pass of the checks reads its
    ``regions`` as a second opinion, so that a mistake of either reader
    refuses a text instead of passing it.  Sources of Mathlib files are
    masked with it too (``sgs.state.leandojo``)."""
    out = list(text)
    problem: Optional[str] = None
    quoted: list[str] = []
    regions: list[tuple[int, int, str]] = []
    n = len(text)

    def blank(start: int, end: int, fill: str = " ", comment: bool = False) -> None:
        regions.append((start, min(end, n), "comment" if comment else "escape" if fill == "_" else "literal"))
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
    return Masked("".join(out), problem, tuple(quoted), tuple(regions))


# -- banned tokens, first pass: the token stream ---------------------------------------

def _is_card_name(word: str) -> bool:
    """``s``, ``s₁``, ``t'``, ``A2``: the one-letter names Mathlib's card
    notation ``#s`` is written with.  No ``#command`` is one letter long."""
    return bool(word) and is_id_first(word[0]) and all(
        lexer.is_ascii_digit(c) or lexer.is_subscript_alnum(c) or c == "'" for c in word[1:])


def _glued(first: Token, second: Token) -> bool:
    return first.end == second.offset


#: how many tokens back an Aesop clause is looked for (a real call is short)
_AESOP_TOKENS = 300


def _aesop_unsafe(code: Sequence[Token], k: int) -> bool:
    """Whether ``code[k]`` (an ``unsafe``) is the phase of an Aesop rule:
    ``aesop (add unsafe 50% apply foo)``, ``aesop? (add safe bar, unsafe baz)``,
    after any number of other ``(...)`` clauses."""
    if k == 0 or not (code[k - 1].text == "," or (code[k - 1].kind == lexer.IDENT and code[k - 1].text == "add")):
        return False
    depth, j, low = 0, k - 1, max(0, k - _AESOP_TOKENS)
    while j >= low:  # the `(` that encloses the rule
        if code[j].text == ")":
            depth += 1
        elif code[j].text == "(":
            if depth == 0:
                break
            depth -= 1
        j -= 1
    if j < low or code[j + 1].text != "add":
        return False
    j -= 1
    while j >= low and code[j].text == ")":  # earlier clauses: (config := ...) (add ...)
        depth, j = 1, j - 1
        while j >= low and depth:
            depth += {")": 1, "(": -1}.get(code[j].text, 0)
            j -= 1
    return j >= low and code[j].kind == lexer.IDENT and code[j].text in AESOP_TACTICS


def _skip_recovery_unsafe(text: str, code: Sequence[Token], k: int) -> bool:
    """Whether ``code[k]``, a name ending in one of :data:`SKIP_RECOVERY`
    (``Set.mem_def``), could make Lean read literal or comment text as code.
    After a parse error Lean may start the command ``def`` there; its name is
    then the next token, and if that is no name, Lean skips characters up to a
    blank or a delimiter.  The skipped run must not enter a literal or a
    comment (``Set.mem_def]"a b"`` would stop inside the string)."""
    if k + 1 >= len(code):
        return False
    after = code[k + 1]
    if after.kind == lexer.IDENT:
        # The name parses, unless a universe list follows (``x.{u}``): it skips the same way.
        return text.startswith(".{", after.end)
    end = after.offset
    while end < len(text) and text[end] not in _SKIP_STOP:
        end += 1
    run = text[after.offset:end]
    return any(c in run for c in "\"'«") or "/-" in run or "--" in run


def _token_banned(code: Sequence[Token], policy: CheckPolicy, text: str = "") -> Optional[str]:
    """The first banned token of the token stream ``code`` (comments left out),
    or ``None``.  Words come first, then ``«quoted»`` keywords, ``eval%``,
    attributes and ``register_*``-style names, so that the reason names the
    most telling token (``@[builtin_init]`` is an attribute first)."""
    keywords = COMMAND_KEYWORDS | PROOF_KEYWORDS | policy.extra_banned
    for k, token in enumerate(code):
        if token.kind in (lexer.IDENT, lexer.NAME_LITERAL):
            first = token.parts[0]
            if not first.escaped:
                if first.text in keywords and not (first.text == "unsafe" and _aesop_unsafe(code, k)):
                    return first.text
            for part in token.parts:
                if part.text in BANNED_NAMES:
                    return part.text
            last = token.parts[-1]
            for word in SKIP_RECOVERY:
                if not last.escaped and token.text.endswith(word) and len(token.text) > len(word) \
                        and _skip_recovery_unsafe(text, code, k):
                    return word
        elif token.kind == lexer.SYMBOL and token.text == "#" and k + 1 < len(code):
            # ``#eval``, ``#exit``, ``#print``...: Lean reads ``#`` and the word as one token.
            name = code[k + 1]
            if name.kind == lexer.IDENT and _glued(token, name) and not name.parts[0].escaped \
                    and not _is_card_name(name.parts[0].text):
                return "#" + name.parts[0].text
    quoted_banned = PROOF_KEYWORDS | policy.extra_banned | BANNED_NAMES
    for token in code:
        for part in token.parts:
            if part.escaped and part.text in quoted_banned:
                return part.text
    for k, token in enumerate(code[:-1]):
        if token.kind == lexer.IDENT and token.text == "eval" and code[k + 1].text == "%" \
                and _glued(token, code[k + 1]):
            return "eval%"
    if any(token.kind == lexer.SYMBOL and token.text == "@[" for token in code):
        # attributes: `@[init]`, `@[csimp]`, `@[export ..]` on a `let rec` or `where` declaration
        return "@["
    for token in code:
        if token.kind in (lexer.IDENT, lexer.NAME_LITERAL) and not token.parts[0].escaped \
                and token.parts[0].text.startswith(BANNED_PREFIXES):
            return token.parts[0].text
    return None


# -- banned tokens, second pass: the raw text --------------------------------------------

_Regions = tuple[list[int], list[tuple[int, int, str]]]


def _lexer_regions(lexed: Lexed) -> _Regions:
    """Comments and literals as the tokenizer read them.  Doc comments count as
    literals (they are tokens, and a docstring can be parsed as Verso markup
    holding code); so do the insides of ``«quoted»`` name parts."""
    found: list[tuple[int, int, str]] = []
    for token in lexed.tokens:
        if token.kind in lexer.COMMENTS:
            found.append((token.offset, token.end, "comment"))
        elif token.kind in lexer.LITERALS or token.kind == lexer.DOC_COMMENT:
            found.append((token.offset, token.end, "literal"))
        for part in token.parts:
            if part.escaped:
                found.append((part.offset - 1, part.offset + len(part.text) + 1, "escape"))
    found.sort()
    return [start for start, _, _ in found], found


def _crude_regions(text: str) -> _Regions:
    found = sorted(mask_comments_and_literals(text).regions)
    return [start for start, _, _ in found], found


def _region_class(regions: _Regions, text: str, a: int, b: int) -> str:
    """``comment``, ``literal`` or ``escape`` when ``[a, b)`` lies inside one
    such region, else ``code`` (also when it straddles a region's edge).  An
    escape whose text is only identifier characters, blanks and dots is
    ``plain_escape``: read as code from any point, it is the same words."""
    starts, found = regions
    k = bisect.bisect_right(starts, a) - 1
    if k >= 0 and found[k][0] <= a and b <= found[k][1]:
        start, end, kind = found[k]
        if kind == "escape" and all(is_id_rest(c) or c in " ." for c in text[start + 1:end - 1]):
            return "plain_escape"
        return kind
    return "code"


class _Runs:
    """For every offset of a text, where the run of ``isIdRest`` characters
    that ends just before it begins (computed once: the checks ask for every
    occurrence of every banned word)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.start = [0] * (len(text) + 1)
        for k in range(1, len(text) + 1):
            self.start[k] = self.start[k - 1] if is_id_rest(text[k - 1]) else k

    def inside_identifier(self, a: int) -> bool:
        """Whether the characters just before ``a`` are the start of an
        identifier part (an ``isIdFirst`` character, then ``isIdRest`` ones):
        then what starts at ``a`` continues that identifier (``h_local``,
        ``xsorry``).  A run that starts with a digit or a quote is a number or
        a char literal that ends there (``2sorry``, ``'a'sorry``), so Lean
        starts a new token at ``a``."""
        k = self.start[a]
        return k < a and is_id_first(self.text[k])

    def after_field_dot(self, a: int) -> bool:
        """``h.sorry``: a ``.`` right after an identifier part."""
        return a > 0 and self.text[a - 1] == "." and self.inside_identifier(a - 1)


#: how far back the crude reading of an Aesop clause looks (a real clause is short)
_AESOP_WINDOW = 2000


def _crude_aesop_unsafe(text: str, a: int) -> bool:
    """:func:`_aesop_unsafe` on characters: ``unsafe`` right after ``(add`` or a
    ``,`` of such a clause, the clause after ``aesop`` / ``aesop?`` and other clauses."""
    low = max(0, a - _AESOP_WINDOW)
    before = text[low:a].rstrip()
    if not (before.endswith(",") or re.search(r"(?<![\w'!?])add$", before)):
        return False
    depth, j = 0, a - 1
    while j >= low:
        if text[j] == ")":
            depth += 1
        elif text[j] == "(":
            if depth == 0:
                break
            depth -= 1
        j -= 1
    if j < low or not re.match(r"\(\s*add\s", text[j:j + 10]):
        return False
    head = text[low:j].rstrip()
    while head.endswith(")"):
        depth, k = 1, len(head) - 2
        while k >= 0 and depth:
            depth += {")": 1, "(": -1}.get(head[k], 0)
            k -= 1
        head = head[:k + 1].rstrip()
    return bool(re.search(r"(?<![\w'!?.])(?:aesop|aesop_cat)\??$", head))


def _occurrence_allowed(word: str, kind: str, where: str, runs: _Runs, a: int, b: int) -> bool:
    """Whether one occurrence of a banned ``word`` of ``kind`` (``command``,
    ``proof``, ``name``, ``prefix``, ``percent``) at ``[a, b)`` is in an
    allowed form, the region being ``where`` (see :func:`_region_class`)."""
    if where == "comment":
        return True
    text = runs.text
    continues = b < len(text) and is_id_rest(text[b])
    inside = runs.inside_identifier(a)
    if kind == "name":  # sorryAx: only as a piece of a longer name part
        return continues or inside
    if kind == "prefix":  # register_...: only inside a longer name
        return inside or runs.after_field_dot(a)
    if kind == "percent":  # eval%
        return where == "code" and (inside or runs.after_field_dot(a))
    if continues:  # `sorry_lemma`, `end_of_list`: another, longer word
        return True
    if where == "plain_escape" and word in SUFFIX_OK and word not in SKIP_RECOVERY:
        # ``«my lemma»``: whatever Lean starts at ``lemma`` reads the same words as the checks
        return True
    if where in ("literal", "escape", "plain_escape"):
        return word in LITERAL_OK
    if word == "unsafe" and _crude_aesop_unsafe(text, a):
        return True
    if inside or runs.after_field_dot(a):
        return kind == "proof" or word in SUFFIX_OK
    return False


def _raw_banned(text: str, regions: Sequence[_Regions], policy: CheckPolicy, skip: int = -1) -> Optional[str]:
    """The first banned word of ``text`` in no allowed form for some reading
    in ``regions``, or ``None``.  ``skip``: an offset where an occurrence is
    not counted (the ``theorem`` that opens a conjecture)."""
    words: list[tuple[str, str]] = (
        [(w, "command") for w in COMMAND_KEYWORDS]
        + [(w, "proof") for w in PROOF_KEYWORDS | policy.extra_banned]
        + [(w, "name") for w in BANNED_NAMES] + [(w, "prefix") for w in BANNED_PREFIXES] + [("eval%", "percent")])
    hits: list[tuple[int, str]] = []
    runs = _Runs(text)
    for word, kind in words:
        a = text.find(word)
        while a >= 0:
            if a != skip and not all(_occurrence_allowed(word, kind, _region_class(r, text, a, a + len(word)), runs, a,
                                                         a + len(word)) for r in regions):
                hits.append((a, word))
                break
            a = text.find(word, a + 1)
    a = text.find("#")
    while a >= 0:
        # ``#`` glued to a name: a command (``#eval``) unless a one-letter card (``#s``); in literals too.
        j = a + 1
        while j < len(text) and is_id_rest(text[j]):
            j += 1
        name = text[a + 1:j]
        if name and is_id_first(name[0]) and not _is_card_name(name) \
                and any(_region_class(r, text, a, j) != "comment" for r in regions):
            hits.append((a, "#" + name))
            break
        a = text.find("#", a + 1)
    a = text.find("@[")
    while a >= 0:
        if any(_region_class(r, text, a, a + 2) not in ("comment", "literal") for r in regions):
            hits.append((a, "@["))
            break
        a = text.find("@[", a + 1)
    return min(hits)[1] if hits else None


def _banned_message(token: str, where: str) -> str:
    if token == "@[":
        return f"attributes (`@[...]`) are not allowed in {where}"
    return f"`{token}` is not allowed in {where}"


def syntax_rejection(lexed: Lexed) -> Rejection:
    assert lexed.problem is not None
    return Rejection(f"syntax:{lexed.problem}",
                     (f"rejected before Lean: {lexed.problem} at character {lexed.problem_offset}",))


def lexical_rejection(text: str, lexed: Lexed, policy: CheckPolicy, where: str,
                       skip: Optional[Token] = None, column_zero: bool = False) -> Optional[Rejection]:
    """Everything the pre-filter checks on the reading of ``text``: what could
    not be read, tokens at column 0 (``column_zero``), banned tokens (both
    passes).  ``skip``: a token not checked (the opening ``theorem`` of a conjecture)."""
    if lexed.fatal:
        return syntax_rejection(lexed)
    code = [t for t in lexed.code if t is not skip]
    if column_zero:
        line_starts = {0} | {k + 1 for k, c in enumerate(text) if c == "\n"}
        for token in code:
            if token.offset in line_starts:
                number = text.count("\n", 0, token.offset) + 1
                return Rejection("leaves_block", (f"line {number} of the proof starts at column 0 and "
                                                  "would end the tactic block",))
    banned = _token_banned(code, policy, text)
    if banned is not None:
        return Rejection(f"banned:{banned}", (_banned_message(banned, where),))
    if lexed.problem is not None:
        return syntax_rejection(lexed)
    banned = _raw_banned(text, (_lexer_regions(lexed), _crude_regions(text)), policy,
                         skip=-1 if skip is None else skip.offset)
    if banned is not None:
        return Rejection(f"banned:{banned}", (_banned_message(banned, where) + " (found in the raw text)",))
    return None


def find_banned(text: str, policy: CheckPolicy = CheckPolicy(), quoted: tuple[str, ...] = ()) -> Optional[str]:
    """The first banned token of ``text`` by both passes, or ``None`` (a text
    that cannot be read for certain gives ``syntax:<what>``).  ``quoted`` is
    accepted for compatibility and ignored: ``«quoted»`` names are read from
    ``text`` itself."""
    rejection = lexical_rejection(text, tokenize(text), policy, "a proof")
    if rejection is None:
        return None
    return rejection.reason.split(":", 1)[1] if rejection.reason.startswith("banned:") else rejection.reason


__all__ = [
    "AESOP_TACTICS", "BANNED_NAMES", "BANNED_PREFIXES", "COMMAND_KEYWORDS", "LITERAL_OK", "PROOF_KEYWORDS",
    "SKIP_RECOVERY", "SUFFIX_OK", "Masked", "find_banned", "lexical_rejection", "mask_comments_and_literals",
    "syntax_rejection",
]
