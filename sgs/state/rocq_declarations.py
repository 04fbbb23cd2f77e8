"""The theorem-like declarations of one Rocq source file, and which of them
can become targets.

:func:`find_declarations` splits a ``.v`` file into sentences the way Coq's
lexer does (:func:`lean_env.rocq.checks.split_sentences`, in its mode for
trusted library text), follows the ``Section`` and ``Module`` blocks, and
returns every ``Theorem``/``Lemma``/``Remark``/``Fact``/``Corollary``/
``Proposition``/``Example`` with its proof, or the reason it cannot be a
target.  A target is checked at the top level of coqtop's ``Top`` module
right after its header (the verifier asks ``Print Assumptions Top.<name>``,
which inside an open section or module names nothing), so a declaration
inside blocks gets a header that leaves no block open:

* in a ``Section``: the header is the file's text before the declaration,
  then ``End S.`` for each open section (what the section defined is then
  generalised, as in the rest of the file) and the sections' ``Hint``s
  that name none of their variables (they ended with it); the statement gets the
  sections' ``Variable``/``Hypothesis``/``Context``/``Let`` declarations
  as binders after its name (``Lemma l (n : nat) (H : n > 0) : ...``), so
  the human proof starts in the context it was written in;
* in a ``Module M`` (not a functor): ``End M.`` closes it and
  ``Import M.`` brings its names back; the target's id is ``File.M.name``;
* in a functor ``Module F (X : T)`` or a ``Module Type``: its opening
  sentence is replaced by ``Declare Module X : T.`` for each parameter
  (with its ``Import``), so the body runs at the top level; the
  parameters' fields, and a module type's ``Parameter``/``Axiom`` fields,
  are then axioms, which ``Print Assumptions`` lists (``needs axioms``).

Such a target's header is no longer a prefix of the file, so
:mod:`sgs.state.rocq_trace` checks its human proof with the verifier before
keeping it.  Still skipped:

* ``a section Let with parameters``, ``a section Let proved by tactics``:
  neither has a binder form (as a hypothesis it would weaken the statement);
* ``Program``: obligations are solved by commands, not by a proof;
* ``attributes or a locality``: ``#[...]``, ``Local``, ``Polymorphic``, ...
  change the declaration, and a task statement starts with its keyword;
* ``proof given as a term`` (``:= term`` or ``Proof term.``),
  ``not proved (Admitted)``, ``not proved (Abort)``, ``proof saved under
  another name (Save)``, ``no end of proof``.

The proof is the source text from ``Proof.`` to ``Qed.``/``Defined.``,
comments included; a proof that starts directly with tactics gets
``Proof.`` in front (as Coq itself allows).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lean_env.rocq.checks import THEOREM_KEYWORDS, Sentence, split_sentences

_ATTRIBUTES = re.compile(r"#\[.*?\]\s*", re.S)
_LOCALITY = frozenset({"Local", "Global", "Polymorphic", "Monomorphic", "Cumulative", "NonCumulative", "Private"})
_SECTION_VARIABLES = frozenset({"Variable", "Variables", "Hypothesis", "Hypotheses", "Context", "Let"})
#: what declares an axiom or parameter (``--allow-project-axioms``); ``Conjecture`` is a claim, not one
_AXIOM_KEYWORDS = frozenset({"Axiom", "Axioms", "Parameter", "Parameters"})
#: a Rocq identifier (no dots); sgs.fill reads Proof using clauses with it too
IDENT = r"[^\W\d][\w']*"
_PROOF_END = re.compile(r"(Qed|Defined|Admitted|Abort|Save)\b")


@dataclass(frozen=True)
class Declaration:
    """A theorem-like declaration with a proof, that can be checked at top level."""

    keyword: str
    name: str
    #: 1-based line of the statement's first character
    line: int
    #: offset of the statement in the file: the header is the text before it
    start: int
    #: the statement sentence, exactly as in the source
    statement: str
    #: the human proof, ``Proof.`` to ``Qed.``/``Defined.``
    proof: str
    #: the text the statement is checked after: the file before the declaration,
    #: with the blocks around it closed or inlined (see the module docstring)
    header: str = ""
    #: the module, functor and module type names around it (its id's middle part)
    path: tuple[str, ...] = ()
    #: the blocks around it, in words (``section S, module M``); empty at the top level
    context: str = ""
    #: in a section: the statements over more of the sections' variables, in
    #: order, for when the one over the variables it names (``statement``)
    #: does not hold the human proof (the last: over all of them)
    alternatives: tuple[str, ...] = ()
    #: the sentence that ends the proof (``Qed``, ``Defined``; ``Admitted`` only when
    #: :func:`find_declarations` is asked for admitted lemmas)
    ending: str = "Qed"
    #: where the proof stands in the file: from the offset of its first sentence to
    #: the end of its closing one (``sgs.fill`` replaces this text)
    proof_span: tuple[int, int] = (0, 0)

    @property
    def generalised(self) -> bool:
        """Whether the header or the statement differ from the file's text."""
        return bool(self.context)


