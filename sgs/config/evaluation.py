"""The evaluation settings of a run and of ``python -m sgs.evaluate``
(a part of the schema in :mod:`sgs.config.schema`, kept in its own module
so that each reads in one sitting), and their checks (:func:`evaluation_problems`;
the benchmark's name against the prover's language is checked with the other
nodes, in :mod:`sgs.config.validation`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sgs.config.checks import Choice, at_least, positive


class Contamination(Choice):
    """``evaluation.contamination``: what a run does with conjectures that state a benchmark problem."""

    exclude = "exclude"
    flag = "flag"


class SolverMode(Choice):
    """``evaluation.solver_mode``: how ``python -m sgs.evaluate`` proves (docs/search.md)."""

    #: whole proofs sampled, ``samples_per_problem`` each: pass@k
    sample = "sample"
    #: tactic-level search, ``seconds_per_target`` each: the share proved within the time
    search = "search"
    #: sampling first, then the search on the problems no sample proved
    both = "both"


class SearchStrategy(Choice):
    """``evaluation.search.strategy``: the names of ``sgs.search.strategies.STRATEGIES``."""

    best_first = "best_first"
    breadth_first = "breadth_first"
    depth_first = "depth_first"


@dataclass
class SolverSearchConfig:
    """The Solver's tactic-level search (``sgs.search``, docs/search.md), as
    ``python -m sgs.evaluate`` (``evaluation.solver_mode``) and the service's
    ``/prove`` (``mode``) run it: the fields of ``sgs.search.settings.SearchSettings``
    a user sets, with its defaults; the time per target is the caller's."""

    #: How the next state is chosen: best_first (the summed log-probabilities
    #: of the path's tactics), breadth_first or depth_first.
    strategy: SearchStrategy = SearchStrategy.best_first
    #: Tactics sampled per proof state (one model call, n = width); 0 runs the finishers alone.
    width: int = 8
    #: Most tactics on a path.
    max_depth: int = 16
    #: Time limit of one tactic (never more than what is left of the target's).
    tactic_seconds: float = 10.0
    #: Tactics tried at every state before the model's; null: the proof
    #: language's own (``sgs.search.languages``: Rocq's sauto, lia, auto,
    #: easy, congruence, where ``sauto`` needs CoqHammer's tactics in
    #: ``prover.rocq.tactic_libraries``; Lean's omega, norm_num, linarith,
    #: simp, aesop, most of them Mathlib's).
    finishers: list[str] | None = None
    #: Longest tactic sampled, in tokens (a completion is cut at its first sentence anyway).
    tactic_max_tokens: int = 64
    #: Searches at once, each a Ray actor with its own Rocq session (one CPU each).
    workers: int = 2


