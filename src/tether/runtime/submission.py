"""The run a submission stores: its checked inputs, its id, its row (one definition).

:meth:`Runner.submit_run <tether.runtime.runner.Runner.submit_run>` and the SQLite fast path
of ``tether submit`` (``stores/sqlite_submit.py``) both build the queued run here, so the two
write the same row. Nothing here imports the runtime's driver or a store (issue 25).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tether.errors import InputError, TetherError, UsageError
from tether.runtime.ids import check_execution_id, new_execution_id
from tether.runtime.input_values import check_values
from tether.runtime.values import to_json
from tether.status import RunStatus
from tether.stores.run_record import RunRecord, utc
from tether.trigger import Trigger, local_trigger

if TYPE_CHECKING:
    from tether.compiler.plan import Plan

__all__ = ["check_dedup_key", "check_queue", "queued_run", "start_values", "utc_now"]


def check_dedup_key(key: str) -> str:
    """``key`` when it can serve as a new run's execution id; raises
    :class:`~tether.errors.InvalidId` (a usage error) saying why not."""
    check_execution_id(key, "a dedup key")
    return key


def check_queue(queue: str) -> None:
    if not queue or not isinstance(queue, str) or not queue.strip():
        raise TetherError("a queue name must be a non-empty string")


def utc_now() -> datetime:
    return utc(time.time())


def start_values(plan: Plan, inputs: Mapping[str, Any] | None,
                 execution_id: str | None) -> tuple[Any, str]:
    """The checked, JSON-ready inputs, and the run's execution id."""
    values, problems = check_values(plan.inputs, dict(inputs or {}), "input")
    if problems:
        raise InputError(problems)
    # run inputs are data the caller chose, never secret-derived: stored as given
    values, _ = to_json(values, "the run's inputs")
    if execution_id is not None:
        check_execution_id(execution_id)
    return values, execution_id or new_execution_id()


def queued_run(plan: Plan, inputs: Mapping[str, Any] | None, *, execution_id: str | None,
               queue: str, priority: int, dedup_key: str | None,
               trigger: Trigger | None) -> RunRecord:
    """The queued run a submission inserts (before its concurrency key is rendered)."""
    if dedup_key is not None:
        if execution_id is not None:
            raise UsageError("give a dedup key or an execution id, not both (the key "
                             "is the run's execution id)")
        execution_id = check_dedup_key(dedup_key)
    values, execution_id = start_values(plan, inputs, execution_id)
    check_queue(queue)
    now = utc_now()
    return RunRecord(
        execution_id=execution_id, workflow=plan.name, plan_fingerprint=plan.fingerprint,
        status=RunStatus.QUEUED, inputs=values, created_at=now, updated_at=now,
        attempt=0, queue=queue, priority=int(priority), trigger=trigger or local_trigger())
