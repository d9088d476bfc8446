"""The workers' statements of the SQL stores: enqueue, claim, cancel, the workers table.

Written once for SQLite and PostgreSQL on the store's public plumbing
(``SQLCheckpointer.sql_cursor``, ``sql_execute``, ``wake_workers``, ``run_from_row``). The
claim reads its candidates with ``FOR UPDATE SKIP LOCKED`` (PostgreSQL: rows another claimer
locked are passed over, never waited for; SQLite compiles no locking clause, and the whole
claim runs in one ``BEGIN IMMEDIATE`` transaction, so claimers are serialised by the
database's write lock), then takes each run with its own fresh owner token in the same
transaction.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Integer,
    String,
    and_,
    bindparam,
    case,
    cast,
    delete,
    exists,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.sql import ClauseElement, ColumnElement, Select

from tether.stores.events import (
    CLAIMED_REASON,
    RunEvent,
    RunEventKind,
    claimed_event,
    event_id_time,
)
from tether.stores.owners import new_owner, owner_suffix
from tether.stores.queueing import (
    Budget,
    CancelOutcome,
    ClaimedRun,
    ClaimReason,
    QueueCounts,
    QueueRecord,
    QueueUsage,
    WorkerRecord,
)
from tether.stores.records import RunStatus
from tether.stores.schema import decisions, pending_interrupts, run_events, runs, workers
from tether.stores.schema import queues as queue_table
from tether.stores.sql_events import event_values
from tether.stores.sql_keys import has_room

if TYPE_CHECKING:
    from tether.stores.sql import SQLCheckpointer

_WORKER_FIELDS = [c.name for c in workers.columns]


def _ready() -> ColumnElement[bool]:
    return or_(runs.c.available_at.is_(None), runs.c.available_at <= bindparam("now"))


_ORDER = (runs.c.priority.desc(), runs.c.created_at, runs.c.execution_id)


_KINDS = ("queued", "recovered", "answered")


def _claimable(queues: int, plans: int | None = None, full: int = 0,
               starts: bool = True, kinds: Sequence[str] = _KINDS) -> ColumnElement[bool]:
    """The runs a claim may take (see ``tether.stores.queueing``): of ``plans`` fingerprints
    when given, none of the ``full`` workflows, queued ones only when ``starts``. ``kinds``:
    which of them: ``queued`` runs, running runs whose lease ran out (``recovered``), paused
    runs with answers (``answered``)."""
    free = or_(runs.c.owner.is_(None), runs.c.lease_until < bindparam("now"))
    answered = exists(select(literal_column("1")).select_from(decisions).where(and_(
        decisions.c.execution_id == runs.c.execution_id,
        decisions.c.created_at > runs.c.updated_at)))
    terms = {"queued": and_(runs.c.status == RunStatus.QUEUED.value,
                            runs.c.cancel_requested_at.is_(None), _ready(), has_room()),
             "recovered": and_(runs.c.status == RunStatus.RUNNING.value, free, _ready()),
             "answered": and_(runs.c.status == RunStatus.PAUSED.value, runs.c.owner.is_(None),
                              answered)}
    chosen = [terms[kind] for kind in kinds if starts or kind != "queued"]
    where = [runs.c.queue.in_([bindparam(f"q{i}") for i in range(queues)]),
             chosen[0] if len(chosen) == 1 else or_(*chosen)]
    if plans is not None:
        where.append(runs.c.plan_fingerprint.in_([bindparam(f"p{i}") for i in range(plans)]))
    if full:
        where.append(runs.c.workflow.not_in([bindparam(f"w{i}") for i in range(full)]))
    return and_(*where)


def _candidates(queues: int, plans: int | None, full: int, starts: bool) -> ClauseElement:
    """The first ``n`` claimable runs in claim order, locked (``SKIP LOCKED``): the best
    ``n`` of each kind (queued, recovered, answered), each read in the order of the
    ``runs_claim_order`` index, so a claim reads about ``n`` index entries per queue instead
    of sorting the whole backlog; then the best ``n`` of those."""
    return _first(_branch(_claimable(queues, plans, full, starts, (kind,)))
                  for kind in _KINDS if starts or kind != "queued")


def _first(branches: Iterable[Select[Any]], n: ColumnElement[int] | None = None,
           ) -> Select[Any]:
    both = union_all(*branches).subquery("claimable")
    return select(*both.c).order_by(both.c.priority.desc(), both.c.created_at,
                                    both.c.execution_id).limit(_limit(n))


def _branch(where: ColumnElement[bool], n: ColumnElement[int] | None = None) -> Select[Any]:
    """The first ``n`` runs matching ``where`` in claim order, locked (``SKIP LOCKED``), as a
    sub-select (SQLite takes no parenthesised member in a compound select). ``n``: the
    bound ``:n`` unless given."""
    first = select(runs.c.execution_id, runs.c.status.label("was"), runs.c.queue,
                   runs.c.workflow, runs.c.priority, runs.c.created_at).where(where).order_by(
        *_ORDER).limit(_limit(n)).with_for_update(skip_locked=True).subquery()
    return select(*first.c)


def _limit(n: ColumnElement[int] | None) -> ColumnElement[int]:
    return bindparam("n") if n is None else n


def _take() -> ClauseElement:
    """Take the run; ``RETURNING`` the run row as taken (no read per claimed run after)."""
    return update(runs).where(runs.c.execution_id == bindparam("eid")).values(
        owner=bindparam("owner"), lease_until=bindparam("until"),
        status=RunStatus.RUNNING.value, attempt=runs.c.attempt + 1,
        updated_at=bindparam("now"), blocked_reason=None,
        started_at=case((runs.c.status == RunStatus.QUEUED.value, bindparam("now")),
                        else_=runs.c.started_at)).returning(*runs.columns)


_REASONS = {RunStatus.QUEUED.value: ClaimReason.QUEUED,
            RunStatus.RUNNING.value: ClaimReason.RECOVERED,
            RunStatus.PAUSED.value: ClaimReason.ANSWERED}
_LIMITED = or_(queue_table.c.concurrency.is_not(None), queue_table.c.per_workflow.is_not(None),
               queue_table.c.rate_limit.is_not(None))


def _locked_limits(store: SQLCheckpointer, cursor: Any, queues: Sequence[str],
                   ) -> list[QueueRecord]:
    """The limited queues among ``queues``, their rows locked until the claim commits: the
    claimers of one limited queue are serialised, so each counts what the last one took."""
    count = len(queues)
    rows = store.sql_execute(cursor, f"queue_limits:{count}", lambda: select(
        *queue_table.columns).where(and_(queue_table.c.name.in_(
            [bindparam(f"q{i}") for i in range(count)]), _LIMITED)).order_by(
        queue_table.c.name).with_for_update(), **_names("q", queues)).fetchall()
    return [_to_queue(row) for row in rows]


def _usage(store: SQLCheckpointer, cursor: Any, queue: QueueRecord, now: float) -> QueueUsage:
    held = store.sql_execute(cursor, "queue_held", lambda: select(
        runs.c.workflow, func.count()).where(and_(
            runs.c.queue == bindparam("q"), runs.c.status == RunStatus.RUNNING.value,
            runs.c.owner.is_not(None), runs.c.lease_until >= bindparam("now"))).group_by(
        runs.c.workflow), q=queue.name, now=now).fetchall()
    usage = QueueUsage(Counter({str(w): int(n) for w, n in held}))
    if queue.rate_limit is not None:
        usage.started = int(store.sql_execute(cursor, "queue_started", lambda: select(
            func.count()).where(and_(runs.c.queue == bindparam("q"),
                                     runs.c.started_at > bindparam("since"))),
            q=queue.name, since=now - queue.window).fetchone()[0])
    return usage


def _names(prefix: str, values: Iterable[str]) -> dict[str, str]:
    return {f"{prefix}{i}": value for i, value in enumerate(values)}


def claim_one_statement(queues: int, plans: int | None, one: bool = False) -> ClauseElement:
    """PostgreSQL's claim when none of the served queues has limits, in one statement:
    ``WITH lim AS (the served queues that have limits), cand AS (the claimable runs,
    none if lim is not empty: the first n of each kind ... FOR UPDATE SKIP LOCKED, then the
    first n of those, as :func:`_candidates`), upd AS (UPDATE runs ... FROM cand RETURNING
    the run rows and their status before), ev AS (INSERT each taken run's ``claimed``
    event) SELECT * FROM upd``.

    ``one``: n is 1, written in the statement (``LIMIT 1``), not bound: a worker's slot
    claims so after each run's end (``pg_end_claim.py``). A worker's generic plan of ``LIMIT
    $n`` estimates ``cand`` at a tenth of its input, 20 runs over an analysed backlog of
    1,000, and so joined it to ``runs`` by hashing a sequential scan of every run, about
    half of the claim's server time there; knowing 1 row, the planner probes ``runs_pkey``
    once (docs/decisions.md, issue 26). Other n stay bound: one prepared statement for all.

    Each run gets its own owner token, ``gen_random_uuid()``'s 32 hex digits (random, as
    :func:`new_owner`'s) followed by this process's ``@host/pid/...`` suffix; each event
    the claim's time as its id's first 19 digits
    (:func:`~tether.stores.events.event_id_time`), then 8 random hex digits. The row locks and
    ``SKIP LOCKED`` are the transaction's; a queue's limits are read from the same snapshot
    the transaction's ``_locked_limits`` would read (nothing to lock when there are none)."""
    lim = select(queue_table.c.name).where(and_(queue_table.c.name.in_(
        [bindparam(f"q{i}") for i in range(queues)]), _LIMITED)).cte("lim")
    empty = ~exists(select(literal_column("1")).select_from(lim))
    n = literal_column("1", Integer) if one else None
    first = _first((_branch(and_(_claimable(queues, plans, kinds=(kind,)), empty), n)
                    for kind in _KINDS), n).subquery("first")
    cand = select(first.c.execution_id, first.c.was).cte("cand")
    token = func.replace(cast(func.gen_random_uuid(), String), "-", "") + \
        bindparam("suffix", type_=String)
    upd = update(runs).where(runs.c.execution_id == cand.c.execution_id).values(
        owner=token, lease_until=bindparam("until"), status=RunStatus.RUNNING.value,
        attempt=runs.c.attempt + 1, updated_at=bindparam("now"), blocked_reason=None,
        started_at=case((runs.c.status == RunStatus.QUEUED.value, bindparam("now")),
                        else_=runs.c.started_at)).returning(*runs.columns, cand.c.was).cte("upd")
    data = cast(func.json_build_object("attempt", upd.c.attempt, "reason", CLAIMED_REASON,
                                       "worker", bindparam("worker", type_=String)), String)
    event_id = bindparam("event_at", type_=String) + func.substr(
        func.md5(cast(func.random(), String)), 1, 8)
    ev = insert(run_events).from_select(
        ["execution_id", "event_id", "kind", "created_at", "owner", "data"],
        select(upd.c.execution_id, event_id, literal(RunEventKind.CLAIMED.value, String),
               bindparam("now"), upd.c.owner, data)).cte("ev")
    return select(*upd.c).add_cte(ev)


