"""Statement identity up to renaming (or by text: :func:`exact_form`), and the
conclusion-based collapse signals.

``canonical_form`` maps a statement to a string that is the same for two
statements that differ only in
* whitespace, comments and line breaks;
* the theorem's own name (and ``lemma`` versus ``theorem``);
* the names of bound variables: binders of the theorem itself
  (``(x y : T)``, ``{x : T}``, ``[inst : C]``, Rocq's bare ``n``), of the
  quantifiers and big operators (``∀ ∃ ∃! ∑ ∏ ⋃ ⋂ ⨆ ⨅ ∫ Σ``, Rocq's
  ``forall``/``exists``), of ``fun``/``λ``, ``let``/``have``, set-builder
  notation (``{x : T | P}``, ``{(x, y) : A × B | P}``) and Lean's dependent
  arrows (``(n : ℕ) → P n``); hypothesis names are binders too;
* ASCII versus Unicode spellings of the same symbol (``->``/``→``,
  ``fun``/``λ``, ``=>``/``↦``, ``<=``/``≤``, ``forall``/``∀``...).
Bound names become ``$v0``, ``$v1``... in order of binding; free names are
kept.  A statement's trailing ``:= by`` (plus ``sorry``) or, in Rocq,
everything from its final ``.`` on, is ignored.

It is a tokenizer with bracket matching, not a parser.  Known limits:
* a binder's scope runs to the end of the bracket group that holds the
  binder, which is exact for ``∀``/``∃``/``fun`` (their body extends as far as
  it can) but too long for binders inside an unbracketed ``let`` value;
  binders in ``match`` patterns and ``fun | pattern =>`` are not renamed;
* statements that differ otherwise stay different, even when logically the
  same: reordered hypotheses, ``(x y : T)`` versus ``(x : T) (y : T)``,
  ``∀ x y,`` versus ``∀ x, ∀ y,``, redundant parentheses, ``a > b`` versus
  ``b < a``, ``open`` namespaces;
* in image notation ``{f x | x ∈ s}`` the function name ``f`` is taken as
  bound too, so two such sets over different free functions look alike;
* statements nested deeper than ``_MAX_NESTING`` brackets are compared
  token by token without renaming (no real statement comes close).

The conclusion (for the paper's collapse signals, §1.6) is what remains of
the statement's type after peeling off, repeatedly, a leading universal
quantifier (``∀ x,``), a leading ``let``, a leading dependent arrow, and the
premise before the first top-level implication arrow; the peeling stops at
the first existential, ``fun``, or other binder, since an arrow after it
belongs to its body.  In Lean, a top-level ``↔`` binds looser than ``→``, so
a statement with one is its own conclusion.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from sgs.method.roles.language import Language
from sgs.method.roles.lexer import Token, tokenize

_OPENERS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "⌊": "⌋", "⌈": "⌉"}
_CLOSERS = frozenset(_OPENERS.values())
# Deeper bracket nesting than this is compared without renaming (the
# renamer recurses once per bracket level).
_MAX_NESTING = 100
# A binder's names and types between its keyword and its separator span at
# most this many top-level tokens (bracket groups count as one); this keeps
# the work linear on hostile input such as ten thousand ∀ in a row.
_MAX_BINDER_SPAN = 256
# The conclusion finder peels at most this many premises and binders
# (real statements have a few dozen at most), keeping it linear too.
_MAX_PEELS = 64


@dataclass(frozen=True)
class _Syntax:
    """The per-language tables the renamer and the conclusion finder use."""

    synonyms: dict[str, str]  # spelling -> canonical spelling
    quantifiers: frozenset[str]  # binders closed by ','
    functions: frozenset[str]  # binders closed by '=>'
    lets: frozenset[str]  # binders closed by ':='
    universal: frozenset[str]  # quantifiers peeled off the conclusion
    stop_words: frozenset[str]  # identifier-shaped words that are never binder names
    builder_bars: frozenset[str]  # separators of set-builder notation
    arrow: str
    iff: str
    disjunctions: frozenset[str]
    decl: str  # the declaration keyword, canonically spelled

    @cached_property
    def separators(self) -> dict[str, frozenset[str]]:
        """Binder keyword -> the tokens that can end its binder list."""
        return {**{q: frozenset({","}) for q in self.quantifiers},
                **{f: frozenset({"=>", ","}) for f in self.functions},
                **{k: frozenset({":="}) for k in self.lets}}


_LEAN = _Syntax(
    synonyms={"λ": "fun", "↦": "=>", "->": "→", "<->": "↔", "<=": "≤", ">=": "≥", "!=": "≠",
              "forall": "∀", "exists": "∃", "lemma": "theorem"},
    quantifiers=frozenset({"∀", "∃", "∃!", "Π", "Σ", "Σ'", "∑", "∏", "⋃", "⋂", "⨆", "⨅",
                           "∫", "∮", "∀ᶠ", "∃ᶠ"}),
    universal=frozenset({"∀"}),
    functions=frozenset({"fun"}),
    lets=frozenset({"let", "have"}),
    stop_words=frozenset({"in", "at", "with", "from", "fun", "let", "have", "show", "by",
                          "if", "then", "else", "match", "do", "Type", "Sort", "Prop", "_"}),
    builder_bars=frozenset({"|"}),
    arrow="→",
    iff="↔",
    disjunctions=frozenset({"∨", "Or"}),
    decl="theorem",
)

_ROCQ = _Syntax(
    synonyms={"∀": "forall", "∃": "exists", "→": "->", "↔": "<->", "λ": "fun", "∧": "/\\",
              "∨": "\\/", "≠": "<>", "≤": "<=", "≥": ">=", "Lemma": "Theorem"},
    quantifiers=frozenset({"forall", "exists", "exists2"}),
    universal=frozenset({"forall"}),
    functions=frozenset({"fun"}),
    lets=frozenset({"let"}),
    stop_words=frozenset({"in", "as", "return", "with", "fun", "let", "forall", "exists",
                          "match", "end", "if", "then", "else", "Type", "Prop", "Set", "_"}),
    builder_bars=frozenset({"|", "&"}),
    arrow="->",
    iff="<->",
    disjunctions=frozenset({"\\/", "or"}),
    decl="Theorem",
)


class _Statement:
    """A statement's tokens with canonical spellings, bracket partners and the
    proof part cut off; the shared input of renaming and conclusion finding."""

    def __init__(self, text: str, language: Language):
        self.language = Language(language)
        self.syntax = _LEAN if self.language is Language.LEAN else _ROCQ
        tokens = _without_proof(tokenize(text, self.language), self.language)
        self.tokens: list[Token] = tokens
        self.texts = [self.syntax.synonyms.get(t.text, t.text) for t in tokens]
        self.partner, self.nesting = _match_brackets(self.texts)
        # index of the first token after the theorem keyword and its name
        self.after_name = 0
        if self.texts and self.texts[0] == self.syntax.decl:
            self.after_name = 2 if len(tokens) > 1 and tokens[1].kind == "ident" else 1

    def find(self, start: int, end: int, targets, limit: int | None = None,
             stop=frozenset()) -> int | None:
        """Index of the first token in ``targets`` at the bracket depth of
        ``start``, scanning ``[start, end)`` and jumping over bracket groups;
        None if the depth drops, a ``stop`` token comes first, or ``limit``
        top-level tokens pass without a hit."""
        i, steps = start, 0
        while i < end and (limit is None or steps < limit):
            text = self.texts[i]
            if text in targets:
                return i
            if text in stop or text in _CLOSERS:
                return None
            if text in _OPENERS:
                close = self.partner[i]
                if close is None:
                    return None
                i = close + 1
            else:
                i += 1
            steps += 1
        return None

    def is_dependent_arrow(self, i: int) -> bool:
        """Whether a Lean binder group ``(x : T) →`` opens at ``i``."""
        close = self.partner[i] if self.texts[i] in ("(", "{", "⦃", "[") else None
        return (self.language is Language.LEAN and close is not None
                and close + 1 < len(self.texts) and self.texts[close + 1] == "→"
                and self.find(i + 1, close, {":"}) is not None)

    def header_colon(self) -> int | None:
        """Index of the ``:`` that ends the theorem's binders, if any."""
        if self.after_name == 0:
            return None
        return self.find(self.after_name, len(self.texts), {":"})


