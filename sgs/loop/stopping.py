"""When a run stops: after ``iterations`` iterations, or earlier once its
cumulative solve rate has gone flat (``stop.flat_iterations``).

The paper's claim is about plateaus: with equal generations, SGS keeps
improving after RL stops.  A long comparison therefore runs each method until
its own curve is flat, not for a fixed count chosen in advance.  The rule is
a pure function of the recorded metrics, so a resumed run (or one re-run
after it stopped) reaches the same decision without remembering anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sgs.config import SGSConfig


def flat_iterations(rates: Sequence[float]) -> int:
    """How many of the latest iterations added nothing: the number of trailing
    rates equal to the one before them.  The cumulative solve rate never falls,
    so equal means not risen.

    >>> flat_iterations([0.30, 0.35, 0.35, 0.35])
    2
    """
    flat = 0
    for before, after in zip(reversed(rates[:-1]), reversed(rates[1:])):
        if after > before:
            break
        flat += 1
    return flat


def stop_reason(cfg: SGSConfig, metrics: Sequence[Mapping]) -> str | None:
    """Why the run is finished, given its metrics lines (one per finished
    iteration, in order); None while it has iterations to do."""
    done = len(metrics)
    if done >= cfg.iterations:
        return f"all {cfg.iterations} iterations are done"
    patience = cfg.stop.flat_iterations
    if patience is None or done < cfg.stop.min_iterations:
        return None
    flat = flat_iterations([m["cumulative_solve_rate"] for m in metrics])
    if flat >= patience:
        return (f"the cumulative solve rate has not risen for {flat} iterations "
                f"(stop.flat_iterations={patience}) after {done} iterations")
    return None