def _claim_in_one(store: SQLCheckpointer, worker: str, queues: Sequence[str], limit: int,
                  now: float, lease_until: float, fingerprints: list[str] | None,
                  ) -> list[ClaimedRun]:
    """:func:`claim_one_statement` in autocommit; nothing when the queues have limits
    (or nothing is claimable): the caller then claims in the transaction."""
    name, build, values = claim_one_call(worker, queues, limit, now, lease_until, fingerprints)
    with store.sql_cursor("claiming runs") as cursor:
        rows = store.sql_execute(cursor, name, build, **values).fetchall()
    return claimed_from_rows(store, rows, lease_until)


def claim_one_call(worker: str, queues: Sequence[str], limit: int, now: float,
                   lease_until: float, fingerprints: Sequence[str] | None,
                   ) -> tuple[str, Callable[[], ClauseElement], dict[str, Any]]:
    """:func:`claim_one_statement`'s cache name, builder and bound values for one claim
    (also sent with a run's end: ``pg_end_claim.py``)."""
    count, planned = len(queues), len(fingerprints) if fingerprints is not None else None
    values = {"now": now, "n": limit, "until": lease_until, "suffix": owner_suffix(),
              "worker": worker, "event_at": event_id_time(now), **_names("q", queues),
              **_names("p", fingerprints or ())}
    one = limit == 1
    return (f"claim_one:{count}:{planned}:{int(one)}",
            lambda: claim_one_statement(count, planned, one), values)


