"""The training objectives by name: one entry each, saying everything the loop
and the learner need to know of it, so that neither ever compares a name.

An entry (:class:`Objective`) says

* which samples it trains on: ``select`` chooses among this iteration's
  Solver rollouts, or ``replay`` among the stored proofs of the last
  iterations (expert iteration);
* which training targets the Solver samples (``sample_targets``; expert
  iteration: only those with too few stored proofs);
* what its examples must carry: the sampler's log-probs
  (``needs_old_logprobs``), and whether an optimizer step holds whole groups
  (``whole_groups``);
* its loss over one micro-batch (``loss``), or None for an objective that
  never trains (parallel sampling).

A new objective is one :func:`register` call here (or anywhere, before the
learner runs: the driver sends the entry itself to the workers).  The config
names the objectives a run may choose for the Solver
(``sgs.config.method.SOLVER_OBJECTIVES``, each a registered name).  The
model is verl's registry of policy losses and prime-rl's one module per
algorithm, whose pipelines never branch on an algorithm's name; the math the
entries point to is :mod:`sgs.method.objectives` (selection) and
:mod:`sgs.method.losses` (losses, imported at the first loss: the registry
itself loads no torch).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sgs.config.method import MethodConfig
from sgs.config.schema import SGSConfig
from sgs.method.objectives import (
    Rollout,
    Sample,
    StoredProof,
    expert_iteration_targets,
    select_cispo,
    select_expert_iteration,
    select_nothing,
    select_reinforce,
    select_reinforce_half,
)

if TYPE_CHECKING:
    from torch import Tensor

    from sgs.method.losses import Normalisation


@dataclass(frozen=True)
class LossBatch:
    """One micro-batch as every loss sees it, with the global counts of its optimizer step
    (gradient accumulation: see :mod:`sgs.method.objectives`)."""

    logprobs: Tensor
    """[B, T]: the policy's log-prob of each completion token, with grad (right-aligned)."""
    mask: Tensor
    """[B, T]: 1 on completion tokens, 0 on padding."""
    weights: Tensor
    """[B]: each sequence's loss weight (or advantage)."""
    old_logprobs: Tensor | None
    """[B, T]: the sampler's log-probs, aligned with ``logprobs``; None unless the objective needs them."""
    group_ids: Tensor
    """[B]: each sequence's group within the step."""
    group_num_tokens: Tensor
    """[B]: completion tokens of each sequence's whole group in the step."""
    num_tokens: int
    """Completion tokens of the whole step."""
    num_sequences: int
    """Sequences of the whole step."""
    num_groups: int
    """Groups of the whole step."""


class LossSettings(Protocol):
    """The knobs the losses read, under the config's names (``method.loss_normalisation``,
    ``method.cispo_ratio_min`` / ``_max``); the learner's ``TrainSettings`` has them."""

    @property
    def loss_normalisation(self) -> Normalisation:
        """Weighted-NLL normaliser: "token_mean" (reference code) or "sequence_mean" (paper eq. 4)."""

    @property
    def cispo_ratio_min(self) -> float:
        """CISPO raises importance weights below this (1 - eps_low) to it."""

    @property
    def cispo_ratio_max(self) -> float:
        """CISPO lowers importance weights above this (1 + eps_high) to it."""


Loss = Callable[[LossBatch, LossSettings], "Tensor"]
#: (this iteration's rollouts) -> the samples to train on
RolloutSelection = Callable[[Sequence[Rollout]], list[Sample]]
#: (stored proofs, current iteration, window) -> the samples to train on
ReplaySelection = Callable[[Sequence[StoredProof], int, int], list[Sample]]
#: (target ids, stored proofs per target, most stored per target) -> the targets to sample
TargetSampling = Callable[[Sequence[str], Mapping[str, int], int], list[str]]


def every_target(target_ids: Sequence[str], stored_proof_counts: Mapping[str, int], max_stored: int) -> list[str]:
    """The on-policy objectives sample every target of the batch, solved or not."""
    return list(target_ids)


@dataclass(frozen=True)
class Objective:
    """One training objective (see the module's docstring)."""

    name: str
    """What configs and the learner call it."""
    loss: Loss | None
    """The loss of one micro-batch; None: the objective never trains its role."""
    select: RolloutSelection = select_nothing
    """Its choice among this iteration's Solver rollouts (unused when ``replay`` is set)."""
    replay: ReplaySelection | None = None
    """Its choice among the stored proofs of recent iterations, in place of ``select``."""
    sample_targets: TargetSampling = every_target
    """The training targets the Solver samples this iteration."""
    needs_old_logprobs: bool = False
    """Its examples carry the sampler's log-probs of their tokens (π_old)."""
    whole_groups: bool = False
    """An optimizer step holds whole groups (every rollout of a problem), never part of one."""

    @property
    def trains(self) -> bool:
        """Whether the objective ever updates its role's weights."""
        return self.loss is not None


