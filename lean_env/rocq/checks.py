"""Pure checks of Rocq text before any of it reaches ``coqtop``.

Everything here treats its input as hostile model output.  It splits text into
sentences exactly the way Coq 8.16's lexer does for the constructs we accept,
and refuses (with a :class:`RocqTextError` naming a reason) whatever it cannot
split with certainty or whatever is not allowed where it appears.

Splitting rules (Coq's ``CLexer``):

* comments ``(* ... *)`` nest, and string literals inside comments are lexed
  as strings, so ``(* "*)" *)`` is one comment;
* string literals are ``"..."`` with ``""`` standing for one quote;
* a ``.`` ends a sentence only when followed by a blank (space, tab, newline,
  carriage return) or the end of the text, so ``Nat.add_comm`` and ``x.(f)``
  do not end one; ``...`` followed by a blank ends a tactic sentence too
  (``split...`` runs the ``Proof with`` tactic after ``split``); ``..``
  before a blank, ``]`` or ``|`` is the goal selectors' ellipsis (``[ tac
  .. ]``, ``[|rewrite IHu..]``, ``[intros d0..| ]``);
* outside a comment ``*)`` is two tokens, ``*`` and ``)`` (``auto with *)``);
* at the start of a sentence a run of one bullet character (``-``, ``+``,
  ``*``) is a sentence of its own, and so are ``{`` and ``}``; ``2: {`` and
  ``[x]: {`` are sentences too.

Where Coq's behaviour depends on the keyword table (other ``..``, ``.(*``)
we refuse the text instead of guessing.  The coqtop session independently
verifies that Coq saw exactly one sentence per sentence sent, so a splitting
mistake here can only turn into a rejection, never into an accepted proof.

Policy (see :func:`validate_proof`): a proof starts with ``Proof.``,
``Proof using ... .`` or ``Proof with tactic.``, goes on with tactic
sentences, bullets, braces and the commands :mod:`lean_env.rocq.commands`
allows (queries that only print, such as ``Show``, ``Check``, ``Search``,
and ``Unshelve``), and ends with ``Qed.`` or ``Defined.``.  Every other
command is refused with the reason its row in that table gives
(``banned:Unset Guard Checking``, ``banned:Fail``, ...); a capitalised
sentence start that is no command is ``unknown_command``, unless it is a
qualified name (``Z.order.``: a tactic of a module) or a word with an
underscore (``Qc_unfolds``, ``Inversion_clear``: a library's Ltac name).
Command keywords with an underscore exist (CoqHammer's ``Hammer_version``);
each is a row of the table, found before this rule applies, and
``tests/integration/lean_env/test_rocq_commands.py`` checks against the
grammar, with every installed plugin-bearing library loaded, that every
command keyword with an underscore has its row.  Command words
(``Admitted``, ``Axiom``, ...) are refused anywhere in a sentence, so none
can be smuggled inside ``ltac:(...)``; tactics that leave holes or skip
checks (``admit``, ``give_up``, ``*_no_check``) and Ltac profiling are
refused too, anywhere in a sentence.  So are, unless
``RocqConfig.allow_bug_prone_features`` names them, the features through
which proof text reaches Coq 8.16's known soundness bugs
(:mod:`lean_env.rocq.known_bugs`: ``fix``/``cofix``, the VM).

Statements (see :func:`validate_statement`), trusted task statements and
untrusted conjectures alike, are one ``<keyword> name ... : type.`` sentence
with a keyword from :data:`THEOREM_KEYWORDS` and a name that is a Rocq
identifier (Unicode letters included: ``Theorem 証明 : ...``); headers (see
:func:`validate_header`) only load libraries and open or close scopes.

Reasons (the verdict's ``reason``, also metric keys): ``banned:<command>``,
``banned:<word>`` and ``known_bug:<class>`` (finite: :data:`REJECTION_REASONS`),
``unknown_command``, ``not_a_tactic``, ``banned:Proof_variant``,
``proof_start``, ``proof_end``, ``after_qed``, ``empty``, ``too_long``,
``bad_input``, ``bad_character``, ``syntax:<what>``, ``statement_shape``,
``header_rejected``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from lean_env.rocq.commands import REJECTION_REASONS as COMMAND_REASONS
from lean_env.rocq.commands import classify, head_words
from lean_env.rocq.known_bugs import REJECTION_REASONS as KNOWN_BUG_REASONS
from lean_env.rocq.known_bugs import find_bug_prone, refusal_detail

#: theorem-like keywords accepted at the start of a statement
THEOREM_KEYWORDS = ("Theorem", "Lemma", "Example", "Corollary", "Proposition", "Fact", "Remark")

#: tactics that leave a hole or skip a check; never acceptable in a proof
BANNED_TACTICS = frozenset({
    "admit", "give_up",
    "exact_no_check", "vm_cast_no_check", "native_cast_no_check", "change_no_check",
})

#: CoqHammer's tactics that start processes: ``hammer``, ``best``, ``sbest`` and
#: ``hbest`` fork coqtop copies (which can outlive the tactic), ``predict`` runs a
#: shell and a predictor on feature files it writes to ``$TMPDIR``,
#: ``hammer_hook`` runs external provers.  Measured under coqtop with strace;
#: the rest of the family (``sauto``, ``hauto``, ``qauto``, ``sfirstorder``,
#: ``scrush``, ...) are plain Ltac that start nothing, and stay allowed.  Refused
#: anywhere in a sentence (``banned:hammer``), under any header: none of these
#: words occurs in the standard library's proofs
PROCESS_TACTICS = frozenset({"hammer", "hammer_hook", "predict", "best", "sbest", "hbest"})

#: command words that are never part of a tactic, wherever they appear
BANNED_WORDS = frozenset({
    "Admitted", "Abort", "Qed", "Defined", "Save", "Proof", "Goal",
    "Axiom", "Axioms", "Parameter", "Parameters", "Hypothesis", "Hypotheses",
    "Conjecture", "Variable", "Variables", "Context",
    *THEOREM_KEYWORDS,
    "Definition", "Fixpoint", "CoFixpoint", "Inductive", "CoInductive", "Instance",
    "Ltac", "Ltac2", "Reset", "Back", "BackTo", "Undo", "Restart", "Unset",
    "Redirect", "Extraction", "Drop", "Load", "Cd",
})

#: every ``banned:...`` and ``known_bug:...`` reason a proof, tactic step or
#: statement can be refused with
REJECTION_REASONS = COMMAND_REASONS | KNOWN_BUG_REASONS | frozenset(
    f"banned:{word}" for word in {*BANNED_WORDS, *BANNED_TACTICS, "ltac", "ltac2", "ltac_profiling",
                                  "Proof_variant", "hammer"})

#: sentences a header may contain: loading libraries and opening scopes
_HEADER_SENTENCE = re.compile(
    r"(?:From\s+[\w.']+\s+)?Require(?:\s+(?:Import|Export))?(?:\s+[\w.']+)+\s*\.|"
    r"(?:Import|Export)(?:\s+[\w.']+)+\s*\.|"
    r"(?:Local\s+)?(?:Open|Close)\s+Scope\s+[\w']+\s*\.",
)

_BLANKS = " \t\n\r"
#: a Rocq identifier: a letter (any script) or ``_``, then letters, digits,
#: ``_`` and ``'``.  Where Coq reads a name differently, the session's check
#: that the statement opens exactly the proof of that name refuses it.
_IDENT = r"[^\W\d][\w']*"
#: characters after which ``(*`` certainly starts a comment (no keyword of
#: Coq's or of the standard library's notations ends there)
_SAFE_BEFORE_COMMENT = set(_BLANKS) | set("()[]{}\",;_'|") | set(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
#: ``2: {`` / ``[x]: {`` at the start of a sentence (a focusing brace command)
_SELECTOR_BRACE = re.compile(rf"(?:\d+|\[\s*{_IDENT}\s*\])[ \t\n\r]*:[ \t\n\r]*\{{")
#: a goal selector that may prefix a tactic sentence
_SELECTOR = re.compile(
    rf"(?:all|par|!|\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*|\[\s*{_IDENT}\s*\])\s*:\s*")
_STATEMENT_HEAD = re.compile(rf"({'|'.join(THEOREM_KEYWORDS)})\s+({_IDENT})(?=[\s(\[{{`:])")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_']*")
#: a qualified name at the start of a sentence (``Z.order``, ``Nat.le_elim H``):
#: never a command, since commands are keywords without dots
_QUALIFIED_HEAD = re.compile(r"([^\W\d][\w']*)\.(?=[^\W\d])")
#: Ltac's profiler, whose output and state outlive the proof
_LTAC_PROFILING = re.compile(r"(?<![A-Za-z0-9_'])ltac\s+profil")
#: characters refused everywhere: controls (except tab, newline, CR), format
#: characters (bidi overrides, zero-width joiners), surrogates, private-use and
#: unassigned code points, and every space other than U+0020
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})


class RocqTextError(ValueError):
    """Untrusted text was refused.  ``reason`` is the verdict reason."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        #: short machine-readable classification (``banned:Admitted``, ``syntax:...``)
        self.reason = reason
        #: human-readable explanation, quoted back to the model as feedback
        self.detail = detail