def claimed_from_rows(store: SQLCheckpointer, rows: Iterable[Any],
                      lease_until: float) -> list[ClaimedRun]:
    """The runs :func:`claim_one_statement` returned, in claim order."""
    claimed: list[ClaimedRun] = []
    for row in rows:
        run = store.run_from_row(row[:-1])
        assert run.owner is not None
        claimed.append(ClaimedRun(run, run.owner, lease_until, _REASONS[row[-1]]))
    claimed.sort(key=lambda c: (-c.run.priority, c.run.created_at, c.run.execution_id))
    return claimed


def claim_runs(store: SQLCheckpointer, worker: str, queues: Sequence[str], limit: int,
               now: float, lease_until: float,
               plans: Collection[str] | None = None) -> list[ClaimedRun]:
    if limit <= 0 or not queues or (plans is not None and not plans):
        return []
    fingerprints = sorted(plans) if plans is not None else None
    if store.claims_in_one_statement:
        taken = _claim_in_one(store, worker, queues, limit, now, lease_until, fingerprints)
        if taken:
            return taken

    def candidates(cursor: Any, names: Sequence[str], n: int, full: Sequence[str] = (),
                   starts: bool = True) -> list[Any]:
        count, planned = len(names), len(fingerprints) if fingerprints is not None else None
        key = f"claim_candidates:{count}:{planned}:{len(full)}:{int(starts)}"
        return list(store.sql_execute(
            cursor, key, lambda: _candidates(count, planned, len(full), starts), now=now,
            n=n, **_names("q", names), **_names("p", fingerprints or ()),
            **_names("w", full)).fetchall())

    with store.sql_cursor(f"claiming runs for worker {worker}", write=True) as cursor:
        limits = _locked_limits(store, cursor, queues)
        budget = Budget(limits, {q.name: _usage(store, cursor, q, now) for q in limits})
        limited = {q.name for q in limits}
        plain = [q for q in queues if q not in limited]
        found = candidates(cursor, plain, limit) if plain else []
        for queue in limits:
            room = budget.room(queue.name)
            if room == 0:
                continue
            wanted = limit if room is None else min(limit, room)
            found += candidates(cursor, [queue.name], 2 * wanted,
                                budget.full_workflows(queue.name),
                                budget.starts_left(queue.name) != 0)
        found.sort(key=lambda row: (-row[4], row[5], row[0]))
        claimed: list[ClaimedRun] = []
        for execution_id, status, queue_name, workflow, _, _ in found:
            if len(claimed) >= limit:
                break
            if not budget.admit(queue_name, workflow, status == RunStatus.QUEUED.value):
                continue
            owner = new_owner()
            row = store.sql_execute(cursor, "claim_take", _take, eid=execution_id, owner=owner,
                                 until=lease_until, now=now).fetchone()
            if row is not None:
                run = store.run_from_row(row)
                event = claimed_event(execution_id, owner, run.attempt, worker, now)
                store.sql_execute(cursor, "insert_event", lambda: insert(run_events),
                                  **event_values(event))
                claimed.append(ClaimedRun(run, owner, lease_until, _REASONS[status]))
    return claimed


