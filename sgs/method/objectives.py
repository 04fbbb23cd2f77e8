"""Solver and Conjecturer objectives, their first half: which sequences to train on.

Data selection over rollouts whose rewards are already known
(:func:`sgs.method.rewards.solver_reward`): REINFORCE, REINFORCE½, CISPO and
expert iteration (SPEC §1.3), none at all (parallel sampling), plus the
packing of whole groups (CISPO's) into batches.  Pure Python: the losses,
the second half, are :mod:`sgs.method.losses` (torch), and
:mod:`sgs.method.registry` names which pieces make up each objective.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from lean_env.verdict import Status
from sgs.method.rewards import solve_rate

REINFORCE_HALF_MAX_SOLVE_RATE = 0.5
CISPO_STD_EPS = 1e-6
EI_MAX_STORED_PROOFS = 16
EI_WINDOW = 3


@dataclass(frozen=True)
class Rollout:
    """One Solver attempt as the objectives see it."""

    problem_id: str
    status: str  # verdict status, a lean_env.verdict.Status value
    reward: float | None  # sgs.method.rewards.solver_reward; None for a system error


@dataclass(frozen=True)
class Sample:
    """One sequence chosen for training.

    ``index`` points into the list the selection was made from; ``weight`` is
    the loss weight (REINFORCE, EI) or the advantage (CISPO); ``group`` numbers
    the problems in order of first appearance, and CISPO batches keep each
    group whole.
    """

    index: int
    weight: float
    group: int


def _group_by_problem(rollouts: Sequence[Rollout]) -> dict[str, list[int]]:
    """Rollout indices per problem, problems in order of first appearance.

    System errors are dropped here: they carry no reward and no verdict.
    """
    groups: dict[str, list[int]] = {}
    for index, rollout in enumerate(rollouts):
        if rollout.status == Status.SYSTEM_ERROR:
            continue
        if rollout.reward is None or not math.isfinite(rollout.reward):
            raise ValueError(
                f"rollout {index} of problem {rollout.problem_id!r} has status "
                f"{rollout.status!r} but reward {rollout.reward!r}; only system errors "
                "may lack a finite reward"
            )
        groups.setdefault(rollout.problem_id, []).append(index)
    return groups


def _select_correct(
    rollouts: Sequence[Rollout], keep_problem: Callable[[float], bool]
) -> list[Sample]:
    """Valid rollouts of the problems whose solve rate passes ``keep_problem``.

    Weight = the rollout's reward: 1, or the negative overlong penalty.  Proofs
    whose reward the `try` rule set to 0 are left out (as the reference does):
    they give no gradient and would only inflate the token count that
    normalises the loss.  Failed proofs are never selected, so the overlong
    penalty reaches only correct proofs here, as in the reference code.
    """
    samples = []
    for group, indices in enumerate(_group_by_problem(rollouts).values()):
        if not keep_problem(solve_rate([rollouts[i].status for i in indices])):
            continue
        for i in indices:
            if rollouts[i].status == Status.VALID and rollouts[i].reward != 0.0:
                samples.append(Sample(index=i, weight=rollouts[i].reward, group=group))
    return samples


def select_reinforce(rollouts: Sequence[Rollout]) -> list[Sample]:
    """REINFORCE: the correct proofs of every problem, weight 1."""
    return _select_correct(rollouts, lambda rate: True)


def select_reinforce_half(
    rollouts: Sequence[Rollout], max_solve_rate: float = REINFORCE_HALF_MAX_SOLVE_RATE
) -> list[Sample]:
    """REINFORCE½: the correct proofs of problems with 0 < s <= 0.5, weight 1."""
    return _select_correct(rollouts, lambda rate: 0.0 < rate <= max_solve_rate)


def select_nothing(rollouts: Sequence[Rollout]) -> list[Sample]:
    """Parallel sampling (objective ``none``): the Solver is never trained, so
    every iteration samples the starting weights again; nothing is selected."""
    return []


def group_advantages(rewards: Sequence[float]) -> list[float]:
    """Â_i = (r_i - mean) / (std + 1e-6) within one group.

    std is the population standard deviation (divide by n), as in the
    reference code (`torch.std(unbiased=False)`).
    """
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
    return [(r - mean) / (std + CISPO_STD_EPS) for r in rewards]


def select_cispo(rollouts: Sequence[Rollout]) -> list[Sample]:
    """CISPO: every rollout of problems with 0 < s < 1, weight = group advantage.

    s comes from the verdicts; the advantages come from the rewards (after the
    `try` rule and the overlong penalty), as in the reference.  A group whose
    rewards are all equal has zero advantages and is left out: it would add
    nothing to the gradient but would still count in the mean over groups.
    System errors are not part of any group, so a group may hold fewer than k.
    """
    samples = []
    for group, indices in enumerate(_group_by_problem(rollouts).values()):
        rate = solve_rate([rollouts[i].status for i in indices])
        if not 0.0 < rate < 1.0:
            continue
        rewards = [rollouts[i].reward for i in indices]
        if min(rewards) == max(rewards):
            continue
        for i, advantage in zip(indices, group_advantages(rewards)):
            samples.append(Sample(index=i, weight=advantage, group=group))
    return samples


def whole_group_batches(samples: Sequence[Sample], batch_size: int) -> list[list[Sample]]:
    """Pack whole groups into batches of at most ``batch_size`` sequences.

    Groups keep their order of first appearance and are never split; a new
    batch starts when the next group would not fit.  With groups of k that
    divide ``batch_size`` (8 and 64 in the reference) every batch but the last
    holds exactly batch_size / k groups.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
    groups: dict[int, list[Sample]] = {}
    for sample in samples:
        groups.setdefault(sample.group, []).append(sample)
    batches: list[list[Sample]] = []
    current: list[Sample] = []
    for group_id, members in groups.items():
        if len(members) > batch_size:
            raise ValueError(
                f"group {group_id} has {len(members)} sequences, more than batch_size {batch_size}"
            )
        if len(current) + len(members) > batch_size:
            batches.append(current)
            current = []
        current.extend(members)
    if current:
        batches.append(current)
    return batches


