"""The small checks every config group's validation is made of; each appends
one message naming the key to ``problems`` when the value fails."""

from __future__ import annotations

from typing import Any


def choice(problems: list[str], key: str, value: Any, choices: tuple | dict) -> None:
    """``value`` must be one of ``choices``."""
    if value not in choices:
        problems.append(f"{key}={value!r} is not one of {', '.join(map(str, choices))}")


def at_least(problems: list[str], key: str, value: float | None, low: float) -> None:
    """``value`` (None passes: the unset optional) must be at least ``low``."""
    if value is not None and value < low:
        problems.append(f"{key}={value!r} must be at least {low}")


def fraction(problems: list[str], key: str, value: float) -> None:
    """``value`` must lie in (0, 1]."""
    if not 0.0 < value <= 1.0:
        problems.append(f"{key}={value!r} must lie in (0, 1]")
