"""Comparing the config a run was started with to the one it is resumed with.

:meth:`sgs.state.store.Store.open` refuses a resume whose config differs in a
key outside its list of resumable keys; these functions find and show the
differences, key by dotted key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def plain_config(config: Mapping[str, Any]) -> dict:
    """The config as plain JSON data (tuples become lists), or a clear error."""
    try:
        plain = json.loads(json.dumps(config))
    except (TypeError, ValueError) as e:
        raise ValueError(f"config must be plain data (dicts, lists, numbers, strings): {e}") from None
    if not isinstance(plain, dict):
        raise ValueError(f"config must be a mapping, got {type(config).__name__}")
    return plain


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in d.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


#: Stands for a key that one of the two configs does not have.
ABSENT = object()


def config_diff(old: dict, new: dict) -> dict[str, tuple[Any, Any]]:
    """``{dotted key: (old value, new value)}`` for every key that differs."""
    a, b = _flatten(old), _flatten(new)
    diff = {}
    for key in sorted(a.keys() | b.keys()):
        va, vb = a.get(key, ABSENT), b.get(key, ABSENT)
        # Compare canonical JSON text: NaN then equals NaN, and dict key order does not matter.
        if va is ABSENT or vb is ABSENT or json.dumps(va, sort_keys=True) != json.dumps(vb, sort_keys=True):
            diff[key] = (va, vb)
    return diff


def show_value(value: Any) -> str:
    text = "<absent>" if value is ABSENT else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