def claimable_plans(store: SQLCheckpointer, queues: Sequence[str], now: float,
                    known: Collection[str]) -> list[str]:
    if not queues:
        return []
    count = len(queues)
    with store.sql_cursor("listing the plans of claimable runs") as cursor:
        rows = store.sql_execute(cursor, f"claimable_plans:{count}", lambda: select(
            runs.c.plan_fingerprint).where(_claimable(count)).distinct(),
            now=now, **_names("q", queues)).fetchall()
    return sorted({str(row[0]) for row in rows} - set(known))


def block_runs(store: SQLCheckpointer, fingerprint: str, queues: Sequence[str], reason: str,
               now: float) -> int:
    if not queues:
        return 0
    count = len(queues)
    with store.sql_cursor(f"recording why runs of plan {fingerprint[:12]} wait",
                       write=True) as cursor:
        store.sql_execute(cursor, f"block_runs:{count}", lambda: update(runs).where(and_(
            _claimable(count), runs.c.plan_fingerprint == bindparam("fp"),
            runs.c.blocked_reason.is_(None))).values(blocked_reason=bindparam("reason")),
            now=now, fp=fingerprint, reason=reason, **_names("q", queues))
        return int(cursor.rowcount)


def retry_later(store: SQLCheckpointer, execution_id: str, owner: str, available_at: float,
                reason: str, event: RunEvent | None = None) -> bool:
    """The run given back with its backoff and, if that took effect, ``event`` (the claim's
    ``released`` event) in the same transaction: a retry after a lost commit finds the owner
    gone and adds nothing."""
    with store.sql_cursor(f"putting run {execution_id} back for a later retry",
                       write=True) as cursor:
        store.sql_execute(cursor, "retry_later", lambda: update(runs).where(and_(
            runs.c.execution_id == bindparam("eid"), runs.c.owner == bindparam("holder"))).values(
            owner=None, lease_until=None, available_at=bindparam("at"),
            blocked_reason=bindparam("reason"),
            recovery_failures=runs.c.recovery_failures + 1),
            eid=execution_id, holder=owner, at=available_at, reason=reason)
        took = bool(cursor.rowcount == 1)
        if took and event is not None:
            store.sql_execute(cursor, "insert_event", lambda: insert(run_events),
                              **event_values(event))
        return took


