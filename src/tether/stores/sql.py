"""The SQL checkpointer: one implementation for SQLite and PostgreSQL.

The schema and the statements are SQLAlchemy Core (``schema.py``); each statement is compiled
once per dialect and executed on the driver's connection (``statements.py``), one connection
per store, serialised by a lock. Dialect differences live in subclasses (``sqlite.py``,
``postgres.py``) as a few hooks: the connection, how a write transaction starts and ends,
the insert that ignores a taken key, the serialisation of schema set-up across processes,
and which driver errors mean "duplicate" or "connection lost". Everything else, the atomic
claim included, is written once here.

Foreign exceptions are mapped at one boundary (:meth:`SQLCheckpointer._errors`): every public
method runs inside it, so callers only ever see :class:`~tether.errors.StoreError` and its
subclasses.
"""

from __future__ import annotations

import abc
import contextlib
import json
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Insert,
    Table,
    and_,
    bindparam,
    case,
    delete,
    exists,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.sql import ClauseElement, Select
from sqlalchemy.sql.elements import BindParameter

from tether.errors import (
    ExecutionExists,
    LeaseLost,
    SchemaVersionError,
    StoreError,
    StoreUnavailable,
)
from tether.stores import listing, sql_queue
from tether.stores.base import Checkpointer
from tether.stores.migrations import MigrationContext
from tether.stores.owners import describe_owner
from tether.stores.queueing import (
    CancelOutcome,
    ClaimedRun,
    QueueCounts,
    QueueRecord,
    WorkerRecord,
)
from tether.stores.records import (
    RUN_END,
    CheckpointRow,
    Claim,
    Decision,
    PendingCursor,
    PendingEntry,
    PendingInterrupt,
    PruneResult,
    RunCursor,
    RunRecord,
    RunStatus,
    utc,
)
from tether.stores.retry import transient
from tether.stores.schedule_sql import SQLSchedules
from tether.stores.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    checkpoints,
    decisions,
    idempotency_cache,
    pending_interrupts,
    plans,
    runs,
    schedules,
    schema_version,
)
from tether.stores.statements import Statements

_ROW_FIELDS = [c.name for c in checkpoints.columns]
assert tuple(_ROW_FIELDS) == CheckpointRow._fields, "CheckpointRow must follow the columns"
_RUN_FIELDS = [c.name for c in runs.columns]
_PENDING_FIELDS = [c.name for c in pending_interrupts.columns]
_DECISION_FIELDS = [c.name for c in decisions.columns]
_EID: BindParameter[str] = bindparam("eid")
_TAKE: dict[str, Any] = {  # the SET of taking a lease: a completed run keeps its status
    "owner": bindparam("owner"), "lease_until": bindparam("until"),
    "status": case((runs.c.status == RunStatus.COMPLETED.value, runs.c.status),
                   else_=RunStatus.RUNNING.value),
    "attempt": case((runs.c.owner == bindparam("owner"), runs.c.attempt),
                    else_=runs.c.attempt + 1),
    "updated_at": bindparam("now"),
}


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False,
                                                  separators=(",", ":"))


