"""The small checks every config group's validation is made of; each appends
one message naming the key to ``problems`` when the value fails.  And
:class:`Choice`, the base of every choice field's Enum."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any


class Choice(StrEnum):
    """The allowed values of one choice field of the config, each member named
    as its value (``vllm = "vllm"``).

    OmegaConf checks a field typed with one on every assignment, so a bad
    value is refused while the config is composed, with the allowed values
    named (:mod:`sgs.config.choices` checks command-line overrides first, to
    report every bad one at once).  A member is the string it names: it
    compares equal to it, hashes like it (so dicts keyed by the plain strings
    find it), formats and serialises to JSON as it, so code reading
    ``cfg.resources.engine_backend == "vllm"`` and saved configs see plain
    strings.  Its repr is the string's too, so that the messages that show a
    value with ``!r`` read ``model.dtype='float16'``, as the YAML does.
    """

    def __repr__(self) -> str:
        return repr(self.value)


def choice(problems: list[str], key: str, value: Any, choices: tuple) -> None:
    """``value`` must be one of ``choices``."""
    if value not in choices:
        problems.append(f"{key}={value!r} is not one of {', '.join(map(str, choices))}")


def at_least(problems: list[str], key: str, value: float | None, low: float) -> None:
    """``value`` (None passes: the unset optional) must be at least ``low``, and
    finite (Hydra reads ``inf`` and ``nan`` as floats; ``nan < low`` is false)."""
    if value is None:
        return
    if not math.isfinite(value):
        problems.append(f"{key}={value!r} must be a finite number, at least {low}")
    elif value < low:
        problems.append(f"{key}={value!r} must be at least {low}")


def positive(problems: list[str], key: str, value: float, unit: str = "") -> None:
    """``value`` must be positive and finite: a time limit of ``inf`` would
    leave a hung prover or worker running for ever, a learning rate of ``inf``
    would train to NaN."""
    if not (value > 0 and math.isfinite(value)):
        problems.append(f"{key}={value!r} must be positive and finite{f' ({unit})' if unit else ''}")


def fraction(problems: list[str], key: str, value: float) -> None:
    """``value`` must lie in (0, 1]."""
    if not 0.0 < value <= 1.0:
        problems.append(f"{key}={value!r} must lie in (0, 1]")