@dataclass(frozen=True)
class SkippedDeclaration:
    """A theorem-like declaration that is not a target, and why."""

    name: str
    line: int
    reason: str
    #: the module, functor and module type names around it, as :attr:`Declaration.path`
    path: tuple[str, ...] = ()
    #: the sentence that ended its proof, when it had one (``Admitted``, ...)
    ending: str = ""


@dataclass(frozen=True)
class _Binder:
    """One binder group made of a section variable declaration: ``(n p : nat)``."""

    #: the names it binds
    names: tuple[str, ...]
    #: its type (or a Let's ``: T := body``), whose words a kept binder needs in scope
    type: str
    #: ``(`` or ``{``; empty for a ``Context`` binder list kept whole
    bracket: str = "("
    #: a ``Let``: ``(x : T := body)``
    let: bool = False

    def text(self, names: tuple[str, ...] | None = None) -> str:
        names = self.names if names is None else names
        if not self.bracket:
            return self.type
        close = {"(": ")", "{": "}", "[": "]"}[self.bracket]
        separator = " " if self.let else " : "
        return f"{self.bracket}{' '.join(names)}{separator}{self.type}{close}"


@dataclass
class _Block:
    """An open ``Section`` or ``Module`` block."""

    #: ``section``, ``module``, ``functor``, ``module type``
    kind: str
    name: str
    #: the sentence that opened it
    opener: Sentence
    #: what replaces the opener in a header (functors and module types: their
    #: parameters declared at the top level)
    replacement: str = ""
    #: a section's variables and hypotheses, as binder groups
    binders: list[_Binder] = field(default_factory=list)
    #: a section's ``Implicit Types``: name to type (they end with the section)
    implicit_types: dict[str, str] = field(default_factory=dict)
    #: a section's ``Hint`` sentences (they end with the section)
    hints: list[str] = field(default_factory=list)
    #: why a declaration inside cannot be stated at the top level, if it cannot
    unsupported: str | None = None

    @property
    def inlined(self) -> bool:
        return self.kind in ("functor", "module type")


def find_declarations(text: str, *, admitted: bool = False) -> tuple[list[Declaration], list[SkippedDeclaration]]:
    """The declarations of ``text`` (a whole ``.v`` file) that can be targets,
    and those that cannot, each with its reason (see the module docstring).
    ``admitted``: a lemma whose proof ends in ``Admitted`` is returned too,
    with that :attr:`~Declaration.ending` (what ``sgs.fill`` proves).
    Raises :class:`lean_env.rocq.checks.RocqTextError` when the file cannot
    be split into sentences."""
    sentences = split_sentences(text, trusted=True)
    found: list[Declaration] = []
    skipped: list[SkippedDeclaration] = []
    blocks: list[_Block] = []
    i = 0
    while i < len(sentences):
        sentence = sentences[i]
        i += 1
        words = _head_words(sentence)
        if not words:
            continue
        _follow_blocks(words, sentence, blocks)
        keyword, name, prefixed = _declared(words)
        if keyword is None:
            continue
        line = text.count("\n", 0, sentence.start) + 1
        first = i
        if _has_body(sentence.code):
            proof, ending = None, "term"   # no proof sentences follow
        else:
            proof, i, ending = _proof_after(sentences, i, text)
        reason = _reason_to_skip(sentence, blocks, prefixed, proof, ending, admitted)
        if reason is not None:
            skipped.append(SkippedDeclaration(name, line, reason,
                                              tuple(b.name for b in blocks if b.kind != "section"), ending))
        else:
            assert proof is not None
            span = (sentences[first].start, sentences[i - 1].start + len(sentences[i - 1].text))
            found.append(_in_context(text, blocks, Declaration(keyword, name, line, sentence.start,
                                                               sentence.text, proof, ending=ending,
                                                               proof_span=span)))
    return found, skipped


