"""Differential test: wherever our sentence splitter accepts a text, coqtop
reads it as the same number of sentences.

coqtop prints one prompt per sentence it reads, including sentences it
rejects (after a syntax error it skips to the end of the sentence as its own
lexer sees it), so counting prompts compares the two splitters without
having to write only well-formed Ltac.
"""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lean_env.rocq.checks import RocqTextError, split_sentences

PIECES = [
    "idtac.", 'idtac "a.b. c".', 'idtac "x"" . y".', "idtac (* c. *) .", "(* (* n. *) . *)", '(* "*)" . *)',
    "(*) . *)", "-", "+", "*", "--", "{", "}", "idtac Nat.add.", "idtac 1.5.", "idtac x.(y).", "2:", "{ idtac. }",
    "idtac", ".", "(", ")", '"', " ", " ", "\n", "\t", "auto with *.", "exact I .", "[x]:", "e", "→",
]


@pytest.mark.rocq
@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=14).map("".join))
def test_coqtop_reads_as_many_sentences_as_we_split(coqtop, text):
    try:
        sentences = split_sentences(text)
    except RocqTextError:
        assume(False)
        return
    assume(sentences)
    source = "Goal True.\n" + text + "\n"
    result = subprocess.run([coqtop, "-emacs", "-q"], input=source.encode(), capture_output=True, timeout=60)
    printed = (result.stdout + result.stderr).decode("utf-8", "replace")
    # one prompt at start-up, one after the Goal, then one per sentence
    assert printed.count("</prompt>") - 2 == len(sentences), (text, printed[-2000:])
