"""A registered schedule as the stores keep it (see ``tether schedules``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ScheduleRecord:
    """One workflow's schedule, by the workflow's name.

    Times are Unix seconds (UTC). ``last_tick`` is the newest tick handled (fired, or skipped
    by the catch-up policy); the first tick fired is the first one after it (``schedules add``
    sets it to the moment of registering). ``next_tick`` is the next tick after ``last_tick``,
    kept for listing; None when the expression never fires again.
    """

    name: str
    plan_fingerprint: str
    cron: str
    timezone: str
    catchup: str
    inputs: dict[str, Any] = field(default_factory=dict)
    queue: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    last_tick: float | None = None
    next_tick: float | None = None


__all__ = ["ScheduleRecord"]