def project_axioms(text: str) -> set[str]:
    """The names ``text`` declares with ``Axiom``/``Parameter`` (anywhere:
    a module type's fields are axioms once its body is inlined)."""
    names: set[str] = set()
    for sentence in split_sentences(text, trusted=True):
        words = _head_words(sentence)
        while words and (words[0] in _LOCALITY or words[0] == "#[]"):
            words = words[1:]
        if not words or words[0] not in _AXIOM_KEYWORDS:
            continue
        rest = sentence.code.split(None, 1)[1] if len(sentence.code.split(None, 1)) > 1 else ""
        rest = rest[rest.index(words[0]) + len(words[0]):] if words[0] in rest else rest
        # "Axiom a b : T." or "Parameters (a : A) (b : B)."
        groups = re.findall(r"\(([^():]*):", rest) if rest.lstrip().startswith("(") else [rest.split(":")[0]]
        for group in groups:
            names.update(re.findall(IDENT, group))
    names.discard("Inline")
    return names


def _in_context(text: str, blocks: list[_Block], declaration: Declaration) -> Declaration:
    """The declaration with its header (and, in sections, its statement) for
    being checked at the top level: see the module docstring."""
    start = declaration.start
    if not blocks:
        return Declaration(**{**declaration.__dict__, "header": text[:start]})
    pieces: list[str] = []
    position = 0
    for block in blocks:
        if block.inlined:
            pieces += [text[position:block.opener.start], block.replacement]
            position = block.opener.start + len(block.opener.text)
    pieces.append(text[position:start])
    closing = [f"End {block.name}." for block in reversed(blocks) if not block.inlined]
    modules = [block.name for block in blocks if block.kind == "module"]
    # Import restores the module's names (and its exported hints and notations) at the top level
    imports = [f"Import {'.'.join(modules[:i + 1])}." for i in range(len(modules))]
    # the sections' hints end with them: those about no variable of theirs are given again
    variables = {name for block in blocks for binder in block.binders for name in binder.names}
    hints = [hint for block in blocks for hint in block.hints
             if not set(re.findall(IDENT, hint)) & variables]
    header = "".join(pieces).rstrip() + "\n" + "\n".join(closing + imports + hints) + "\n"
    groups = [binder for block in blocks for binder in block.binders]
    implicit = {name: typ for block in blocks for name, typ in block.implicit_types.items()}
    proof = declaration.proof
    if groups:
        # the section's variables are the statement's own binders now, and
        # "Proof using" names only section variables
        proof = re.sub(r"\AProof\s+using\b[^.]*\.", "Proof.", proof)
    # an admitted proof's tactics never ran to completion: only its Proof using names variables,
    # and Coq counts those its statement's binders get from Implicit Types as named by it
    used = declaration.proof if declaration.ending != "Admitted" else \
        " ".join([*re.findall(r"\AProof\s+using\b[^.]*\.", declaration.proof),
                  _typed_binders(declaration.statement, implicit) if implicit else ""])
    choices = _binder_choices(groups, declaration.statement + " " + used)
    statements = tuple(dict.fromkeys(_bound(declaration, binders, implicit) for binders in choices))
    context = ", ".join(f"{block.kind} {block.name}" for block in blocks)
    path = tuple(block.name for block in blocks if block.kind != "section")
    return Declaration(declaration.keyword, declaration.name, declaration.line, start, statements[0],
                       proof, header, path, context, statements[1:], declaration.ending, declaration.proof_span)