@dataclass(frozen=True)
class Sentence:
    """One Coq sentence as Coq's parser sees it."""

    #: exact source text, from its first token to its terminator
    text: str
    #: offset of ``text`` in the source
    start: int
    #: ``command`` ends with a ``.``; ``bullet``/``brace`` stand alone
    kind: Literal["command", "bullet", "brace"]
    #: ``text`` with comments blanked out and string contents removed, for
    #: looking at words without being fooled by comments or strings
    code: str

    def words(self) -> list[str]:
        """ASCII identifier-like words outside comments and strings.  A word
        next to a non-ASCII letter counts on its own (``admitα`` yields
        ``admit``), so a banned word is found even where Coq would read a
        longer identifier: refusing too much, never too little."""
        return _WORD.findall(self.code)


@dataclass(frozen=True)
class Statement:
    """A validated theorem statement."""

    #: the statement as one sentence
    sentence: Sentence
    #: ``Theorem``, ``Lemma``, ...
    keyword: str
    #: the name being declared
    name: str


def check_characters(text: object, *, max_chars: int, what: str) -> str:
    """Refuse non-strings, over-long text, lone surrogates and control,
    format or exotic space characters; return the text unchanged."""
    if not isinstance(text, str):
        raise RocqTextError("bad_input", f"{what} must be a string, not {type(text).__name__}")
    if len(text) > max_chars:
        raise RocqTextError("too_long", f"{what} has {len(text)} characters (at most {max_chars})")
    for i, ch in enumerate(text):
        if ch in "\t\n\r" or (" " <= ch <= "~"):
            continue
        if unicodedata.category(ch) in _BAD_CATEGORIES:
            raise RocqTextError("bad_character", f"{what} contains U+{ord(ch):04X} at offset {i}")
    return text


