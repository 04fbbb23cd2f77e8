"""What the search needs to know of each proof language, in one registry.

A search is the same best-first walk over proof states in Rocq and in Lean
(:mod:`sgs.search.strategies`); four things differ, and each language's
entry of :data:`TACTIC_LANGUAGES` holds them:

* ``prover``: the :class:`~sgs.search.provers.Prover` adapter over the
  language's backend (:class:`~sgs.search.provers.RocqProver` keeps coqtop's
  one line of states; :class:`~sgs.search.provers.LeanProver` steps the
  REPL's proof-state ids);
* ``finishers``: the decision procedures tried at every state by default;
* ``first_tactic``: a sampled completion cut to one tactic (a model goes on
  past its tactic): Rocq's first sentence, Lean's first line;
* ``step_text``: a found path's tactic as the Solver is trained to write it
  (a Rocq sentence ends with its period; a Lean tactic as run).

The keys are the backend names of :data:`lean_env.backends.BACKENDS`, so a
run's :class:`~lean_env.backends.BackendSpec` picks its entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from sgs.prover.model_tactics import first_sentence
from sgs.search.provers import LeanProver, Prover, RocqProver, rocq_sentence
from sgs.search.settings import ROCQ_FINISHERS

__all__ = ["LEAN_FINISHERS", "TACTIC_LANGUAGES", "TacticLanguage", "build_prover", "first_line", "finishers_for",
           "tactic_language"]

#: Lean 4 / Mathlib's closing tactics: arithmetic decision procedures (``omega``
#: on Nat and Int, ``linarith`` over ordered fields, ``norm_num`` on numerals),
#: the simplifier, and Aesop's proof search.  Without Mathlib only ``omega``
#: and ``simp`` exist; the others then fail like any unknown tactic.
LEAN_FINISHERS = ("omega", "norm_num", "linarith", "simp", "aesop")


def first_line(text: str) -> str:
    """A Lean completion's first tactic: its first non-blank line, stripped
    (the lines after it are the model going on to the next steps)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


@dataclass(frozen=True)
class TacticLanguage:
    """One language's part of the search (module docstring)."""

    prover: Callable[[Any], Prover]
    finishers: tuple[str, ...]
    first_tactic: Callable[[str], str]
    step_text: Callable[[str], str]


TACTIC_LANGUAGES: dict[str, TacticLanguage] = {
    "rocq": TacticLanguage(RocqProver, ROCQ_FINISHERS, first_sentence, rocq_sentence),
    "lean": TacticLanguage(LeanProver, LEAN_FINISHERS, first_line, str.strip),
}


def tactic_language(name: str) -> TacticLanguage:
    """The entry of ``name`` (a backend or language name), or a ``ValueError`` naming the choices."""
    if name not in TACTIC_LANGUAGES:
        raise ValueError(f"the search knows no proof language {name!r}; choose one of {', '.join(TACTIC_LANGUAGES)}")
    return TACTIC_LANGUAGES[name]


def finishers_for(configured: Optional[Sequence[str]], language: str) -> tuple[str, ...]:
    """The finishers a config names (``evaluation.search.finishers``, ``solver.search.finishers``),
    or ``language``'s own where it names none (null)."""
    return tuple(configured) if configured is not None else tactic_language(language).finishers


def build_prover(spec: Any) -> Prover:
    """The search's prover over a fresh backend of ``spec`` (a :class:`~lean_env.backends.BackendSpec`)."""
    return tactic_language(spec.name).prover(spec.create())
