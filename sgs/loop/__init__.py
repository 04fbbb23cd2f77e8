"""The SGS iteration: :class:`~sgs.loop.iteration.Loop` runs the phases
(:mod:`sgs.loop.phases`) in order, each phase a module of this package
(conjecture, prove, review, train, record) over a shared
:class:`~sgs.loop.context.RunContext`.

This file imports nothing, so that :mod:`sgs.loop.phases` loads without
the engines, the learner and Ray (the command line reads it first).
"""
