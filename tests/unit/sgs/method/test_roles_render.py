"""Prompt rendering from the packaged templates and from a custom directory."""

import jinja2
import pytest

from sgs.method.roles import PROMPT_NAMES, TEMPLATE_ROOT, Language, PromptSet, template_dir

HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"
STATEMENT = "theorem t (x : ℝ) (h : 0 < x) : 0 < x ^ 2 := by"
ROCQ_STATEMENT = "Theorem t : forall n : nat, n + 0 = n."


def test_every_language_ships_every_template():
    for language in Language:
        assert template_dir(language.value) == TEMPLATE_ROOT / language.value
        for name in PROMPT_NAMES:
            assert (TEMPLATE_ROOT / language.value / f"{name}.j2").is_file()


def test_lean_solver_prompt_is_the_non_cot_completion_format():
    prompt = PromptSet("lean").solver(HEADER, STATEMENT)
    assert prompt == f"Complete the following Lean 4 code:\n\n```lean4\n{HEADER.strip()}\n\n{STATEMENT}\n```"


def test_rocq_solver_prompt_uses_coq_blocks_and_skips_an_empty_header():
    prompt = PromptSet("rocq").solver("", ROCQ_STATEMENT)
    assert f"```coq\n{ROCQ_STATEMENT}\n```" in prompt
    assert "Proof." in prompt and "Qed." in prompt


@pytest.mark.parametrize("language, fence", [("lean", "```lean4"), ("rocq", "```coq")])
def test_conjecturer_and_guide_prompts_show_their_inputs(language, fence):
    prompts = PromptSet(language)
    target, conjecture = "TARGET_STATEMENT_TEXT", "CONJECTURE_STATEMENT_TEXT"
    conditioned = prompts.conjecturer(target)
    assert target in conditioned and fence in conditioned
    unconditioned = prompts.conjecturer_unconditioned()
    assert target not in unconditioned and fence in unconditioned
    guide = prompts.guide(target, conjecture)
    assert guide.index(target) < guide.index(conjecture)
    for tag in ("relevance_score", "redundancy_score", "conclusion_complexity_score"):
        assert f"<begin_{tag}>" in guide and f"<end_{tag}>" in guide


def test_inserted_text_is_not_evaluated_as_a_template():
    hostile = "theorem t : {{ 7 * 7 }} = {% raw %}x := by"
    prompt = PromptSet("lean").conjecturer(hostile)
    assert hostile in prompt and "49" not in prompt


def test_custom_directory(tmp_path):
    for name in PROMPT_NAMES:
        (tmp_path / f"{name}.j2").write_text(f"{name}: {{{{ target | default('-') }}}}\n")
    (tmp_path / "solver.j2").write_text("Prove {{ statement }} under {{ header }}")
    prompts = PromptSet(tmp_path)
    assert prompts.solver("  H  ", "S") == "Prove S under H"
    assert prompts.conjecturer("T") == "conjecturer: T"
    assert prompts.conjecturer_unconditioned() == "conjecturer_unconditioned: -"


def test_missing_template_is_reported_at_construction(tmp_path):
    (tmp_path / "solver.j2").write_text("x")
    with pytest.raises(FileNotFoundError, match="guide.j2"):
        PromptSet(tmp_path)


def test_template_using_an_unknown_variable_fails_loudly(tmp_path):
    for name in PROMPT_NAMES:
        (tmp_path / f"{name}.j2").write_text("{{ no_such_variable }}")
    with pytest.raises(jinja2.UndefinedError):
        PromptSet(tmp_path).guide("t", "c")