def _bound(declaration: Declaration, binders: str, implicit: dict[str, str]) -> str:
    """The statement with ``binders`` after its name and the sections'
    implicit types written out."""
    statement = declaration.statement
    if binders:
        named = re.search(rf"\b{re.escape(declaration.keyword)}\s+{re.escape(declaration.name)}(?![\w'])", statement)
        assert named is not None, statement
        statement = statement[:named.end()] + " " + binders + statement[named.end():]
    return _typed_binders(statement, implicit) if implicit else statement


def _binder_choices(groups: list[_Binder], text: str) -> list[str]:
    """The binders to try, in order: the section variables ``text`` (the
    statement and the proof) names, with those their types name; then also
    every hypothesis about only those (``auto`` uses a hypothesis without
    naming it); then all of them.  Coq itself generalises over what the proof
    *term* uses, which the text alone cannot tell: the tracer keeps the first
    choice that holds the human proof."""
    variables = {name for group in groups for name in group.names}
    kept: dict[int, tuple[str, ...]] = {}

    def close(used: set[str]) -> None:
        changed = True
        while changed:
            changed = False
            for i, group in enumerate(groups):
                names = group.names if not group.bracket else tuple(n for n in group.names if n in used)
                if names and names != kept.get(i):
                    kept[i] = names
                    used |= set(re.findall(IDENT, group.type))
                    changed = True

    def binders() -> str:
        return " ".join(group.text(kept[i]) for i, group in enumerate(groups) if i in kept)

    used = set(re.findall(IDENT, text))
    close(used)
    choices = [binders()]
    named = {name for names in kept.values() for name in names}
    about = [group for group in groups
             if (mentioned := set(re.findall(IDENT, group.type)) & variables) and mentioned <= named]
    close(used | {name for group in about for name in group.names})
    choices.append(binders())
    choices.append(" ".join(group.text() for group in groups))
    return choices


def _head_words(sentence: Sentence) -> list[str]:
    """The sentence's words, attributes (``#[...]``) kept as one word ``#[]``."""
    code = sentence.code
    attributes = _ATTRIBUTES.match(code)
    words = code[attributes.end():].split() if attributes else code.split()
    return (["#[]"] if attributes else []) + words


def _follow_blocks(words: list[str], sentence: Sentence, blocks: list[_Block]) -> None:
    """Open or close a ``Section``/``Module`` block for this sentence."""
    first, code = words[0], sentence.code
    if first == "Section" and len(words) > 1:
        blocks.append(_Block("section", words[1].rstrip("."), sentence))
    elif first == "Module" and ":=" not in code:
        blocks.append(_module_block(code, sentence))
    elif first == "End" and blocks:
        blocks.pop()
    elif first == "Implicit" and len(words) > 1 and words[1] in ("Type", "Types") and blocks \
            and blocks[-1].kind == "section":
        blocks[-1].implicit_types.update(_implicit_types(code))
    elif "Hint" in words[:3] and blocks and blocks[-1].kind == "section":
        blocks[-1].hints.append(" ".join(code.split()))
    elif first in _SECTION_VARIABLES and blocks and blocks[-1].kind == "section":
        binders, why_not = _section_binders(first, code)
        if binders is None:
            blocks[-1].unsupported = why_not
        else:
            blocks[-1].binders += binders


def _module_block(code: str, sentence: Sentence) -> _Block:
    """The block a ``Module [Import|Export] [Type] Name (X : T)... [<: S | : S].``
    sentence opens; a functor's or module type's opener is replaced by its
    parameters, declared at the top level."""
    match = re.match(rf"Module\s+(?:(Import|Export)\s+)?(Type\s+)?({IDENT})\s*(.*?)\s*\.\s*$", code, re.S)
    if match is None:
        return _Block("module", "?", sentence, unsupported="a module opening this tracer cannot read")
    name, rest = match.group(3), match.group(4)
    parameters: list[str] = []
    while rest.startswith("("):
        depth, end = 0, None
        for i, char in enumerate(rest):
            depth += (char == "(") - (char == ")")
            if depth == 0:
                end = i
                break
        if end is None:
            return _Block("functor", name, sentence, unsupported="a functor parameter this tracer cannot read")
        group = rest[1:end].strip()
        rest = rest[end + 1:].lstrip()
        importing = re.match(r"(Import|Export)\s+", group)
        if importing:
            group = group[importing.end():]
        names, colon, module_type = group.partition(":")
        if not colon or not names.split():
            return _Block("functor", name, sentence, unsupported="a functor parameter this tracer cannot read")
        for parameter in names.split():
            parameters.append(f"Declare Module {parameter} : {' '.join(module_type.split())}.")
            if importing:
                parameters.append(f"{importing.group(1)} {parameter}.")
    if match.group(2) or parameters:
        kind = "module type" if match.group(2) else "functor"
        return _Block(kind, name, sentence, replacement="\n".join(parameters))
    return _Block("module", name, sentence)


