"""The SGS iteration: :class:`Loop` runs the phases of :mod:`sgs.loop.iteration`
in order, each phase a module of this package (conjecture, prove, review,
train, record) over a shared :class:`~sgs.loop.context.RunContext`."""

from sgs.loop.context import PHASES, derived_seed
from sgs.loop.iteration import Loop
from sgs.loop.weights import current_weights

__all__ = ["PHASES", "Loop", "current_weights", "derived_seed"]
