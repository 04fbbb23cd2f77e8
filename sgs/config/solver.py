"""How the Solver proves in self-play (``python -m sgs``): the ``solver`` node
of the schema (:mod:`sgs.config.schema`), in its own module so that each reads
in one sitting, and its checks (:func:`solver_problems`).

``solver.mode=sample`` (the default, the paper's method) samples whole
proofs, ``method.num_solver_samples`` per problem.  ``solver.mode=search``
runs the tactic-level search of ``sgs.search`` (docs/search.md) on every
target and conjecture instead, ``solver.attempts`` times each, and trains the
Solver on the tactic steps of the proofs it found (docs/search.md, "In
self-play").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sgs.config.checks import Choice, at_least, positive
from sgs.config.evaluation import SolverSearchConfig, search_problems


class SelfPlaySolverMode(Choice):
    """``solver.mode``: how the Solver attempts targets and conjectures in self-play."""

    #: whole proofs sampled, ``method.num_solver_samples`` per problem (the paper's method)
    sample = "sample"
    #: tactic-level search, ``solver.attempts`` searches per problem
    search = "search"


def searching(solver: "SolverConfig") -> bool:
    """Whether the Solver runs the tactic search (its actors, their prover sessions, the search's settings)."""
    return SelfPlaySolverMode(solver.mode) is SelfPlaySolverMode.search


@dataclass
class SolverConfig:
    """The Solver's way of proving in self-play (module docstring)."""

    #: ``sample`` (whole proofs) or ``search`` (tactic-level search).
    mode: SelfPlaySolverMode = SelfPlaySolverMode.sample
    #: In search mode: searches per target and per conjecture.  A problem's
    #: solve rate is the share of them whose proof the verifier pool accepted
    #: (each with its own budget, ``expansions``, and tactics sampled at the
    #: Solver's temperature); ``method.num_solver_samples`` plays this part in
    #: sample mode.
    attempts: int = 4
    #: In search mode: the most states each of a problem's searches expands,
    #: growing: attempt j gets entry j (past the end, the last entry).  The finishers are deterministic, so searches
    #: with equal budgets mostly agree (all or none of a conjecture's attempts
    #: succeed, and the Conjecturer earns nothing); with growing budgets the solve
    #: rate says how much search a problem needs: one proved at the root by every
    #: attempt scores 1, one only the largest budget proves 1/attempts.  Empty:
    #: every search the same, bounded by its time alone.
    expansions: list[int] = field(default_factory=lambda: [1, 4, 16, 64])
    #: In search mode: the time limit of one search (seconds), the re-check apart.
    seconds_per_attempt: float = 20.0
    #: In search mode: the search's settings (as ``evaluation.search``'s).
    search: SolverSearchConfig = field(default_factory=SolverSearchConfig)
    #: In search mode: a prover corpus (the layout of ``python -m sgs.corpus``;
    #: ``sgs.fill --adapt-anchor`` passes the project's own proofs) whose
    #: training split's tactic steps are replayed in each Solver update beside
    #: the found proofs' steps, so that training on its own short proofs does
    #: not narrow what the Solver proposes to what it already finds (the
    #: rarer steps of the human proofs stay in its top ``width``).  Null: none.
    anchor_corpus: str | None = None
    #: With an anchor corpus: its steps in an update per found step trained on
    #: (rounded; an update without found steps replays none).
    anchor_ratio: float = 1.0


def solver_problems(solver: SolverConfig) -> list[str]:
    """Every problem of the ``solver`` node, each naming its key; the search's
    settings are checked in search mode only (sample mode never reads them)."""
    problems: list[str] = []
    if not searching(solver):
        return problems
    at_least(problems, "solver.attempts", solver.attempts, 1)
    budgets = list(solver.expansions)
    if budgets and (min(budgets) < 1 or budgets != sorted(budgets)):
        problems.append(f"solver.expansions={budgets!r} must be budgets of at least 1 state, growing "
                        "(or empty: equal budgets)")
    positive(problems, "solver.seconds_per_attempt", solver.seconds_per_attempt)
    problems.extend(search_problems(solver.search, "solver.search"))
    if solver.anchor_corpus is not None:
        if not Path(solver.anchor_corpus).is_dir():
            problems.append(f"solver.anchor_corpus={solver.anchor_corpus!r} is not a directory (a prover corpus, "
                            "python -m sgs.corpus extract)")
        positive(problems, "solver.anchor_ratio", solver.anchor_ratio)
    return problems


def attempt_expansions(solver: SolverConfig, attempt: int) -> int | None:
    """The most states attempt ``attempt`` (0-based) of a problem expands; None: its time alone bounds it."""
    return solver.expansions[min(attempt, len(solver.expansions) - 1)] if solver.expansions else None


def search_cpus(solver: SolverConfig) -> int:
    """CPUs the search's actors reserve beside the run's other actors (one per search worker)."""
    return solver.search.workers if searching(solver) else 0