# -- queue configuration ----------------------------------------------------------------------
_QUEUE_FIELDS = [c.name for c in queue_table.columns]


def _to_queue(row: Any) -> QueueRecord:
    values = dict(zip(_QUEUE_FIELDS, row, strict=True))
    return QueueRecord(**values)


def put_queue(store: SQLCheckpointer, queue: QueueRecord) -> None:
    with store.sql_cursor(f"configuring queue {queue.name}", write=True) as cursor:
        old = store.sql_execute(cursor, "queue_get", lambda: select(queue_table.c.created_at).where(
            queue_table.c.name == bindparam("name")).with_for_update(),
            name=queue.name).fetchone()
        values = dataclasses.asdict(queue)
        if old is None:
            store.sql_execute(cursor, "queue_insert", lambda: insert(queue_table), **values)
            return
        del values["created_at"]
        store.sql_execute(cursor, "queue_update", lambda: update(queue_table).where(
            queue_table.c.name == bindparam("key")).values(
            {k: bindparam(k) for k in values if k != "name"}), key=queue.name, **values)


def list_queues(store: SQLCheckpointer) -> list[QueueRecord]:
    with store.sql_cursor("listing queues") as cursor:
        rows = store.sql_execute(cursor, "list_queues", lambda: select(
            *queue_table.columns).order_by(queue_table.c.name)).fetchall()
    return [_to_queue(row) for row in rows]


def remove_queue(store: SQLCheckpointer, name: str) -> bool:
    with store.sql_cursor(f"removing queue {name}", write=True) as cursor:
        store.sql_execute(cursor, "queue_delete", lambda: delete(queue_table).where(
            queue_table.c.name == bindparam("name")), name=name)
        return bool(cursor.rowcount == 1)


def queue_counts(store: SQLCheckpointer, now: float) -> list[QueueCounts]:
    with store.sql_cursor("counting runs per queue") as cursor:
        rows = store.sql_execute(cursor, "queue_counts", lambda: select(
            runs.c.queue, runs.c.status, func.count()).where(and_(
                runs.c.queue.is_not(None), or_(
                    runs.c.status == RunStatus.QUEUED.value,
                    and_(runs.c.status == RunStatus.RUNNING.value, runs.c.owner.is_not(None),
                         runs.c.lease_until >= bindparam("now"))))).group_by(
            runs.c.queue, runs.c.status), now=now).fetchall()
    counts: dict[str, Counter[str]] = {}
    for queue, status, n in rows:
        counts.setdefault(str(queue), Counter())[str(status)] += int(n)
    return [QueueCounts(name, c[RunStatus.QUEUED.value], c[RunStatus.RUNNING.value])
            for name, c in sorted(counts.items())]