def split_sentences(text: str, *, trusted: bool = False) -> list[Sentence]:
    """Split Rocq source into sentences; raise :class:`RocqTextError` on an
    unterminated comment, string or sentence, or on a construct whose
    splitting depends on Coq's keyword table.  ``trusted`` (library sources,
    never model output) reads those constructs as Coq usually does instead of
    refusing them: any ``..`` is the ellipsis, ``(*`` opens a comment
    anywhere, ``{|`` opens a record."""
    sentences: list[Sentence] = []
    n = len(text)
    i = 0
    at_start = True        # Coq's ``between_commands``: bullets and braces allowed
    start: int | None = None   # offset of the current sentence's first token
    code: list[str] = []

    def emit(end: int, kind: Literal["command", "bullet", "brace"], first: int) -> None:
        sentences.append(Sentence(text=text[first:end], start=first, kind=kind, code="".join(code).strip()))
        code.clear()

    while i < n:
        ch = text[i]
        if text.startswith("(*", i):
            if start is not None and text[i - 1] not in _SAFE_BEFORE_COMMENT and not trusted:
                raise RocqTextError("syntax:comment", f"a comment right after {text[i - 1]!r} at offset {i} "
                                    "is ambiguous")
            i = skip_comment(text, i)
            if start is not None:
                code.append(" ")
            continue
        if ch in _BLANKS:
            if start is not None:
                code.append(ch)
            i += 1
            continue
        # outside a comment Coq reads '*)' as the tokens '*' and ')' (``auto with *)``)
        if start is None and at_start and ch in "-+*":
            j = i
            while j < n and text[j] == ch:
                j += 1
            code.append(text[i:j])
            emit(j, "bullet", i)
            i = j
            continue
        if start is None and ch in "{}" and not (trusted and text.startswith("{|", i)):
            # outside the between-commands state Coq reads the longest keyword here
            if not at_start and not trusted:
                _check_brace_alone(text, i + 1)
            code.append(ch)
            emit(i + 1, "brace", i)
            i += 1
            continue
        if start is None and at_start:
            m = _SELECTOR_BRACE.match(text, i)
            if m:
                if not trusted:
                    _check_brace_alone(text, m.end())
                code.append(m.group(0))
                emit(m.end(), "brace", i)
                i = m.end()
                at_start = False   # the selector's number ends Coq's between-commands state
                continue
        if start is None:
            start = i
        if ch == '"':
            j = skip_string(text, i)
            code.append('""')
            i = j
            at_start = False
            continue
        if ch == ".":
            nxt = text[i + 1] if i + 1 < n else ""
            if text.startswith("...", i) and (i + 3 == n or text[i + 3] in _BLANKS):
                code.append("...")
                i += 3
                emit(i, "command", start)
                start = None
                at_start = True
                continue
            if nxt == ".":
                after = text[i + 2] if i + 2 < n else ""
                if not (trusted or after in _BLANKS or after in "]|"):
                    raise RocqTextError("syntax:ellipsis", f"'..' at offset {i} is not accepted")
                # the goal selectors' ellipsis, ``[ tac .. ]``: one token, no sentence end
                code.append("..")
                i += 2
                at_start = False
                continue
            code.append(".")
            i += 1
            if nxt == "" or nxt in _BLANKS:
                emit(i, "command", start)
                start = None
                at_start = True
            else:
                at_start = False
            continue
        code.append(ch)
        at_start = False
        i += 1
    if start is not None:
        raise RocqTextError("syntax:unterminated", "the text ends inside a sentence (missing '.')")
    return sentences