def _implicit_types(code: str) -> dict[str, str]:
    """``Implicit Types x y : T.`` (or ``(x : T) (v : A)``) as names to types."""
    rest = re.sub(r"\AImplicit\s+Types?\s+", "", code.strip()).rstrip(". \n")
    groups = re.findall(r"\(([^()]*)\)", rest) if rest.startswith("(") else [rest]
    found: dict[str, str] = {}
    for group in groups:
        names, colon, typ = group.partition(":")
        if colon:
            found.update({name: " ".join(typ.split()) for name in names.split()})
    return found


def _typed_binders(statement: str, implicit: dict[str, str]) -> str:
    """The statement with each bare binder that a section's ``Implicit
    Types`` gave a type (``forall x v,`` and the binders before the colon;
    ``x``, ``x1``, ``x'`` for ``x``) written with that type, since the
    section, and with it that declaration, is closed in the header."""
    def typed(names: str) -> str:
        out = []
        for token in re.split(r"(\s+)", names):
            base = re.fullmatch(rf"({IDENT}?)[0-9']*", token)
            stem = base.group(1).rstrip("0123456789'") if base else ""
            name = token if token in implicit else stem if stem in implicit else None
            out.append(f"({token} : {implicit[name]})" if name and token and not token.isspace() else token)
        return "".join(out)

    # forall/exists binders up to their comma: the bare names among them, outside brackets
    out, position = [], 0
    for match in re.finditer(r"\b(?:forall|exists)\s", statement):
        if match.start() < position:
            continue
        depth, end = 0, None
        for i in range(match.end(), len(statement)):
            char = statement[i]
            depth += (char in "([{") - (char in ")]}")
            if depth < 0 or (depth == 0 and char == ","):
                end = i if char == "," else None
                break
        if end is None:
            continue
        binders = statement[match.end():end]
        pieces = re.split(r"(\([^()]*\)|\{[^{}]*\})", binders)
        out += [statement[position:match.end()],
                "".join(piece if piece.startswith(("(", "{")) else typed(piece) for piece in pieces)]
        position = end
    out.append(statement[position:])
    statement = "".join(out)
    # the statement's own binders before its colon
    named = re.match(rf"\s*{IDENT}\s+{IDENT}", statement)
    depth, colon = 0, None
    for i in range(named.end() if named else len(statement), len(statement)):
        char = statement[i]
        depth += (char in "([{") - (char in ")]}")
        if depth == 0 and char == ":" and statement[i + 1:i + 2] != "=":
            colon = i
            break
    if named and colon is not None:
        pieces = re.split(r"(\([^()]*\)|\{[^{}]*\})", statement[named.end():colon])
        statement = statement[:named.end()] + "".join(p if p.startswith(("(", "{")) else typed(p) for p in pieces) \
            + statement[colon:]
    return statement


