"""JSON value types as workflows name them: ``string``, ``number``, ``integer``, ``boolean``,
``object``, ``array``; and how messages name the type of a value (``an integer``, ``a list``).

Shared by validation (input defaults), the compiler (literal arguments) and the runtime (run
inputs, approval answers), so every message names types the same way.
"""

from __future__ import annotations


def json_type_name(value: object) -> str:
    """The JSON name of a value's type, as used in messages: ``a string``, ``null``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def matches_type(value: object, type_name: str) -> bool:
    """Whether a JSON value has the input type ``type_name``."""
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if type_name == "object":
        return isinstance(value, dict)
    if type_name == "array":
        return isinstance(value, list)
    return False


def article(type_name: str) -> str:
    """``an integer``, ``a string``: an input type with its article."""
    return ("an " if type_name[0] in "aeiou" else "a ") + type_name


__all__ = ["article", "json_type_name", "matches_type"]
