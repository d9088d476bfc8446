"""Checks of a literal ``matrix`` (codes E213, E214, E216): the keys of its ``exclude`` and
``include`` entries are axes, the values of an ``exclude`` entry are listed by their axes, and
no axis lists a value twice.

A key that is no axis matches nothing (an ``exclude`` entry then leaves every combination in;
an ``include`` entry adds a combination whose ``item`` has a key no other has), and a value
listed twice runs each of its combinations twice: both pass silently at run time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tether.dsl.source import Path
from tether.jsontypes import json_type_name
from tether.suggest import did_you_mean

Add = Callable[..., None]
"""``mapper.add(code, message, path, *, key=False, help=None, related=())`` of the validator."""

_EXTRA = ("include", "exclude")


def check_matrix_entries(add: Add, node_id: str, matrix: dict[str, Any], path: Path) -> None:
    """Report keys of ``exclude``/``include`` entries that are no axis, and repeated values
    of a literal axis, for the matrix of node ``node_id`` at ``path``."""
    axes = [str(axis) for axis in matrix if axis not in _EXTRA]
    for extra in _EXTRA:
        entries = matrix.get(extra)
        if isinstance(entries, list):
            for index, entry in enumerate(entries):
                if isinstance(entry, dict):
                    _check_entry(add, node_id, extra, entry, axes, (*path, extra, index))
                    if extra == "exclude":
                        _check_excluded_values(add, node_id, matrix, entry,
                                               (*path, extra, index))
    for axis in axes:
        values = matrix[axis]
        if isinstance(values, list):
            _check_repeats(add, node_id, axis, values, (*path, axis))


def _check_entry(add: Add, node_id: str, extra: str, entry: dict[str, Any], axes: list[str],
                 path: Path) -> None:
    for key in entry:
        if key in axes:
            continue
        shown = ", ".join(f"`{a}`" for a in axes) or "none"
        effect = ("so the entry excludes nothing" if extra == "exclude"
                  else f"so `item.{key}` exists in the combination it adds only")
        add("E213", f"`{key}` in an `{extra}` entry of the matrix of node `{node_id}` is not "
            f"an axis, {effect}", (*path, key), key=True,
            help=_with_axes(did_you_mean(str(key), axes), shown))


def _check_excluded_values(add: Add, node_id: str, matrix: dict[str, Any],
                           entry: dict[str, Any], path: Path) -> None:
    """An ``exclude`` value that its (literal) axis does not list matches nothing."""
    for key, value in entry.items():
        values = matrix.get(key) if key not in _EXTRA else None
        if not isinstance(values, list) or _is_template(value) or \
                any(_is_template(v) for v in values) or value in values:
            continue
        listed = [json.dumps(v, default=str) for v in values]
        shown = json.dumps(value, default=str)
        add("E216", f"`exclude` entry of the matrix of node `{node_id}` gives `{key}` the value "
            f"{shown}, which axis `{key}` does not list, so the entry excludes nothing",
            (*path, key), help=_value_help(key, value, values, listed))


def _value_help(key: str, value: Any, values: list[Any], listed: list[str]) -> str:
    """The same text of another type (``3.12`` for ``"3.12"``: unquoted, it is a number),
    else the nearest value; and what the axis lists."""
    axis = f"`{key}` lists " + ", ".join(listed[:20]) + (", ..." if len(listed) > 20 else "")
    same = [text for v, text in zip(values, listed, strict=True) if str(v) == str(value)]
    if same:
        return f"write it as the axis does, {same[0]} (`{value}` here is " \
            f"{json_type_name(value)}); {axis}"
    close = did_you_mean(json.dumps(value, default=str), listed) \
        if isinstance(value, str) else None
    return f"{close} ({axis})" if close else axis


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def _with_axes(close: str | None, shown: str) -> str:
    return f"{close} (the axes: {shown})" if close else f"the axes: {shown}"


def _check_repeats(add: Add, node_id: str, axis: str, values: list[Any], path: Path) -> None:
    seen: dict[str, int] = {}
    for index, value in enumerate(values):
        text = json.dumps(value, sort_keys=True, default=str)
        first = seen.setdefault(text, index)
        if first != index:
            add("E214", f"matrix axis `{axis}` of node `{node_id}` lists {text} twice, so "
                "each of its combinations would run twice", (*path, index),
                related=(((*path, first), "first listed here"),),
                help="remove one of them")
