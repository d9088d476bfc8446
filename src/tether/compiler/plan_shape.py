"""The JSON shape of plan format 1: every node is written with every key of every kind.

Release 0.1 wrote a plan node as one flat record: ``task``, ``approval``, ``workflow`` and all
the settings, those that do not apply to the node's kind holding a neutral value (``null``,
``{}``, ``false``). Fingerprints are hashes of that JSON, so the node variants of
:mod:`tether.compiler.plan` keep writing it (:func:`add_absent`) and read it back
(:func:`drop_absent`), refusing a key that does not apply to the kind unless it holds its
neutral value. Which keys are absent for a kind comes from the table in :mod:`tether.kinds`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from tether.kinds import KINDS, NodeKind, spec_of

if TYPE_CHECKING:
    from pydantic import SerializationInfo

NEUTRAL: dict[str, Any] = {
    "task": None, "approval": None, "workflow": None, "with": {}, "retry": None,
    "timeout": None, "idempotent": False, "for_each": None, "concurrency": None,
}
"""The value format 1 writes for a key that does not apply to a node's kind."""

ORDER: tuple[str, ...] = (
    "id", "index", "kind", "task", "approval", "workflow", "agent", "with", "needs", "waits_for",
    "when", "trigger", "for_each", "concurrency", "retry", "timeout", "idempotent", "loop", "loops",
    "generation",
)
"""The order of a node's keys in format 1 (the field order of release 0.1's one node model).
Keys added since come after them, in the order of their model, and only when they differ
from their default (:data:`OMITTED`), so plans of earlier releases keep their JSON and their
fingerprints."""

OMITTED: dict[str, Any] = {"title": None, "matrix": None, "fail_fast": True, "until": None,
                           "renamed_from": ()}
"""Keys added after release 0.1, left out of a node's JSON while they hold these values."""

_FIELD_NAMES = {"with": "args"}  # the attribute behind a key, where they differ


@functools.cache
def absent(kind: NodeKind) -> tuple[str, ...]:
    """The keys of format 1 a node of ``kind`` does not have: the other kinds, and the
    settings its kind refuses. Kinds added after release 0.1 (``agent``) are written with
    their own keys only, and never appear as a neutral key of another kind; settings
    added after format 1 are left out at their default instead (:data:`OMITTED`)."""
    if kind.value not in NEUTRAL:
        return ()
    others = tuple(other.value for other in KINDS if other is not kind and other.value in NEUTRAL)
    return tuple(key for key in others + spec_of(kind).refuses if key in NEUTRAL)


def _is_neutral(key: str, value: Any) -> bool:
    neutral = NEUTRAL[key]
    return value is neutral or (type(value) is type(neutral) and value == neutral)


def drop_absent(kind: NodeKind, data: Any) -> Any:
    """``data`` without the keys that do not apply to ``kind``, if they are neutral.

    Raises:
        ValueError: A key that does not apply to ``kind`` holds a value (pydantic reports it
            at the node).
    """
    if not isinstance(data, dict):
        return data
    present = [key for key in absent(kind) if key in data]
    if not present:
        return data
    data = dict(data)
    for key in present:
        value = data.pop(key)
        if not _is_neutral(key, value):
            raise ValueError(f"{spec_of(kind).noun} cannot have `{key}`")
    return data


def add_absent(kind: NodeKind, data: dict[str, Any], info: SerializationInfo) -> dict[str, Any]:
    """``data`` (a serialised node) with the neutral keys of ``kind``, in format 1's order."""
    for key in absent(kind):
        name = key if info.by_alias else _FIELD_NAMES.get(key, key)
        if not _excluded(info.exclude, name):
            data[name] = _copy(NEUTRAL[key])
    for key, default in OMITTED.items():
        if key in data and is_default(data[key], default):
            del data[key]
    order = ORDER if info.by_alias else tuple(_FIELD_NAMES.get(k, k) for k in ORDER)
    ordered = {key: data[key] for key in order if key in data}
    return ordered | {key: value for key, value in data.items() if key not in ordered}


def is_default(value: Any, default: Any) -> bool:
    if type(default) is tuple:  # JSON mode writes a tuple as a list
        return type(value) in (tuple, list) and tuple(value) == default
    return value is default or (type(value) is type(default) and value == default)


def _excluded(exclude: Any, name: str) -> bool:
    """Whether ``exclude`` leaves out ``name`` whole (not just some of its content)."""
    if isinstance(exclude, set):
        return name in exclude
    return isinstance(exclude, dict) and exclude.get(name) in (True, ...)


def _copy(value: Any) -> Any:
    return {} if isinstance(value, dict) else value
