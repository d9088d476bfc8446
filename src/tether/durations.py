"""Durations as authors and operators write them: ``500ms``, ``30s``, ``5m``, ``2h``, ``7d``,
``2w``. One parser for the language (timeouts, backoffs) and the command line (``prune
--older-than``), with one upper bound, so a typo such as ``99999999999d`` is a clear error
instead of an overflow somewhere downstream.
"""

from __future__ import annotations

import re

UNIT_SECONDS: dict[str, float] = {
    "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0,
}
MAX_SECONDS = 366 * 86400.0  # a year and a day: longer is a typo, not a plan
DURATION_RE = re.compile(r"^(\d{1,15}(?:\.\d{1,9})?)(ms|s|m|h|d|w)$")


class DurationError(ValueError):
    """A duration that is malformed, not positive, or longer than :data:`MAX_SECONDS`."""


def parse_duration(text: str) -> float:
    """Seconds in ``text`` (``500ms``, ``30s``, ``5m``, ``2h``, ``1d``, ``2w``).

    Raises :class:`DurationError` with a message fit to show a user.
    """
    match = DURATION_RE.match(text.strip())
    if match is None:
        raise DurationError(f"{text!r} is not a duration like 500ms, 30s, 5m, 2h, 7d or 2w")
    seconds = float(match.group(1)) * UNIT_SECONDS[match.group(2)]
    if seconds <= 0:
        raise DurationError(f"{text!r}: a duration must be longer than zero")
    if seconds > MAX_SECONDS:
        raise DurationError(f"{text!r} is longer than the limit of 366 days")
    return seconds
