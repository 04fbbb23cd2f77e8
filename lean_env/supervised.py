"""A fixed set of Ray actors, reserved together and kept alive.

The verifier pool (:class:`lean_env.pool.VerifierPool`) and every engine
group (:class:`sgs.machinery.engines.EngineGroup`) own N long-lived actors
and supervise them the same way, which is this module:

* **Reserve all or nothing.**  The N actors' resources are one placement
  group of N equal bundles; if the cluster cannot hold them all within
  ``start_timeout_s``, nothing starts and the error names the cluster's total
  and free resources.
* **Actor i lives in bundle i**, and a replacement takes its predecessor's
  bundle, so a restart never waits for, or steals, another slot.
* **A first answer gets a load allowance.**  A new actor may spend a long time
  starting (a vLLM engine loading a model, a Lean worker loading Mathlib)
  before it answers anything, so its deadlines until then are the owner's
  loading limit, not its steady-state one (:meth:`deadline_s`).  The owner
  says when an actor answered (:meth:`mark_answered`).
* **Replace and shut down.**  :meth:`replace` kills actor i (which makes the
  raylet end a hung process) and starts a new one in the same bundle, under
  the same name once Ray has freed it; :meth:`shutdown` kills them all and
  releases the placement group.

What work the actors hold, how a hang is noticed (a check running past its
deadline, a heartbeat ping left unanswered) and what to redo after a loss
stay with the owner, and so do the counts of restarts by cause: the pool
and the group differ there.  This module
imports nothing of ``sgs`` (``lean_env`` sits below it).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional

import ray
from ray.exceptions import ActorAlreadyExistsError, GetTimeoutError, RayActorError, RayTaskError
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

log = logging.getLogger(__name__)

#: builds the actor of one slot: ``launch(index, scheduling_strategy)``; the
#: strategy pins it to the slot's bundle and must be passed to ``.options``.
Launch = Callable[[int, PlacementGroupSchedulingStrategy], "ray.actor.ActorHandle"]

#: how long a replacement waits for Ray to free its killed predecessor's name
NAME_RELEASE_TIMEOUT_S = 30.0


class SupervisedActors:
    """``count`` actor slots in one placement group; the owner decides what runs in them."""

    def __init__(self, what: str, launch: Launch, *, count: int, bundle: dict[str, float],
                 strategy: str = "PACK", start_timeout_s: float = 300.0) -> None:
        """Reserve the slots; no actor starts until :meth:`start`.

        Args:
            what: the actors, in words, for errors ("verifier workers", "'solver' engines").
            launch: starts the actor of a slot in the bundle it is given.
            count: number of slots.
            bundle: Ray resources of each slot, e.g. ``{"CPU": 1}``.
            strategy: the placement group's strategy ("PACK", "SPREAD", ...).
            start_timeout_s: how long to wait for the cluster to have room for
                every slot.
        """
        if count < 1:
            raise ValueError(f"need at least one actor for the {what}, got {count}")
        self.what = what
        self._launch = launch
        self._handles: list[Optional[ray.actor.ActorHandle]] = [None] * count
        self._answered = [False] * count
        self._placement_group: Optional[PlacementGroup] = placement_group([bundle] * count, strategy=strategy)
        if not self._placement_group.wait(timeout_seconds=start_timeout_s):
            self.shutdown()
            raise RuntimeError(
                f"could not reserve {count} x {bundle} for the {what} within {start_timeout_s} s; "
                f"the cluster has {ray.cluster_resources()} in total, {ray.available_resources()} free")

    def __len__(self) -> int:
        return len(self._handles)

    @property
    def placement_group(self) -> Optional[PlacementGroup]:
        """The slots' placement group (``None`` after :meth:`shutdown`)."""
        return self._placement_group

    def handle(self, index: int) -> ray.actor.ActorHandle:
        """The live actor of slot ``index``."""
        actor = self._handles[index]
        if actor is None:
            raise RuntimeError(f"slot {index} of the {self.what} has no actor (not started, or shut down)")
        return actor

    @property
    def handles(self) -> list[ray.actor.ActorHandle]:
        """The live actors by slot (none after :meth:`shutdown`)."""
        return [actor for actor in self._handles if actor is not None]

    def start(self, index: int) -> ray.actor.ActorHandle:
        """Start the actor of slot ``index`` in its bundle (it has not answered yet)."""
        assert self._placement_group is not None, "start after shutdown"
        in_bundle = PlacementGroupSchedulingStrategy(placement_group=self._placement_group,
                                                     placement_group_bundle_index=index)
        self._handles[index] = self._launch(index, in_bundle)
        self._answered[index] = False
        return self._handles[index]

    def replace(self, index: int, name_release_timeout_s: float = NAME_RELEASE_TIMEOUT_S) -> ray.actor.ActorHandle:
        """Kill the actor of slot ``index`` and start a new one in the same bundle.
        ``ray.kill`` returns before the control store has marked the actor dead,
        and a named actor's name stays taken until then (under load, long
        enough to refuse a replacement started at once): the replacement is
        tried again until the name is free."""
        _kill(self._handles[index])
        deadline = time.monotonic() + name_release_timeout_s
        while True:
            try:
                return self.start(index)
            except ActorAlreadyExistsError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def answered(self, index: int) -> bool:
        """Whether the actor of slot ``index`` has answered anything yet."""
        return self._answered[index]

    def mark_answered(self, index: int) -> None:
        self._answered[index] = True

    def deadline_s(self, index: int, steady_s: float, loading_s: float) -> float:
        """The limit that applies to slot ``index`` now: ``loading_s`` until its
        actor first answered (it may still be starting), then ``steady_s``."""
        return steady_s if self._answered[index] else loading_s

    def shutdown(self, farewell: Optional[str] = None, farewell_timeout_s: float = 10.0) -> None:
        """Kill every actor and release the placement group.  With
        ``farewell``, each live actor's method of that name is called first
        (at most ``farewell_timeout_s`` each), so it can stop child processes."""
        for actor in self._handles:
            if actor is not None and farewell is not None:
                try:
                    ray.get(getattr(actor, farewell).remote(), timeout=farewell_timeout_s)
                except (RayActorError, RayTaskError, GetTimeoutError):
                    pass
            _kill(actor)
        self._handles = [None] * len(self._handles)
        if self._placement_group is not None:
            remove_placement_group(self._placement_group)
            self._placement_group = None


def _kill(actor: Optional[ray.actor.ActorHandle]) -> None:
    if actor is None:
        return
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # already gone
        log.debug("actor already gone when killed", exc_info=True)
