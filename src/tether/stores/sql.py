"""The SQL checkpointer: one implementation over SQLAlchemy Core for SQLite and PostgreSQL.

Dialect differences live in subclasses (``sqlite.py``, ``postgres.py``) as a few hooks: how
the engine and the hot-path connection are made, how a write transaction begins, how the
schema set-up is serialised across processes, and which driver errors mean "duplicate" or
"connection lost". Everything else, including the atomic claim, is written once here.

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
from collections.abc import Iterator
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Insert,
    Table,
    and_,
    case,
    delete,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from tether.errors import ExecutionExists, SchemaVersionError, StoreError, StoreUnavailable
from tether.stores.base import Checkpointer
from tether.stores.records import (
    RUN_END,
    CheckpointRow,
    PendingInterrupt,
    PruneResult,
    RunRecord,
    RunStatus,
    utc,
)
from tether.stores.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    checkpoints,
    idempotency_cache,
    pending_interrupts,
    plans,
    runs,
    schema_version,
)

_ROW_FIELDS = [c.name for c in checkpoints.columns]
assert tuple(_ROW_FIELDS) == CheckpointRow._fields, "CheckpointRow must follow the columns"


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False,
                                                  separators=(",", ":"))


def _parse(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class SQLCheckpointer(Checkpointer):
    """Checkpointer over a SQL database; see the dialect subclasses."""

    paramstyle = "?"

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.RLock()
        self._insert_sql = self._insert_statement()
        self.setup()

    # -- dialect hooks -----------------------------------------------------------------------
    @abc.abstractmethod
    def _hot(self) -> Any:
        """The DBAPI connection (autocommit) used for single-statement writes on the hot path."""

    @abc.abstractmethod
    def _begin_write(self, connection: Connection) -> None:
        """Start a write transaction on ``connection`` (SQLite: BEGIN IMMEDIATE)."""

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
        """Forget a broken hot-path connection."""

    # -- plumbing ----------------------------------------------------------------------------
    def _insert_statement(self) -> str:
        marks = ", ".join(self.paramstyle for _ in _ROW_FIELDS)
        return f"INSERT INTO {checkpoints.name} ({', '.join(_ROW_FIELDS)}) VALUES ({marks})"

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
    def _write(self, what: str) -> Iterator[Connection]:
        with self._errors(what), self._lock, self.engine.connect() as connection, \
                connection.begin():
            self._begin_write(connection)
            yield connection

    @contextlib.contextmanager
    def _read(self, what: str) -> Iterator[Connection]:
        with self._errors(what), self._lock, self.engine.connect() as connection:
            yield connection

    def setup(self) -> None:
        """Create or migrate the schema; safe when many processes call it at once."""
        with self._write("schema set-up") as connection:
            self._lock_schema(connection)
            schema_version.create(connection, checkfirst=True)
            found = connection.execute(select(schema_version.c.version)).scalar()
            current = int(found or 0)
            if current > SCHEMA_VERSION:
                raise SchemaVersionError(current, SCHEMA_VERSION)
            for migration in MIGRATIONS[current:]:
                migration(connection)
            if found is None:
                connection.execute(insert(schema_version).values(id=1, version=SCHEMA_VERSION))
            elif current < SCHEMA_VERSION:
                connection.execute(update(schema_version).values(version=SCHEMA_VERSION))

    def close(self) -> None:
        with self._lock:
            self._reset_hot()
            self.engine.dispose()

    # -- runs --------------------------------------------------------------------------------
    def create_run(self, run: RunRecord, plan_json: str) -> None:
        """The run row is inserted with ``ON CONFLICT DO NOTHING``: of processes starting one
        execution id at once, one inserts it and the others find it taken (PostgreSQL makes
        them wait for the first to commit), so they get ExecutionExists, not a driver error."""
        with self._write(f"creating run {run.execution_id}") as connection:
            self._store_plan(connection, run.plan_fingerprint, plan_json)
            created = connection.execute(self._insert_or_ignore(runs).values(
                self._run_values(run)).returning(runs.c.execution_id)).first()
            if created is None:
                raise ExecutionExists(run.execution_id)

    def _store_plan(self, connection: Connection, fingerprint: str, plan_json: str) -> None:
        """Store a plan once per fingerprint. Processes starting runs of one plan at once all
        insert it; a read-then-insert would let two of them pass the read on PostgreSQL (read
        committed) and fail the second with a duplicate key, so the insert ignores a row that
        is already there (``ON CONFLICT DO NOTHING``: the dialect hook)."""
        connection.execute(self._insert_or_ignore(plans).values(
            fingerprint=fingerprint, plan=plan_json, created_at=time.time()))

    @staticmethod
    def _run_values(run: RunRecord) -> dict[str, Any]:
        return {
            "execution_id": run.execution_id, "workflow": run.workflow,
            "plan_fingerprint": run.plan_fingerprint, "status": run.status,
            "inputs": _json(run.inputs) or "null", "created_at": run.created_at.timestamp(),
            "updated_at": run.updated_at.timestamp(),
            "parent_execution_id": run.parent_execution_id,
            "parent_checkpoint_id": run.parent_checkpoint_id, "error": _json(run.error),
            "owner": run.owner, "lease_until": run.lease_until,
            "decision": _json(run.decision),
        }

    @staticmethod
    def _to_run(row: Any) -> RunRecord:
        return RunRecord(
            execution_id=row.execution_id, workflow=row.workflow,
            plan_fingerprint=row.plan_fingerprint, status=row.status,
            inputs=_parse(row.inputs), created_at=utc(row.created_at),
            updated_at=utc(row.updated_at), parent_execution_id=row.parent_execution_id,
            parent_checkpoint_id=row.parent_checkpoint_id, error=_parse(row.error),
            owner=row.owner, lease_until=row.lease_until, decision=_parse(row.decision),
        )

    def get_run(self, execution_id: str) -> RunRecord | None:
        with self._read(f"reading run {execution_id}") as connection:
            row = connection.execute(select(runs).where(
                runs.c.execution_id == execution_id)).first()
        return self._to_run(row) if row is not None else None

    def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunRecord]:
        query = select(runs).order_by(runs.c.created_at.desc(), runs.c.execution_id.desc())
        if status is not None:
            query = query.where(runs.c.status == status)
        with self._read("listing runs") as connection:
            rows = connection.execute(query.limit(limit)).all()
        return [self._to_run(row) for row in rows]

    def get_plan(self, fingerprint: str) -> str | None:
        with self._read("reading a plan") as connection:
            value = connection.execute(select(plans.c.plan).where(
                plans.c.fingerprint == fingerprint)).scalar()
        return str(value) if value is not None else None

    def set_run_plan(self, execution_id: str, fingerprint: str, plan_json: str) -> None:
        with self._write(f"changing the plan of run {execution_id}") as connection:
            self._store_plan(connection, fingerprint, plan_json)
            connection.execute(update(runs).where(runs.c.execution_id == execution_id).values(
                plan_fingerprint=fingerprint, updated_at=time.time()))

    # -- leases ------------------------------------------------------------------------------
    def acquire(self, execution_id: str, owner: str, until: float, now: float,
                steal_from: str | None = None) -> bool:
        """One ``UPDATE ... WHERE <lease is free>``: a compare-and-set the database serialises."""
        free = [runs.c.owner.is_(None), runs.c.owner == owner, runs.c.lease_until < now]
        if steal_from is not None:
            free.append(runs.c.owner == steal_from)
        completed = runs.c.status == RunStatus.COMPLETED.value
        status = case((completed, runs.c.status), else_=RunStatus.RUNNING.value)
        with self._write(f"taking run {execution_id}") as connection:
            result = connection.execute(update(runs).where(
                and_(runs.c.execution_id == execution_id, or_(*free))).values(
                owner=owner, lease_until=until, status=status, updated_at=time.time()))
            return bool(result.rowcount == 1)

    def renew(self, execution_id: str, owner: str, until: float) -> bool:
        with self._write(f"renewing the lease of run {execution_id}") as connection:
            result = connection.execute(update(runs).where(and_(
                runs.c.execution_id == execution_id, runs.c.owner == owner)).values(
                lease_until=until))
            return bool(result.rowcount == 1)

    def release(self, execution_id: str, owner: str) -> None:
        with self._write(f"releasing run {execution_id}") as connection:
            connection.execute(update(runs).where(and_(
                runs.c.execution_id == execution_id, runs.c.owner == owner)).values(
                owner=None, lease_until=None))

    # -- checkpoints -------------------------------------------------------------------------
    def put(self, row: CheckpointRow) -> None:
        """The hot path: one INSERT on a dedicated autocommit connection, nothing read first.

        The row is a named tuple in column order: it is the statement's parameters as is.
        """
        try:
            with self._lock:
                self._hot().execute(self._insert_sql, row)
        except Exception as exc:
            with self._errors(f"writing checkpoint {row.checkpoint_id} of run "
                              f"{row.execution_id}"):
                raise exc from None

    @staticmethod
    def _to_row(row: Any) -> CheckpointRow:
        return CheckpointRow(*row)

    def _rows(self, execution_id: str, first: str | None = None,
              last: str | None = None) -> list[CheckpointRow]:
        query = select(checkpoints).where(checkpoints.c.execution_id == execution_id)
        if first is not None:
            query = query.where(checkpoints.c.checkpoint_id >= first)
        if last is not None:
            query = query.where(checkpoints.c.checkpoint_id <= last)
        with self._read(f"reading checkpoints of run {execution_id}") as connection:
            rows = connection.execute(query.order_by(checkpoints.c.checkpoint_id)).all()
        return [self._to_row(row) for row in rows]

    def _row(self, execution_id: str, checkpoint_id: str) -> CheckpointRow | None:
        with self._read(f"reading checkpoint {checkpoint_id}") as connection:
            row = connection.execute(select(checkpoints).where(and_(
                checkpoints.c.execution_id == execution_id,
                checkpoints.c.checkpoint_id == checkpoint_id))).first()
        return self._to_row(row) if row is not None else None

    def _last_row(self, execution_id: str, *, skip_run_end: bool) -> CheckpointRow | None:
        query = select(checkpoints).where(checkpoints.c.execution_id == execution_id)
        if skip_run_end:
            query = query.where(checkpoints.c.node_id != RUN_END)
        query = query.order_by(checkpoints.c.checkpoint_id.desc()).limit(1)
        with self._read(f"reading the last checkpoint of run {execution_id}") as connection:
            row = connection.execute(query).first()
        return self._to_row(row) if row is not None else None

    @staticmethod
    def _row_values(row: CheckpointRow) -> dict[str, Any]:
        return row._asdict()

    # -- interrupts --------------------------------------------------------------------------
    def record_interrupt(self, row: CheckpointRow, pending: PendingInterrupt,
                         owner: str | None) -> None:
        with self._write(f"pausing run {row.execution_id}") as connection:
            exists = connection.execute(select(pending_interrupts.c.execution_id).where(
                pending_interrupts.c.execution_id == row.execution_id)).first()
            if exists is not None:
                raise StoreError(f"run {row.execution_id} already has a pending interrupt")
            connection.execute(insert(checkpoints).values(self._row_values(row)))
            connection.execute(insert(pending_interrupts).values(
                execution_id=pending.execution_id, checkpoint_id=pending.checkpoint_id,
                node_id=pending.node_id, agent_path=pending.agent_path, reason=pending.reason,
                context=_json(pending.context) or "null",
                created_at=pending.created_at.timestamp()))
            self._set_status(connection, row.execution_id, RunStatus.PAUSED.value, owner)

    def _set_status(self, connection: Connection, execution_id: str, status: str,
                    owner: str | None, **extra: Any) -> None:
        values = {"status": status, "updated_at": time.time(), **extra}
        connection.execute(update(runs).where(runs.c.execution_id == execution_id)
                           .values(values))
        connection.execute(update(runs).where(and_(
            runs.c.execution_id == execution_id, runs.c.owner == owner)).values(
            owner=None, lease_until=None))

    @staticmethod
    def _to_pending(row: Any) -> PendingInterrupt:
        return PendingInterrupt(
            execution_id=row.execution_id, checkpoint_id=row.checkpoint_id,
            node_id=row.node_id, agent_path=row.agent_path, reason=row.reason,
            context=_parse(row.context), created_at=utc(row.created_at))

    def get_pending(self, execution_id: str) -> PendingInterrupt | None:
        with self._read(f"reading the pending interrupt of run {execution_id}") as connection:
            row = connection.execute(select(pending_interrupts).where(
                pending_interrupts.c.execution_id == execution_id)).first()
        return self._to_pending(row) if row is not None else None

    def list_pending(self) -> list[PendingInterrupt]:
        query = select(pending_interrupts).order_by(pending_interrupts.c.created_at,
                                                    pending_interrupts.c.execution_id)
        with self._read("listing pending interrupts") as connection:
            rows = connection.execute(query).all()
        return [self._to_pending(row) for row in rows]

    def delete_pending_interrupt_atomic(
        self, execution_id: str, *, owner: str | None = None, until: float = 0.0,
        decision: Any = None,
    ) -> PendingInterrupt | None:
        """The claim: ``DELETE ... RETURNING`` in a write transaction (SQLite: BEGIN IMMEDIATE,
        which takes the database's write lock, so it is atomic across processes; PostgreSQL:
        the row lock of the DELETE). The losers' DELETE returns nothing."""
        with self._write(f"claiming the interrupt of run {execution_id}") as connection:
            row = connection.execute(delete(pending_interrupts).where(
                pending_interrupts.c.execution_id == execution_id).returning(
                *pending_interrupts.columns)).first()
            if row is None:
                return None
            if owner is not None:
                connection.execute(update(runs).where(runs.c.execution_id == execution_id)
                                   .values(owner=owner, lease_until=until,
                                           status=RunStatus.RUNNING.value,
                                           decision=_json(decision), updated_at=time.time()))
            return self._to_pending(row)

    def set_decision(self, execution_id: str, decision: Any) -> None:
        with self._write(f"storing the decision of run {execution_id}") as connection:
            connection.execute(update(runs).where(runs.c.execution_id == execution_id)
                               .values(decision=_json(decision)))

    # -- idempotency -------------------------------------------------------------------------
    def get_idempotent(self, execution_id: str, key: str) -> str | None:
        with self._read("reading the idempotency cache") as connection:
            value = connection.execute(select(idempotency_cache.c.value).where(and_(
                idempotency_cache.c.execution_id == execution_id,
                idempotency_cache.c.key == key))).scalar()
        return str(value) if value is not None else None

    def put_idempotent(self, execution_id: str, key: str, value_json: str) -> str:
        """Insert unless present (``ON CONFLICT DO NOTHING``), then read what is stored: the
        first writer wins even when two processes cache the same key at once."""
        with self._write("writing the idempotency cache") as connection:
            connection.execute(self._insert_or_ignore(idempotency_cache).values(
                execution_id=execution_id, key=key, value=value_json, created_at=time.time()))
            current = connection.execute(select(idempotency_cache.c.value).where(and_(
                idempotency_cache.c.execution_id == execution_id,
                idempotency_cache.c.key == key))).scalar()
            return str(current) if current is not None else value_json

    # -- ending and pruning ------------------------------------------------------------------
    def finish_run(self, row: CheckpointRow, status: str, error: Any,
                   owner: str | None) -> None:
        with self._write(f"ending run {row.execution_id}") as connection:
            connection.execute(insert(checkpoints).values(self._row_values(row)))
            self._set_status(connection, row.execution_id, status, owner, error=_json(error))

    def prune(self, older_than: float, *, include_failed: bool = False) -> PruneResult:
        """Delete finished runs in one write transaction (paused/running runs never match)."""
        statuses = [RunStatus.COMPLETED.value] + ([RunStatus.FAILED.value] if include_failed
                                                  else [])
        with self._write("pruning") as connection:
            doomed = [r[0] for r in connection.execute(
                select(runs.c.execution_id).where(and_(
                    runs.c.status.in_(statuses), runs.c.updated_at < older_than,
                    runs.c.execution_id.not_in(select(pending_interrupts.c.execution_id)),
                ))).all()]
            counts = [0, 0]
            for start in range(0, len(doomed), 500):
                chunk = doomed[start:start + 500]
                counts[0] += connection.execute(delete(checkpoints).where(
                    checkpoints.c.execution_id.in_(chunk))).rowcount
                counts[1] += connection.execute(delete(idempotency_cache).where(
                    idempotency_cache.c.execution_id.in_(chunk))).rowcount
                connection.execute(delete(runs).where(runs.c.execution_id.in_(chunk)))
            connection.execute(delete(plans).where(
                plans.c.fingerprint.not_in(select(runs.c.plan_fingerprint))))
        return PruneResult(len(doomed), counts[0], counts[1], tuple(sorted(doomed)))
