"""The method settings of a run: which roles play and how they learn (a part
of the schema in :mod:`sgs.config.schema`, kept in its own module so that
each reads in one sitting), and their checks (:func:`method_problems`)."""

from __future__ import annotations

from dataclasses import dataclass

from sgs.config.checks import Choice, at_least, choice

#: The objectives a run may choose for the Solver: each a name registered in
#: sgs.method.registry, where everything else about it is said (an open
#: registry, so a string and no :class:`Choice`).
SOLVER_OBJECTIVES = ("reinforce_half", "reinforce", "cispo", "ei", "none")


class ConjecturerPrompt(Choice):
    """``method.conjecturer_prompt``."""

    target_conditioned = "target_conditioned"
    unconditioned = "unconditioned"


class RewardNormalisation(Choice):
    """``method.reward_normalisation``."""

    reference = "reference"
    paper = "paper"


class LossNormalisation(Choice):
    """``method.loss_normalisation``."""

    token_mean = "token_mean"
    sequence_mean = "sequence_mean"


class UnelaboratedConjectures(Choice):
    """``method.unelaborated_conjectures``."""

    skip = "skip"
    attempt = "attempt"


#: What each ``method.unelaborated_conjectures`` means for the generation
#: count, in the words the run summary and the report use.
UNELABORATED_CONJECTURES = {
    UnelaboratedConjectures.skip: "conjectures that fail to elaborate get no Solver attempts",
    UnelaboratedConjectures.attempt: "every conjecture gets k Solver attempts, counted as generations, whether it "
                                     "elaborates or not (the paper's loop)",
}


class ConjectureDedup(Choice):
    """``method.conjecture_dedup``."""

    canonical = "canonical"
    exact = "exact"


class EiSolvedCount(Choice):
    """``method.ei_solved_count``."""

    distinct = "distinct"
    all = "all"


@dataclass
class MethodConfig:
    """The algorithm: which roles play and how they learn (SPEC §1.2-§1.3).

    The defaults are the ``standard`` SGS method; each experiment file in
    ``conf/experiment/`` changes only the fields it needs.
    """

    #: Solver objective: ``reinforce_half`` (problems with 0 < s <= 0.5),
    #: ``reinforce`` (all correct proofs), ``cispo`` (clipped importance
    #: sampling over whole groups), ``ei`` (expert iteration on stored proofs)
    #: or ``none``: the Solver is never trained and samples its starting weights
    #: again every iteration (parallel sampling; needs ``conjectures_per_target``
    #: 0, and no learner run starts).
    solver_objective: str = "reinforce_half"
    #: Conjectures sampled per still-unsolved target each iteration (1 in the
    #: paper); 0 runs the Solver alone with no Conjecturer and no Guide.
    conjectures_per_target: int = 1
    #: Conjecturer prompt: ``target_conditioned`` shows the unsolved target;
    #: ``unconditioned`` asks for a moderately hard theorem from a random area.
    conjecturer_prompt: ConjecturerPrompt = ConjecturerPrompt.target_conditioned
    #: Update the Conjecturer's weights each iteration; false keeps it frozen.
    train_conjecturer: bool = True
    #: Score kept conjectures with the Guide: R = R_guide * (1 - s).  False
    #: uses R = 1 - s.
    use_guide: bool = True
    #: Min-max normalisation of Conjecturer rewards: ``reference`` over the
    #: kept set only (the released code), ``paper`` with the non-kept
    #: conjectures in the batch at reward 0 (the paper's text).
    reward_normalisation: RewardNormalisation = RewardNormalisation.reference
    #: Loss normaliser: ``token_mean`` divides by all label tokens of the
    #: global batch (the reference); ``sequence_mean`` averages per-sequence
    #: token means (the paper's 1/|y|).
    loss_normalisation: LossNormalisation = LossNormalisation.token_mean
    #: A conjecture whose statement does not elaborate: ``skip`` checks each
    #: new statement with a placeholder proof first and gives those that fail
    #: no Solver attempts (SPEC §3.2: no proof budget on them); ``attempt``
    #: checks nothing before proving, so every conjecture gets k Solver
    #: attempts, all counted as generations (the paper's Algorithm 1 and its
    #: code).  The run summary and the report say which a run used.
    unelaborated_conjectures: UnelaboratedConjectures = UnelaboratedConjectures.skip
    #: When a conjecture is a duplicate, of a target or of an earlier
    #: conjecture of its iteration (rejected either way): ``canonical`` up to
    #: whitespace, comments, the theorem's name and the names of bound
    #: variables (``sgs.method.roles.canonical_form``); ``exact`` only when its
    #: statement's text, name included, is the same (SPEC §1.2 and the paper's
    #: code).  Held-out targets and benchmark problems are matched up to
    #: renaming whichever is chosen: a renamed copy never leaks into training.
    conjecture_dedup: ConjectureDedup = ConjectureDedup.canonical
    #: k, the Solver samples per problem (targets and conjectures alike).
    num_solver_samples: int = 8
    #: Verified proofs stored per target; expert iteration samples only
    #: targets that have fewer.
    max_proofs_per_target: int = 16
    #: What counts towards a target's stored proofs (the solved registry keeps
    #: the first 16 found; expert iteration samples targets with fewer than
    #: ``max_proofs_per_target`` and trains on them): ``distinct`` proof texts,
    #: a proof found again being neither stored nor counted again, or ``all``
    #: verified proofs, repeats included (the paper: "solved fewer than 16
    #: times", and its code).
    ei_solved_count: EiSolvedCount = EiSolvedCount.distinct
    #: Expert iteration trains on stored proofs found in this many most
    #: recent iterations.
    ei_replay_iterations: int = 3
    #: Conjectures with 0 < s <= the solve rate at this quantile of the
    #: conjectures with 0 < s < 1 are kept for Conjecturer training (p70).
    conjecture_keep_quantile: float = 0.7
    #: A generation longer than this fraction of its role's ``max_tokens``
    #: gets the soft overlong penalty, down to -1 at ``max_tokens``.
    overlong_fraction: float = 0.8
    #: Give reward 0 to a Solver proof that uses the ``try`` tactic.
    penalize_try: bool = True
    #: Lower bound of CISPO's clipped token ratio pi/pi_old: 1 - eps_low, with
    #: eps_low = 1 as in the paper.
    cispo_ratio_min: float = 0.0
    #: Upper bound of CISPO's clipped token ratio: 1 + eps_high, with
    #: eps_high = 3 as in the paper.
    cispo_ratio_max: float = 4.0
    #: Targets per iteration; null is the full batch (every target).
    batch_size: int | None = None


