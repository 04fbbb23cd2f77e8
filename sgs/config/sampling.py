"""The generation settings of a run, per role (a part of the schema in
:mod:`sgs.config.schema`, kept in its own module so that each reads in one
sitting), and their checks (:func:`sampling_problems`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sgs.config.checks import at_least, fraction

#: sampling.conjecturer_grammar naming the prover language's built-in statement grammar
STATEMENT_GRAMMAR = "statement"


@dataclass
class RoleSampling:
    """Sampling settings of one role's generation engine."""

    #: Largest number of generated tokens per sample (prompt not included).
    max_tokens: int = 8192
    #: Softmax temperature; 0 is greedy decoding.
    temperature: float = 1.0
    #: Nucleus sampling mass; 1.0 disables top-p filtering.
    top_p: float = 1.0


@dataclass
class SamplingConfig:
    """Generation settings per role."""

    #: The Solver: writes k proofs per problem.
    solver: RoleSampling = field(default_factory=RoleSampling)
    #: The Conjecturer: writes one statement per unsolved target.
    conjecturer: RoleSampling = field(default_factory=RoleSampling)
    #: The Guide: writes a review with three sub-scores.
    guide: RoleSampling = field(default_factory=RoleSampling)
    #: Grammar every Conjecturer output follows (constrained decoding,
    #: sgs/method/roles/grammar.py): null for free text (the paper), ``statement``
    #: for the prover language's built-in statement grammar (Rocq: a typed
    #: fragment whose statements have no free variable; Lean has none, and
    #: samples freely), or the path of an EBNF file in xgrammar's dialect.
    #: The checks do not change: every statement is still elaborated.
    conjecturer_grammar: str | None = None
    #: Log-probs of this many most likely tokens are kept per generated
    #: position, for the token-entropy metric (SPEC §1.6); 0 keeps none.
    entropy_top_logprobs: int = 10
    #: Keep the Solver's iteration-0 samples (of the base weights) on the
    #: training targets in a cache shared by runs (``<cache dir>/starts/``), so
    #: that experiments with the same seed, base weights, engine backend and
    #: sampling settings start from the same iteration-0 samples: a comparison
    #: of two methods with one seed is then paired.  Off: every run draws its own.
    share_start_samples: bool = True


def sampling_problems(sampling: SamplingConfig) -> list[str]:
    """Every problem within the ``sampling`` node, one message per problem, each naming its key."""
    problems: list[str] = []
    for role in ("solver", "conjecturer", "guide"):
        settings: RoleSampling = getattr(sampling, role)
        at_least(problems, f"sampling.{role}.max_tokens", settings.max_tokens, 1)
        at_least(problems, f"sampling.{role}.temperature", settings.temperature, 0.0)
        fraction(problems, f"sampling.{role}.top_p", settings.top_p)
    at_least(problems, "sampling.entropy_top_logprobs", sampling.entropy_top_logprobs, 0)
    grammar = sampling.conjecturer_grammar
    if grammar is not None and grammar != STATEMENT_GRAMMAR and not Path(grammar).expanduser().is_file():
        problems.append(f"sampling.conjecturer_grammar={grammar!r} is neither null, {STATEMENT_GRAMMAR!r} "
                        "(the built-in grammar) nor a grammar file")
    return problems
