"""Pure tests of the Rocq text checks: sentence splitting and validators."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lean_env.rocq.checks import (
    BANNED_TACTICS,
    BANNED_WORDS,
    RocqTextError,
    check_characters,
    split_sentences,
    validate_header,
    validate_proof,
    validate_statement,
    validate_tactics,
)


def texts(source: str) -> list[str]:
    return [s.text for s in split_sentences(source)]


def reason(fn, *args, **kwargs) -> str:
    with pytest.raises(RocqTextError) as info:
        fn(*args, **kwargs)
    return info.value.reason


# -- sentence splitting ------------------------------------------------------

@pytest.mark.parametrize("source, expected", [
    ("Proof. intros. lia. Qed.", ["Proof.", "intros.", "lia.", "Qed."]),
    ("rewrite Nat.add_comm. apply Coq.Arith.PeanoNat.Nat.le_refl.",
     ["rewrite Nat.add_comm.", "apply Coq.Arith.PeanoNat.Nat.le_refl."]),
    ("exact 1.5.", ["exact 1.5."]),
    ("exact I .\nQed .", ["exact I .", "Qed ."]),
    ("lia.\tauto.\rreflexivity.", ["lia.", "auto.", "reflexivity."]),
    ("auto with *.", ["auto with *."]),
    ("destruct x as [|y ys]; simpl.", ["destruct x as [|y ys]; simpl."]),
    ("exact (f x).(proj1).", ["exact (f x).(proj1)."]),
])
def test_sentence_terminator_is_a_dot_before_a_blank(source, expected):
    assert texts(source) == expected


@pytest.mark.parametrize("source, expected", [
    ("split. - lia. - { auto. }", ["split.", "-", "lia.", "-", "{", "auto.", "}"]),
    ("-- a. ** b. +++ c.", ["--", "a.", "**", "b.", "+++", "c."]),
    ("-+ a.", ["-", "+", "a."]),          # Coq reads a run of one character as one bullet
    ("*a.", ["*", "a."]),
    ("{ - a. }", ["{", "-", "a.", "}"]),  # a bullet may follow a brace
    ("2: { lia. }", ["2: {", "lia.", "}"]),
    ("2:{ lia. }", ["2:{", "lia.", "}"]),
    ("[x]: { lia. }", ["[x]: {", "lia.", "}"]),
    ("{| x |}.", ["{", "| x |}."]),       # at a sentence start '{' is its own command
    ("f - g.", ["f - g."]),                 # '-' inside a sentence is not a bullet
])
def test_bullets_and_braces_are_sentences_at_a_sentence_start(source, expected):
    assert texts(source) == expected


def test_a_selector_brace_before_a_symbol_is_ambiguous():
    assert texts("[x]:{idtac. }") == ["[x]:{", "idtac.", "}"]
    assert reason(split_sentences, "2: {| a. }") == "syntax:brace"


def test_after_a_selector_brace_a_dash_is_not_a_bullet():
    # Coq's lexer leaves its between-commands state at the selector's number
    sentences = split_sentences("2: { - lia. }")
    assert [(s.kind, s.text) for s in sentences] == [("brace", "2: {"), ("command", "- lia."), ("brace", "}")]


@pytest.mark.parametrize("source, expected", [
    ("lia. (* Qed. *) auto.", ["lia.", "auto."]),
    ("lia. (* a (* nested. *) still. *) auto.", ["lia.", "auto."]),
    ('lia. (* "*)" still a comment. *) auto.', ["lia.", "auto."]),   # strings are lexed inside comments
    ("lia. (*) still a comment. *) auto.", ["lia.", "auto."]),       # '(*)' opens a comment
    ('idtac "a. b"" c.". lia.', ['idtac "a. b"" c.".', "lia."]),
    ('idtac "(* not a comment". lia.', ['idtac "(* not a comment".', "lia."]),
    ("lia(* c *). auto.", ["lia(* c *).", "auto."]),
    ("-(* c *) lia.", ["-", "lia."]),
])
def test_comments_and_strings_hide_dots(source, expected):
    assert texts(source) == expected


def test_code_blanks_comments_and_empties_strings():
    (sentence,) = split_sentences('idtac "Admitted." (* Admitted. *) x.')
    assert sentence.code == 'idtac ""   x.'
    assert "Admitted" not in sentence.words()


def test_sentences_are_exact_slices_of_the_source():
    source = "Proof. (* c *)\n  intros n.\n  - lia.\nQed."
    for sentence in split_sentences(source):
        assert source[sentence.start:sentence.start + len(sentence.text)] == sentence.text


@pytest.mark.parametrize("source, expected_reason", [
    ("lia", "syntax:unterminated"),
    ("lia. auto", "syntax:unterminated"),
    ("(* open", "syntax:unterminated"),
    ("(* a (* b *)", "syntax:unterminated"),
    ('(* "*) *)', "syntax:unterminated"),      # the string swallows the comment end
    ('idtac "open.', "syntax:unterminated"),
    ("lia.. ", "syntax:unterminated"),           # '..' then a blank is the ellipsis token, as in Coq
    ("auto...x ", "syntax:ellipsis"),
    ("auto.... ", "syntax:ellipsis"),
    ("x.(* c *) y.", "syntax:comment"),        # Coq reads '.(' as a keyword here
    ("2: { {|x. }", "syntax:brace"),
    ("2: {{ a. }", "syntax:brace"),
])
def test_unsplittable_text_is_refused(source, expected_reason):
    assert reason(split_sentences, source) == expected_reason


def test_empty_and_comment_only_text_has_no_sentence():
    assert split_sentences("") == []
    assert split_sentences("  (* nothing *)\n") == []


# -- characters --------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "a\x00b", "a\x07b", "\x1b[31m", "a\x7fb", "a\u200bb", "a\u202eb", "a\ufeffb", "a\u00a0b",
    "a\u2028b", "a\ud800b", "a\udfffb", "a\ue000b",
])
def test_control_format_surrogate_and_exotic_space_characters_are_refused(text):
    assert reason(check_characters, text, max_chars=100, what="proof") == "bad_character"


def test_ordinary_unicode_is_accepted():
    text = "forall x : ℕ, x ≤ x → ∀ α, α = α\t\n"
    assert check_characters(text, max_chars=100, what="statement") == text


@pytest.mark.parametrize("value", [None, b"Proof. Qed.", 42, ["Proof."]])
def test_non_strings_are_refused(value):
    assert reason(check_characters, value, max_chars=100, what="proof") == "bad_input"


def test_over_long_text_is_refused_before_scanning():
    assert reason(validate_proof, "Proof. " + "idtac. " * 800_000 + "Qed.", max_chars=50_000) == "too_long"


def test_too_many_sentences_are_refused():
    assert reason(validate_proof, "Proof. " + "idtac. " * 50 + "Qed.", max_sentences=20) == "too_long"


# -- proofs ------------------------------------------------------------------

@pytest.mark.parametrize("proof", [
    "Proof. intros. lia. Qed.",
    "Proof.\n  induction n as [|n IH]; simpl.\n  - reflexivity.\n  - rewrite IH. reflexivity.\nQed.",
    "Proof. split; [exact I | exact I]. Qed.",
    "Proof. split. { exact I. } { exact I. } Qed.",
    "Proof. split. 2: { exact I. } exact I. Qed.",
    "Proof. split. all: exact I. Qed.",
    "Proof. split. 1-2: exact I. Qed.",
    "Proof. split. [x]: exact I. Qed.",
    "Proof. (tauto). Qed.",
    "Proof. eapply ex_intro. Unshelve. 2: exact 0. reflexivity. Qed.",
    "Proof. (* Qed. *) exact I. (* Admitted. *) Qed. (* done *)",
    'Proof. idtac "Qed. Admitted.". exact I. Qed.',
    "Proof. exact (Nat.add_comm 1 2). Qed.",
    "Proof. intros; timeout 5 lia. Qed.",
    "Proof . lia. Qed .",
    "Proof. Show. lia. Qed.",
    "Proof. Print nat. Search nat. Check I. About I. Show Proof. Show Existentials. exact I. Qed.",
    "Proof using. lia. Qed.",
    "Proof with auto. split... Qed.",
    "Proof. lia. Defined.",
    # forms of the Coq 8.16 standard library's own proofs
    "Proof. intros. Z.swap_greater. Z.order. Qed.",
    "Proof. intros. Z.le_elim H. Z.to_euclidean_division_equations. lia. Qed.",
    "Proof. split; (auto with *). Qed.",
    "Proof. intuition (auto with *). Qed.",
    "Proof. split; [ exact I |(* the right one *) exact I ]. Qed.",
    "Proof. repeat split; [ exact I .. ]. Qed.",
    "Proof. repeat split; [> exact I .. ]. Qed.",
    "Proof. repeat split; [ exact I | .. ]. Qed.",
    "Proof. Open Scope Z_scope. lia. Qed.",
    "Proof. Local Open Scope Z_scope. Close Scope Z_scope. lia. Qed.",
    "Proof. Eval cbv in 1 + 1. exact I. Qed.",
    "Proof. now induction u; [|simpl; rewrite IHu..]. Qed.",
    "Proof. intros. Qc_unfolds; fold (this x). Inversion_clear H. Qed.",
])
def test_well_formed_proofs_are_accepted(proof):
    sentences = validate_proof(proof)
    assert sentences[0].code.startswith("Proof") and sentences[-1].code.startswith(("Qed", "Defined"))


@pytest.mark.parametrize("proof, expected", [
    ("", "empty"),
    ("(* only a comment *)", "empty"),
    ("intros. lia. Qed.", "proof_start"),
    ("Proof.", "proof_end"),
    ("Proof. lia.", "proof_end"),
    ("Proof. lia. (* Qed. *)", "proof_end"),
    ("Proof I. Qed.", "banned:Proof_variant"),
    ('Proof Mode "Classic". lia. Qed.', "banned:Proof Mode"),
    ("Proof using admit. lia. Qed.", "banned:admit"),
    ("Proof with admit. lia. Qed.", "banned:admit"),
    ("Proof. lia. Defined foo.", "banned:Defined"),
    ("Proof. lia. Save foo.", "banned:Save"),
    ("Proof. lia. Defined. exact I. Qed.", "after_qed"),
    ("Proof. Show Proof. Print Universes. Qed.", "banned:Print Universes"),
    ("Proof. Pwd. Qed.", "banned:Pwd"),
    ('Proof. Locate File "x.v". Qed.', "banned:Locate File"),
    ("Proof. Frobnicate. Qed.", "unknown_command"),
    ("Proof. Check ltac:(admit). Qed.", "banned:admit"),
    ("Proof. About Admitted. Qed.", "banned:Admitted"),
    ("Proof. 2: Print nat. Qed.", "not_a_tactic"),
    ("Proof. Admitted.", "banned:Admitted"),
    ("Proof. admit. Qed.", "banned:admit"),
    ("Proof. split; [admit|]. Qed.", "banned:admit"),
    ("Proof. exact (M.admit). Qed.", "banned:admit"),
    ("Proof. give_up. Qed.", "banned:give_up"),
    ("Proof. exact_no_check I. Qed.", "banned:exact_no_check"),
    ("Proof. Abort.", "banned:Abort"),
    ("Proof. Abort. Theorem t : True. Proof. exact I. Qed.", "banned:Abort"),
    ("Proof. Axiom cheat : False. exact (False_ind _ cheat). Qed.", "banned:Axiom"),
    ("Proof. Parameter p : False. Qed.", "banned:Parameter"),
    ("Proof. Hypothesis h : False. Qed.", "banned:Hypothesis"),
    ("Proof. Variable v : False. Qed.", "banned:Variable"),
    ("Proof. Conjecture c : False. Qed.", "banned:Conjecture"),
    ("Proof. Definition d := 0. Qed.", "banned:Definition"),
    ("Proof. Fixpoint f (n : nat) : nat := f n. Qed.", "banned:Fixpoint"),
    ("Proof. Inductive i := . Qed.", "banned:Inductive"),
    ("Proof. Instance x : Foo. Qed.", "banned:Instance"),
    ("Proof. Program Definition d := 0. Qed.", "banned:Program"),
    ("Proof. Module M. Qed.", "banned:Module"),
    ("Proof. Section S. Qed.", "banned:Section"),
    ("Proof. Ltac t := idtac. t. Qed.", "banned:Ltac"),
    ("Proof. Local Ltac t := idtac. Qed.", "banned:Local"),
    ("Proof. Global Set Printing All. Qed.", "banned:Global"),
    ("Proof. Reset Initial. Qed.", "banned:Reset"),
    ("Proof. Back 2. Qed.", "banned:Back"),
    ("Proof. BackTo 1. Qed.", "banned:BackTo"),
    ("Proof. Undo. Qed.", "banned:Undo"),
    ("Proof. Restart. Qed.", "banned:Restart"),
    ("Proof. Unset Guard Checking. Qed.", "banned:Unset Guard Checking"),
    ("Proof. all: Unset Guard Checking. Qed.", "banned:Unset Guard Checking"),
    ("Proof. Unset Positivity Checking. Qed.", "banned:Unset Positivity Checking"),
    ("Proof. Unset Universe Checking. Qed.", "banned:Unset Universe Checking"),
    ("Proof. Unset Printing Notations. Qed.", "banned:Unset"),
    ("Proof. Set Printing All. Qed.", "banned:Set"),
    ('Proof. Redirect "out" Print nat. Qed.', "banned:Redirect"),
    ('Proof. Extraction "f.ml" nat. Qed.', "banned:Extraction"),
    ('Proof. Cd "/tmp". Qed.', "banned:Cd"),
    ('Proof. Load "evil". Qed.', "banned:Load"),
    ('Proof. Declare ML Module "evil". Qed.', "banned:Declare ML Module"),
    ('Proof. Add LoadPath "/tmp" as Evil. Qed.', "banned:Add LoadPath"),
    ('Proof. Add Rec LoadPath "/tmp" as Evil. Qed.', "banned:Add Rec LoadPath"),
    ("Proof. Require Import Classical. exact I. Qed.", "banned:Require"),
    ("Proof. Import Nat. Qed.", "banned:Import"),
    ("Proof. Drop. Qed.", "banned:Drop"),
    ("Proof. Time lia. Qed.", "banned:Time"),
    ("Proof. Timeout 5 lia. Qed.", "banned:Timeout"),
    ("Proof. Fail lia. Qed.", "banned:Fail"),
    ("Proof. Succeed lia. Qed.", "banned:Succeed"),
    ("Proof. Opaque plus. Qed.", "banned:Opaque"),
    ("Proof. Transparent plus. Qed.", "banned:Transparent"),
    ("Proof. Arguments plus : simpl never. Qed.", "banned:Arguments"),
    ("Proof. Hint Resolve I. Qed.", "banned:Hint"),
    ('Proof. Notation "x" := 0. Qed.', "banned:Notation"),
    ('Proof. Infix "+++" := plus. Qed.', "banned:Infix"),
    ('Proof. Tactic Notation "t" := idtac. Qed.', "banned:Tactic Notation"),
    ("Proof. Goal True. exact I. Qed.", "banned:Goal"),
    ("Proof. exact I. Qed. Theorem u : True. Proof. exact I. Qed.", "after_qed"),
    ("Proof. exact I. Qed. Check I.", "after_qed"),
    ("Proof. exact I. Qed. Goal False.", "after_qed"),
    ("Proof. exact I. Qed. junk", "syntax:unterminated"),
    ("Proof. #[local] Hint Resolve I. Qed.", "banned:#[attributes]"),
    ("Proof. start ltac profiling. exact I. Qed.", "banned:ltac_profiling"),
    ("Proof. infoH start ltac profiling. exact I. Qed.", "banned:ltac_profiling"),
    ("Proof. Check ltac:(start ltac profiling; exact I). exact I. Qed.", "banned:ltac_profiling"),
    ("Proof with start ltac profiling. exact I. Qed.", "banned:ltac_profiling"),
    ("Proof. Print LoadPath. exact I. Qed.", "banned:Print LoadPath"),
    ("Proof. Print ML Path. exact I. Qed.", "banned:Print ML Path"),
    ("Proof. Open Scope Z_scope. Admitted.", "banned:Admitted"),
    ("Proof. Z.order. Admitted.", "banned:Admitted"),
    ("Proof. Z.order; admit. Qed.", "banned:admit"),
    ("Proof. Print.Admitted. Qed.", "banned:Admitted"),
    ("Proof. Abort.foo. Qed.", "banned:Abort"),
    # Coq 8.16's known soundness bugs (lean_env.rocq.known_bugs)
    ("Proof. fix f 1. intros n. exact (f n). Qed.", "known_bug:fixpoints"),
    ("Proof. cofix c. exact c. Qed.", "known_bug:fixpoints"),
    ("Proof. exact ((fix f (n : nat) : False := f n) 0). Qed.", "known_bug:fixpoints"),
    ("Proof. refine (let fix f (n : nat) : False := f n in f 0). Qed.", "known_bug:fixpoints"),
    ("Proof with fix f 1. exact I. Qed.", "known_bug:fixpoints"),
    ("Proof. Check (fix f (n : nat) : nat := 0). exact I. Qed.", "known_bug:fixpoints"),
    ("Proof. vm_compute. reflexivity. Qed.", "known_bug:vm_reduction"),
    ("Proof. native_compute. reflexivity. Qed.", "known_bug:vm_reduction"),
    ("Proof. exact (eq_refl <: 1 = 1). Qed.", "known_bug:vm_reduction"),
    ("Proof. exact (eq_refl <<: 1 = 1). Qed.", "known_bug:vm_reduction"),
    ("Proof. Compute 1 + 1. exact I. Qed.", "known_bug:vm_reduction"),
    ("Proof. Eval vm_compute in 1 + 1. exact I. Qed.", "known_bug:vm_reduction"),
    ("Proof. all: vm_compute. Qed.", "known_bug:vm_reduction"),
    ("Proof. (* outer (* inner *) *) Admitted. (* Qed. *)", "banned:Admitted"),
    ('Proof. idtac "unterminated. Qed.', "syntax:unterminated"),
])
def test_hostile_proofs_are_refused_with_a_reason(proof, expected):
    assert reason(validate_proof, proof) == expected


def test_known_bug_features_pass_when_the_config_allows_them():
    proof = "Proof. fix f 1. vm_compute. exact (eq_refl <: 1 = 1). Compute 1. Qed."
    assert reason(validate_proof, proof, allowed=frozenset({"fixpoints"})) == "known_bug:vm_reduction"
    assert reason(validate_proof, proof, allowed=frozenset({"vm_reduction"})) == "known_bug:fixpoints"
    validate_proof(proof, allowed=frozenset({"fixpoints", "vm_reduction"}))
    statement = "Theorem t : (fix f (n : nat) : nat := 0) 0 = 0."
    assert reason(validate_statement, statement) == "known_bug:fixpoints"
    assert validate_statement(statement, allowed=frozenset({"fixpoints"})).name == "t"
    assert reason(validate_tactics, "fix f 1.") == "known_bug:fixpoints"
    validate_tactics("fix f 1.", allowed=frozenset({"fixpoints"}))


def test_known_bug_words_inside_names_comments_and_strings_do_not_count():
    validate_proof("Proof. (* fix it with vm_compute *) exact (Wf.Fix_eq). Qed.")
    validate_proof('Proof. idtac "fix <: Compute". apply fix_lemma. apply Nat.fix_point. Qed.')


def test_the_ellipsis_must_stand_before_a_blank_or_a_bracket():
    assert texts("[ auto .. ]. [> auto .. ].") == ["[ auto .. ].", "[> auto .. ]."]
    assert texts("[|simpl; rewrite IHu..]. ") == ["[|simpl; rewrite IHu..]."]
    assert texts("[intros d0..| ]. ") == ["[intros d0..| ]."]
    assert reason(split_sentences, "[ auto ..x ]. ") == "syntax:ellipsis"
    assert reason(split_sentences, "[ auto ..) ]. ") == "syntax:ellipsis"


def test_a_comment_end_outside_a_comment_is_two_tokens():
    # as Coq 8.16 lexes it: '*' then ')', so ``auto with *)`` closes the parenthesis
    assert texts("(auto with *). *) b.") == ["(auto with *).", "*", ") b."]


def test_comment_or_string_hidden_keywords_do_not_count():
    validate_proof("Proof. (* outer (* inner *) Admitted. *) exact I. Qed.")
    validate_proof('Proof. (* "*)" Admitted. *) exact I. Qed.')
    validate_proof('Proof. idtac "Admitted. Axiom x : False.". exact I. Qed.')


# -- statements --------------------------------------------------------------

@pytest.mark.parametrize("statement, keyword, name", [
    ("Theorem add_comm' : forall n m : nat, n + m = m + n.", "Theorem", "add_comm'"),
    ("Lemma l (n : nat) : n = n.", "Lemma", "l"),
    ("Example e: 1 + 1 = 2.", "Example", "e"),
    ("Corollary c {A : Type} (x : A) : x = x.", "Corollary", "c"),
    ("Proposition p : True.", "Proposition", "p"),
    ("Fact f : True.", "Fact", "f"),
    ("Remark r : True.", "Remark", "r"),
    ("Theorem m (n : nat) : match n with 0 => True | S _ => True end.", "Theorem", "m"),
    ("Theorem l : let x := 1 in x = 1.", "Theorem", "l"),
    ("(* about addition *) Theorem t : 0 + 0 = 0. (* trailing *)", "Theorem", "t"),
    ("Theorem 証明 : 1 + 1 = 2.", "Theorem", "証明"),
    ("Lemma α_β' (n : nat) : n = n.", "Lemma", "α_β'"),
])
def test_statements_name_their_theorem(statement, keyword, name):
    parsed = validate_statement(statement)
    assert (parsed.keyword, parsed.name) == (keyword, name)


@pytest.mark.parametrize("statement, expected", [
    ("", "statement_shape"),
    ("Theorem t : True. Theorem u : True.", "statement_shape"),
    ("Theorem t : True. Proof. exact I. Qed.", "statement_shape"),
    ("Theorem t : True. Admitted.", "statement_shape"),
    ("Definition t : True.", "statement_shape"),
    ("Axiom t : False.", "statement_shape"),
    ("Goal True.", "statement_shape"),
    ("Local Theorem t : True.", "statement_shape"),
    ("#[universes(polymorphic)] Theorem t : True.", "statement_shape"),
    ("Theorem t@{u} : True.", "statement_shape"),
    ("Theorem : True.", "statement_shape"),
    ("Theorem a : True with b : True.", "statement_shape"),
    ("Theorem a : forall αmatch : nat, True with b : True.", "statement_shape"),
    ("Theorem a : forall matchα : nat, True with b : True.", "statement_shape"),
    ("Theorem t : (fix f (n : nat) : nat := 0) 0 = 0.", "known_bug:fixpoints"),
    ("Theorem t : (eq_refl <: 0 = 0) = eq_refl.", "known_bug:vm_reduction"),
    ("Theorem t : True", "syntax:unterminated"),
    ("Theorem t : ltac:(exact True).", "banned:ltac"),
    ("Theorem t : (ltac:(admit) : Prop).", "banned:admit"),
    ("Theorem t : Admitted.", "banned:Admitted"),
    ("Theorem t : True\x00.", "bad_character"),
    (None, "bad_input"),
])
def test_bad_statements_are_refused(statement, expected):
    assert reason(validate_statement, statement) == expected


# -- headers and tactic steps -------------------------------------------------

def test_headers_load_libraries_and_open_scopes_only():
    header = ("From Coq Require Import Arith.Arith Lia.\nRequire Coq.Lists.List.\nRequire Export ZArith.\n"
              "Import ListNotations.\nExport Nat.\nOpen Scope Z_scope.\nLocal Close Scope nat_scope.")
    assert len(validate_header(header)) == 7
    assert validate_header("") == []


@pytest.mark.parametrize("header", [
    "Axiom cheat : False.",
    "Require Import Arith.\nUnset Guard Checking.",
    "Set Implicit Arguments.",
    'Load "x".',
    "Require Import Arith",
    "Definition x := 0.",
])
def test_other_header_sentences_are_refused(header):
    assert reason(validate_header, header).startswith(("header_rejected", "syntax:"))


def test_tactic_steps_are_tactics_only():
    assert [s.text for s in validate_tactics("intros. - lia.")] == ["intros.", "-", "lia."]
    assert reason(validate_tactics, "Qed.") == "banned:Qed"
    assert reason(validate_tactics, "Proof.") == "banned:Proof"
    assert reason(validate_tactics, "admit.") == "banned:admit"
    assert reason(validate_tactics, "  ") == "empty"


# -- properties ---------------------------------------------------------------

#: characters that matter to the lexer, plus a few words that matter to the checks
TRICKY = st.lists(st.sampled_from([
    "(", ")", "*", "(*", "*)", '"', '""', ".", "..", " ", "\n", "\t", "-", "+", "{", "}", ":", "2", "[x]",
    "a", "Nat.add", "Proof.", "Qed.", "Admitted.", "admit", "lia", "Theorem t : True.", "\x00", "\ud800",
    "é", "→", "\u00a0",
]), max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=200), TRICKY))
def test_checks_never_raise_anything_but_text_errors(text):
    for check in (split_sentences, validate_proof, validate_statement, validate_header, validate_tactics):
        try:
            check(text)
        except RocqTextError as e:
            assert e.reason and isinstance(e.detail, str)


@settings(max_examples=400, deadline=None)
@given(TRICKY)
def test_accepted_proofs_have_the_required_shape(text):
    try:
        sentences = validate_proof(text)
    except RocqTextError:
        return
    assert sentences[0].code.replace(" ", "") == "Proof."
    assert sentences[-1].code.replace(" ", "") == "Qed."
    for sentence in sentences[1:-1]:
        assert not (BANNED_WORDS | BANNED_TACTICS).intersection(sentence.words())


@settings(max_examples=300, deadline=None)
@given(TRICKY)
def test_split_sentences_are_ordered_exact_slices(text):
    try:
        sentences = split_sentences(text)
    except RocqTextError:
        return
    end = 0
    for sentence in sentences:
        assert sentence.start >= end
        assert text[sentence.start:sentence.start + len(sentence.text)] == sentence.text
        end = sentence.start + len(sentence.text)


# -- issue 43: plugin commands, process-starting tactics, Ltac2's VM ---------------

@pytest.mark.parametrize("proof, reason", [
    ("Proof. Hammer_version. sauto. Qed.", "banned:Hammer_version"),
    ("Proof. Hammer_cleanup. sauto. Qed.", "banned:Hammer_cleanup"),
    ("Proof. Hammer_features_cached n. sauto. Qed.", "banned:Hammer_features_cached"),
    ("Proof. 1: Hammer_objects. sauto. Qed.", "banned:Hammer_objects"),
    ("Proof. hammer. Qed.", "banned:hammer"),
    ("Proof. predict 10. Qed.", "banned:hammer"),
    ('Proof. hammer_hook "eprover" "t". Qed.', "banned:hammer"),
    ("Proof. first [ best | sauto ]. Qed.", "banned:hammer"),
    ("Proof. try sbest. hbest. Qed.", "banned:hammer"),
    ("Proof. ltac1:(hammer). Qed.", "banned:hammer"),
    ("Proof. Ltac2 Eval 1. exact I. Qed.", "banned:Ltac2"),
    ("Proof. Ltac2 Notation \"x\" := (). exact I. Qed.", "banned:Ltac2"),
    ("Proof. Std.vm None { Std.on_hyps := None; Std.on_concl := Std.AllOccurrences }. Qed.",
     "known_bug:vm_reduction"),
    ("Proof. Std.native None x. Qed.", "known_bug:vm_reduction"),
    ("Proof. let _ := Std.eval_vm None constr:(1) in exact I. Qed.", "known_bug:vm_reduction"),
    ("Proof. let _ := Std.eval_native None constr:(1) in exact I. Qed.", "known_bug:vm_reduction"),
])
def test_plugin_commands_process_tactics_and_ltac2_vm_are_refused(proof, reason):
    with pytest.raises(RocqTextError) as refused:
        validate_proof(proof)
    assert refused.value.reason == reason


@pytest.mark.parametrize("proof", [
    "Proof. sauto. Qed.",
    "Proof. induction n; hauto lq: on. Qed.",
    "Proof. qauto. sfirstorder. scrush. Qed.",
    "Proof. intros n. Control.refine (fun () => constr:(I)). Qed.",
    "Proof. ltac1:(auto). Qed.",
    "Proof. intros best_bound. apply Std_vm_lemma. Qed.",   # words that merely contain the names
    "Proof. by case: b. Qed.",
])
def test_the_hammer_family_and_ltac2_tactics_stay_allowed(proof):
    validate_proof(proof)
