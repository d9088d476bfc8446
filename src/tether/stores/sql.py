"""The SQL checkpointer: one implementation for SQLite and PostgreSQL.

The schema and the statements are SQLAlchemy Core (``schema.py``); each statement is compiled
once per dialect and executed on the driver's connection (``statements.py``), one connection
per store, serialised by a lock. Dialect differences live in subclasses (``sqlite.py``,
``postgres.py``) as a few hooks: the connection, how a write transaction starts and ends,
the insert that ignores a taken key, the serialisation of schema set-up across processes,
and which driver errors mean "duplicate" or "connection lost". Everything else, the atomic
claim included, is written once: here the plumbing, the schema set-up and the runs; in mixins
the leases (``sql_leases.py``), the checkpoint rows, interrupts, decisions and idempotency
cache (``sql_rows.py``) and the schedules (``schedule_sql.py``); the workers' statements in
``sql_queue.py``.

Foreign exceptions are mapped at one boundary (:meth:`SQLCheckpointer._errors`): every public
method runs inside it, so callers only ever see :class:`~tether.errors.StoreError` and its
subclasses.
SQLAlchemy is imported when a statement is first built or the engine used (``lazy.py``).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tether.errors import (
    ExecutionExists,
    SchemaVersionError,
    StoreError,
    StoreUnavailable,
)
from tether.stores.base import Checkpointer
from tether.stores.events import RunEvent, upgraded_event
from tether.stores.keys import (
    KeyedStart,
    decide,
    key_error,
    last_in_line,
    superseded_error,
)
from tether.stores.lazy import LazyModule
from tether.stores.queueing import (
    CancelOutcome,
    ClaimedRun,
    QueueCounts,
    QueueRecord,
    WorkerRecord,
)
from tether.stores.records import (
    LIVE_STATUSES,
    CheckpointRow,
    PruneResult,
    Readdress,
    RunCursor,
    RunRecord,
    RunStatus,
    readdressed,
    utc,
)
from tether.stores.retry import transient
from tether.stores.schedule_sql import SQLSchedules
from tether.stores.sql_events import SQLEvents
from tether.stores.sql_leases import eid
from tether.stores.sql_rows import SQLRows, row_written
from tether.stores.sql_text import RUN_COLUMNS, SCHEMA_VERSION, run_values
from tether.stores.statements import Compiled, Statements, from_json, to_json
from tether.trigger import Trigger

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy import ClauseElement, Connection, Engine, Insert, Table

    from tether.stores import listing, schema, sql_keys, sql_queue
else:  # imported when a statement is first built (SQLite: rarely, see lazy.py)
    sa = LazyModule("sqlalchemy")
    schema = LazyModule("tether.stores.schema")
    listing = LazyModule("tether.stores.listing")
    sql_keys = LazyModule("tether.stores.sql_keys")
    sql_queue = LazyModule("tether.stores.sql_queue")


def _readdressing(table: Table) -> Callable[[], ClauseElement]:
    """The statement giving one pause (or decision) of a run its new place."""
    return lambda: sa.update(table).where(
        table.c.execution_id == eid(), table.c.checkpoint_id == sa.bindparam("cid")).values(
        node_id=sa.bindparam("node"), agent_path=sa.bindparam("path"))


def _is_sqlalchemy_error(exc: Exception) -> bool:
    """Whether SQLAlchemy raised ``exc`` (never, in a process that did not import it: the
    statements run on the driver's cursor)."""
    errors = sys.modules.get("sqlalchemy.exc")
    return errors is not None and isinstance(exc, errors.SQLAlchemyError)


def _run_created(store: SQLCheckpointer, run: RunRecord, *_: Any) -> bool:
    """Whether a run insert whose connection dropped did commit (by this owner)."""
    found = store.get_run(run.execution_id)
    return found is not None and (found.owner, found.plan_fingerprint, found.created_at) == (
        run.owner, run.plan_fingerprint, run.created_at)


class SQLCheckpointer(SQLRows, SQLSchedules, SQLEvents, Checkpointer):
    """Checkpointer over a SQL database; see the dialect subclasses.

    ``retry_seconds``: how long an operation waits for an unreachable database to come back
    (see :mod:`tether.stores.retry`).
    """

    retry_seconds = 15.0

    def __init__(self, engine: Engine | None = None,
                 ready: Mapping[str, Compiled] | None = None) -> None:
        """``engine`` None: :meth:`_make_engine` makes it at its first use; ``ready``: the
        statements compiled ahead of time, by name (``statements.py``)."""
        self._engine = engine
        self._lock = threading.RLock()
        self._sql = Statements(lambda: self.engine.dialect, ready)
        self.setup()

    def share_statements(self, other: Checkpointer) -> None:
        """As every store's (a store of another class keeps its own)."""
        if type(other) is type(self):
            assert isinstance(other, SQLCheckpointer)
            self._sql = other._sql

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine of schema set-up, migrations, prune and schedules."""
        if self._engine is None:
            self._engine = self._make_engine()
        return self._engine

    def _make_engine(self) -> Engine:
        """The engine of a store that was given none (SQLite: over its one connection)."""
        raise NotImplementedError

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

    def _new_cursor(self, connection: Any) -> Any:
        """A driver cursor on ``connection`` for :meth:`_text`'s SQL."""
        return connection.cursor()

    def _text(self, sql: str) -> str:
        """The SQL text a cursor of :meth:`_new_cursor` runs for a compiled statement's
        ``sql`` (PostgreSQL: with server-side placeholders, converted once)."""
        return sql

    _can_drop_columns = True  # ALTER TABLE ... DROP COLUMN (SQLite since 3.35)

    claims_in_one_statement = False
    """Whether a claim of queues without limits is one statement (``sql_queue``)."""

    def _finish_fenced(self, row: CheckpointRow, status: str, error: str | None,
                       owner: str, last_node: CheckpointRow | None) -> bool | None:
        """A dialect's fenced ``finish_run`` in one statement (whether it wrote both rows
        and the update), or None: the transaction of fence, inserts and status update
        instead."""
        return None

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
        except Exception as exc:
            if _is_sqlalchemy_error(exc):
                raise self._sqlalchemy_error(what, exc) from exc
            if self._is_disconnect(exc):
                self._reset_hot()
                raise StoreUnavailable(f"{what}: the database is unreachable: {exc}") from exc
            if self._is_duplicate(exc):
                raise StoreError(f"{what}: {exc}") from exc
            if type(exc).__module__.split(".")[0] in ("sqlite3", "psycopg"):
                raise self._refused(what, exc) from exc
            raise

    def _sqlalchemy_error(self, what: str, exc: Exception) -> StoreError:
        """The store error for an error SQLAlchemy raised (the engine's paths)."""
        from sqlalchemy.exc import IntegrityError

        if isinstance(exc, IntegrityError):
            return StoreError(f"{what}: {exc.orig}")
        if self._is_disconnect(exc):
            reason = getattr(exc, "orig", exc)
            return StoreUnavailable(f"{what}: the database is unreachable: {reason}")
        return self._refused(what, exc)

    def _refused(self, what: str, exc: Exception) -> StoreError:
        """The error for a statement the database refused (a store may word it better)."""
        return StoreError(f"{what}: {exc}")

    @contextlib.contextmanager
    def _cursor(self, what: str, *, write: bool = False) -> Iterator[Any]:
        """A driver cursor; with ``write``, inside one transaction (committed on success)."""
        with self._errors(what), self._lock:
            connection = self._hot()
            cursor = self._new_cursor(connection)
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
        cursor.execute(self._text(statement.sql), statement.params(values))
        return cursor

    @contextlib.contextmanager
    def _engine_write(self, what: str) -> Iterator[Connection]:
        with self._errors(what), self._lock, self.engine.connect() as connection, \
                connection.begin():
            self._begin_write(connection)
            yield connection

    def setup(self) -> None:
        """Create or migrate the schema; safe when many processes call it at once.

        A store already at this release's version (every opening but the first) is left as
        it is after one read: no write lock, no DDL, nothing reflected."""
        if self._schema_is_current():
            return
        from sqlalchemy import insert, select, update

        from tether.stores.migrations import MigrationContext
        from tether.stores.schema import MIGRATIONS, schema_version

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

    def _schema_is_current(self) -> bool:
        """Whether the schema's recorded version is this release's. The version is written in
        the transaction that creates or migrates the schema, so it is seen only once that
        committed. Any failure (no table yet, no schema, no server) says no: the full set-up
        then runs, and reports what is wrong."""
        try:
            with self._cursor("reading the schema version") as cursor:
                row = self._execute(cursor, "schema_version",
                                    lambda: sa.select(schema.schema_version.c.version)).fetchone()
        except StoreError:
            self._reset_hot()  # (PostgreSQL: not left open if the full set-up then fails)
            return False
        return row is not None and row[0] == SCHEMA_VERSION

    def close(self) -> None:
        with self._lock:
            self._reset_hot()
            if self._engine is not None:
                self._engine.dispose()

    # -- runs --------------------------------------------------------------------------------
    @transient(done=_run_created)
    def create_run(self, run: RunRecord, plan_json: str) -> None:
        """Insert the plan and the run with ``ON CONFLICT DO NOTHING``: of processes starting
        one plan or one execution id at once, none fails with a driver error; the ones that
        find the execution id taken get ExecutionExists (PostgreSQL makes them wait for the
        first to commit)."""
        self._insert_run(run, plan_json)

    def _insert_run(self, run: RunRecord, plan_json: str) -> None:
        """:meth:`create_run`'s writes (PostgreSQL: in one statement, ``pg_starts.py``)."""
        with self._cursor(f"creating run {run.execution_id}", write=True) as cursor:
            self._store_plan(cursor, run.plan_fingerprint, plan_json)
            self._execute(cursor, "create_run", lambda: self._insert_or_ignore(
                schema.runs).returning(schema.runs.c.execution_id), **self._run_values(run))
            if cursor.fetchone() is None:
                raise ExecutionExists(run.execution_id)
            if run.status == RunStatus.QUEUED:
                self._notify(cursor)

    def _store_plan(self, cursor: Any, fingerprint: str, plan_json: str) -> None:
        self._execute(cursor, "store_plan", lambda: self._insert_or_ignore(schema.plans),
                      fingerprint=fingerprint, plan=plan_json, created_at=time.time(), tasks=None)

    _run_values = staticmethod(run_values)

    @staticmethod
    def _to_run(row: Any) -> RunRecord:
        values = dict(zip(RUN_COLUMNS, row, strict=True))
        return RunRecord(
            execution_id=values["execution_id"], workflow=values["workflow"],
            plan_fingerprint=values["plan_fingerprint"], status=values["status"],
            inputs=from_json(values["inputs"]), created_at=utc(values["created_at"]),
            updated_at=utc(values["updated_at"]),
            parent_execution_id=values["parent_execution_id"],
            parent_checkpoint_id=values["parent_checkpoint_id"],
            error=from_json(values["error"]), owner=values["owner"],
            lease_until=values["lease_until"], attempt=values["attempt"],
            queue=values["queue"], priority=values["priority"],
            available_at=values["available_at"],
            cancel_requested_at=values["cancel_requested_at"],
            started_at=values["started_at"], blocked_reason=values["blocked_reason"],
            recovery_failures=values["recovery_failures"] or 0,
            trigger=Trigger.from_dict(from_json(values["triggered_by"])),
            concurrency_key=values["concurrency_key"],
            concurrency_limit=values["concurrency_limit"],
        )

    @transient()
    def get_run(self, execution_id: str) -> RunRecord | None:
        with self._cursor(f"reading run {execution_id}") as cursor:
            row = self._execute(cursor, "get_run", lambda: sa.select(*schema.runs.columns).where(
                schema.runs.c.execution_id == eid()), eid=execution_id).fetchone()
        return self._to_run(row) if row is not None else None

    @transient()
    def cancel_requested_at(self, execution_id: str) -> float | None:
        with self._cursor(f"reading run {execution_id}") as cursor:
            row = self._execute(cursor, "cancel_requested_at", lambda: sa.select(
                schema.runs.c.cancel_requested_at).where(schema.runs.c.execution_id == eid()),
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
        last = dict(zip(RUN_COLUMNS, rows[-1], strict=True))
        return [self._to_run(row) for row in rows], RunCursor(last["updated_at"],
                                                              last["execution_id"])

    @transient()
    def get_plan(self, fingerprint: str) -> str | None:
        with self._cursor("reading a plan") as cursor:
            row = self._execute(cursor, "get_plan", lambda: sa.select(schema.plans.c.plan).where(
                schema.plans.c.fingerprint == sa.bindparam("fp")), fp=fingerprint).fetchone()
        return str(row[0]) if row is not None else None

    @transient()
    def set_plan_tasks(self, fingerprint: str, tasks_json: str) -> bool:
        with self._cursor(f"recording the tasks of plan {fingerprint[:12]}",
                          write=True) as cursor:
            self._execute(cursor, "set_plan_tasks", lambda: sa.update(schema.plans).where(
                schema.plans.c.fingerprint == sa.bindparam("fp"),
                schema.plans.c.tasks.is_(None)).values(tasks=sa.bindparam("tasks")),
                fp=fingerprint, tasks=tasks_json)
            return bool(cursor.rowcount == 1)

    @transient()
    def get_plan_tasks(self, fingerprint: str) -> str | None:
        with self._cursor("reading a plan's tasks") as cursor:
            row = self._execute(cursor, "get_plan_tasks", lambda: sa.select(
                schema.plans.c.tasks).where(schema.plans.c.fingerprint == sa.bindparam("fp")),
                fp=fingerprint).fetchone()
        return str(row[0]) if row is not None and row[0] is not None else None

    @transient()
    def set_run_plan(self, execution_id: str, fingerprint: str, plan_json: str,
                     owner: str | None = None) -> None:
        with self._cursor(f"changing the plan of run {execution_id}", write=True) as cursor:
            self._fence(cursor, execution_id, owner)
            self._store_plan(cursor, fingerprint, plan_json)
            self._execute(cursor, "set_run_plan", lambda: sa.update(schema.runs).where(
                schema.runs.c.execution_id == eid()).values(plan_fingerprint=sa.bindparam("fp"),
                                                     updated_at=sa.bindparam("now")),
                eid=execution_id, fp=fingerprint, now=time.time())

    @transient()
    def move_run_plan(self, execution_id: str, expected: str, fingerprint: str,
                      plan_json: str, readdress: Sequence[Readdress] = ()) -> bool:
        """One ``UPDATE ... WHERE`` (a compare-and-set like a claim): only while no attempt
        holds the run and it is still live on ``expected``; then, in its transaction, the
        pauses readdressed and the ``upgraded`` event."""
        with self._cursor(f"upgrading run {execution_id}", write=True) as cursor:
            self._store_plan(cursor, fingerprint, plan_json)
            self._execute(cursor, "move_run_plan", lambda: sa.update(schema.runs).where(
                schema.runs.c.execution_id == eid(), schema.runs.c.owner.is_(None),
                schema.runs.c.plan_fingerprint == sa.bindparam("expected"),
                sa.or_(*(schema.runs.c.status == status for status in LIVE_STATUSES))).values(
                plan_fingerprint=sa.bindparam("fp"), updated_at=sa.bindparam("now")),
                eid=execution_id, expected=expected, fp=fingerprint, now=time.time())
            if cursor.rowcount != 1:
                return False
            for to in readdress:
                for table in (schema.pending_interrupts, schema.decisions):
                    self._execute(cursor, f"readdress_{table.name}", _readdressing(table),
                                  eid=execution_id, cid=to.checkpoint_id, node=to.node_id,
                                  path=to.agent_path)
            self._insert_event(cursor, upgraded_event(execution_id, expected, fingerprint,
                                                      readdressed(readdress)))
            return True

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
                    reason: str, event: RunEvent | None = None) -> bool:
        return sql_queue.retry_later(self, execution_id, owner, available_at, reason, event)

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

    def create_keyed_run(self, run: RunRecord, plan_json: str, on_conflict: str,
                         now: float) -> KeyedStart:
        """In one transaction under the key's lock (``sql_keys.py``): read the key's runs,
        decide (``keys.decide``), insert, cancel the superseded runs."""
        key = run.concurrency_key or ""
        with self._cursor(f"creating run {run.execution_id}", write=True) as cursor:
            sql_keys.lock_key(self, cursor, key)
            if sql_keys.run_exists(self, cursor, run.execution_id):
                raise ExecutionExists(run.execution_id)
            holders, occupied, latest = sql_keys.holders(self, cursor, key)
            decision = decide(run, on_conflict, holders, occupied)
            if decision.insert is not None:
                stored = dataclasses.replace(
                    last_in_line(run, latest), status=decision.insert.value,
                    error=key_error(run, holders) if decision.insert == RunStatus.CANCELLED
                    else run.error)
                self._store_plan(cursor, run.plan_fingerprint, plan_json)
                self._execute(cursor, "create_keyed_run", lambda: self._insert_or_ignore(
                    schema.runs).returning(schema.runs.c.execution_id), **self._run_values(stored))
                if cursor.fetchone() is None:  # the same id under another key's lock won:
                    raise ExecutionExists(run.execution_id)  # nothing of this one is kept
            for older in decision.cancel:
                sql_queue.cancel_in(self, cursor, older, now,
                                    superseded_error(run.execution_id, key))
            if decision.insert == RunStatus.QUEUED:
                self._notify(cursor)
        return KeyedStart(decision.insert, tuple(holders), occupied, decision.cancel)

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

    def _set_status(self, cursor: Any, execution_id: str, status: str, owner: str | None,
                    error: str | None) -> None:
        """Set the final (or paused) status and error, and release ``owner``'s lease."""
        def build() -> ClauseElement:
            mine = schema.runs.c.owner == sa.bindparam("holder")
            return sa.update(schema.runs).where(schema.runs.c.execution_id == eid()).values(
                status=sa.bindparam("status"), updated_at=sa.bindparam("now"),
                error=sa.bindparam("error"),
                owner=sa.case((mine, None), else_=schema.runs.c.owner),
                lease_until=sa.case((mine, None), else_=schema.runs.c.lease_until))

        self._execute(cursor, "set_status", build, eid=execution_id, status=status,
                      now=time.time(), error=error, holder=owner)

    # -- ending and pruning ------------------------------------------------------------------
    @transient(done=row_written)
    def finish_run(self, row: CheckpointRow, status: str, error: Any,
                   owner: str | None, *, last_node: CheckpointRow | None = None) -> None:
        if owner is not None:
            with self._errors(f"ending run {row.execution_id}"), self._lock:
                written = self._finish_fenced(row, status, to_json(error), owner, last_node)
            if written is not None:
                if not written:
                    raise self._lost(row.execution_id)
                return
        with self._cursor(f"ending run {row.execution_id}", write=True) as cursor:
            self._fence(cursor, row.execution_id, owner)
            if last_node is not None:
                self._insert_row(cursor, last_node)
            self._insert_row(cursor, row)
            self._set_status(cursor, row.execution_id, status, owner, to_json(error))

    def _prune(self, cutoff: float, *, include_failed: bool) -> PruneResult:
        """Delete finished runs in one write transaction (``sql_prune.py``)."""
        from tether.stores.sql_prune import prune_finished

        with self._engine_write("pruning") as connection:
            return prune_finished(connection, cutoff, include_failed=include_failed)

    # -- plumbing for the statement modules (sql_queue.py) -------------------------------------
    def sql_cursor(self, what: str, *,
                   write: bool = False) -> contextlib.AbstractContextManager[Any]:
        """A driver cursor, errors translated into :class:`~tether.errors.StoreError` naming
        ``what``; with ``write``, inside one transaction committed on success."""
        return self._cursor(what, write=write)

    def sql_execute(self, cursor: Any, name: str, build: Callable[[], ClauseElement], /,
                    **values: Any) -> Any:
        """Run the statement cached under ``name`` (built by ``build`` once per dialect) on
        ``cursor`` with the bound ``values``; returns the cursor for fetching."""
        return self._execute(cursor, name, build, **values)

    def wake_workers(self, cursor: Any) -> None:
        """Inside a write transaction: wake idle workers at its commit (PostgreSQL
        ``NOTIFY``; nothing on SQLite, whose workers poll)."""
        self._notify(cursor)

    @staticmethod
    def run_from_row(row: Any) -> RunRecord:
        """The :class:`RunRecord` of a ``runs`` row read with every column in table order."""
        return SQLCheckpointer._to_run(row)