def _losses():
    """:mod:`sgs.method.losses`, imported at the first loss computed: it loads torch, and
    ``python -m sgs`` reads the registry (:func:`config_problems`) before torch loads."""
    from sgs.method import losses

    return losses


def weighted_nll(batch: LossBatch, settings: LossSettings) -> Tensor:
    """REINFORCE, REINFORCE½ and expert iteration: reward-weighted NLL."""
    return _losses().weighted_nll_loss(
        batch.logprobs, batch.mask, batch.weights, normalisation=settings.loss_normalisation,
        num_tokens_global=batch.num_tokens, num_sequences_global=batch.num_sequences)


def conjecturer_nll(batch: LossBatch, settings: LossSettings) -> Tensor:
    """The Conjecturer's weighted NLL on its normalised rewards."""
    return _losses().conjecturer_loss(
        batch.logprobs, batch.mask, batch.weights, normalisation=settings.loss_normalisation,
        num_tokens_global=batch.num_tokens, num_sequences_global=batch.num_sequences)


def cispo(batch: LossBatch, settings: LossSettings) -> Tensor:
    """CISPO over the step's groups, with importance weights clipped to the configured ratio range."""
    return _losses().cispo_loss(
        batch.logprobs, batch.old_logprobs, batch.mask, batch.weights, batch.group_ids,
        eps_low=1.0 - settings.cispo_ratio_min, eps_high=settings.cispo_ratio_max - 1.0,
        group_num_tokens=batch.group_num_tokens, num_groups_global=batch.num_groups)


#: Every registered objective by name, in registration order.
OBJECTIVES: dict[str, Objective] = {}


def register(objective: Objective) -> Objective:
    """Add ``objective`` under its name (a name is registered once)."""
    if objective.name in OBJECTIVES:
        raise ValueError(f"an objective named {objective.name!r} is registered already")
    OBJECTIVES[objective.name] = objective
    return objective


def objective(name: str) -> Objective:
    """The objective registered as ``name``."""
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ValueError(f"unknown objective {name!r}; expected one of {', '.join(OBJECTIVES)}") from None


register(Objective("reinforce", weighted_nll, select=select_reinforce))
register(Objective("reinforce_half", weighted_nll, select=select_reinforce_half))
register(Objective("cispo", cispo, select=select_cispo, needs_old_logprobs=True, whole_groups=True))
register(Objective("ei", weighted_nll, replay=select_expert_iteration, sample_targets=expert_iteration_targets))
#: Parallel sampling: the Solver is never trained and samples its starting weights every iteration.
register(Objective("none", None))
#: The Conjecturer's objective (a config chooses only the Solver's).
CONJECTURER_OBJECTIVE = register(Objective("conjecturer", conjecturer_nll)).name
#: The Solver's in search mode (``solver.mode=search``): the tactic steps of its found proofs,
#: reward-weighted NLL whatever the Solver objective that chose them (``sgs.loop.search_steps``).
STEP_OBJECTIVE = register(Objective("search_steps", weighted_nll)).name


def trained_roles(method: MethodConfig) -> list[str]:
    """The roles whose weights the training phase may update: the Solver when its
    objective trains, the Conjecturer when ``method.train_conjecturer``.  With
    none, no learner run ever starts."""
    roles = ["solver"] if objective(method.solver_objective).trains else []
    if method.train_conjecturer:
        roles.append("conjecturer")
    return roles


def config_problems(cfg: SGSConfig) -> list[str]:
    """What the Solver objective asks of the rest of a config, one message per problem.

    Kept here rather than in :mod:`sgs.config.validation` because the answer
    depends on the objective's entry, which the config layer cannot import: it
    sits below the method (``tests/unit/test_layout.py``).  ``python -m sgs``
    runs this right after the config's own checks, before torch loads.
    """
    method, training = cfg.method, cfg.training
    chosen = objective(method.solver_objective)
    problems = []
    if not chosen.trains and method.conjectures_per_target > 0:
        problems.append(
            f"method.solver_objective={chosen.name} never trains the Solver (parallel sampling): a Solver that "
            "never learns gains nothing from conjectures; set method.conjectures_per_target=0 (with "
            "method.train_conjecturer=false and method.use_guide=false), as +experiment=parallel_sampling does"
        )
    k = method.num_solver_samples
    if chosen.whole_groups and k >= 1 and training.global_batch_size % k:
        problems.append(
            f"training.global_batch_size={training.global_batch_size} must be a multiple of "
            f"method.num_solver_samples={k} for method.solver_objective={chosen.name}, whose batches hold "
            "whole groups"
        )
    return problems