def _check_brace_alone(text: str, j: int) -> None:
    """A brace Coq lexes with its keyword table is certainly a brace alone
    when followed by a blank, the end of the text or an identifier character;
    another symbol might make a longer keyword (``{|``)."""
    if j < len(text) and text[j] not in _BLANKS and not (text[j].isascii() and (text[j].isalnum() or text[j] == "_")):
        raise RocqTextError("syntax:brace", f"ambiguous {text[j - 1:j + 1]!r} at offset {j - 1}")


def skip_comment(text: str, i: int) -> int:
    """Return the offset just after the comment opening at ``i``."""
    depth = 0
    n = len(text)
    while i < n:
        if text.startswith("(*", i):
            depth += 1
            i += 2
        elif text.startswith("*)", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        elif text[i] == '"':
            i = skip_string(text, i)
        else:
            i += 1
    raise RocqTextError("syntax:unterminated", "unterminated comment")


def skip_string(text: str, i: int) -> int:
    """Return the offset just after the string literal opening at ``i``."""
    j = i + 1
    n = len(text)
    while j < n:
        if text[j] == '"':
            if j + 1 < n and text[j + 1] == '"':
                j += 2
                continue
            return j + 1
        j += 1
    raise RocqTextError("syntax:unterminated", "unterminated string literal")


def _is(sentence: Sentence, pattern: str) -> bool:
    return re.fullmatch(pattern, sentence.code) is not None


def _check_banned_words(sentence: Sentence, allowed: frozenset[str]) -> None:
    """Refuse banned words, Ltac profiling and the features of known prover
    bugs (:mod:`lean_env.rocq.known_bugs`) not in ``allowed``, anywhere in
    the sentence's code."""
    words = sentence.words()
    banned = sorted((BANNED_WORDS | BANNED_TACTICS).intersection(words))
    if banned:
        raise RocqTextError(f"banned:{banned[0]}", f"{banned[0]!r} is not allowed in {sentence.text[:80]!r}")
    processes = sorted(PROCESS_TACTICS.intersection(words))
    if processes:
        raise RocqTextError("banned:hammer", f"{processes[0]!r} starts external provers and processes "
                            "(CoqHammer's hammer, predict, hammer_hook, best, sbest and hbest are refused; "
                            "sauto, hauto, qauto and the rest of the family are allowed)")
    if _LTAC_PROFILING.search(sentence.code):
        raise RocqTextError("banned:ltac_profiling", "Ltac profiling is not allowed")
    _check_known_bugs(sentence, allowed)


def _check_known_bugs(sentence: Sentence, allowed: frozenset[str]) -> None:
    bug_class = find_bug_prone(sentence.code, sentence.words(), allowed)
    if bug_class is not None:
        raise RocqTextError(bug_class.reason, refusal_detail(bug_class, sentence.text))


def _words_after(code: str, words: tuple[str, ...]) -> str:
    """``code`` without the command keywords ``words`` it starts with."""
    m = re.match(r"\s*".join(re.escape(w) for w in words), code)
    assert m is not None, (code, words)
    return code[m.end():]


def check_tactic_sentence(sentence: Sentence, allowed: frozenset[str] = frozenset()) -> None:
    """Accept a bullet, a brace, a sentence that runs tactics or a command
    the table (:mod:`lean_env.rocq.commands`) allows; refuse everything else
    with a ``banned:<command>``, ``banned:<word>``, ``known_bug:<class>``,
    ``unknown_command`` or ``not_a_tactic`` reason.  ``allowed`` names the
    known-bug classes to let through."""
    if sentence.kind != "command":
        return
    code = sentence.code
    selector = _SELECTOR.match(code)
    body = code[selector.end():] if selector else code
    qualified = _QUALIFIED_HEAD.match(body)
    if qualified and classify((qualified.group(1),)) is None and qualified.group(1) not in BANNED_WORDS:
        _check_banned_words(sentence, allowed)   # a tactic of a module: ``Z.order.``
        return
    command = classify(head_words(body))
    if command is not None:
        if not command.allowed:
            raise RocqTextError(command.reason, f"{command.name!r} is not allowed in a proof ({command.why})")
        if selector:
            raise RocqTextError("not_a_tactic", f"a goal selector cannot apply to the command {command.name!r}")
        rest = _words_after(body, command.words)
        _check_banned_words(Sentence(text=sentence.text, start=sentence.start, kind="command", code=rest), allowed)
        _check_known_bugs(sentence, allowed)   # the command itself may reach one (``Compute``)
        return
    _check_banned_words(sentence, allowed)
    if body[:1].isupper():
        # a command keyword with an underscore is a row, classified above: ``Qc_unfolds`` is a library's Ltac
        if "_" in head_words(body)[0]:
            return
        raise RocqTextError("unknown_command", f"{sentence.text[:80]!r} starts with a word that is neither a "
                            "tactic nor a command allowed in a proof")
    if not body or not (body[0].islower() and body[0].isascii() or body[0] in "(["):
        raise RocqTextError("not_a_tactic", f"{sentence.text[:80]!r} does not start with a tactic")


def validate_proof(proof: object, *, max_chars: int = 50_000, max_sentences: int = 2_000,
                   allowed: frozenset[str] = frozenset()) -> list[Sentence]:
    """Check an untrusted proof body and return its sentences.

    The body must be ``Proof.`` (or ``Proof using ... .`` / ``Proof with
    tactic.``), then tactic sentences and allowed commands, then ``Qed.`` or
    ``Defined.`` with nothing but blanks and comments after it.  ``allowed``
    names the known-bug classes (:mod:`lean_env.rocq.known_bugs`) to let
    through.
    """
    text = check_characters(proof, max_chars=max_chars, what="proof")
    sentences = split_sentences(text)
    if not sentences:
        raise RocqTextError("empty", "the proof is empty")
    if len(sentences) > max_sentences:
        raise RocqTextError("too_long", f"{len(sentences)} sentences (at most {max_sentences})")
    _check_proof_head(sentences[0], allowed)
    if len(sentences) == 1:
        raise RocqTextError("proof_end", "the proof must end with 'Qed.' or 'Defined.'")
    *middle, last = sentences[1:]
    for i, sentence in enumerate(middle):
        if _is(sentence, _CLOSING):
            trailing = sentences[i + 2].text[:80]
            raise RocqTextError("after_qed", f"text after the proof is closed: {trailing!r}")
        check_tactic_sentence(sentence, allowed)
    if not _is(last, _CLOSING):
        check_tactic_sentence(last, allowed)  # names the command when the proof ends with Admitted/Abort/...
        raise RocqTextError("proof_end", f"the proof must end with 'Qed.' or 'Defined.', not {last.text[:80]!r}")
    return sentences


#: the sentences that may end a proof (``Defined`` only makes the proof
#: transparent; the kernel checks it exactly as with ``Qed``)
_CLOSING = r"(?:Qed|Defined)\s*\."


def _check_proof_head(head: Sentence, allowed: frozenset[str]) -> None:
    """``Proof.``, ``Proof using <names>.``, ``Proof with <tactic>.`` or
    both; the rest of the sentence may hold no banned word."""
    if head.kind == "command" and _is(head, r"Proof\s*\."):
        return
    variant = re.fullmatch(r"Proof\s+(?:using|with)\b(.*)", head.code, re.S)
    if head.kind == "command" and variant:
        _check_banned_words(Sentence(text=head.text, start=head.start, kind="command", code=variant.group(1)),
                            allowed)
        return
    command = classify(head_words(head.code))
    if command is not None and command.words != ("Proof",):
        raise RocqTextError(command.reason if not command.allowed else "proof_start",
                            f"the proof must start with 'Proof.', not {head.text[:80]!r}")
    if head.code.startswith("Proof"):
        raise RocqTextError("banned:Proof_variant", f"'Proof <term>.' and other forms are not accepted: "
                            f"{head.text[:80]!r}")
    raise RocqTextError("proof_start", f"the proof must start with 'Proof.', not {head.text[:80]!r}")


def validate_statement(statement: object, *, max_chars: int = 10_000,
                       allowed: frozenset[str] = frozenset()) -> Statement:
    """Check a theorem statement: exactly one ``Theorem name ... : type.``
    sentence (or another keyword of :data:`THEOREM_KEYWORDS`), declaring
    exactly one theorem, with no tactics or holes inside.

    Used for trusted task statements and for untrusted conjectures alike.
    Whether the statement elaborates (including whether it has a ``:`` and a
    type) is for Coq to say.  The known-bug features (a ``fix`` in the type
    would let a conjecture carry its own proof of ``False``) are refused
    unless named in ``allowed``.
    """
    text = check_characters(statement, max_chars=max_chars, what="statement")
    sentences = split_sentences(text)
    if len(sentences) != 1 or sentences[0].kind != "command":
        raise RocqTextError("statement_shape", f"expected exactly one sentence, got {len(sentences)}")
    sentence = sentences[0]
    head = _STATEMENT_HEAD.match(sentence.code)
    if head is None:
        raise RocqTextError("statement_shape",
                            f"expected '<{'|'.join(THEOREM_KEYWORDS)}> name ... : type.', got {sentence.text[:80]!r}")
    keyword, name = head.groups()
    rest = Sentence(text=sentence.text, start=sentence.start, kind="command", code=sentence.code[head.end():])
    _check_banned_words(rest, allowed)
    tactics = sorted({"ltac", "ltac2"}.intersection(rest.words()))
    if tactics:
        raise RocqTextError(f"banned:{tactics[0]}", "tactics inside a statement are not allowed")
    if has_mutual_with(rest.code):
        raise RocqTextError("statement_shape", "mutual statements ('... with ...') are not accepted")
    return Statement(sentence=sentence, keyword=keyword, name=name)


def has_mutual_with(code: str) -> bool:
    """Whether ``with`` occurs outside brackets and outside ``match ... end``
    (a mutual ``Theorem a : A with b : B``)."""
    depth = 0
    open_matches = 0
    # whole identifiers, Unicode letters included: ``αmatch`` is a name, not ``match``
    for m in re.finditer(rf"{_IDENT}|[()\[\]{{}}]", code):
        token = m.group(0)
        if token in "([{":
            depth += 1
        elif token in ")]}":
            depth -= 1
        elif depth == 0 and token == "match":
            open_matches += 1
        elif depth == 0 and token == "end":
            open_matches -= 1
        elif depth == 0 and token == "with" and open_matches <= 0:
            return True
    return False


def validate_header(header: object, *, max_chars: int = 10_000) -> list[Sentence]:
    """Check a task header: only ``Require``/``From ... Require``,
    ``Import``/``Export`` and ``Open Scope``/``Close Scope`` sentences."""
    text = check_characters(header, max_chars=max_chars, what="header")
    sentences = split_sentences(text)
    for sentence in sentences:
        if sentence.kind != "command" or not _HEADER_SENTENCE.fullmatch(sentence.code):
            raise RocqTextError("header_rejected", f"header sentence not accepted: {sentence.text[:80]!r}")
    return sentences


def validate_tactics(text: object, *, max_chars: int = 50_000, max_sentences: int = 2_000,
                     allowed: frozenset[str] = frozenset()) -> list[Sentence]:
    """Check one step of the tactic-level API: one or more tactic sentences
    (bullets and braces allowed), no ``Proof.`` and no ``Qed.``; ``allowed``
    as for :func:`validate_proof`."""
    checked = check_characters(text, max_chars=max_chars, what="tactic")
    sentences = split_sentences(checked)
    if not sentences:
        raise RocqTextError("empty", "no tactic given")
    if len(sentences) > max_sentences:
        raise RocqTextError("too_long", f"{len(sentences)} sentences (at most {max_sentences})")
    for sentence in sentences:
        check_tactic_sentence(sentence, allowed)
    return sentences