def method_problems(method: MethodConfig) -> list[str]:
    """Every problem within the ``method`` node, one message per problem, each naming its key.
    (What the Solver objective asks of other nodes: :func:`sgs.method.registry.config_problems`.)"""
    problems: list[str] = []
    choice(problems, "method.solver_objective", method.solver_objective, SOLVER_OBJECTIVES)
    at_least(problems, "method.conjectures_per_target", method.conjectures_per_target, 0)
    at_least(problems, "method.num_solver_samples", method.num_solver_samples, 1)
    at_least(problems, "method.max_proofs_per_target", method.max_proofs_per_target, 1)
    at_least(problems, "method.ei_replay_iterations", method.ei_replay_iterations, 1)
    at_least(problems, "method.batch_size", method.batch_size, 1)
    # sgs.method.rewards.keep_threshold indexes the sorted rates at floor(q * n): q = 1 is past the end.
    if not 0.0 < method.conjecture_keep_quantile < 1.0:
        problems.append(f"method.conjecture_keep_quantile={method.conjecture_keep_quantile!r} must lie in (0, 1)")
    # rewards.overlong_penalty needs room between the threshold and max_tokens.
    if not 0.0 < method.overlong_fraction < 1.0:
        problems.append(f"method.overlong_fraction={method.overlong_fraction!r} must lie strictly between 0 and 1")
    at_least(problems, "method.cispo_ratio_min", method.cispo_ratio_min, 0.0)
    if not method.cispo_ratio_min <= 1.0 <= method.cispo_ratio_max:
        problems.append(
            f"method.cispo_ratio_min={method.cispo_ratio_min!r} and method.cispo_ratio_max="
            f"{method.cispo_ratio_max!r} must bracket 1 (the ratio range is [1 - eps_low, 1 + eps_high])"
        )
    if method.conjectures_per_target == 0:
        if method.train_conjecturer:
            problems.append(
                "method.train_conjecturer=true needs conjectures: method.conjectures_per_target is 0 "
                "(a Solver-only run); set method.train_conjecturer=false"
            )
        if method.use_guide:
            problems.append(
                "method.use_guide=true needs conjectures to score: method.conjectures_per_target is 0 "
                "(a Solver-only run); set method.use_guide=false"
            )
    elif method.use_guide and not method.train_conjecturer:
        problems.append(
            "method.use_guide=true with method.train_conjecturer=false: Guide scores only feed the "
            "Conjecturer's reward, so a frozen Conjecturer needs no Guide; set method.use_guide=false"
        )
    return problems
