"""Run values are JSON: one function turns a Python value into its stored form or says why not.

Everything a run stores (state, outputs, interrupt contexts, cached results) goes through
:func:`to_json`. It rejects what JSON cannot carry faithfully, with the same error on every
backend: NaN and infinities, strings containing NUL characters (PostgreSQL's JSONB refuses
them), non-string mapping keys, and objects without a JSON form. pydantic models are stored as
their JSON form. The stored value is the decoded text, so a value read back from the store
equals the value the run held in memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from tether.errors import NotJSONError, TetherError, ValueTooLarge

_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")

MAX_VALUE_BYTES = 16 * 1024 * 1024
"""The default cap on one node output's (and a run's result's) JSON text, in UTF-8 bytes."""
MAX_VALUE_BYTES_ENV = "TETHER_MAX_VALUE_BYTES"


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump) and hasattr(type(value), "model_fields"):
        return dump(mode="json")
    if isinstance(value, set | frozenset):
        raise TypeError("a set has no JSON form (use a list)")
    if isinstance(value, bytes):
        raise TypeError("bytes have no JSON form (decode them to a string)")
    raise TypeError(f"an object of type {type(value).__name__} has no JSON form")


_ENCODER = json.JSONEncoder(default=_default, allow_nan=False, ensure_ascii=False,
                            separators=(",", ":"))
"""What ``json.dumps`` with these options builds on every call (built once: dumps is on the
hot path of every checkpoint)."""

_C_ENCODE = c_make_encoder(None, _default, encode_basestring, None, ":", ",", False, False,
                           False) if c_make_encoder is not None else None
"""The same encoder's C core, called directly (``JSONEncoder.encode`` adds two Python calls
and builds a C encoder per call). Without its circular-reference bookkeeping: a value that
contains itself is refused by the recursion limit instead (RecursionError)."""

_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore
"""Decodes one JSON value at an offset: for text :func:`dumps` wrote (no surrounding
whitespace, nothing after it), the same value ``json.loads`` returns, without its three Python
calls and two regular-expression matches."""


def dumps(value: Any) -> str:
    """Compact JSON text of ``value``; raises ``ValueError``/``TypeError`` on non-JSON values
    (``RecursionError`` on one that contains itself)."""
    if _C_ENCODE is None:  # pragma: no cover - CPython always has the accelerator
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


def to_json(value: Any, what: str, *, node_id: str | None = None) -> tuple[Any, str]:
    """The JSON form of ``value`` and its text, or :class:`NotJSONError` naming ``what``."""
    try:
        text = dumps(value)
    except ValueError as exc:
        reason = "NaN and infinite numbers have no JSON form" if "Out of range" in str(exc) \
            else str(exc)
        raise NotJSONError(what, reason, node_id=node_id) from None
    except TypeError as exc:
        raise NotJSONError(what, str(exc), node_id=node_id) from None
    except RecursionError:
        raise NotJSONError(what, "it is nested too deeply (or refers to itself)",
                           node_id=node_id) from None
    if "\\u0000" in text and _NUL.search(text):
        raise NotJSONError(what, "a string contains a NUL character (\\u0000)", node_id=node_id)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start]
            raise NotJSONError(what, f"a string holds a lone surrogate ({bad!a}), which no "
                               "store can keep as UTF-8", node_id=node_id) from None
    decoded = _SCAN(text, 0)[0]
    if decoded != value and not _same_keys(value, decoded):  # equal: every key survived
        raise NotJSONError(what, "a mapping has a key that is not a string", node_id=node_id)
    return decoded, text


def _same_keys(original: Any, decoded: Any) -> bool:
    """Whether every mapping key survived as itself (json turns 1 into "1" silently)."""
    if isinstance(original, dict):
        if not all(isinstance(k, str) for k in original):
            return False
        return all(_same_keys(v, decoded[k]) for k, v in original.items())
    if isinstance(original, list | tuple):
        return all(_same_keys(a, b) for a, b in zip(original, decoded, strict=False))
    return True


def check_size(text: str, limit: int, node_id: str | None) -> None:
    """Raise :class:`ValueTooLarge` when ``text`` (a value's JSON, as :func:`to_json` made
    it) is more than ``limit`` UTF-8 bytes (``node_id`` None: the workflow's output).

    Measures the text already produced, never encodes the value again: a text of at most
    ``limit // 4`` characters is within any limit (a character is at most 4 bytes), so only
    larger texts are measured in bytes."""
    if len(text) <= limit // 4:
        return
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > limit:
        raise ValueTooLarge(node_id, size, limit)


def max_value_bytes(value: int | None = None) -> int:
    """The cap in effect: ``value`` when given, else ``TETHER_MAX_VALUE_BYTES``, else 16 MB.

    Raises:
        ValueError: ``value`` is not a positive integer.
        TetherError: the environment variable is not a positive integer.
    """
    import os

    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"max_value_bytes must be a positive integer, not {value!r}")
        return value
    text = os.environ.get(MAX_VALUE_BYTES_ENV, "").strip()
    if not text:
        return MAX_VALUE_BYTES
    if not text.isdigit() or int(text) < 1:
        raise TetherError(f"{MAX_VALUE_BYTES_ENV} must be a positive whole number of bytes, "
                          f"not {text[:40]!r}")
    return int(text)
