"""The Lean validity checks: pre-filter of untrusted text and verdicts from
REPL answers (pure functions, no process)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lean_env.lean.checks import (
    EXAMPLE_NAME, CheckPolicy, PreparedProof, Rejection, check_body, check_conjecture, check_tactic,
    check_trusted_statement, find_banned, judge_axioms, judge_command, mask_comments_and_literals, named_statement,
    normalize_body, parse_axioms, prepare_proof, theorem_name)
from lean_env.lean.protocol import CommandResponse, Message, parse_command_response
from tests.lean.lean_support import needs_fixtures, responses

STATEMENT = "theorem t (a b : Nat) : a + b = b + a := by"


def reason(result: object) -> str:
    return result.reason if isinstance(result, Rejection) else "accepted"


# -- normalisation -------------------------------------------------------------

def test_column_zero_body_is_indented_by_two():
    assert normalize_body("intro x\nsimp at x\n  exact x") == "  intro x\n  simp at x\n    exact x"


def test_indented_body_is_kept():
    assert normalize_body("    omega") == "    omega"


def test_tabs_line_ends_and_blank_edges_are_normalised():
    assert normalize_body("\r\n\n\tsimp \r\n\texact h\t\n\n") == "  simp\n  exact h"


def test_a_leading_comment_does_not_decide_the_indentation():
    assert normalize_body("-- first the easy case\nsimp") == "  -- first the easy case\n  simp"
    assert normalize_body("/- note -/\n  simp") == "/- note -/\n  simp"


def test_mask_keeps_lines_and_columns():
    text = 'simp -- sorry\n/- a /- nested -/ sorry -/ exact "sorry" \'s\''
    masked = mask_comments_and_literals(text)
    assert masked.problem is None
    assert len(masked.code) == len(text) and masked.code.count("\n") == 1
    assert "sorry" not in masked.code and "simp" in masked.code and "exact" in masked.code


# -- bodies ------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    "rw [Nat.add_comm]",
    "intro x\nsimp",
    "  simp (config := {decide := true})\n  omega",
    "-- sorry, this is a comment\n  ring",
    "/- admit -/ simp",
    "exact sorry_lemma a b",
    "exact h.sorry",
    "exact Filter.Eventually.exists h",
    "exact?",
    "decide",
    "have : \"sorry\" = \"sorry\" := rfl\n  simp",
    "have := '\"'\n  simp",
    "simp [Finset.card_eq, #s]",
    "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]",
    "exact fun h' => h'",
    "letI := Classical.decEq ℕ\n  simp",
    "exact @List.length_cons ℕ 1 [2, 3]",
    "intro init h_local stop_at\n  exact h_local",
    "exact «ofReduceBool_spec» h",
    "decide +kernel",
])
def test_ordinary_proofs_pass(body):
    result = check_body(body)
    assert isinstance(result, str), result


@pytest.mark.parametrize("body, expected", [
    ("", "empty"),
    ("   \n\t\n", "empty"),
    ("-- only a comment", "empty"),
    ("sorry", "banned:sorry"),
    ("  simp\n  admit", "banned:admit"),
    ("exact (sorry : False)", "banned:sorry"),
    ("native_decide", "banned:native_decide"),
    ("decide +native", "banned:native"),
    ("exact Lean.ofReduceBool _ _ h", "banned:ofReduceBool"),
    ("exact sorryAx _ false", "banned:sorryAx"),
    ("set_option maxHeartbeats 0 in\n  nlinarith", "banned:set_option"),
    ("open Real in simp", "banned:open"),
    ("run_tac Lean.Elab.Tactic.done", "banned:run_tac"),
    ("exact by_elab pure default", "banned:by_elab"),
    ("exact eval% 2 + 2", "banned:eval%"),
    ("  simp\ntheorem cheat : False := sorry", "leaves_block"),
    ("  simp\nexact h", "leaves_block"),
    ("  simp\n  theorem cheat : 1 = 1 := rfl", "banned:theorem"),
    ("  rfl\n  #eval IO.println \"hi\"", "banned:#eval"),
    ("  rfl\n  #exit", "banned:#exit"),
    ("  rfl\n  #print axioms t", "banned:#print"),
    ("  rfl\n  axiom cheat : False", "banned:axiom"),
    ("  rfl\n  instance : Inhabited Nat := ⟨0⟩", "banned:instance"),
    ("  rfl\n  end", "banned:end"),
    ("  rfl\n  namespace Foo", "banned:namespace"),
    ("  rfl\n  run_cmd pure ()", "banned:run_cmd"),
    ("  rfl\n  elab \"x\" : tactic => pure ()", "banned:elab"),
    ("  rfl\n  macro \"x\" : tactic => `(tactic| rfl)", "banned:macro"),
    ("  rfl\n  attribute [simp] Nat.add_comm", "banned:attribute"),
    ("  rfl\n  import Mathlib", "banned:import"),
    ("  rfl\n  @[implemented_by foo] def bar := 1", "banned:implemented_by"),
    # public exploit collections (issue 29): attributes, compiler internals, kernel bypasses
    ("  rfl\n  where @[init] hook : IO Unit := pure ()", "banned:@["),
    ("  let rec @[csimp] h : @id ℕ = @id ℕ := rfl\n  rfl", "banned:@["),
    ("  local instance : Add Nat := ⟨fun _ _ => 3⟩\n  rfl", "banned:local"),
    ("  rfl\n  scoped notation \"T\" => False", "banned:scoped"),
    ("  stop\n  simp", "banned:stop"),
    ("  bv_decide", "banned:bv_decide"),
    ("  bv_check \"proof.lrat\"", "banned:bv_check"),
    ("  exact lcProof", "banned:lcProof"),
    ("  exact unsafeCast h", "banned:unsafeCast"),
    ("  exact (Lean.addDeclCore d 0 none)", "banned:addDeclCore"),
    ("  exact Lean.withOptions (Lean.debug.skipKernelTC.set · true) x", "banned:skipKernelTC"),
    ("  exact Lean.modifyEnv id", "banned:modifyEnv"),
    ("  exact Lean.Meta.mkSorry t false", "banned:mkSorry"),
    ("  exact «sorryAx» _ false", "banned:sorryAx"),
    ("  exact Lean.«ofReduceBool» _ _ rfl", "banned:ofReduceBool"),
    ("  «sorry»", "banned:sorry"),
    # lexical tricks that would hide a token from a careless scanner
    ('  have := r"\\" ; #eval 1 ; "x"', "banned:#eval"),
    ("  have := '\"' ; #eval 1", "banned:#eval"),
    ("  exact «a -- » <;> theorem x : False := sorry", "banned:theorem"),
    ('  exact s!"{(sorry : Nat)}"', "syntax:interpolated_string"),
    ("  simp /- never closed", "syntax:unterminated_comment"),
    # a command keyword inside a string: after a parse error Lean reads literal text as commands
    # (issue 43; until CHECKS_VERSION 3 this string passed)
    ('have : "theorem" = "theorem" := rfl\n  simp', "banned:theorem"),
    ('  exact "never closed', "syntax:unterminated_string"),
    ("  exact «never closed", "syntax:unterminated_identifier"),
])
def test_hostile_bodies_are_rejected(body, expected):
    assert reason(check_body(body)) == expected


def test_quoted_names_are_recorded_and_attributes_explained():
    masked = mask_comments_and_literals('exact «sorryAx» "«x»" -- «y»\n  «my lemma»')
    assert masked.quoted == ("sorryAx", "my lemma")
    rejection = check_body("rfl\n  where @[init] hook : IO Unit := pure ()")
    assert isinstance(rejection, Rejection) and "attributes" in rejection.messages[0]


def test_a_disagreement_between_the_two_readings_refuses():
    # `/--/ sorry -/`: for Lean (and the tokenizer) one doc comment; for the simple scanner the comment
    # `/--/` and then code.  The word is allowed in a doc comment, not in code: refused.
    assert reason(check_body("/--/ sorry -/\n  simp")) == "banned:sorry"
    # the same word inside a comment both readings see is harmless
    assert reason(check_body("/- sorry -/\n  simp")) == "accepted"


def test_find_banned_names_the_token_or_the_unreadable_part():
    assert find_banned("exact h.sorry") is None
    assert find_banned("exact sorry«x»") == "sorry"
    assert find_banned('exact "#eval"') == "#eval"
    assert find_banned('exact s! "x"') == "syntax:interpolated_string"


@pytest.mark.parametrize("body, expected", [
    ("simp\ud800", "bad_encoding"),
    ("simp\x00", "control_char"),
    ("simp\x1b[2J", "control_char"),
    ("simp\x85theorem", "control_char"),
    ("simp\x0btheorem", "control_char"),
    ("x" * 3_000_000, "too_long"),
    (None, "bad_input"),
    (b"simp", "bad_input"),
])
def test_unusable_text_is_rejected(body, expected):
    assert reason(check_body(body)) == expected


def test_extra_banned_tokens_and_length_are_configurable():
    policy = CheckPolicy(extra_banned=frozenset({"nlinarith"}), max_body_chars=50)
    assert reason(check_body("nlinarith [sq_nonneg a]", policy)) == "banned:nlinarith"
    assert reason(check_body("simp" + " " * 60, policy)) == "too_long"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_never_crashes_the_checks(text):
    for result in (check_body(text), check_conjecture(text), prepare_proof(STATEMENT, text)):
        assert isinstance(result, (str, Rejection, PreparedProof))
    assert check_tactic(text) is None or isinstance(check_tactic(text), Rejection)


# -- statements --------------------------------------------------------------------

@pytest.mark.parametrize("statement, name", [
    ("theorem foo : 1 = 1 := by", "foo"),
    ("lemma Nat.foo_bar' {x : ℕ} (h₀ : x = 1) : x + 0 = 1 := by", "Nat.foo_bar'"),
    ("theorem «weird name» : True := by", "«weird name»"),
    ("@[simp] theorem h₀ : True := by", "h₀"),
    ("/-- says theorem decoy -/\ntheorem real_one : True := by", "real_one"),
    ("theorem mathd_algebra_1\n  (x : ℝ) : x = x := by", "mathd_algebra_1"),
    ("example : True := by", None),
])
def test_theorem_name(statement, name):
    assert theorem_name(statement) == name


def test_prepare_proof_splices_body_under_statement():
    prepared = prepare_proof(STATEMENT + "  ", "rw [Nat.add_comm]")
    assert prepared == PreparedProof(command=STATEMENT + "\n  rw [Nat.add_comm]", name="t",
                                     body="  rw [Nat.add_comm]")


def test_examples_get_a_name_for_the_axiom_check():
    assert named_statement("example (x : ℕ) : x = x := by") == (
        f"theorem {EXAMPLE_NAME} (x : ℕ) : x = x := by", EXAMPLE_NAME)
    assert prepare_proof("example : True := by", "trivial").name == EXAMPLE_NAME


@pytest.mark.parametrize("statement", ["def f : Nat := by", "theorem t : True := trivial", "theorem t : True",
                                       "", None, "theorem t\ud800 : True := by"])
def test_unusable_trusted_statements(statement):
    assert reason(check_trusted_statement(statement)) == "bad_statement"
    assert reason(prepare_proof(statement, "simp")) == "bad_statement"


@pytest.mark.parametrize("statement", [
    "theorem conj_1 (n : ℕ) (h : 0 < n) : n ^ 2 > 0 := by",
    "lemma conj_2 : ∀ x : ℝ, x ^ 2 ≥ 0 := by",
    "theorem conj_3 (x : ℕ) :\nx + 0 = x := by",
    "/-- a docstring -/ theorem conj_4 : True := by",
])
def test_good_conjectures(statement):
    assert isinstance(check_conjecture(statement), str)


@pytest.mark.parametrize("statement, expected", [
    ("def f : ℕ := by", "bad_statement"),
    ("@[simp] theorem t : True := by", "bad_statement"),
    ("theorem t : True := by trivial", "bad_statement"),
    ("theorem t : True", "bad_statement"),
    ("theorem a : True := trivial\ntheorem b : False := by", "banned:theorem"),
    ("theorem t : (sorry : Prop) := by", "banned:sorry"),
    ("theorem t : True := by\n#eval 1\ntheorem u : True := by", "banned:#eval"),
    ("theorem t (h : native_decide) : True := by", "banned:native_decide"),
    ("theorem t : («sorryAx» Prop false) := by", "banned:sorryAx"),
    ("theorem t : (s!\"{x}\" = \"\") := by", "syntax:interpolated_string"),
    ("theorem t : sorry«x» := by", "banned:sorry"),
    ("theorem t : True := by\ud800", "bad_encoding"),
    ("theorem t : True\x07 := by", "control_char"),
    ("theorem t : " + "x" * 30_000 + " := by", "too_long"),
    (42, "bad_input"),
])
def test_bad_conjectures(statement, expected):
    assert reason(check_conjecture(statement)) == expected


@pytest.mark.parametrize("tactic, expected", [
    ("exact?", "accepted"),
    ("induction x with\n| zero => rfl\n| succ x ih => simp", "accepted"),
    ("sorry", "banned:sorry"),
    ("set_option maxHeartbeats 0 in nlinarith", "banned:set_option"),
    ("stop", "banned:stop"),
    ("exact «sorryAx» _ false", "banned:sorryAx"),
    ("let rec @[init] f : IO Unit := pure ()\nrfl", "banned:@["),
    (".sorry", "banned:sorry"),
    ("aesop (add unsafe 50% apply foo)", "accepted"),
    ("exact unsafe foo", "banned:unsafe"),
    ("  ", "empty"),
    ("simp\ud800", "bad_encoding"),
])
def test_tactic_prefilter(tactic, expected):
    assert reason(check_tactic(tactic)) == expected


# -- verdicts from answers ------------------------------------------------------------

def axioms_answer(*texts: str, severity: str = "info") -> CommandResponse:
    return CommandResponse(env=7, messages=tuple(Message(severity, t) for t in texts))


@pytest.mark.parametrize("text, axioms", [
    ("'t' depends on axioms: [propext, Classical.choice, Quot.sound]", ("propext", "Classical.choice", "Quot.sound")),
    ("'t' depends on axioms: [propext,\n Classical.choice,\n Quot.sound]", ("propext", "Classical.choice", "Quot.sound")),
    ("'t' does not depend on any axioms", ()),
    ("'t' depends on axioms: [propext, sorryAx]", ("propext", "sorryAx")),
])
def test_parse_axioms(text, axioms):
    assert parse_axioms(axioms_answer(text)) == axioms


def test_axioms_within_the_default_set_pass():
    assert judge_axioms(axioms_answer("'t' depends on axioms: [propext, Classical.choice, Quot.sound]")) is None
    assert judge_axioms(axioms_answer("'t' does not depend on any axioms")) is None


@pytest.mark.parametrize("text, expected", [
    ("'t' depends on axioms: [propext, sorryAx]", "sorry"),
    ("'t' depends on axioms: [propext, Classical.choice, Lean.ofReduceBool, Lean.trustCompiler, Quot.sound]",
     "axioms"),
    ("'t' depends on axioms: [propext, Classical.choice, Quot.sound, t._native.native_decide.ax_1_1]", "axioms"),
    ("'t' depends on axioms: [cheat]", "axioms"),
])
def test_disallowed_axioms_fail(text, expected):
    assert reason(judge_axioms(axioms_answer(text))) == expected


def test_axiom_check_fails_closed():
    assert reason(judge_axioms(axioms_answer())) == "axioms_unknown"
    assert reason(judge_axioms(axioms_answer("unknown constant '_root_.t'", severity="error"))) == "axioms_unknown"
    twice = "'t' depends on axioms: [propext]"
    assert reason(judge_axioms(axioms_answer(twice, twice))) == "axioms_unknown"


def test_allowed_axioms_are_configurable():
    answer = axioms_answer("'t' depends on axioms: [propext, Lean.ofReduceBool]")
    assert judge_axioms(answer, frozenset({"propext", "Lean.ofReduceBool"})) is None


@needs_fixtures
def test_judge_command_on_recorded_answers():
    assert reason(judge_command(parse_command_response(responses("have_by_sorry")[0]))) == "prover_error"
    assert reason(judge_command(parse_command_response(responses("dup_sorries")[0]))) == "sorry"
    assert judge_command(parse_command_response(responses("mathlib/H20231020")[1])) is None
    rejection = judge_command(parse_command_response(responses("line_breaks")[0]))
    assert rejection.messages[0].startswith("error 1:23: unsolved goals")