def enqueue_run(store: SQLCheckpointer, execution_id: str, queue: str, priority: int,
                available_at: float | None) -> bool:
    with store.sql_cursor(f"enqueueing run {execution_id}", write=True) as cursor:
        store.sql_execute(cursor, "enqueue_run", lambda: update(runs).where(
            runs.c.execution_id == bindparam("eid")).values(
            queue=bindparam("queue"), priority=bindparam("priority"),
            available_at=bindparam("at"),
            status=case((runs.c.status == RunStatus.FAILED.value, RunStatus.QUEUED.value),
                        else_=runs.c.status)), eid=execution_id, queue=queue, priority=priority,
            at=available_at)
        changed = bool(cursor.rowcount == 1)
        if changed:
            store.wake_workers(cursor)
        return changed


def request_cancel(store: SQLCheckpointer, execution_id: str,
                   now: float) -> CancelOutcome | None:
    with store.sql_cursor(f"cancelling run {execution_id}", write=True) as cursor:
        return cancel_in(store, cursor, execution_id, now)


def cancel_in(store: SQLCheckpointer, cursor: Any, execution_id: str, now: float,
              error: dict[str, Any] | None = None) -> CancelOutcome | None:
    """:func:`request_cancel` inside the caller's transaction; ``error``: the recorded error
    of a run cancelled at once (default: the message of ``tether cancel``)."""
    row = store.sql_execute(cursor, "cancel_lock", lambda: select(
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
        store.sql_execute(cursor, "cancel_request", lambda: update(runs).where(
            runs.c.execution_id == bindparam("eid")).values(
            cancel_requested_at=bindparam("now")), eid=execution_id, now=now)
        return CancelOutcome.REQUESTED
    store.sql_execute(cursor, "cancel_now", lambda: update(runs).where(
        runs.c.execution_id == bindparam("eid")).values(
        status=RunStatus.CANCELLED.value, cancel_requested_at=bindparam("now"),
        updated_at=bindparam("now"), owner=None, lease_until=None,
        error=bindparam("error")), eid=execution_id, now=now,
        error=json.dumps(error or {
            "type": "RunCancelled", "message": "cancelled before a worker executed it"
            if status == RunStatus.QUEUED.value else "cancelled while nothing executed it",
            "node_id": None}))
    store.sql_execute(cursor, "cancel_pending", lambda: delete(pending_interrupts).where(
        pending_interrupts.c.execution_id == bindparam("eid")), eid=execution_id)
    return CancelOutcome.CANCELLED


def register_worker(store: SQLCheckpointer, worker: WorkerRecord) -> None:
    with store.sql_cursor(f"registering worker {worker.worker_id}", write=True) as cursor:
        store.sql_execute(cursor, "worker_delete", lambda: delete(workers).where(
            workers.c.worker_id == bindparam("wid")), wid=worker.worker_id)
        store.sql_execute(cursor, "worker_insert", lambda: insert(workers),
                       worker_id=worker.worker_id, host=worker.host, pid=worker.pid,
                       queues=json.dumps(list(worker.queues)), concurrency=worker.concurrency,
                       started_at=worker.started_at, heartbeat_at=worker.heartbeat_at,
                       held=json.dumps(list(worker.held)))


def heartbeat_worker(store: SQLCheckpointer, worker_id: str, now: float,
                     held: Sequence[str]) -> bool:
    with store.sql_cursor(f"heartbeat of worker {worker_id}", write=True) as cursor:
        store.sql_execute(cursor, "worker_heartbeat", lambda: update(workers).where(
            workers.c.worker_id == bindparam("wid")).values(
            heartbeat_at=bindparam("now"), held=bindparam("held")),
            wid=worker_id, now=now, held=json.dumps(list(held)))
        return bool(cursor.rowcount == 1)


def deregister_worker(store: SQLCheckpointer, worker_id: str) -> None:
    with store.sql_cursor(f"deregistering worker {worker_id}", write=True) as cursor:
        store.sql_execute(cursor, "worker_delete", lambda: delete(workers).where(
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
    with store.sql_cursor("listing workers") as cursor:
        rows = store.sql_execute(cursor, "list_workers", lambda: select(*workers.columns).where(
            workers.c.heartbeat_at >= bindparam("since")).order_by(
            workers.c.started_at, workers.c.worker_id), since=since).fetchall()
    return [_to_worker(row) for row in rows]