def _parse(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _acquire_statement() -> ClauseElement:
    """The lease compare-and-set: free, expired, ours, or held by a dead owner."""
    free = or_(runs.c.owner.is_(None), runs.c.owner == bindparam("owner"),
               runs.c.lease_until < bindparam("now"), runs.c.owner == bindparam("steal"))
    return update(runs).where(and_(runs.c.execution_id == _EID, free)).values(**_TAKE)


def _fenced_insert() -> ClauseElement:
    """The checkpoint INSERT that writes only while the run row names the owner."""
    held: Select[Any] = select(literal_column("1")).select_from(runs).where(and_(
        runs.c.execution_id == bindparam("eid"), runs.c.owner == bindparam("owner"),
    )).with_for_update(read=True)
    values = select(*[bindparam(name, type_=checkpoints.c[name].type) for name in _ROW_FIELDS])
    return insert(checkpoints).from_select(_ROW_FIELDS, values.where(exists(held)))


def _to_decision(row: Any) -> Decision:
    values = dict(zip(_DECISION_FIELDS, row, strict=True))
    return Decision(
        execution_id=values["execution_id"], checkpoint_id=values["checkpoint_id"],
        node_id=values["node_id"], agent_path=values["agent_path"],
        value=_parse(values["value"]), created_at=utc(values["created_at"]),
        resolver=values["resolver"], comment=values["comment"])


def _lost_reason(holder: str | None) -> str:
    return f"the run is now held by {describe_owner(holder)}" if holder else \
        "the run is no longer held by this attempt"


def _row_written(store: SQLCheckpointer, row: CheckpointRow, *_: Any) -> bool:
    """Whether a write whose connection dropped did commit: its checkpoint row exists."""
    return store._row(row.execution_id, row.checkpoint_id) is not None


def _run_created(store: SQLCheckpointer, run: RunRecord, *_: Any) -> bool:
    """Whether a run insert whose connection dropped did commit (by this owner)."""
    found = store.get_run(run.execution_id)
    return found is not None and (found.owner, found.plan_fingerprint, found.created_at) == (
        run.owner, run.plan_fingerprint, run.created_at)


class SQLCheckpointer(SQLSchedules, Checkpointer):
    """Checkpointer over a SQL database; see the dialect subclasses.

    ``retry_seconds``: how long an operation waits for an unreachable database to come back
    (see :mod:`tether.stores.retry`).
    """

    retry_seconds = 15.0

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.RLock()
        self._sql = Statements(engine.dialect)
        self.setup()

    # -- dialect hooks -----------------------------------------------------------------------
    @abc.abstractmethod
    def _hot(self) -> Any:
        """The driver connection (autocommit) every operation of this store uses."""

    @abc.abstractmethod
    def _transaction(self, connection: Any) -> contextlib.AbstractContextManager[None]:
        """A write transaction on the driver connection (SQLite: BEGIN IMMEDIATE)."""

    @abc.abstractmethod
    def _begin_write(self, connection: Connection) -> None:
        """Start a write transaction on a SQLAlchemy connection (schema set-up, prune)."""

    @abc.abstractmethod
    def _lock_schema(self, connection: Connection) -> None:
        """Serialise schema set-up across processes, inside the current transaction."""

    @abc.abstractmethod
    def _is_duplicate(self, exc: BaseException) -> bool:
        """Whether a driver error is a primary-key violation."""

    @abc.abstractmethod
    def _is_disconnect(self, exc: BaseException) -> bool:
        """Whether a driver error means the server could not be reached."""

    @abc.abstractmethod
    def _insert_or_ignore(self, table: Table) -> Insert:
        """An INSERT into ``table`` that does nothing if the primary key is taken."""

    def _reset_hot(self) -> None:
        """Forget a broken connection (the next operation opens a new one)."""

    def _notify(self, cursor: Any) -> None:
        """Inside a write transaction: wake idle workers at commit (PostgreSQL NOTIFY)."""

    _can_drop_columns = True  # ALTER TABLE ... DROP COLUMN (SQLite since 3.35)

    def _qualified(self, table: str) -> str:
        """A table's name for raw SQL: quoted, and qualified by the store's schema if any."""
        return str(self.engine.dialect.identifier_preparer.quote(table))

    # -- plumbing ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except IntegrityError as exc:
            raise StoreError(f"{what}: {exc.orig}") from exc
        except SQLAlchemyError as exc:
            if self._is_disconnect(exc):
                reason = getattr(exc, "orig", exc)
                raise StoreUnavailable(f"{what}: the database is unreachable: {reason}") \
                    from exc
            raise StoreError(f"{what}: {exc}") from exc
        except Exception as exc:
            if self._is_disconnect(exc):
                self._reset_hot()
                raise StoreUnavailable(f"{what}: the database is unreachable: {exc}") from exc
            if self._is_duplicate(exc):
                raise StoreError(f"{what}: {exc}") from exc
            if type(exc).__module__.split(".")[0] in ("sqlite3", "psycopg"):
                raise StoreError(f"{what}: {exc}") from exc
            raise

    @contextlib.contextmanager
    def _cursor(self, what: str, *, write: bool = False) -> Iterator[Any]:
        """A driver cursor; with ``write``, inside one transaction (committed on success)."""
        with self._errors(what), self._lock:
            connection = self._hot()
            cursor = connection.cursor()
            try:
                if write:
                    with self._transaction(connection):
                        yield cursor
                else:
                    yield cursor
            finally:
                cursor.close()

    def _execute(self, cursor: Any, name: str, build: Callable[[], ClauseElement], /,
                 **values: Any) -> Any:
        statement = self._sql.get(name, build)
        cursor.execute(statement.sql, statement.params(values))
        return cursor

    @contextlib.contextmanager
    def _engine_write(self, what: str) -> Iterator[Connection]:
        with self._errors(what), self._lock, self.engine.connect() as connection, \
                connection.begin():
            self._begin_write(connection)
            yield connection

    def setup(self) -> None:
        """Create or migrate the schema; safe when many processes call it at once."""
        with self._engine_write("schema set-up") as connection:
            self._lock_schema(connection)
            schema_version.create(connection, checkfirst=True)
            found = connection.execute(select(schema_version.c.version)).scalar()
            current = int(found or 0)
            if current > SCHEMA_VERSION:
                raise SchemaVersionError(current, SCHEMA_VERSION)
            context = MigrationContext(connection, self.engine.dialect.name, self._qualified,
                                       self._can_drop_columns)
            for migration in MIGRATIONS[current:]:
                migration(context)
            if found is None:
                connection.execute(insert(schema_version).values(id=1, version=SCHEMA_VERSION))
            elif current < SCHEMA_VERSION:
                connection.execute(update(schema_version).values(version=SCHEMA_VERSION))

    def close(self) -> None:
        with self._lock:
            self._reset_hot()
            self.engine.dispose()

    # -- runs --------------------------------------------------------------------------------
    @transient(done=_run_created)
    def create_run(self, run: RunRecord, plan_json: str) -> None:
        """Insert the plan and the run with ``ON CONFLICT DO NOTHING``: of processes starting
        one plan or one execution id at once, none fails with a driver error; the ones that
        find the execution id taken get ExecutionExists (PostgreSQL makes them wait for the
        first to commit)."""
        with self._cursor(f"creating run {run.execution_id}", write=True) as cursor:
            self._store_plan(cursor, run.plan_fingerprint, plan_json)
            self._execute(cursor, "create_run", lambda: self._insert_or_ignore(runs).returning(
                runs.c.execution_id), **self._run_values(run))
            if cursor.fetchone() is None:
                raise ExecutionExists(run.execution_id)
            if run.status == RunStatus.QUEUED:
                self._notify(cursor)

    def _store_plan(self, cursor: Any, fingerprint: str, plan_json: str) -> None:
        self._execute(cursor, "store_plan", lambda: self._insert_or_ignore(plans),
                      fingerprint=fingerprint, plan=plan_json, created_at=time.time())

    @staticmethod
    def _run_values(run: RunRecord) -> dict[str, Any]:
        return {
            "execution_id": run.execution_id, "workflow": run.workflow,
            "plan_fingerprint": run.plan_fingerprint, "status": run.status,
            "inputs": _json(run.inputs) or "null", "created_at": run.created_at.timestamp(),
            "updated_at": run.updated_at.timestamp(),
            "parent_execution_id": run.parent_execution_id,
            "parent_checkpoint_id": run.parent_checkpoint_id, "error": _json(run.error),
            "owner": run.owner, "lease_until": run.lease_until, "attempt": run.attempt,
            "queue": run.queue, "priority": run.priority, "available_at": run.available_at,
            "cancel_requested_at": run.cancel_requested_at, "started_at": run.started_at,
            "blocked_reason": run.blocked_reason, "recovery_failures": run.recovery_failures,
        }

    @staticmethod
    def _to_run(row: Any) -> RunRecord:
        values = dict(zip(_RUN_FIELDS, row, strict=True))
        return RunRecord(
            execution_id=values["execution_id"], workflow=values["workflow"],
            plan_fingerprint=values["plan_fingerprint"], status=values["status"],
            inputs=_parse(values["inputs"]), created_at=utc(values["created_at"]),
            updated_at=utc(values["updated_at"]),
            parent_execution_id=values["parent_execution_id"],
            parent_checkpoint_id=values["parent_checkpoint_id"],
            error=_parse(values["error"]), owner=values["owner"],
            lease_until=values["lease_until"], attempt=values["attempt"],
            queue=values["queue"], priority=values["priority"],
            available_at=values["available_at"],
            cancel_requested_at=values["cancel_requested_at"],
            started_at=values["started_at"], blocked_reason=values["blocked_reason"],
            recovery_failures=values["recovery_failures"] or 0,
        )

    @transient()
    def get_run(self, execution_id: str) -> RunRecord | None:
        with self._cursor(f"reading run {execution_id}") as cursor:
            row = self._execute(cursor, "get_run", lambda: select(*runs.columns).where(
                runs.c.execution_id == _EID), eid=execution_id).fetchone()
        return self._to_run(row) if row is not None else None

    @transient()
    def cancel_requested_at(self, execution_id: str) -> float | None:
        with self._cursor(f"reading run {execution_id}") as cursor:
            row = self._execute(cursor, "cancel_requested_at", lambda: select(
                runs.c.cancel_requested_at).where(runs.c.execution_id == _EID),
                eid=execution_id).fetchone()
        return float(row[0]) if row is not None and row[0] is not None else None

    @transient()
    def find_runs(self, *, status: str | None = None, workflow: str | None = None,
                  before: RunCursor | None = None, limit: int = 50) -> list[RunRecord]:
        shape = {"status": status is not None, "workflow": workflow is not None,
                 "before": before is not None}
        name = "find_runs:" + "".join(str(int(v)) for v in shape.values())
        values: dict[str, Any] = {"n": max(0, limit), "status": status, "workflow": workflow}
        if before is not None:
            values.update(at=before.at, eid=before.execution_id)
        with self._cursor("listing runs") as cursor:
            rows = self._execute(cursor, name, lambda: listing.find_runs_statement(**shape),
                                 **values).fetchall()
        return [self._to_run(row) for row in rows]

    @transient()
    def runs_changed(self, after: RunCursor | None = None, limit: int = 500,
                     ) -> tuple[list[RunRecord], RunCursor | None]:
        values: dict[str, Any] = {"n": max(0, limit)}
        if after is not None:
            values.update(at=after.at, eid=after.execution_id)
        with self._cursor("listing changed runs") as cursor:
            rows = self._execute(
                cursor, f"runs_changed:{after is not None}",
                lambda: listing.runs_changed_statement(after=after is not None),
                **values).fetchall()
        if not rows:
            return [], None
        last = dict(zip(_RUN_FIELDS, rows[-1], strict=True))
        return [self._to_run(row) for row in rows], RunCursor(last["updated_at"],
                                                              last["execution_id"])

    @transient()
    def get_plan(self, fingerprint: str) -> str | None:
        with self._cursor("reading a plan") as cursor:
            row = self._execute(cursor, "get_plan", lambda: select(plans.c.plan).where(
                plans.c.fingerprint == bindparam("fp")), fp=fingerprint).fetchone()
        return str(row[0]) if row is not None else None

    @transient()
    def set_run_plan(self, execution_id: str, fingerprint: str, plan_json: str,
                     owner: str | None = None) -> None:
        with self._cursor(f"changing the plan of run {execution_id}", write=True) as cursor:
            self._fence(cursor, execution_id, owner)
            self._store_plan(cursor, fingerprint, plan_json)
            self._execute(cursor, "set_run_plan", lambda: update(runs).where(
                runs.c.execution_id == _EID).values(plan_fingerprint=bindparam("fp"),
                                                     updated_at=bindparam("now")),
                eid=execution_id, fp=fingerprint, now=time.time())

    # -- leases ------------------------------------------------------------------------------
    @transient()
    def acquire(self, execution_id: str, owner: str, until: float, now: float,
                steal_from: str | None = None) -> bool:
        """One ``UPDATE ... WHERE <lease is free>``: a compare-and-set the database serialises.
        A completed run keeps its status."""
        with self._cursor(f"taking run {execution_id}", write=True) as cursor:
            return self._acquire(cursor, "acquire", _acquire_statement, execution_id, owner,
                                 until, now, steal_from)

    def _acquire(self, cursor: Any, name: str, build: Callable[[], ClauseElement],
                 execution_id: str, owner: str, until: float, now: float,
                 steal_from: str | None) -> bool:
        self._execute(cursor, name, build, eid=execution_id, owner=owner, until=until, now=now,
                      steal=steal_from)
        return bool(cursor.rowcount == 1)

    def _fence(self, cursor: Any, execution_id: str, owner: str | None) -> None:
        """Inside a write transaction: lock the run row (PostgreSQL ``FOR UPDATE``; SQLite's
        ``BEGIN IMMEDIATE`` already holds the write lock) and refuse to go on unless ``owner``
        holds it. A takeover (an ``UPDATE`` of the same row) is thereby ordered before or after
        the whole transaction, never inside it."""
        if owner is None:
            return
        row = self._execute(cursor, "fence", lambda: select(runs.c.owner).where(
            runs.c.execution_id == _EID).with_for_update(), eid=execution_id).fetchone()
        if row is None or row[0] != owner:
            raise LeaseLost(execution_id, _lost_reason(row[0] if row else None))

    def _lost(self, execution_id: str) -> LeaseLost:
        """The error for a fenced single-statement write that wrote nothing."""
        run = self.get_run(execution_id)
        return LeaseLost(execution_id, _lost_reason(run.owner if run else None))

    @transient(window=lambda _eid, _owner, until: until - time.time())
    def renew(self, execution_id: str, owner: str, until: float) -> bool:
        """Retried for at most the new lease's length, never the whole ``retry_seconds``:
        a retry window longer than the lease would keep a cut-off attempt believing it
        still holds the run (its heartbeat retries again and loses the lease in time)."""
        with self._cursor(f"renewing the lease of run {execution_id}", write=True) as cursor:
            self._execute(cursor, "renew", lambda: update(runs).where(and_(
                runs.c.execution_id == _EID, runs.c.owner == bindparam("holder"))).values(
                lease_until=bindparam("until")), eid=execution_id, holder=owner, until=until)
            return bool(cursor.rowcount == 1)

    @transient()
    def release(self, execution_id: str, owner: str) -> None:
        with self._cursor(f"releasing run {execution_id}", write=True) as cursor:
            self._release(cursor, execution_id, owner)

    def _release(self, cursor: Any, execution_id: str, owner: str | None) -> None:
        self._execute(cursor, "release", lambda: update(runs).where(and_(
            runs.c.execution_id == _EID, runs.c.owner == bindparam("holder"))).values(
            owner=None, lease_until=None), eid=execution_id, holder=owner)

    # -- queues and workers (statements in sql_queue.py) -------------------------------------
    def enqueue_run(self, execution_id: str, queue: str, priority: int = 0,
                    available_at: float | None = None) -> bool:
        return sql_queue.enqueue_run(self, execution_id, queue, priority, available_at)

    def claim_runs(self, worker: str, queues: Sequence[str], limit: int, now: float,
                   lease_until: float, plans: Collection[str] | None = None,
                   ) -> list[ClaimedRun]:
        """Not retried on a lost connection: a claim that may have committed is simply not
        seen; its runs' leases expire and are claimed again."""
        return sql_queue.claim_runs(self, worker, queues, limit, now, lease_until, plans)

    @transient()
    def claimable_plans(self, queues: Sequence[str], now: float,
                        known: Collection[str] = ()) -> list[str]:
        return sql_queue.claimable_plans(self, queues, now, known)

    @transient()
    def block_runs(self, fingerprint: str, queues: Sequence[str], reason: str,
                   now: float) -> int:
        return sql_queue.block_runs(self, fingerprint, queues, reason, now)

    def retry_later(self, execution_id: str, owner: str, available_at: float,
                    reason: str) -> bool:
        return sql_queue.retry_later(self, execution_id, owner, available_at, reason)

    @transient()
    def put_queue(self, queue: QueueRecord) -> None:
        sql_queue.put_queue(self, queue)

    @transient()
    def list_queues(self) -> list[QueueRecord]:
        return sql_queue.list_queues(self)

    @transient()
    def remove_queue(self, name: str) -> bool:
        return sql_queue.remove_queue(self, name)

    @transient()
    def queue_counts(self, now: float) -> list[QueueCounts]:
        return sql_queue.queue_counts(self, now)

    def request_cancel(self, execution_id: str, now: float) -> CancelOutcome | None:
        return sql_queue.request_cancel(self, execution_id, now)

    @transient()
    def register_worker(self, worker: WorkerRecord) -> None:
        sql_queue.register_worker(self, worker)

    def heartbeat_worker(self, worker_id: str, now: float, held: Sequence[str]) -> bool:
        return sql_queue.heartbeat_worker(self, worker_id, now, held)

    @transient()
    def deregister_worker(self, worker_id: str) -> None:
        sql_queue.deregister_worker(self, worker_id)

    @transient()
    def list_workers(self, alive_since: float | None = None) -> list[WorkerRecord]:
        return sql_queue.list_workers(self, alive_since)

    # -- checkpoints -------------------------------------------------------------------------
    @transient(done=_row_written)
    def put(self, row: CheckpointRow, owner: str | None = None) -> None:
        """The hot path: one statement in autocommit, nothing read first. The row is a named
        tuple in column order: it is the statement's parameters as it is.

        With ``owner`` the statement is ``INSERT ... SELECT <row> WHERE EXISTS (the run row
        names owner)``; on PostgreSQL the sub-select takes ``FOR SHARE`` on the run row, so a
        takeover's ``UPDATE`` either waits for this insert to commit or makes it insert
        nothing (SQLite runs the whole statement under its write lock)."""
        if owner is None:
            statement = self._sql.get("put", lambda: insert(checkpoints))
            params: Any = row if statement.names is not None else \
                statement.params(row._asdict())
        else:
            statement = self._sql.get("put_fenced", _fenced_insert)
            params = (*row, row.execution_id, owner) if statement.names is not None else \
                statement.params({**row._asdict(), "eid": row.execution_id, "owner": owner})
        try:
            with self._lock:
                written = self._put(self._hot(), statement.sql, params)
        except Exception as exc:
            with self._errors(f"writing checkpoint {row.checkpoint_id} of run "
                              f"{row.execution_id}"):
                raise exc from None
        if not written:
            raise self._lost(row.execution_id)

    def _put(self, connection: Any, sql: str, params: Any) -> bool:
        """Execute the checkpoint INSERT (PostgreSQL: as a prepared statement); whether it
        wrote the row."""
        return bool(connection.execute(sql, params).rowcount == 1)

    def _insert_row(self, cursor: Any, row: CheckpointRow) -> None:
        statement = self._sql.get("put", lambda: insert(checkpoints))
        cursor.execute(statement.sql, statement.params(row._asdict())
                       if statement.names is None else row)

    @transient()
    def _rows(self, execution_id: str, first: str | None = None,
              last: str | None = None) -> list[CheckpointRow]:
        def build() -> ClauseElement:
            low = or_(bindparam("first", type_=checkpoints.c.checkpoint_id.type).is_(None),
                      checkpoints.c.checkpoint_id >= bindparam("first"))
            high = or_(bindparam("last", type_=checkpoints.c.checkpoint_id.type).is_(None),
                       checkpoints.c.checkpoint_id <= bindparam("last"))
            return select(*checkpoints.columns).where(and_(
                checkpoints.c.execution_id == _EID, low, high)).order_by(
                checkpoints.c.checkpoint_id)

        with self._cursor(f"reading checkpoints of run {execution_id}") as cursor:
            rows = self._execute(cursor, "rows", build, eid=execution_id, first=first,
                                 last=last).fetchall()
        return [CheckpointRow(*row) for row in rows]

    @transient()
    def _page_rows(self, execution_id: str, after: str | None,
                   limit: int) -> list[CheckpointRow]:
        """One keyset page: ``checkpoint_id > after ORDER BY checkpoint_id LIMIT n``."""
        def build() -> ClauseElement:
            low = or_(bindparam("after", type_=checkpoints.c.checkpoint_id.type).is_(None),
                      checkpoints.c.checkpoint_id > bindparam("after"))
            return select(*checkpoints.columns).where(and_(
                checkpoints.c.execution_id == _EID, low)).order_by(
                checkpoints.c.checkpoint_id).limit(bindparam("n"))

        with self._cursor(f"reading checkpoints of run {execution_id}") as cursor:
            rows = self._execute(cursor, "page_rows", build, eid=execution_id, after=after,
                                 n=limit).fetchall()
        return [CheckpointRow(*row) for row in rows]

    @transient()
    def _row(self, execution_id: str, checkpoint_id: str) -> CheckpointRow | None:
        with self._cursor(f"reading checkpoint {checkpoint_id}") as cursor:
            row = self._execute(cursor, "row", lambda: select(*checkpoints.columns).where(and_(
                checkpoints.c.execution_id == _EID,
                checkpoints.c.checkpoint_id == bindparam("cid"))),
                eid=execution_id, cid=checkpoint_id).fetchone()
        return CheckpointRow(*row) if row is not None else None

    @transient()
    def _last_row(self, execution_id: str, *, skip_run_end: bool) -> CheckpointRow | None:
        def build() -> ClauseElement:
            query = select(*checkpoints.columns).where(checkpoints.c.execution_id == _EID)
            if skip_run_end:
                query = query.where(checkpoints.c.node_id != RUN_END)
            return query.order_by(checkpoints.c.checkpoint_id.desc()).limit(1)

        key = "last_row_skip" if skip_run_end else "last_row"
        with self._cursor(f"reading the last checkpoint of run {execution_id}") as cursor:
            row = self._execute(cursor, key, build, eid=execution_id).fetchone()
        return CheckpointRow(*row) if row is not None else None

    # -- interrupts --------------------------------------------------------------------------
    @transient(done=_row_written)
    def record_interrupt(self, row: CheckpointRow, pending: PendingInterrupt,
                         owner: str | None) -> None:
        with self._cursor(f"pausing run {row.execution_id}", write=True) as cursor:
            self._fence(cursor, row.execution_id, owner)
            exists = self._execute(cursor, "pending_exists", lambda: select(
                pending_interrupts.c.checkpoint_id).where(and_(
                    pending_interrupts.c.execution_id == _EID,
                    pending_interrupts.c.agent_path == bindparam("path"),
                    pending_interrupts.c.node_id == bindparam("node"))),
                eid=row.execution_id, path=pending.agent_path, node=pending.node_id).fetchone()
            if exists is not None:
                raise StoreError(f"run {row.execution_id} already has a pending interrupt at "
                                 f"{pending.address}")
            self._insert_row(cursor, row)
            self._execute(cursor, "record_pending", lambda: insert(pending_interrupts),
                          execution_id=pending.execution_id,
                          checkpoint_id=pending.checkpoint_id, node_id=pending.node_id,
                          agent_path=pending.agent_path, reason=pending.reason,
                          context=_json(pending.context) or "null",
                          created_at=pending.created_at.timestamp(), due_at=pending.due_at)

    @transient()
    def pause_run(self, execution_id: str, owner: str | None,
                  waiting: Sequence[str]) -> list[Decision]:
        with self._cursor(f"pausing run {execution_id}", write=True) as cursor:
            self._fence(cursor, execution_id, owner)
            wanted = set(waiting)
            answered = [d for d in self._decisions(cursor, execution_id)
                        if d.checkpoint_id in wanted]
            if not answered:
                self._set_status(cursor, execution_id, RunStatus.PAUSED.value, owner, None)
            return answered

    def _set_status(self, cursor: Any, execution_id: str, status: str, owner: str | None,
                    error: str | None) -> None:
        """Set the final (or paused) status and error, and release ``owner``'s lease."""
        def build() -> ClauseElement:
            mine = runs.c.owner == bindparam("holder")
            return update(runs).where(runs.c.execution_id == _EID).values(
                status=bindparam("status"), updated_at=bindparam("now"),
                error=bindparam("error"),
                owner=case((mine, None), else_=runs.c.owner),
                lease_until=case((mine, None), else_=runs.c.lease_until))

        self._execute(cursor, "set_status", build, eid=execution_id, status=status,
                      now=time.time(), error=error, holder=owner)

    @staticmethod
    def _to_pending(row: Any) -> PendingInterrupt:
        values = dict(zip(_PENDING_FIELDS, row, strict=True))
        return PendingInterrupt(
            execution_id=values["execution_id"], checkpoint_id=values["checkpoint_id"],
            node_id=values["node_id"], agent_path=values["agent_path"],
            reason=values["reason"], context=_parse(values["context"]),
            created_at=utc(values["created_at"]), due_at=values["due_at"])

    @transient()
    def list_pending(self, execution_id: str | None = None) -> list[PendingInterrupt]:
        order = (pending_interrupts.c.created_at, pending_interrupts.c.execution_id,
                 pending_interrupts.c.checkpoint_id)
        with self._cursor("listing pending interrupts") as cursor:
            if execution_id is None:
                self._execute(cursor, "list_pending", lambda: select(
                    *pending_interrupts.columns).order_by(*order))
            else:
                self._execute(cursor, "list_pending_of", lambda: select(
                    *pending_interrupts.columns).where(
                    pending_interrupts.c.execution_id == _EID).order_by(*order),
                    eid=execution_id)
            rows = cursor.fetchall()
        return [self._to_pending(row) for row in rows]

    @transient()
    def due_pending(self, now: float, limit: int = 100) -> list[PendingInterrupt]:
        with self._cursor("listing due timers") as cursor:
            rows = self._execute(cursor, "due_pending", lambda: select(
                *pending_interrupts.columns).where(
                pending_interrupts.c.due_at <= bindparam("now")).order_by(
                pending_interrupts.c.due_at, pending_interrupts.c.execution_id,
                pending_interrupts.c.checkpoint_id).limit(bindparam("n")),
                now=now, n=max(0, limit)).fetchall()
        return [self._to_pending(row) for row in rows]

    @transient()
    def pending_page(self, before: PendingCursor | None = None,
                     limit: int = 50) -> list[PendingEntry]:
        values: dict[str, Any] = {"n": max(0, limit)}
        if before is not None:
            values.update(at=before.at, eid=before.execution_id, cid=before.checkpoint_id)
        with self._cursor("listing pending interrupts") as cursor:
            rows = self._execute(
                cursor, f"pending_page:{before is not None}",
                lambda: listing.pending_page_statement(before=before is not None),
                **values).fetchall()
        return [PendingEntry(self._to_pending(row[:-1]), row[-1]) for row in rows]

    def claim(self, pending: PendingInterrupt, answer: dict[str, Any], *,
              owner: str | None = None, until: float = 0.0, now: float = 0.0,
              steal_from: str | None = None, resolver: str | None = None,
              comment: str | None = None) -> Claim | None:
        """``DELETE ... RETURNING`` of the one pending row in a write transaction that first
        locks the run row (SQLite: BEGIN IMMEDIATE holds the database's write lock, so it is
        atomic across processes; PostgreSQL: ``FOR UPDATE`` on the run row, then the row lock
        of the DELETE). The losers' DELETE returns nothing. Not retried on a lost connection:
        a claim that may have committed is reported as lost by the caller, never doubled."""
        execution_id = pending.execution_id
        with self._cursor(f"claiming the interrupt of run {execution_id} at "
                          f"{pending.address}", write=True) as cursor:
            self._execute(cursor, "lock_run", lambda: select(runs.c.execution_id).where(
                runs.c.execution_id == _EID).with_for_update(), eid=execution_id)
            row = self._execute(cursor, "claim", lambda: delete(pending_interrupts).where(and_(
                pending_interrupts.c.execution_id == _EID,
                pending_interrupts.c.checkpoint_id == bindparam("cid"))).returning(
                *pending_interrupts.columns), eid=execution_id,
                cid=pending.checkpoint_id).fetchone()
            if row is None:
                return None
            found = self._to_pending(row)
            self._execute(cursor, "insert_decision", lambda: insert(decisions),
                          execution_id=execution_id, checkpoint_id=found.checkpoint_id,
                          node_id=found.node_id, agent_path=found.agent_path,
                          value=_json(answer) or "{}", resolver=resolver, comment=comment,
                          created_at=time.time())
            owned = owner is not None and self._acquire(
                cursor, "acquire", _acquire_statement, execution_id, owner, until, now,
                steal_from)
            return Claim(found, owned)

    def _decisions(self, cursor: Any, execution_id: str) -> list[Decision]:
        rows = self._execute(cursor, "decisions", lambda: select(*decisions.columns).where(
            decisions.c.execution_id == _EID).order_by(decisions.c.created_at,
                                                       decisions.c.checkpoint_id),
            eid=execution_id).fetchall()
        return [_to_decision(row) for row in rows]

    @transient()
    def decisions(self, execution_id: str) -> list[Decision]:
        with self._cursor(f"reading the decisions of run {execution_id}") as cursor:
            return self._decisions(cursor, execution_id)

    @transient()
    def replace_decision(self, decision: Decision, owner: str | None) -> None:
        with self._cursor(f"storing the decision of run {decision.execution_id}",
                          write=True) as cursor:
            self._fence(cursor, decision.execution_id, owner)
            self._execute(cursor, "delete_decision", lambda: delete(decisions).where(and_(
                decisions.c.execution_id == _EID, decisions.c.checkpoint_id == bindparam(
                    "cid"))), eid=decision.execution_id, cid=decision.checkpoint_id)
            self._execute(cursor, "insert_decision", lambda: insert(decisions),
                          execution_id=decision.execution_id,
                          checkpoint_id=decision.checkpoint_id, node_id=decision.node_id,
                          agent_path=decision.agent_path, value=_json(decision.value) or "{}",
                          resolver=decision.resolver, comment=decision.comment,
                          created_at=decision.created_at.timestamp())

    # -- idempotency -------------------------------------------------------------------------
    @transient()
    def get_idempotent(self, execution_id: str, key: str) -> str | None:
        with self._cursor("reading the idempotency cache") as cursor:
            return self._cached(cursor, execution_id, key)

    def _cached(self, cursor: Any, execution_id: str, key: str) -> str | None:
        row = self._execute(cursor, "get_idempotent", lambda: select(
            idempotency_cache.c.value).where(and_(
                idempotency_cache.c.execution_id == _EID,
                idempotency_cache.c.key == bindparam("key"))),
            eid=execution_id, key=key).fetchone()
        return str(row[0]) if row is not None else None

    @transient()
    def put_idempotent(self, execution_id: str, key: str, value_json: str,
                       owner: str | None = None) -> str:
        """Insert unless present (``ON CONFLICT DO NOTHING``), then read what is stored: the
        first writer wins even when two processes cache the same key at once."""
        with self._cursor("writing the idempotency cache", write=True) as cursor:
            self._fence(cursor, execution_id, owner)
            self._execute(cursor, "put_idempotent",
                          lambda: self._insert_or_ignore(idempotency_cache),
                          execution_id=execution_id, key=key, value=value_json,
                          created_at=time.time())
            current = self._cached(cursor, execution_id, key)
            return current if current is not None else value_json

    # -- ending and pruning ------------------------------------------------------------------
    @transient(done=_row_written)
    def finish_run(self, row: CheckpointRow, status: str, error: Any,
                   owner: str | None) -> None:
        with self._cursor(f"ending run {row.execution_id}", write=True) as cursor:
            self._fence(cursor, row.execution_id, owner)
            self._insert_row(cursor, row)
            self._set_status(cursor, row.execution_id, status, owner, _json(error))

    def _prune(self, cutoff: float, *, include_failed: bool) -> PruneResult:
        """Delete finished runs in one write transaction (paused/running runs never match)."""
        statuses = [RunStatus.COMPLETED.value, RunStatus.CANCELLED.value] + (
            [RunStatus.FAILED.value] if include_failed else [])
        with self._engine_write("pruning") as connection:
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
                connection.execute(delete(decisions).where(
                    decisions.c.execution_id.in_(chunk)))
                connection.execute(delete(runs).where(runs.c.execution_id.in_(chunk)))
            connection.execute(delete(plans).where(and_(
                plans.c.fingerprint.not_in(select(runs.c.plan_fingerprint)),
                plans.c.fingerprint.not_in(select(schedules.c.plan_fingerprint)))))
        return PruneResult(len(doomed), counts[0], counts[1], tuple(sorted(doomed)))
