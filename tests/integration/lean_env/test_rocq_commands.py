"""The command table (:mod:`lean_env.rocq.commands`) against real Rocq.

The commands of the installed Rocq are read from ``Print Grammar vernac.``
(with the standard plugins loaded, whose commands a header could bring in):
every production of the entries it prints must fall under a row of the
table, so that a command cannot slip in unclassified, and every form of an
allowed command must be a row of its own, so that a new form of an allowed
command (a ``Print Foo "file"``) cannot ride on its neighbour's verdict.
Commands the grammar does not print (queries, the gallina keywords behind
``thm_token`` and friends, the toplevel's own ``Drop``/``BackTo``, attribute
prefixes) are rows too; the test asks Rocq's parser that each of them really
starts a command.

Run: ``pytest tests/integration/lean_env/test_rocq_commands.py`` (needs ``coqtop``; marked ``rocq``).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from lean_env.rocq import RocqConfig
from lean_env.rocq.commands import COMMANDS, REJECTION_REASONS, classify, head_words
from lean_env.rocq.session import RocqSession, SessionDied

#: libraries whose plugins add vernacular commands: every plugin-bearing library
#: Debian installs (coq's plugins, and user-contrib's Ltac2 and CoqHammer from
#: libcoq-hammer), since a header may load any of them
PLUGIN_LIBRARIES = ("Ltac2.Ltac2", "Extraction", "Recdef", "FunInd", "ssreflect", "ssrmatching", "Derive", "Lia",
                    "Psatz", "Ring", "Field", "Nsatz", "Setoid", "Program", "Btauto", "Rtauto")
#: CoqHammer's libraries (package libcoq-hammer; tools/setup.sh installs it)
HAMMER_LIBRARIES = ("Hammer.Plugin.Hammer", "Hammer.Tactics.Tactics")
#: entries ``Print Grammar vernac.`` prints, each of which starts commands
ENTRIES = ("vernac_control", "command", "syntax", "gallina", "gallina_ext")
#: grammar productions that start with a non-terminal, and the rows that
#: stand for it (their words are probed below)
NONTERMINAL_HEADS = {
    "decorated_vernac": ("#[", "Local", "Global", "Polymorphic", "Monomorphic", "Cumulative", "NonCumulative",
                         "Private", "Program"),
    "thm_token": ("Theorem", "Lemma", "Fact", "Remark", "Corollary", "Proposition", "Property"),
    "def_token": ("Definition", "Example", "SubClass"),
    "assumption_token": ("Hypothesis", "Variable", "Axiom", "Parameter", "Conjecture"),
    "assumptions_token": ("Hypotheses", "Variables", "Axioms", "Parameters", "Conjectures"),
    "inductive_token": ("Inductive", "CoInductive", "Variant"),
    "finite_token": ("Record", "Structure", "Class"),
}
#: commands of coqtop's own toplevel loop, with a harmless instance each
#: (``Quit`` goes last: it ends the session)
TOPLEVEL = {"Drop": "Drop.", "BackTo": "BackTo 1.", "Quit": "Quit."}

_PRODUCTION = re.compile(r"^  [\[|] (.*?)(?=^  [\[|] |^  \] \]|\Z)", re.M | re.S)
_SYMBOL = re.compile(r'\s*(?:IDENT\s+"([^"]+)"|"([^"]+)"|(\w+))\s*(?:;|$)')


def parse_vernac_grammar(text: str) -> tuple[set[tuple[str, ...]], set[str]]:
    """From ``Print Grammar vernac.`` output: the leading keywords of every
    production of :data:`ENTRIES`, and the non-terminals some productions
    start with."""
    heads: set[tuple[str, ...]] = set()
    nonterminals: set[str] = set()
    blocks = re.split(r"^Entry (\w+) is$", text, flags=re.M)
    seen = set()
    for name, body in zip(blocks[1::2], blocks[2::2]):
        if name not in ENTRIES:
            continue
        seen.add(name)
        for production in _PRODUCTION.findall(body):
            words: list[str] = []
            symbols = re.sub(r"\s*\]\s*\]\s*$", "", " ".join(production.split()))
            for m in _SYMBOL.finditer(symbols):
                keyword = m.group(1) or m.group(2)
                if keyword is None:
                    if not words:
                        nonterminals.add(m.group(3))
                    break
                words.append(keyword)
            if words:
                heads.add(tuple(words))
    assert seen == set(ENTRIES), f"Print Grammar vernac printed {sorted(seen)}"
    return heads, nonterminals


def test_parse_vernac_grammar_on_a_hand_written_excerpt():
    excerpt = (
        'Entry vernac_control is\n[ LEFTA\n  [ IDENT "Time"; SELF\n  | decorated_vernac ] ]\n'
        'Entry command is\n[ LEFTA\n  [ IDENT "Show"; IDENT "Proof"\n  | IDENT "Load"; [ IDENT "Verbose" |  ];\n'
        '    [ IDENT | ne_string ]\n  | "Set"; setting_name; option_setting ] ]\n'
        'Entry syntax is\n[ LEFTA\n  [ IDENT "Open"; IDENT "Scope"; IDENT ] ]\n'
        'Entry gallina is\n[ LEFTA\n  [ thm_token; ident_decl ] ]\n'
        'Entry gallina_ext is\n[ LEFTA\n  [ IDENT "Section"; identref ] ]\n')
    heads, nonterminals = parse_vernac_grammar(excerpt)
    assert heads == {("Time",), ("Show", "Proof"), ("Load",), ("Set",), ("Open", "Scope"), ("Section",)}
    assert nonterminals == {"decorated_vernac", "thm_token"}


def test_classify_takes_the_longest_row():
    assert classify(("Unset", "Guard", "Checking")).reason == "banned:Unset Guard Checking"
    assert classify(("Unset", "Printing", "All")).reason == "banned:Unset"
    assert classify(("Show", "Proof")).allowed and classify(("Show", "foo")).allowed
    assert classify(("Print", "Universes")).allowed is False
    assert classify(("intros",)) is None
    assert head_words("#[bypass_check(guard)] Fixpoint f") == ("#[",)
    assert head_words("Print   Assumptions\n t.") == ("Print", "Assumptions", "t")


def test_rejection_reasons_are_short_and_name_their_command():
    assert all(reason.startswith("banned:") and len(reason) <= 40 for reason in REJECTION_REASONS)
    assert {"banned:Unset Guard Checking", "banned:Drop", "banned:Declare ML Module", "banned:Fail",
            "banned:#[attributes]"} <= REJECTION_REASONS


@pytest.fixture(scope="module")
def session(coqtop):
    config = RocqConfig(coqtop=coqtop)
    started = RocqSession(config.argv(), env=config.child_env(), limits=config.limits(), name="coqtop-grammar")
    started.wait_ready(time.monotonic() + 60)
    yield started
    started.kill()


def hammer_installed() -> bool:
    where = subprocess.run(["coqc", "-where"], capture_output=True, text=True).stdout.strip()
    return bool(where) and (Path(where) / "user-contrib" / "Hammer").is_dir()


@pytest.fixture(scope="module")
def grammar(session):
    if not hammer_installed():
        message = "CoqHammer is not installed (apt-get install libcoq-hammer; tools/setup.sh does it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}, and CI=true requires it")
        pytest.skip(message)
    deadline = time.monotonic() + 300
    for library in (*PLUGIN_LIBRARIES, *HAMMER_LIBRARIES):
        assert session.run(f"Require {library}.", deadline).ok, library
    reply = session.run("Print Grammar vernac.", deadline)
    assert reply.ok
    return parse_vernac_grammar(reply.message)


@pytest.mark.rocq
def test_every_command_in_the_grammar_has_a_row(grammar):
    heads, _ = grammar
    assert len(heads) > 150   # the whole grammar was read, not a fragment
    unclassified = sorted(" ".join(h) for h in heads if classify(h) is None)
    assert not unclassified, f"commands of the installed Rocq missing from COMMANDS: {unclassified}"


@pytest.mark.rocq
def test_every_command_keyword_with_an_underscore_is_a_refused_row(grammar):
    # the checks read a capitalised word with an underscore (Qc_unfolds) as a
    # library's Ltac name unless a row says it is a command (Hammer_version)
    heads, _ = grammar
    underscored = {head for head in heads if "_" in head[0]}
    assert {("Hammer_version",), ("Hammer_cleanup",)} <= underscored   # CoqHammer's were read
    assert all(classify(head) is not None and not classify(head).allowed for head in underscored)


@pytest.mark.rocq
def test_every_form_of_an_allowed_command_is_a_row_of_its_own(grammar):
    heads, _ = grammar
    rows = {row.words for row in COMMANDS}
    implicit = sorted(" ".join(h) for h in heads if classify(h).allowed and h not in rows)
    assert not implicit, f"forms of allowed commands not classified on their own: {implicit}"


@pytest.mark.rocq
def test_productions_starting_with_a_nonterminal_are_known(grammar):
    _, nonterminals = grammar
    assert nonterminals == set(NONTERMINAL_HEADS)


@pytest.mark.rocq
def test_rows_the_grammar_does_not_print_are_real_commands(session, grammar):
    heads, _ = grammar
    printed_first_words = {h[0] for h in heads}
    hand_listed = {row.words[0] for row in COMMANDS} - printed_first_words - set(TOPLEVEL)
    assert {w for words in NONTERMINAL_HEADS.values() for w in words} <= hand_listed | printed_first_words
    deadline = time.monotonic() + 120
    # a command keyword followed by a stray ')' fails after the keyword; a
    # word that starts no command fails at the start of the sentence
    assert "illegal begin" in session.run("Frobnicate ).", deadline).message
    not_commands = [word for word in sorted(hand_listed)
                    if "illegal begin" in session.run(f"{word} ).", deadline).message]
    assert not not_commands, f"rows that start no command in this Rocq: {not_commands}"
    for word, instance in TOPLEVEL.items():
        assert classify((word,)) is not None and not classify((word,)).allowed
        if word != "Quit":
            assert "illegal begin" not in session.run(instance, deadline).message, word
    with pytest.raises(SessionDied):   # Quit is a command: it ends coqtop
        session.run(TOPLEVEL["Quit"], deadline)
