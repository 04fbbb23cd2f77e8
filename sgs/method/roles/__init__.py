"""The three roles one model plays: prompt rendering and output parsing.

* :class:`PromptSet` renders the Solver, Conjecturer and Guide prompts from
  Jinja2 templates (packaged per language, or any directory);
* :func:`extract_proof`, :func:`extract_conjecture` and
  :func:`extract_guide_scores` parse untrusted model outputs into an
  :class:`Extraction` (a value or a :class:`Failure`), never raising;
* :class:`FailureCounter` counts outcomes per :class:`Role`;
* :func:`canonical_form` identifies statements up to renaming (and
  :func:`exact_form` by their text: :data:`STATEMENT_FORMS` names both), and
  :func:`has_disjunctive_conclusion` / :func:`conclusion_length` measure the
  paper's collapse signals.
"""

from sgs.method.roles.conjecturer import (
    CONJECTURE_NAME_PREFIX,
    conjecture_name,
    extract_conjecture,
    rename_theorem,
)
from sgs.method.roles.guide import SCORE_TAGS, extract_guide_scores
from sgs.method.roles.language import Language
from sgs.method.roles.normalize import (
    STATEMENT_FORMS,
    canonical_form,
    conclusion,
    conclusion_length,
    exact_form,
    has_disjunctive_conclusion,
)
from sgs.method.roles.render import PROMPT_NAMES, TEMPLATE_ROOT, PromptSet, template_dir
from sgs.method.roles.result import (
    MAX_OUTPUT_CHARS,
    Extraction,
    Failure,
    FailureCounter,
    Role,
)
from sgs.method.roles.solver import extract_proof

__all__ = [
    "CONJECTURE_NAME_PREFIX",
    "MAX_OUTPUT_CHARS",
    "PROMPT_NAMES",
    "SCORE_TAGS",
    "STATEMENT_FORMS",
    "TEMPLATE_ROOT",
    "Extraction",
    "Failure",
    "FailureCounter",
    "Language",
    "PromptSet",
    "Role",
    "canonical_form",
    "conclusion",
    "conclusion_length",
    "conjecture_name",
    "exact_form",
    "extract_conjecture",
    "extract_guide_scores",
    "extract_proof",
    "has_disjunctive_conclusion",
    "rename_theorem",
    "template_dir",
]
