"""Walking JSON-shaped run state by path: the one place that does it.

A path is a tuple of mapping keys (``("nodes", "enrich", "items", "3")``). The runtime marks
the paths it changes and the journal stores ``[path, value]`` deltas; the stores fold deltas
back into snapshots with the same functions.
"""

from __future__ import annotations

from typing import Any

StatePath = tuple[str, ...]


def get_path(state: dict[str, Any], path: StatePath) -> Any:
    """The value at ``path``; ``KeyError`` if a key is missing."""
    value: Any = state
    for key in path:
        value = value[key]
    return value


def find_path(state: dict[str, Any], path: StatePath) -> Any:
    """The value at ``path``, or None when any step is missing or not a mapping."""
    value: Any = state
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
        if value is None:
            return None
    return value


def ensure_path(state: dict[str, Any], path: StatePath) -> dict[str, Any]:
    """The mapping at ``path``, created (empty) with its parents where missing."""
    target = state
    for key in path:
        nxt = target.get(key)
        if not isinstance(nxt, dict):
            nxt = {}
            target[key] = nxt
        target = nxt
    return target


def set_path(state: dict[str, Any], path: StatePath | list[str], value: Any) -> None:
    """Assign ``value`` at ``path`` (not empty), creating mappings on the way."""
    ensure_path(state, tuple(path[:-1]))[path[-1]] = value
