"""The config's choice fields, each typed with a :class:`~sgs.config.checks.Choice`
Enum, and checking values for them before OmegaConf does.

OmegaConf refuses a bad value of such a field while Hydra composes the
config, but stops at the first one and says so in a Hydra exception.  These
functions check the same fields themselves, so that a command line (or a
config) with several bad choices is answered with one
:class:`~sgs.config.schema.ConfigError` naming each key, its value and the
allowed values, as every other config problem is.  The allowed values are
the Enums' own: there is no second list.  The options of the config groups
(``experiment``, ``model``, ...) are checked the same way against the files
in ``conf/``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from sgs.config.checks import Choice, choice
from sgs.config.schema import CONFIG_DIR, CONFIG_NAME, ConfigError, SGSConfig


@functools.cache
def choice_fields() -> dict[str, type[Choice]]:
    """Every choice field of :class:`SGSConfig` by dotted key (``model.dtype``), with its Enum."""
    return dict(_walk(SGSConfig, ""))


def _walk(node: type, prefix: str) -> Iterable[tuple[str, type[Choice]]]:
    hints = typing.get_type_hints(node)
    for spec in dataclasses.fields(node):
        hint = hints[spec.name]
        # An optional node (``TinyModelSettings | None``) holds the same fields when it is set.
        if typing.get_origin(hint) in (types.UnionType, typing.Union):
            hint = next((arg for arg in typing.get_args(hint) if arg is not type(None)), hint)
        if dataclasses.is_dataclass(hint):
            yield from _walk(hint, f"{prefix}{spec.name}.")
        elif isinstance(hint, type) and issubclass(hint, Choice):
            yield f"{prefix}{spec.name}", hint


def choice_problems(values: Iterable[tuple[str, Any]]) -> list[str]:
    """One message for every ``(dotted key, value)`` whose key is a choice field
    and whose value is none of its Enum's; other keys pass.  An interpolation
    (``${...}``) passes too: OmegaConf checks what it resolves to when it is read."""
    fields = choice_fields()
    problems: list[str] = []
    for key, value in values:
        allowed = fields.get(key)
        if allowed is not None and not (isinstance(value, str) and "${" in value):
            choice(problems, key, value, tuple(allowed))
    return problems


def override_problems(overrides: Sequence[str]) -> list[str]:
    """The bad choices among Hydra command-line overrides (``model.dtype=int8``,
    or each value of a sweep ``a,b``), one message each.  An override Hydra
    cannot parse is left to Hydra, which names it."""
    parser = OverridesParser.create()
    values: list[tuple[str, Any]] = []
    for text in overrides:
        try:
            override = parser.parse_override(text)
        except HydraException:  # the grammar's error (parse_overrides would wrap it in OverrideParseException)
            continue
        if override.is_delete() or override.package is not None:
            continue
        value = override.value()
        items = value.list if isinstance(value, ChoiceSweep) else [value]  # a sweep's values, each checked
        values += [(override.key_or_group, item) for item in items]
    # Another config directory on Hydra's search path may hold options this one does not.
    searched_elsewhere = any(key.startswith("hydra.searchpath") for key, _ in values)
    return choice_problems(values) + ([] if searched_elsewhere else group_option_problems(values))


@functools.cache
def config_groups() -> dict[str, tuple[str, ...]]:
    """Each config group of ``conf/`` (``experiment``, ``model``, ...) with its options' names."""
    return {group.name: tuple(sorted(option.stem for option in group.glob("*.yaml")))
            for group in sorted(CONFIG_DIR.iterdir()) if group.is_dir()}


def group_option_problems(values: Iterable[tuple[str, Any]]) -> list[str]:
    """One message for every ``(group, option)`` that names a config group of
    ``conf/`` and an option it does not have (``+experiment=standrad``):
    Hydra would name only the first and exit 1.  Other keys pass."""
    groups = config_groups()
    problems: list[str] = []
    for key, value in values:
        options = groups.get(key)
        if options is not None and isinstance(value, str) and "${" not in value and value not in options:
            # An option named _x is a piece the others share (experiment/_paper): valid, not offered.
            choice(problems, key, value, tuple(name for name in options if not name.startswith("_")))
    return problems


def config_choice_problems(cfg: DictConfig | SGSConfig) -> list[str]:
    """The bad choices in a config: a composed or hand-made ``DictConfig`` (which
    OmegaConf may not have checked, when it is not typed), or an
    :class:`SGSConfig` built in Python (which nothing has checked)."""
    values = []
    for key in choice_fields():
        if isinstance(cfg, DictConfig):
            value = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False, throw_on_missing=False)
        else:
            value = functools.reduce(lambda node, name: getattr(node, name, None), key.split("."), cfg)
        if value is not None and value != "???":  # unset (an optional node, or ``MISSING``): not a choice made
            values.append((key, value))
    return choice_problems(values)


def compose_config(overrides: Sequence[str] = (), config_name: str = CONFIG_NAME) -> DictConfig:
    """Hydra's composition of ``conf/<config_name>.yaml`` with ``overrides``, for
    the entry points that compose it themselves (``python -m sgs`` is composed
    by ``hydra.main``, after :func:`override_problems`).

    Raises :class:`ConfigError` naming every bad choice among the overrides
    before composing; Hydra's own exceptions (an unknown key or group, a bad
    value in a YAML file) pass through.
    """
    problems = override_problems(overrides)
    if problems:
        raise ConfigError(problems)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name=config_name, overrides=list(overrides))
