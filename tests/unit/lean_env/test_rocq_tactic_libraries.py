"""Tactic libraries (lean_env.rocq.tactic_libraries) without coqtop: the
setting's validation, the renamed statement copies, the comparison's logic on
scripted replies and its cache.  Against real Rocq:
``tests/integration/lean_env/test_rocq_tactic_libraries_real.py``."""

from __future__ import annotations

import pytest

from lean_env.rocq.checks import validate_statement
from lean_env.rocq.config import RocqConfig, RocqConfigError
from lean_env.rocq.output import Prompt, Reply
from lean_env.rocq.tactic_libraries import (
    AFTER, BEFORE, CHANGED, COMPARE, Meaning, MeaningCache, library_sentences, meaning_changed, meaning_source,
    renamed)

HAMMER = "From Hammer Require Import Tactics."


@pytest.mark.parametrize("sentence", [HAMMER, "Require Import Arith.", "Require Coq.Lists.List.",
                                      "From stdpp Require Export base list.", "  Require Import Coq.ZArith.ZArith.  "])
def test_require_sentences_are_accepted(sentence):
    assert RocqConfig(tactic_libraries=[sentence]).tactic_libraries == (sentence,)


@pytest.mark.parametrize("sentence", [
    "Unset Guard Checking.", "Require Import Arith. Unset Guard Checking.", "Require Import Arith",
    "Import Tactics.", "Require Import Arith (* x *).", "Axiom f : False.", "Require Import A.B..",
    "From Hammer Require Import Tactics. Require Import Arith.", "Load \"x.v\".", "Open Scope Z_scope.",
])
def test_anything_but_one_require_is_a_config_error_naming_it(sentence):
    with pytest.raises(RocqConfigError, match="tactic_libraries") as raised:
        RocqConfig(tactic_libraries=[sentence])
    assert repr(sentence) in str(raised.value)


def test_the_libraries_change_the_policy_fingerprint_and_none_leave_it_as_it_was():
    plain = RocqConfig().policy_fingerprint()
    assert RocqConfig(tactic_libraries=()).policy_fingerprint() == plain
    assert RocqConfig(tactic_libraries=[HAMMER]).policy_fingerprint() != plain
    assert RocqConfig(tactic_libraries=[HAMMER]).policy_fingerprint() != \
        RocqConfig(tactic_libraries=["From Coq Require Import QArith."]).policy_fingerprint()


def test_library_sentences_are_header_sentences():
    (sentence,) = library_sentences([HAMMER])
    assert sentence.text == HAMMER and sentence.kind == "command"


@pytest.mark.parametrize(("statement", "expected"), [
    ("Theorem t : True.", f"Theorem {BEFORE} : True."),
    ("Lemma (* t *) t(n : nat) : n = n.", f"Lemma (* t *) {BEFORE}(n : nat) : n = n."),
    ("Theorem α_t' {A} : A = A.", f"Theorem {BEFORE} {{A}} : A = A."),
    ("Example\nt\n: t = t.", f"Example\n{BEFORE}\n: t = t."),
])
def test_the_copy_renames_only_the_declared_name(statement, expected):
    assert renamed(validate_statement(statement), BEFORE) == expected


def _reply(ok: bool, pending: tuple[str, ...] = (), message: str = "") -> Reply:
    before = 1
    state = 2 if ok else before
    output = message if ok else f"Toplevel input, characters 0-1:\nError: {message or 'failed'}"
    return Reply(output=output, before=before, prompt=Prompt(proof=pending[0] if pending else "Coq", state=state,
                                                             pending=pending))


def scripted(failing: set[str]):
    """A ``run`` that fails the sentences in ``failing`` (matched by prefix) and logs the rest."""
    sent: list[str] = []

    def run(sentence: str) -> Reply:
        sent.append(sentence)
        ok = not any(sentence.startswith(f) for f in failing)
        pending = ()
        if ok and sentence.startswith(("Theorem", "Lemma")):
            pending = (sentence.split()[1],)
        elif ok and sentence == "Goal True.":
            pending = ("Unnamed_thm",)
        return _reply(ok, pending, "" if ok else f"Not equal in {sentence}")
    return run, sent


STATEMENT = validate_statement("Theorem t (n : nat) : n + 0 = n.")
LIBRARIES = library_sentences([HAMMER])


def test_an_unchanged_statement_runs_both_copies_the_libraries_and_the_comparison():
    run, sent = scripted(set())
    assert meaning_changed(run, STATEMENT, LIBRARIES) is None
    assert sent == [renamed(STATEMENT, BEFORE), "Admitted.", HAMMER, renamed(STATEMENT, AFTER), "Admitted.",
                    "Goal True.", COMPARE]


@pytest.mark.parametrize(("failing", "reason"), [
    ({COMPARE}, CHANGED),                                              # other terms
    ({f"Theorem {BEFORE}"}, CHANGED),                                  # elaborates only with the libraries
    ({f"Theorem {AFTER}"}, CHANGED),                                   # elaborates only without them
    ({f"Theorem {BEFORE}", f"Theorem {AFTER}"}, "statement_error"),    # elaborates in neither
    ({"From Hammer"}, "tactic_libraries_error"),
])
def test_what_the_comparison_concludes(failing, reason):
    run, _ = scripted(failing)
    found = meaning_changed(run, STATEMENT, LIBRARIES)
    assert found is not None and found.reason == reason
    assert found.status == ("system_error" if reason == "tactic_libraries_error" else "invalid")


def test_a_statement_error_names_the_statement_not_the_copy():
    run, _ = scripted({f"Theorem {BEFORE}", f"Theorem {AFTER}"})
    found = meaning_changed(run, STATEMENT, LIBRARIES)
    assert BEFORE not in found.messages[0]


def test_the_audit_file_runs_the_same_comparison():
    text = meaning_source(library_sentences(["Require Import Arith."]), STATEMENT, LIBRARIES)
    assert text.splitlines() == ["Require Import Arith.", renamed(STATEMENT, BEFORE), "Admitted.", HAMMER,
                                 renamed(STATEMENT, AFTER), "Admitted.", "Goal True.", COMPARE, "Abort."]


def test_the_cache_keeps_verdicts_not_system_errors_and_forgets_the_oldest():
    cache = MeaningCache(size=2)
    keys = [MeaningCache.key(LIBRARIES, validate_statement(f"Theorem t{i} : True."), LIBRARIES) for i in range(3)]
    assert cache.get(keys[0]) == (False, None)
    cache.put(keys[0], None)
    cache.put(keys[1], Meaning("invalid", CHANGED))
    cache.put(keys[2], Meaning("system_error", "tactic_libraries_error"))
    assert cache.get(keys[0]) == (True, None) and cache.get(keys[1]) == (True, Meaning("invalid", CHANGED))
    assert cache.get(keys[2]) == (False, None)
    cache.put(keys[2], None)
    assert cache.get(keys[0]) == (False, None)
