"""Pruning on the SQL stores: the finished runs older than a cutoff, and all they left.

Imported only by ``SQLCheckpointer._prune`` (``tether prune``), inside its write transaction
on the engine: a run still waiting for input (a pending interrupt) is never deleted, and a
plan goes once no run and no schedule uses it.
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, delete, select

from tether.stores.records import PruneResult, RunStatus
from tether.stores.schema import (
    checkpoints,
    decisions,
    idempotency_cache,
    pending_interrupts,
    plans,
    run_events,
    runs,
    schedules,
)

__all__ = ["prune_finished"]


def prune_finished(connection: Connection, cutoff: float, *,
                   include_failed: bool) -> PruneResult:
    """Delete the completed and cancelled (and, with ``include_failed``, failed) runs last
    updated before ``cutoff``, 500 at a time, with their rows; then the plans left unused."""
    statuses = [RunStatus.COMPLETED.value, RunStatus.CANCELLED.value] + (
        [RunStatus.FAILED.value] if include_failed else [])
    doomed = [r[0] for r in connection.execute(
        select(runs.c.execution_id).where(and_(
            runs.c.status.in_(statuses), runs.c.updated_at < cutoff,
            runs.c.execution_id.not_in(select(pending_interrupts.c.execution_id)),
        ))).all()]
    counts = [0, 0]
    for start in range(0, len(doomed), 500):
        chunk = doomed[start:start + 500]
        counts[0] += connection.execute(delete(checkpoints).where(
            checkpoints.c.execution_id.in_(chunk))).rowcount
        counts[1] += connection.execute(delete(idempotency_cache).where(
            idempotency_cache.c.execution_id.in_(chunk))).rowcount
        connection.execute(delete(decisions).where(decisions.c.execution_id.in_(chunk)))
        connection.execute(delete(run_events).where(run_events.c.execution_id.in_(chunk)))
        connection.execute(delete(runs).where(runs.c.execution_id.in_(chunk)))
    connection.execute(delete(plans).where(and_(
        plans.c.fingerprint.not_in(select(runs.c.plan_fingerprint)),
        plans.c.fingerprint.not_in(select(schedules.c.plan_fingerprint)))))
    return PruneResult(len(doomed), counts[0], counts[1], tuple(sorted(doomed)))
