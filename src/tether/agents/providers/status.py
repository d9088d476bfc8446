"""What an HTTP failure means for a retry: shared by the providers' error mappings."""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping


def is_retryable_status(status: int) -> bool:
    """Rate limits (429) and server errors (5xx) may succeed later; other 4xx never do."""
    return status == 429 or status >= 500


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a server asked for: ``retry-after-ms``, or ``retry-after`` in seconds or as
    an HTTP date; ``None`` when it asked for none (or said something unreadable)."""
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None