@dataclass(frozen=True)
class StoredProof:
    """A verified proof in the solved registry, as expert iteration replays it."""

    problem_id: str
    proof: str
    iteration: int  # the iteration that produced it
    reward: float = 1.0  # sgs.method.rewards.solver_reward when stored (try rule, overlong penalty)


def expert_iteration_targets(
    target_ids: Sequence[str],
    stored_proof_counts: Mapping[str, int],
    max_stored: int = EI_MAX_STORED_PROOFS,
) -> list[str]:
    """The targets expert iteration samples: fewer than 16 stored proofs."""
    return [t for t in target_ids if stored_proof_counts.get(t, 0) < max_stored]


def select_expert_iteration(
    records: Sequence[StoredProof], iteration: int, window: int = EI_WINDOW
) -> list[Sample]:
    """Expert iteration: stored proofs created in the last ``window`` iterations.

    With window 3 at iteration i that is iterations i-2, i-1 and i.  Weight =
    the stored reward (1 unless a rule changed it); zero-weight proofs are left
    out as in REINFORCE.  A record from a later iteration than ``iteration``
    means the caller passed the wrong iteration, and raises.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window!r}")
    problems: dict[str, int] = {}
    samples = []
    for index, record in enumerate(records):
        if record.iteration > iteration:
            raise ValueError(
                f"stored proof {index} of {record.problem_id!r} comes from iteration "
                f"{record.iteration}, after the current iteration {iteration}"
            )
        group = problems.setdefault(record.problem_id, len(problems))
        if record.iteration > iteration - window and record.reward != 0.0:
            samples.append(Sample(index=index, weight=record.reward, group=group))
    return samples
