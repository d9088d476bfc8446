"""Cron expressions and time zones of schedules, read by the cronsim library.

One place for what the compiler checks (:func:`cron_problem`, :func:`zone_problem`) and what
the workers compute (:func:`ticks`, :func:`next_tick`), so that an expression the compiler
accepts is read the same way when it fires. Ticks are aware datetimes in UTC.

Daylight saving time follows cronsim (Debian cron's rules for an expression with fixed
minute and hour): a tick in a local hour that does not exist (spring forward) fires at the
first minute after the gap; a tick in a local hour that happens twice (fall back) fires once,
at its first occurrence.
"""

from __future__ import annotations

import functools
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from cronsim import CronSim, CronSimError

FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")


@dataclass(frozen=True)
class CronProblem:
    """Why an expression cannot be read; ``offset``/``length``: the field in the text (or the
    whole expression, offset 0, when no one field is to blame)."""

    message: str
    offset: int
    length: int


def _fields(expr: str) -> list[tuple[int, str]]:
    """Each field with its offset in ``expr``."""
    found: list[tuple[int, str]] = []
    pos = 0
    for part in expr.split():
        pos = expr.index(part, pos)
        found.append((pos, part))
        pos += len(part)
    return found


def cron_problem(expr: str) -> CronProblem | None:
    """None when ``expr`` is a valid five-field expression, else what is wrong and where."""
    fields = _fields(expr)
    if len(fields) != 5:
        return CronProblem(f"a cron expression has 5 fields (minute hour day-of-month month "
                           f"day-of-week), not {len(fields)}", 0, len(expr))
    for i, (offset, text) in enumerate(fields):
        probe = ["*"] * 5
        probe[i] = text
        try:
            CronSim(" ".join(probe), datetime(2000, 1, 1))
        except CronSimError:
            return CronProblem(f"field {i + 1} ({FIELDS[i]}) `{text}` cannot be read", offset,
                               len(text))
    try:
        CronSim(expr, datetime(2000, 1, 1))
    except CronSimError as exc:
        return CronProblem(f"`{expr}` never matches a date ({exc})", 0, len(expr))
    return None


@functools.cache
def zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones() | {"UTC"})


def zone(name: str) -> tzinfo:
    """The time zone of an IANA name (``UTC`` included); KeyError when there is none."""
    if name == "UTC":
        return UTC
    if name not in zone_names():
        raise KeyError(name)
    return zoneinfo.ZoneInfo(name)


def zone_problem(name: str) -> str | None:
    """None when ``name`` is an IANA time zone, else a message."""
    try:
        zone(name)
    except (KeyError, ValueError, zoneinfo.ZoneInfoNotFoundError):
        return f"unknown time zone `{name}`"
    return None


def ticks(expr: str, timezone: str, after: datetime) -> Iterator[datetime]:
    """The ticks strictly after ``after`` (an aware datetime), in UTC, oldest first."""
    local = after.astimezone(zone(timezone))
    for tick in CronSim(expr, local):
        yield tick.astimezone(UTC)


def next_tick(expr: str, timezone: str, after: datetime) -> datetime | None:
    """The first tick strictly after ``after``; None when the expression never fires again."""
    return next(ticks(expr, timezone, after), None)


__all__ = ["FIELDS", "CronProblem", "cron_problem", "next_tick", "ticks", "zone",
           "zone_names", "zone_problem"]
