"""Moments as ``sleep_until`` gives them: ISO 8601 text with a UTC offset, or a Unix number.

One reader for the language's check (a literal ``sleep_until``) and the runtime (a rendered
one), so both refuse the same values with the same words. Text without an offset is refused:
a run's workers may sit in several time zones, and a timer must mean one moment everywhere.
"""

from __future__ import annotations

import math
from datetime import datetime

__all__ = ["TimestampError", "parse_timestamp"]


class TimestampError(ValueError):
    """A value that is not a moment (see :func:`parse_timestamp`)."""


def parse_timestamp(value: object) -> float:
    """Unix seconds of ``value``: a number (Unix seconds), a numeric string, or ISO 8601
    text with an offset (``2026-12-03T10:00:00+01:00``, ``...Z``)."""
    if isinstance(value, bool):
        raise TimestampError(f"{value!r} is not a timestamp")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            seconds = _iso(text)
    else:
        raise TimestampError(f"{value!r} is not a timestamp: give ISO 8601 text with an "
                             "offset or a Unix number")
    if not math.isfinite(seconds) or seconds < 0:
        raise TimestampError(f"{value!r} is not a moment after 1970")
    return seconds


def _iso(text: str) -> float:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise TimestampError(f"{text!r} is not a timestamp: give ISO 8601 text with an offset "
                             "(2026-12-03T10:00:00+01:00) or a Unix number") from None
    if moment.tzinfo is None:
        raise TimestampError(f"{text!r} has no UTC offset: add one (Z, +01:00), so it means "
                             "the same moment on every worker")
    return moment.timestamp()
