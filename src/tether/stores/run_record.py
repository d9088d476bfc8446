"""A run's record (:class:`RunRecord`), apart from the other records of ``records.py``
(which re-exports it): the SQLAlchemy-free submit builds one without importing the
checkpoint and pending-interrupt records (issue 25, fast start).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tether.status import RunStatus, RunStatusName
from tether.trigger import Trigger

__all__ = ["RunRecord", "utc"]


def utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


@dataclass(frozen=True)
class RunRecord:
    """One run: what it executes, how it stands, who holds it."""

    execution_id: str
    workflow: str
    plan_fingerprint: str
    status: RunStatus | RunStatusName
    inputs: Any
    created_at: datetime
    updated_at: datetime
    parent_execution_id: str | None = None
    parent_checkpoint_id: str | None = None
    error: Any = None
    owner: str | None = None  # the token of the attempt holding the lease (see owners.py)
    lease_until: float | None = None
    attempt: int = 1  # 1 for the first execution, +1 each time another attempt takes it
    queue: str | None = None  # the workers' queue serving it (every run has one since
    # issue 21; None only in rows stored before: treated as ``default``)
    priority: int = 0  # higher first within a queue
    available_at: float | None = None  # a queued run may start from then (Unix time)
    cancel_requested_at: float | None = None  # tether cancel asked for it (Unix time)
    started_at: float | None = None  # a worker first claimed it, queued (Unix time)
    blocked_reason: str | None = None  # why a claimable run is not taken (see queueing.py)
    recovery_failures: int = 0  # drives that failed for a reason other than fencing
    trigger: Trigger | None = None  # what started it (None: stored before triggers were)
    concurrency_key: str | None = None  # the workflow's concurrency key, rendered (keys.py)
    concurrency_limit: int | None = None  # at most this many runs of the key running at once