def _section_binders(keyword: str, code: str) -> tuple[list[_Binder] | None, str]:
    """A section's ``Variable``/``Hypothesis``/``Context``/``Let`` sentence as
    binder groups of a statement (``(n m : nat)``), or None and why not."""
    rest = code.strip()[len(keyword):].strip()
    rest = rest[:-1].strip() if rest.endswith(".") else rest
    if keyword == "Let":
        let = re.fullmatch(rf"({IDENT})\s*(?::(?!=)(.*?))?:=(.*)", rest, re.S)
        if let is None:
            # a Let proved by tactics is a local lemma, and one with parameters a local function:
            # neither is a binder, and as a hypothesis it would weaken the statement
            return None, ("a section Let with parameters" if ":=" in rest else "a section Let proved by tactics")
        typed = f": {' '.join(let.group(2).split())} " if let.group(2) else ""
        return [_Binder((let.group(1),), f"{typed}:= {' '.join(let.group(3).split())}", let=True)], ""
    if keyword == "Context" or rest[:1] in ("[", "`"):
        return [_Binder(tuple(re.findall(IDENT, rest.split(":")[0])), " ".join(rest.split()), bracket="")], ""
    if rest[:1] not in ("(", "{"):
        rest = f"({rest})"
    groups = []
    for bracket, inside in re.findall(r"([({])([^(){}]*(?:\([^()]*\)[^(){}]*)*)[)}]", rest):
        names, colon, typ = inside.partition(":")
        if not colon or not names.split():
            return [_Binder(tuple(re.findall(IDENT, rest)), " ".join(rest.split()), bracket="")], ""
        groups.append(_Binder(tuple(names.split()), " ".join(typ.split()), bracket))
    return groups, ""


def _declared(words: list[str]) -> tuple[str | None, str, bool]:
    """``(keyword, name, prefixed)`` when the sentence declares a theorem
    (``prefixed``: attributes, a locality or ``Program`` come first)."""
    prefixed = False
    while words and (words[0] in _LOCALITY or words[0] in ("#[]", "Program")):
        words = words[1:]
        prefixed = True
    if len(words) >= 2 and words[0] in THEOREM_KEYWORDS:
        name = re.match(r"[^\W\d][\w']*", words[1])
        return words[0], name.group(0) if name else words[1], prefixed
    return None, "", prefixed


def _has_body(code: str) -> bool:
    """Whether a statement ends in ``:= term``: a ``:=`` outside brackets
    that is not a ``let``'s."""
    depth = 0
    open_lets = 0
    for token in re.findall(r"[^\W\d][\w']*|:=|[()\[\]{}]", code):
        if token in "([{":
            depth += 1
        elif token in ")]}":
            depth -= 1
        elif depth == 0 and token == "let":
            open_lets += 1
        elif depth == 0 and token == ":=":
            if open_lets == 0:
                return True
            open_lets -= 1
    return False


def _proof_after(sentences: list[Sentence], i: int, text: str) -> tuple[str | None, int, str]:
    """The proof text from sentence ``i`` up to the one that ends it, the
    index after that one, and the ending word (``""``: none before the end of
    the file; ``term``: a ``Proof <term>.`` sentence ends it at once)."""
    first = i
    if first < len(sentences) and re.fullmatch(r"Proof\s+(?!using\b|with\b)\S.*", sentences[first].code, re.S):
        return None, first + 1, "term"
    nested = 0   # theorems stated inside this proof (Coq allows it), each with its own end
    while i < len(sentences):
        words = _head_words(sentences[i])
        end = _PROOF_END.match(sentences[i].code)
        i += 1
        if _declared(words)[0] is not None and not _has_body(sentences[i - 1].code):
            nested += 1
        elif end and nested:
            nested -= 1
        elif end:
            last = sentences[i - 1]
            proof = text[sentences[first].start:last.start + len(last.text)]
            if not sentences[first].code.startswith("Proof"):
                proof = "Proof.\n" + proof
            return proof, i, end.group(1)
    return None, i, ""


def _reason_to_skip(statement: Sentence, blocks: list[_Block], prefixed: bool, proof: str | None,
                    ending: str, admitted: bool = False) -> str | None:
    if "Program" in statement.code.split()[:3]:
        return "Program"
    unsupported = next((block.unsupported for block in blocks if block.unsupported), None)
    if unsupported:
        return unsupported
    if prefixed:
        return "attributes or a locality"
    if ending == "term":
        return "proof given as a term"
    if ending == "":
        return "no end of proof"
    if ending == "Abort" or ending == "Admitted" and not admitted:
        return f"not proved ({ending})"
    if ending == "Save":
        return "proof saved under another name (Save)"
    return None
