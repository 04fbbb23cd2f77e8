"""Reading Rocq's text (pure): goal displays, ``Locate`` answers, and the
identifiers of a tactic that may name a lemma.

``coqtop -emacs`` prints the goals after every sentence of a proof::

    2 goals (ID 5)
      
      n : nat
      H : n <= 3
      ============================
      n + 0 = n

    goal 2 (ID 6) is:
     True

(the focused goal with its hypotheses, the others' conclusions only), or
``1 focused goal (shelved: 1) (ID 17)``, or ``No more goals.``; messages
around it (``<infomsg>`` blocks, ``idtac`` output) are not part of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

_GOAL_HEADER = re.compile(
    r"^(\d+) (?:focused )?goals?(?: \(shelved: \d+\))?(?: \(ID \d+\))?$|"
    r"^No more goals\b.*$|^All the remaining goals are on the shelf\b.*$", re.M)
_MARKUP_BLOCK = re.compile(r"<(infomsg|warning)>.*?</\1>", re.S)
_SEPARATOR = re.compile(r"^\s*=+$")
_OTHER_GOAL = re.compile(r"^goal \d+(?: \(ID \d+\))? is:$")


def goal_display(output: str) -> Optional[str]:
    """The goal display in a sentence's output (from its header line to the
    end), without the messages before it; None when the output shows none."""
    text = _MARKUP_BLOCK.sub("", output)
    m = _GOAL_HEADER.search(text)
    if m is None:
        return None
    return text[m.start():].strip()


def goal_count(display: str) -> int:
    """The number of goals a display announces (0 for ``No more goals.``)."""
    m = re.match(r"(\d+) ", display)
    return int(m.group(1)) if m else 0


@dataclass(frozen=True)
class Goal:
    #: each hypothesis as printed (``n, m : nat``, ``f := fun x => x : nat -> nat``), continuation
    #: lines joined with newlines; empty for the goals Rocq shows by their conclusion only
    hypotheses: tuple[str, ...]
    conclusion: str


def parse_goals(display: str) -> list[Goal]:
    """The goals of a display: the first (focused) one with its hypotheses, the
    others with their conclusions only (that is all ``coqtop`` prints of them)."""
    lines = display.splitlines()
    if not lines or not re.match(r"\d+ ", lines[0]):
        return []
    goals: list[Goal] = []
    i = 1
    hypotheses: list[str] = []
    # the focused goal: hypotheses up to the ===== line, then its conclusion
    separator = next((k for k in range(1, len(lines)) if _SEPARATOR.match(lines[k])), None)
    others_start = next((k for k in range(1, len(lines)) if _OTHER_GOAL.match(lines[k])), len(lines))
    if separator is not None and separator < others_start:
        for line in lines[i:separator]:
            if not line.strip():
                continue
            if line.startswith("   ") and hypotheses:      # a long hypothesis goes on, indented more
                hypotheses[-1] += "\n" + line.strip()
            else:
                hypotheses.append(line.strip())
        conclusion = "\n".join(line[2:] if line.startswith("  ") else line
                               for line in lines[separator + 1:others_start]).strip()
        goals.append(Goal(tuple(hypotheses), conclusion))
    # the other goals: "goal N (ID k) is:" then the conclusion, indented by one space
    k = others_start
    while k < len(lines):
        j = k + 1
        while j < len(lines) and not _OTHER_GOAL.match(lines[j]):
            j += 1
        goals.append(Goal((), "\n".join(line[1:] if line.startswith(" ") else line
                                        for line in lines[k + 1:j]).strip()))
        k = j
    return goals


def hypothesis_names(display: str) -> set[str]:
    """The names the displayed hypotheses bind (local names, never lemmas)."""
    names: set[str] = set()
    for goal in parse_goals(display):
        for hypothesis in goal.hypotheses:
            m = re.match(r"([^:]*?)\s*(?::=|:)", hypothesis)
            if m:
                names.update(n.strip() for n in m.group(1).split(",") if n.strip())
    return names


# -- Locate ---------------------------------------------------------------------

_LOCATE_ENTRY = re.compile(r"^(\w+(?: \w+)?) ([^\s]+)$")
_SHORTER = re.compile(r"^\s+\(shorter name to refer to it in current context is ([^\s)]+)\)$")


def parse_locate(output: str, query: str) -> Optional[tuple[str, str]]:
    """``(kind, path)`` of the object ``query`` denotes, from the answer of
    ``Locate Term <query>.``; None when it denotes none.

    ``Locate`` lists every object whose name ends like the query; the one the
    query denotes is the one printed without a "shorter name" note (the query
    is already its shortest name).  A qualified query longer than needed
    (``PeanoNat.Nat.add_comm``) still denotes the one entry whose path ends
    with it."""
    entries: list[list] = []     # [kind, path, shorter name or None]
    for line in output.splitlines():
        shorter = _SHORTER.match(line)
        if shorter and entries:
            entries[-1][2] = shorter.group(1)
            continue
        m = _LOCATE_ENTRY.match(line)
        if m and not line.startswith(("No ", "Error", "Toplevel")):
            entries.append([m.group(1), m.group(2), None])
    plain = [e for e in entries if e[2] is None]
    if plain:
        return plain[0][0], plain[0][1]
    if "." in query:
        ending = [e for e in entries if e[1] == query or e[1].endswith("." + query)]
        if len(ending) == 1:
            return ending[0][0], ending[0][1]
    return None


# -- identifiers in a tactic --------------------------------------------------------

#: a (qualified) Rocq identifier, not after ``%`` (a scope key) or inside a longer word; after
#: ``?`` it may be a lemma (``rewrite ?app_assoc``) or an evar (``?x``, which Locate finds nowhere)
_IDENTIFIER = re.compile(r"(?<![\w'%.])[^\W\d][\w']*(?:\.[^\W\d][\w']*)*")
#: what may come right before a word in tactic position (the word is then a tactic's name)
_TACTIC_POSITION = re.compile(r"(?:^|[;|\[]|\[>|\b\d+\s*:|\ball\s*:)\s*$")
#: tacticals after which the next word is a tactic's name too
_TACTICALS = frozenset({
    "try", "repeat", "do", "progress", "now", "by", "abstract", "solve", "first", "once", "exactly_once",
    "time", "timeout", "idtac", "tryif", "assert_succeeds", "assert_fails", "unshelve", "infoH", "info_eauto",
    # tactics that take a tactic: `intuition reflexivity`, `firstorder auto`
    "intuition", "dintuition", "firstorder",
})
#: a tactical (and its count, ``do 2``) right before a word
_AFTER_TACTICAL = re.compile(r"(?:^|[^\w'.])(?:" + "|".join(sorted(_TACTICALS)) + r")(?:\s+\d+)?\s*$")
#: words of the tactic language that are never lemma names where they appear
KEYWORDS = frozenset({
    "in", "as", "with", "at", "using", "by", "eqn", "fun", "forall", "exists", "let", "match", "end", "return",
    "if", "then", "else", "Type", "Prop", "Set", "SProp", "into", "from", "on", "to", "goal", "context",
    "lazymatch", "multimatch", "type", "of", "constr", "ltac", "open_constr", "uconstr", "ident", "fix", "cofix",
    "struct", "where", "for", "is", "core", "arith", "zarith", "real", "datatypes", "bool", "sets",
    *_TACTICALS,
})


def tactic_identifiers(code: str) -> list[str]:
    """The identifiers of a tactic sentence that may name a global object, in
    order, each once: every (qualified) identifier of ``code`` (the sentence
    with comments and string contents blanked, :attr:`Sentence.code`) except
    the tactics' own names (a word in tactic position, :func:`_in_tactic_position`),
    keywords and scope keys (``%nat``).  Which of
    them are lemmas is for ``Locate`` to say: ``symmetry`` is a tactic at the
    start of ``symmetry in H`` and a lemma in ``apply symmetry``."""
    found: list[str] = []
    for m in _IDENTIFIER.finditer(code):
        word = m.group(0)
        if _in_tactic_position(code[:m.start()]) or word in KEYWORDS or word in found:
            continue
        found.append(word)
    return found


def _in_tactic_position(before: str) -> bool:
    """Whether a word right after ``before`` is a tactic's name: at the start,
    after ``;``, ``|``, ``[``, a goal selector or a tactical (``try``,
    ``do 2``, ``now``), or after an opening parenthesis that is itself in such
    a place (``try (apply foo; auto)``, ``by (split; congruence)``; but not
    ``rewrite (foo x)``)."""
    while True:
        if _TACTIC_POSITION.search(before) or _AFTER_TACTICAL.search(before):
            return True
        stripped = before.rstrip()
        if not stripped.endswith("("):
            return False
        before = stripped[:-1]


def error_line(error: str) -> str:
    """The line of an error that says what went wrong: Rocq's ``Error:`` line,
    not the ``Toplevel input, characters 0-20:`` before it, and past the
    hypotheses of an ``In environment`` listing."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    for k, line in enumerate(lines):
        if not line.startswith(("Error", "Anomaly")):
            continue
        head, colon, rest = line.partition(":")
        if not colon:
            return line
        rest = rest.strip()
        later = lines[k + 1:]
        if not rest and later:
            rest = later.pop(0)
        if rest == "In environment":
            # the hypotheses (``a1 : aexpr``, ``f := ... : T``) come first, then the message
            said = [text for text in later if not re.match(r"[\w',\s]+ :=? ", text)]
            rest = said[0] if said else rest
        return f"{head}: {rest}"
    return lines[0] if lines else ""