def _without_proof(tokens: list[Token], language: Language) -> list[Token]:
    """Drop the proof placeholder: Lean's last top-level ``:= by`` and what
    follows; Rocq's first sentence end and what follows."""
    if language is Language.ROCQ:
        for k, token in enumerate(tokens):
            if token.kind == "end":
                return tokens[:k]
        return tokens
    depth, cut = 0, len(tokens)
    for k, token in enumerate(tokens):
        if token.text in _OPENERS:
            depth += 1
        elif token.text in _CLOSERS:
            depth = max(0, depth - 1)
        elif depth == 0 and token.text == ":=" and k + 1 < len(tokens) and tokens[k + 1].text == "by":
            cut = k
    return tokens[:cut]


def _match_brackets(texts: list[str]) -> tuple[list[int | None], int]:
    """Each opener's matching closer (None when unmatched; bracket kinds are
    not checked) and the deepest nesting."""
    partner: list[int | None] = [None] * len(texts)
    stack: list[int] = []
    deepest = 0
    for k, text in enumerate(texts):
        if text in _OPENERS:
            stack.append(k)
            deepest = max(deepest, len(stack))
        elif text in _CLOSERS and stack:
            partner[stack.pop()] = k
    return partner, deepest


class _Renamer:
    """One left-to-right pass that renames bound variables in order of binding."""

    def __init__(self, statement: _Statement):
        self.s = statement
        self.scopes: list[dict[str, str]] = [{}]
        self.bound = 0
        self.out: list[str] = []

    def run(self) -> list[str]:
        s = self.s
        start = s.after_name
        colon = s.header_colon()
        if colon is not None:
            self.bind_region(start, colon)  # the theorem's binders: scope is the whole statement
            self.out.append(":")
            start = colon + 1
        self.process(start, len(s.texts))
        return self.out

    # -- names ------------------------------------------------------------
    def is_name(self, i: int) -> bool:
        token = self.s.tokens[i]
        return (token.kind == "ident" and "." not in token.text
                and self.s.texts[i] not in self.s.syntax.stop_words)

    def bind(self, i: int) -> None:
        name = f"$v{self.bound}"
        self.bound += 1
        self.scopes[-1][self.s.texts[i]] = name
        self.out.append(name)

    def resolve(self, i: int) -> str:
        text = self.s.texts[i]
        if self.s.tokens[i].kind != "ident":
            return text
        head, dot, rest = text.partition(".")
        for scope in reversed(self.scopes):
            if text in scope:
                return scope[text]
            if dot and head in scope:  # hx.le, with hx bound
                return f"{scope[head]}.{rest}"
        return text

    # -- walking ----------------------------------------------------------
    def process(self, i: int, end: int) -> None:
        """Emit tokens ``[i, end)``; binders met here scope to ``end``."""
        s = self.s
        mark = len(self.scopes)
        while i < end:
            text = s.texts[i]
            if text in _OPENERS:
                close = s.partner[i]
                if close is None or close >= end:
                    self.out.append(text)
                    i += 1
                    continue
                if self.is_set_builder(i, close):
                    self.set_builder(i, close)
                elif s.is_dependent_arrow(i):
                    self.scopes.append({})
                    self.bind_group(i, close)
                else:
                    self.out.append(text)
                    self.process(i + 1, close)
                    self.out.append(s.texts[close])
                i = close + 1
                continue
            separators = s.syntax.separators.get(text)
            sep = None if separators is None else s.find(i + 1, end, separators, limit=_MAX_BINDER_SPAN)
            if sep is not None:
                self.out.append(text)
                self.scopes.append({})
                self.bind_region(i + 1, sep)
                self.out.append(s.texts[sep])
                i = sep + 1
                continue
            self.out.append(self.resolve(i))
            i += 1
        del self.scopes[mark:]

    def bind_region(self, i: int, end: int) -> None:
        """A binder list: leading names and bracket groups bind into the
        innermost scope; from the first other token on (``: T``, ``∈ s``,
        ``> 0``, ``in s``) it is ordinary code."""
        s = self.s
        while i < end:
            if self.is_name(i):
                self.bind(i)
                i += 1
            elif s.texts[i] in _OPENERS and s.partner[i] is not None and s.partner[i] < end:
                close = s.partner[i]
                self.bind_group(i, close)
                i = close + 1
            else:
                self.process(i, end)
                return

    def bind_group(self, i: int, close: int) -> None:
        """``(x y : T)``, ``{x}``, ``[inst : C]``, ``⟨a, b⟩``: the names before
        the group's ``:`` bind; ``[C α]`` (no colon) binds nothing."""
        s = self.s
        colon = s.find(i + 1, close, {":"})
        self.out.append(s.texts[i])
        if s.texts[i] == "[" and colon is None:
            self.process(i + 1, close)
        else:
            names_end = close if colon is None else colon
            for k in range(i + 1, names_end):
                if self.is_name(k):
                    self.bind(k)
                else:
                    self.out.append(self.resolve(k))
            if colon is not None:
                self.out.append(":")
                self.process(colon + 1, close)
        self.out.append(s.texts[close])

    def is_set_builder(self, i: int, close: int) -> bool:
        s = self.s
        if s.texts[i] != "{":
            return False
        bar = s.find(i + 1, close, s.syntax.builder_bars)
        if bar is None or bar == i + 1:
            return False
        if not (self.is_name(i + 1) or s.texts[i + 1] in ("(", "⟨")):
            return False
        return s.find(i + 1, bar, {","}) is None  # {a, b | c} is no builder

    def set_builder(self, i: int, close: int) -> None:
        s = self.s
        bar = s.find(i + 1, close, s.syntax.builder_bars)
        mark = len(self.scopes)
        self.out.append("{")
        self.scopes.append({})
        self.bind_region(i + 1, bar)
        self.out.append(s.texts[bar])
        self.process(bar + 1, close)
        self.out.append(s.texts[close])
        del self.scopes[mark:]


