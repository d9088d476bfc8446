"""The workers' statements of the SQL stores: enqueue, claim, cancel, the workers table.

Written once for SQLite and PostgreSQL on the store's plumbing (``SQLCheckpointer._cursor``
and ``_execute``). The claim reads its candidates with ``FOR UPDATE SKIP LOCKED`` (PostgreSQL:
rows another claimer locked are passed over, never waited for; SQLite compiles no locking
clause, and the whole claim runs in one ``BEGIN IMMEDIATE`` transaction, so claimers are
serialised by the database's write lock), then takes each run with its own fresh owner token
in the same transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    and_,
    bindparam,
    delete,
    exists,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.sql import ClauseElement, ColumnElement

from tether.stores.owners import new_owner
from tether.stores.queueing import CancelOutcome, ClaimedRun, ClaimReason, WorkerRecord
from tether.stores.records import RunStatus
from tether.stores.schema import decisions, pending_interrupts, runs, workers

if TYPE_CHECKING:
    from tether.stores.sql import SQLCheckpointer

_WORKER_FIELDS = [c.name for c in workers.columns]


def _claimable(queues: int) -> ColumnElement[bool]:
    """The runs a claim may take (see ``tether.stores.queueing``)."""
    free = or_(runs.c.owner.is_(None), runs.c.lease_until < bindparam("now"))
    answered = exists(select(literal_column("1")).select_from(decisions).where(and_(
        decisions.c.execution_id == runs.c.execution_id,
        decisions.c.created_at > runs.c.updated_at)))
    return and_(
        runs.c.queue.in_([bindparam(f"q{i}") for i in range(queues)]),
        or_(
            and_(runs.c.status == RunStatus.QUEUED.value, runs.c.cancel_requested_at.is_(None),
                 or_(runs.c.available_at.is_(None), runs.c.available_at <= bindparam("now"))),
            and_(runs.c.status == RunStatus.RUNNING.value, free),
            and_(runs.c.status == RunStatus.PAUSED.value, runs.c.owner.is_(None), answered),
        ))


def _candidates(queues: int) -> ClauseElement:
    return select(runs.c.execution_id, runs.c.status).where(_claimable(queues)).order_by(
        runs.c.priority.desc(), runs.c.created_at, runs.c.execution_id).limit(
        bindparam("n")).with_for_update(skip_locked=True)


def _take() -> ClauseElement:
    return update(runs).where(runs.c.execution_id == bindparam("eid")).values(
        owner=bindparam("owner"), lease_until=bindparam("until"),
        status=RunStatus.RUNNING.value, attempt=runs.c.attempt + 1,
        updated_at=bindparam("now"))


_REASONS = {RunStatus.QUEUED.value: ClaimReason.QUEUED,
            RunStatus.RUNNING.value: ClaimReason.RECOVERED,
            RunStatus.PAUSED.value: ClaimReason.ANSWERED}


def claim_runs(store: SQLCheckpointer, worker: str, queues: Sequence[str], limit: int,
               now: float, lease_until: float) -> list[ClaimedRun]:
    if limit <= 0 or not queues:
        return []
    with store._cursor(f"claiming runs for worker {worker}", write=True) as cursor:
        count = len(queues)
        names = {f"q{i}": name for i, name in enumerate(queues)}
        found = store._execute(cursor, f"claim_candidates:{count}",
                               lambda: _candidates(count), now=now, n=limit,
                               **names).fetchall()
        taken: list[tuple[str, str, str]] = []
        for execution_id, status in found:
            owner = new_owner()
            store._execute(cursor, "claim_take", _take, eid=execution_id, owner=owner,
                           until=lease_until, now=now)
            taken.append((execution_id, status, owner))
    claimed = []
    for execution_id, status, owner in taken:
        run = store.get_run(execution_id)
        if run is not None:
            claimed.append(ClaimedRun(run, owner, lease_until, _REASONS[status]))
    return claimed


def enqueue_run(store: SQLCheckpointer, execution_id: str, queue: str, priority: int,
                available_at: float | None) -> bool:
    with store._cursor(f"enqueueing run {execution_id}", write=True) as cursor:
        store._execute(cursor, "enqueue_run", lambda: update(runs).where(
            runs.c.execution_id == bindparam("eid")).values(
            queue=bindparam("queue"), priority=bindparam("priority"),
            available_at=bindparam("at")), eid=execution_id, queue=queue, priority=priority,
            at=available_at)
        changed = bool(cursor.rowcount == 1)
        if changed:
            store._notify(cursor)
        return changed


def request_cancel(store: SQLCheckpointer, execution_id: str,
                   now: float) -> CancelOutcome | None:
    with store._cursor(f"cancelling run {execution_id}", write=True) as cursor:
        row = store._execute(cursor, "cancel_lock", lambda: select(
            runs.c.status, runs.c.owner, runs.c.lease_until).where(
            runs.c.execution_id == bindparam("eid")).with_for_update(),
            eid=execution_id).fetchone()
        if row is None:
            return None
        status, owner, lease_until = row
        if status in (RunStatus.COMPLETED.value, RunStatus.CANCELLED.value):
            return CancelOutcome.FINISHED
        held = owner is not None and lease_until is not None and lease_until >= now
        if held:
            store._execute(cursor, "cancel_request", lambda: update(runs).where(
                runs.c.execution_id == bindparam("eid")).values(
                cancel_requested_at=bindparam("now")), eid=execution_id, now=now)
            return CancelOutcome.REQUESTED
        store._execute(cursor, "cancel_now", lambda: update(runs).where(
            runs.c.execution_id == bindparam("eid")).values(
            status=RunStatus.CANCELLED.value, cancel_requested_at=bindparam("now"),
            updated_at=bindparam("now"), owner=None, lease_until=None,
            error=bindparam("error")), eid=execution_id, now=now,
            error=json.dumps({"type": "RunCancelled", "message": "cancelled before a worker "
                              "executed it" if status == RunStatus.QUEUED.value else
                              "cancelled while nothing executed it", "node_id": None}))
        store._execute(cursor, "cancel_pending", lambda: delete(pending_interrupts).where(
            pending_interrupts.c.execution_id == bindparam("eid")), eid=execution_id)
        return CancelOutcome.CANCELLED


def register_worker(store: SQLCheckpointer, worker: WorkerRecord) -> None:
    with store._cursor(f"registering worker {worker.worker_id}", write=True) as cursor:
        store._execute(cursor, "worker_delete", lambda: delete(workers).where(
            workers.c.worker_id == bindparam("wid")), wid=worker.worker_id)
        store._execute(cursor, "worker_insert", lambda: insert(workers),
                       worker_id=worker.worker_id, host=worker.host, pid=worker.pid,
                       queues=json.dumps(list(worker.queues)), concurrency=worker.concurrency,
                       started_at=worker.started_at, heartbeat_at=worker.heartbeat_at,
                       held=json.dumps(list(worker.held)))


def heartbeat_worker(store: SQLCheckpointer, worker_id: str, now: float,
                     held: Sequence[str]) -> bool:
    with store._cursor(f"heartbeat of worker {worker_id}", write=True) as cursor:
        store._execute(cursor, "worker_heartbeat", lambda: update(workers).where(
            workers.c.worker_id == bindparam("wid")).values(
            heartbeat_at=bindparam("now"), held=bindparam("held")),
            wid=worker_id, now=now, held=json.dumps(list(held)))
        return bool(cursor.rowcount == 1)


def deregister_worker(store: SQLCheckpointer, worker_id: str) -> None:
    with store._cursor(f"deregistering worker {worker_id}", write=True) as cursor:
        store._execute(cursor, "worker_delete", lambda: delete(workers).where(
            workers.c.worker_id == bindparam("wid")), wid=worker_id)


def _to_worker(row: Any) -> WorkerRecord:
    values = dict(zip(_WORKER_FIELDS, row, strict=True))
    return WorkerRecord(
        worker_id=values["worker_id"], host=values["host"], pid=int(values["pid"]),
        queues=tuple(json.loads(values["queues"])), concurrency=int(values["concurrency"]),
        started_at=float(values["started_at"]), heartbeat_at=float(values["heartbeat_at"]),
        held=tuple(json.loads(values["held"])))


def list_workers(store: SQLCheckpointer, alive_since: float | None) -> list[WorkerRecord]:
    since = alive_since if alive_since is not None else float("-inf")
    with store._cursor("listing workers") as cursor:
        rows = store._execute(cursor, "list_workers", lambda: select(*workers.columns).where(
            workers.c.heartbeat_at >= bindparam("since")).order_by(
            workers.c.started_at, workers.c.worker_id), since=since).fetchall()
    return [_to_worker(row) for row in rows]