@dataclass
class EvaluationConfig:
    """Solver evaluation (:mod:`sgs.evaluate`): on the held-out targets at the
    start and end of a run, and pass@k on a benchmark (``python -m sgs.evaluate``,
    or every ``every`` iterations of a run)."""

    #: Proofs sampled per held-out target for the run's start/end pass@k
    #: (with the Solver's sampling settings); 0 skips that evaluation.
    k: int = 8
    #: The benchmark: ``minif2f-test`` or ``proofnet-test`` (Lean 4, from the
    #: Hugging Face hub), ``rocq-held-out`` (the held-out Rocq targets),
    #: ``jsonl:PATH`` or a path (problems ``{"id", "statement", "header"?}``);
    #: see :mod:`sgs.state.benchmarks`.  Null is the prover's own: ``rocq-held-out``
    #: for Rocq, ``minif2f-test`` for Lean.
    benchmark: str | None = None
    #: A local copy of a named benchmark's data (JSONL, JSON or Parquet, in
    #: the hub's layout), for machines that cannot reach the hub; null
    #: downloads it.
    benchmark_file: str | None = None
    #: Evaluate only the first N problems of the benchmark; null uses all.
    limit: int | None = None
    #: The k of each reported pass@k.
    ks: list[int] = field(default_factory=lambda: [1, 8, 32])
    #: n, the proofs sampled per problem; pass@k is the unbiased estimate
    #: from n samples, so n must be at least the largest k.
    samples_per_problem: int = 32
    #: The Solver weights to evaluate: a Hugging Face checkpoint directory or
    #: hub id.  Null evaluates the run's base model, warm-started as
    #: ``python -m sgs`` would start it.
    checkpoint: str | None = None
    #: Where ``python -m sgs.evaluate`` writes ``problems.jsonl`` and
    #: ``summary.json``; null: ``runs/evaluations/<date>_<time>`` of the call
    #: (chosen when it runs, not in the config, so a resumed run's config keeps it).
    output_dir: str | None = None
    #: Coverage of the bootstrap confidence interval of each pass@k.
    confidence: float = 0.95
    #: Evaluate the Solver on the benchmark every N iterations of a run; 0 never does.
    every: int = 0
    #: Conjectures that state a benchmark problem (when ``benchmark`` is set
    #: or ``every`` > 0), up to whitespace and bound-variable names:
    #: ``exclude`` rejects them (reason ``matches_benchmark``: never attempted,
    #: never trained on), ``flag`` lets them through; both count them
    #: (``conjectures_matching_benchmark``).  Conjectures equal to a target,
    #: held-out ones included, are always rejected.
    contamination: Contamination = Contamination.exclude
    #: How ``python -m sgs.evaluate`` proves: ``sample`` (whole proofs, pass@k),
    #: ``search`` (tactic-level search, ``evaluation.search``) or ``both``
    #: (sampling first, the search on what no sample proved).
    solver_mode: SolverMode = SolverMode.sample
    #: The search's time per target (seconds), the re-check apart.
    seconds_per_target: float = 60.0
    #: The search's settings.
    search: SolverSearchConfig = field(default_factory=SolverSearchConfig)


def evaluation_problems(evaluation: EvaluationConfig) -> list[str]:
    """Every problem within the ``evaluation`` node, one message per problem, each naming its key."""
    problems: list[str] = []
    at_least(problems, "evaluation.k", evaluation.k, 0)
    at_least(problems, "evaluation.limit", evaluation.limit, 1)
    bad_ks = [k for k in evaluation.ks if k < 1]
    if not evaluation.ks or bad_ks:
        problems.append(f"evaluation.ks={list(evaluation.ks)!r} must list at least one k, each at least 1")
    elif len(set(evaluation.ks)) != len(evaluation.ks):
        problems.append(f"evaluation.ks={list(evaluation.ks)!r} lists a k twice")
    elif evaluation.samples_per_problem < max(evaluation.ks):
        problems.append(
            f"evaluation.samples_per_problem={evaluation.samples_per_problem} must be at least the largest k "
            f"of evaluation.ks ({max(evaluation.ks)}): the unbiased pass@k needs n >= k samples per problem"
        )
    at_least(problems, "evaluation.samples_per_problem", evaluation.samples_per_problem, 1)
    if evaluation.checkpoint is not None and not evaluation.checkpoint.strip():
        problems.append("evaluation.checkpoint must not be empty; use null for the run's base model")
    if evaluation.output_dir is not None and not evaluation.output_dir.strip():
        problems.append("evaluation.output_dir must not be empty")
    if not 0.0 < evaluation.confidence < 1.0:
        problems.append(f"evaluation.confidence={evaluation.confidence!r} must lie strictly between 0 and 1")
    at_least(problems, "evaluation.every", evaluation.every, 0)
    positive(problems, "evaluation.seconds_per_target", evaluation.seconds_per_target)
    problems.extend(search_problems(evaluation.search, "evaluation.search"))
    return problems


def search_problems(search: SolverSearchConfig, key: str) -> list[str]:
    """Every problem of a search node, each naming its key."""
    problems: list[str] = []
    at_least(problems, f"{key}.width", search.width, 0)
    at_least(problems, f"{key}.max_depth", search.max_depth, 1)
    at_least(problems, f"{key}.tactic_max_tokens", search.tactic_max_tokens, 1)
    at_least(problems, f"{key}.workers", search.workers, 1)
    positive(problems, f"{key}.tactic_seconds", search.tactic_seconds)
    if search.finishers is not None and any(not finisher.strip() for finisher in search.finishers):
        problems.append(f"{key}.finishers={list(search.finishers)!r} must not hold an empty tactic")
    if search.width == 0 and search.finishers is not None and not search.finishers:
        problems.append(f"{key}: width=0 and no finishers would try no tactic at all")
    return problems