def canonical_form(statement: str, language: Language | str) -> str:
    """A string equal for statements that are the same up to whitespace,
    comments, the theorem's name and the names of bound variables."""
    parsed = _Statement(statement, language)
    if parsed.nesting > _MAX_NESTING:
        return " ".join(parsed.texts[parsed.after_name:])
    return " ".join(_Renamer(parsed).run())


def exact_form(statement: str, language: Language | str) -> str:
    """The statement's text, leading and trailing whitespace aside: equal only
    for statements written alike, theorem name included (the paper's code
    compares conjectures as strings).  ``language`` is unused: the signature
    is :func:`canonical_form`'s, so that either can be :data:`STATEMENT_FORMS`'."""
    return statement.strip()


#: ``method.conjecture_dedup``: the form in which two statements are compared.
STATEMENT_FORMS = {"canonical": canonical_form, "exact": exact_form}


def _conclusion_span(parsed: _Statement) -> tuple[int, int]:
    """Token range ``[start, end)`` of the conclusion (module docstring)."""
    s, syntax = parsed, parsed.syntax
    end = len(s.texts)
    colon = s.header_colon()
    start = s.after_name if colon is None else colon + 1
    binders = frozenset(syntax.separators)
    for _ in range(_MAX_PEELS):
        if start >= end:
            break
        text = s.texts[start]
        if text in syntax.universal:
            sep = s.find(start + 1, end, {","}, limit=_MAX_BINDER_SPAN)
            if sep is not None:
                start = sep + 1
                continue
        if text in syntax.lets:
            body = _let_body(s, start, end)
            if body is not None:
                start = body
                continue
        if s.is_dependent_arrow(start):
            start = s.partner[start] + 2  # past (n : ℕ) →
            continue
        arrow = s.find(start, end, {syntax.arrow}, stop=binders)
        # Lean's ↔ binds looser than →, so a top-level ↔ makes the whole
        # rest the conclusion; Rocq's <-> binds tighter than ->.
        if arrow is None or (s.language is Language.LEAN
                             and s.find(start, end, {syntax.iff}, stop=binders) is not None):
            break
        start = arrow + 1
    return start, end


