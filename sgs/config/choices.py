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
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

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


def override_problems(overrides: Sequence[str], config_dir: str | None = None) -> list[str]:
    """The bad choices among Hydra command-line overrides (``model.dtype=int8``,
    or each value of a sweep ``a,b``), one message each.  An override Hydra
    cannot parse is left to Hydra, which names it.  ``config_dir``: a user's
    config directory (``--config-dir``), whose group options count beside those
    of ``conf/``."""
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
    if config_dir is not None and not Path(config_dir).is_dir():
        return [f"--config-dir {config_dir!r} is not a directory"]
    if searched_elsewhere:
        return choice_problems(values)
    config_dirs = (CONFIG_DIR,) if config_dir is None else (CONFIG_DIR, Path(config_dir))
    return choice_problems(values) + group_option_problems(values, config_dirs)


@functools.cache
def config_groups(config_dirs: tuple[Path, ...] = (CONFIG_DIR,)) -> dict[str, tuple[str, ...]]:
    """Each config group of the ``config_dirs`` (``experiment``, ``model``, ...) with
    its options' names, those of every directory together."""
    options: dict[str, set[str]] = {}
    for config_dir in config_dirs:
        groups = sorted(config_dir.iterdir()) if config_dir.is_dir() else []
        for group in (g for g in groups if g.is_dir()):
            options.setdefault(group.name, set()).update(option.stem for option in group.glob("*.yaml"))
    return {group: tuple(sorted(names)) for group, names in sorted(options.items())}


def group_option_problems(values: Iterable[tuple[str, Any]],
                          config_dirs: tuple[Path, ...] = (CONFIG_DIR,)) -> list[str]:
    """One message for every ``(group, option)`` that names a config group of
    the ``config_dirs`` and an option none of them has (``+experiment=standrad``):
    Hydra would name only the first and exit 1.  Other keys pass."""
    groups = config_groups(config_dirs)
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
    by ``hydra.main``, after :func:`override_problems` and :func:`composition_problems`).

    Raises :class:`ConfigError` naming every bad choice among the overrides
    before composing, and what Hydra refused while composing (an unknown key,
    a value of the wrong type, a bad value in a YAML file: :func:`composition_problem`).
    """
    problems = override_problems(overrides)
    if problems:
        raise ConfigError(problems)
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            return compose(config_name=config_name, overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as error:
        raise ConfigError([composition_problem(error)]) from error


def composition_problems(overrides: Sequence[str], *, config_dir: str | None = None,
                         config_name: str = CONFIG_NAME) -> list[str]:
    """What Hydra would refuse while composing the config of each job of
    ``overrides``, one message each: a value of the wrong type, an unknown key,
    a bad value in a YAML file (a user's experiment).  ``hydra.main`` would print
    the first and exit 1, like a crash of the run.

    The jobs of a sweep (``a=1,2``) are its first job and, for each swept key, one
    job per value (the others at their first): every value is composed once, not
    every combination.  A sweep is expanded with or without ``-m`` (a config may
    set Hydra's mode); a sweep whose values cannot be listed (``interval(...)``,
    for an optimising sweeper) is left to Hydra."""
    jobs = sweep_jobs(overrides)
    if jobs is None:
        return []
    if config_dir is not None:  # Hydra adds --config-dir to its search path; this override does too
        if any(text.startswith("hydra.searchpath") for text in overrides):
            return []  # both: Hydra's way of joining them is left to Hydra
        jobs = [job + [f"hydra.searchpath=[file://{Path(config_dir).resolve()}]"] for job in jobs]
    problems: list[str] = []
    for job in jobs:
        try:
            with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
                compose(config_name=config_name, overrides=job)
        except (HydraException, OmegaConfBaseException) as error:
            if (problem := composition_problem(error)) not in problems:
                problems.append(problem)
    return problems


def sweep_jobs(overrides: Sequence[str]) -> list[list[str]] | None:
    """The jobs :func:`composition_problems` composes for a sweep (see there); None
    when a swept value cannot be listed.  Overrides Hydra cannot parse form one job,
    whose composition names them."""
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException:
        return [list(overrides)]
    values: list[list[str]] = []
    for override in parsed:
        if not override.is_sweep_override():
            values.append([override.input_line or ""])
            continue
        try:
            values.append([f"{override.get_key_element()}={value}" for value in override.sweep_string_iterator()])
        except HydraException:
            return None
    first = [options[0] for options in values]
    jobs = [first]
    for i, options in enumerate(values):
        jobs += [first[:i] + [value] + first[i + 1:] for value in options[1:]]
    return jobs


#: OmegaConf's detail lines in Hydra's messages: the key is kept, the types are not for users.
_DETAIL_LINES = ("full_key:", "reference_type=", "object_type=")


def composition_problem(error: Exception) -> str:
    """One line for what Hydra refused while composing: the key first, when the
    message names one, then Hydra's words and OmegaConf's reason, without the
    type details."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    cause = error.__cause__
    if isinstance(cause, OmegaConfBaseException):
        lines += [line.strip() for line in str(getattr(cause, "msg", "") or cause).splitlines() if line.strip()]
    keys = [line.removeprefix("full_key:").strip() for line in lines if line.startswith("full_key:")]
    if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None):
        keys.append(str(cause.full_key))
    text = " ".join(line for line in lines if not line.startswith(_DETAIL_LINES))
    return f"{keys[0]}: {text}" if keys else text