def _let_body(s: _Statement, start: int, end: int) -> int | None:
    """Where the body of the ``let`` at ``start`` begins: Rocq after its
    ``in``; Lean after a ``;`` or at the first top-level token on a new line
    after the value."""
    assign = s.find(start + 1, end, {":="}, limit=_MAX_BINDER_SPAN)
    if assign is None:
        return None
    if s.language is Language.ROCQ:
        body = s.find(assign + 1, end, {"in"})
        return None if body is None else body + 1
    i = assign + 1
    while i < end:
        if s.texts[i] == ";":
            return i + 1
        if i > assign + 1 and s.tokens[i].newline_before:
            return i
        if s.texts[i] in _OPENERS:
            if s.partner[i] is None:
                return None
            i = s.partner[i] + 1
        else:
            i += 1
    return None


def conclusion(statement: str, language: Language | str) -> str:
    """The conclusion of ``statement``, as written (comments removed)."""
    parsed = _Statement(statement, language)
    start, end = _conclusion_span(parsed)
    if start >= end:
        return ""
    tokens = parsed.tokens[start:end]
    pieces = [tokens[0].text]
    for previous, token in zip(tokens, tokens[1:]):
        if statement[previous.end:token.start]:  # whitespace or a comment
            pieces.append(" ")
        pieces.append(token.text)
    return "".join(pieces)


def conclusion_length(statement: str, language: Language | str) -> int:
    """Number of tokens in the conclusion (whitespace-independent)."""
    start, end = _conclusion_span(_Statement(statement, language))
    return max(0, end - start)


def has_disjunctive_conclusion(statement: str, language: Language | str) -> bool:
    """True when the conclusion contains a disjunction (``∨``/``Or``; Rocq
    ``\\/``/``or``) anywhere, nested or not."""
    parsed = _Statement(statement, language)
    start, end = _conclusion_span(parsed)
    return any(text in parsed.syntax.disjunctions for text in parsed.texts[start:end])
