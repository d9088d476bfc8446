"""The checkpoint rows of the SQL stores and what is written with them: pending interrupts,
decisions, the idempotency cache (a mixin of :class:`~tether.stores.sql.SQLCheckpointer`).

Every statement runs on the store's driver connection (``SQLCheckpointer._cursor`` and
``_execute``, compiled once per dialect by ``statements.py``). :meth:`SQLRows.put` is the hot
path: one statement in autocommit. Pausing writes the interrupted row and its pending row in
one transaction; a claim takes the pending row with ``DELETE ... RETURNING``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether.errors import StoreError
from tether.stores.events import answered_event
from tether.stores.lazy import LazyModule
from tether.stores.records import (
    RUN_END,
    CheckpointRow,
    Claim,
    Decision,
    PendingCursor,
    PendingEntry,
    PendingInterrupt,
    RunStatus,
    utc,
)
from tether.stores.retry import transient
from tether.stores.sql_events import event_values
from tether.stores.sql_ids import SQLIds
from tether.stores.sql_leases import acquire_statement, eid
from tether.stores.sql_text import DECISION_COLUMNS, PENDING_COLUMNS
from tether.stores.statements import Statements, from_json, to_json

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy import ClauseElement, Insert, Select, Table

    from tether.stores import listing, schema
else:  # imported when a statement is first built (SQLite: rarely, see lazy.py)
    sa = LazyModule("sqlalchemy")
    schema = LazyModule("tether.stores.schema")
    listing = LazyModule("tether.stores.listing")

_ROW_FIELDS = CheckpointRow._fields  # the columns of ``checkpoints`` (schema.py checks)


def _fenced_insert() -> ClauseElement:
    """The checkpoint INSERT that writes only while the run row names the owner."""
    runs, checkpoints = schema.runs, schema.checkpoints
    held: Select[Any] = sa.select(sa.literal_column("1")).select_from(runs).where(sa.and_(
        runs.c.execution_id == eid(), runs.c.owner == sa.bindparam("owner"),
    )).with_for_update(read=True)
    values = sa.select(*[sa.bindparam(name, type_=checkpoints.c[name].type)
                         for name in _ROW_FIELDS])
    return sa.insert(checkpoints).from_select(_ROW_FIELDS, values.where(sa.exists(held)))


def _claim_statement() -> ClauseElement:
    """The claim of one pending interrupt: its row deleted, and returned."""
    pending = schema.pending_interrupts
    return sa.delete(pending).where(sa.and_(
        pending.c.execution_id == eid(), pending.c.checkpoint_id == sa.bindparam("cid"),
    )).returning(*pending.columns)


def _to_decision(row: Any) -> Decision:
    values = dict(zip(DECISION_COLUMNS, row, strict=True))
    return Decision(
        execution_id=values["execution_id"], checkpoint_id=values["checkpoint_id"],
        node_id=values["node_id"], agent_path=values["agent_path"],
        value=from_json(values["value"]), created_at=utc(values["created_at"]),
        resolver=values["resolver"], comment=values["comment"])


def row_written(store: SQLRows, row: CheckpointRow, *_: Any) -> bool:
    """Whether a write whose connection dropped did commit: its checkpoint row exists."""
    return store._row(row.execution_id, row.checkpoint_id) is not None


class SQLRows(SQLIds):
    """Checkpoints, pending interrupts, decisions and the idempotency cache, each a table."""

    # the plumbing and run status of SQLCheckpointer (sql.py)
    _sql: Statements
    _lock: threading.RLock

    def _hot(self) -> Any:
        raise NotImplementedError

    def _errors(self, what: str) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError

    def _insert_or_ignore(self, table: Table) -> Insert:
        raise NotImplementedError

    def _text(self, sql: str) -> str:
        raise NotImplementedError

    def _set_status(self, cursor: Any, execution_id: str, status: str, owner: str | None,
                    error: str | None) -> None:
        raise NotImplementedError

    # -- checkpoints -------------------------------------------------------------------------
    @transient(done=row_written)
    def put(self, row: CheckpointRow, owner: str | None = None) -> None:
        """The hot path: one statement in autocommit, nothing read first. The row is a named
        tuple in column order: it is the statement's parameters as it is.

        With ``owner`` the statement is ``INSERT ... SELECT <row> WHERE EXISTS (the run row
        names owner)``; on PostgreSQL the sub-select takes ``FOR SHARE`` on the run row, so a
        takeover's ``UPDATE`` either waits for this insert to commit or makes it insert
        nothing (SQLite runs the whole statement under its write lock)."""
        try:
            with self._lock:
                if owner is not None:
                    written = self._put_fenced(self._hot(), row, owner)
                else:
                    statement = self._sql.get("put", lambda: sa.insert(schema.checkpoints))
                    written = self._put(self._hot(), statement.sql, row
                                        if statement.names is not None else
                                        statement.params(row._asdict()))
        except Exception as exc:
            with self._errors(f"writing checkpoint {row.checkpoint_id} of run "
                              f"{row.execution_id}"):
                raise exc from None
        if not written:
            raise self._lost(row.execution_id)

    def _put_fenced(self, connection: Any, row: CheckpointRow, owner: str) -> bool:
        """Execute the fenced checkpoint INSERT; whether it wrote the row (PostgreSQL also
        keeps the run row's ``cancel_requested_at`` it read: ``take_cancel_seen``)."""
        statement = self._sql.get("put_fenced", _fenced_insert)
        params = (*row, row.execution_id, owner) if statement.names is not None else \
            statement.params({**row._asdict(), "eid": row.execution_id, "owner": owner})
        return self._put(connection, statement.sql, params)

    def _put(self, connection: Any, sql: str, params: Any) -> bool:
        """Execute the checkpoint INSERT (PostgreSQL: as a prepared statement); whether it
        wrote the row."""
        return bool(connection.execute(sql, params).rowcount == 1)

    def _insert_row(self, cursor: Any, row: CheckpointRow) -> None:
        statement = self._sql.get("put", lambda: sa.insert(schema.checkpoints))
        cursor.execute(self._text(statement.sql), statement.params(row._asdict())
                       if statement.names is None else row)

    @transient()
    def _rows(self, execution_id: str, first: str | None = None,
              last: str | None = None) -> list[CheckpointRow]:
        def build() -> ClauseElement:
            checkpoints = schema.checkpoints
            low = sa.or_(sa.bindparam("first", type_=checkpoints.c.checkpoint_id.type).is_(None),
                         checkpoints.c.checkpoint_id >= sa.bindparam("first"))
            high = sa.or_(sa.bindparam("last", type_=checkpoints.c.checkpoint_id.type).is_(None),
                          checkpoints.c.checkpoint_id <= sa.bindparam("last"))
            return sa.select(*checkpoints.columns).where(sa.and_(
                checkpoints.c.execution_id == eid(), low, high)).order_by(
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
            checkpoints = schema.checkpoints
            low = sa.or_(sa.bindparam("after", type_=checkpoints.c.checkpoint_id.type).is_(None),
                         checkpoints.c.checkpoint_id > sa.bindparam("after"))
            return sa.select(*checkpoints.columns).where(sa.and_(
                checkpoints.c.execution_id == eid(), low)).order_by(
                checkpoints.c.checkpoint_id).limit(sa.bindparam("n"))

        with self._cursor(f"reading checkpoints of run {execution_id}") as cursor:
            rows = self._execute(cursor, "page_rows", build, eid=execution_id, after=after,
                                 n=limit).fetchall()
        return [CheckpointRow(*row) for row in rows]

    @transient()
    def _row(self, execution_id: str, checkpoint_id: str) -> CheckpointRow | None:
        with self._cursor(f"reading checkpoint {checkpoint_id}") as cursor:
            row = self._execute(cursor, "row", lambda: sa.select(
                *schema.checkpoints.columns).where(sa.and_(
                schema.checkpoints.c.execution_id == eid(),
                schema.checkpoints.c.checkpoint_id == sa.bindparam("cid"))),
                eid=execution_id, cid=checkpoint_id).fetchone()
        return CheckpointRow(*row) if row is not None else None

    @transient()
    def _last_row(self, execution_id: str, *, skip_run_end: bool) -> CheckpointRow | None:
        def build() -> ClauseElement:
            checkpoints = schema.checkpoints
            query = sa.select(*checkpoints.columns).where(checkpoints.c.execution_id == eid())
            if skip_run_end:
                query = query.where(checkpoints.c.node_id != RUN_END)
            return query.order_by(checkpoints.c.checkpoint_id.desc()).limit(1)

        key = "last_row_skip" if skip_run_end else "last_row"
        with self._cursor(f"reading the last checkpoint of run {execution_id}") as cursor:
            row = self._execute(cursor, key, build, eid=execution_id).fetchone()
        return CheckpointRow(*row) if row is not None else None

    # -- interrupts --------------------------------------------------------------------------
    @transient(done=row_written)
    def record_interrupt(self, row: CheckpointRow, pending: PendingInterrupt,
                         owner: str | None) -> None:
        with self._cursor(f"pausing run {row.execution_id}", write=True) as cursor:
            self._fence(cursor, row.execution_id, owner)
            exists = self._execute(cursor, "pending_exists", lambda: sa.select(
                schema.pending_interrupts.c.checkpoint_id).where(sa.and_(
                    schema.pending_interrupts.c.execution_id == eid(),
                    schema.pending_interrupts.c.agent_path == sa.bindparam("path"),
                    schema.pending_interrupts.c.node_id == sa.bindparam("node"))),
                eid=row.execution_id, path=pending.agent_path, node=pending.node_id).fetchone()
            if exists is not None:
                raise StoreError(f"run {row.execution_id} already has a pending interrupt at "
                                 f"{pending.address}")
            self._insert_row(cursor, row)
            self._execute(cursor, "record_pending", lambda: sa.insert(schema.pending_interrupts),
                          execution_id=pending.execution_id,
                          checkpoint_id=pending.checkpoint_id, node_id=pending.node_id,
                          agent_path=pending.agent_path, reason=pending.reason,
                          context=to_json(pending.context) or "null",
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


    @staticmethod
    def _to_pending(row: Any) -> PendingInterrupt:
        values = dict(zip(PENDING_COLUMNS, row, strict=True))
        return PendingInterrupt(
            execution_id=values["execution_id"], checkpoint_id=values["checkpoint_id"],
            node_id=values["node_id"], agent_path=values["agent_path"],
            reason=values["reason"], context=from_json(values["context"]),
            created_at=utc(values["created_at"]), due_at=values["due_at"])

    @transient()
    def list_pending(self, execution_id: str | None = None) -> list[PendingInterrupt]:
        def build(of_run: bool) -> ClauseElement:
            pending = schema.pending_interrupts
            query = sa.select(*pending.columns)
            if of_run:
                query = query.where(pending.c.execution_id == eid())
            return query.order_by(pending.c.created_at, pending.c.execution_id,
                                  pending.c.checkpoint_id)

        with self._cursor("listing pending interrupts") as cursor:
            if execution_id is None:
                self._execute(cursor, "list_pending", lambda: build(of_run=False))
            else:
                self._execute(cursor, "list_pending_of", lambda: build(of_run=True),
                              eid=execution_id)
            rows = cursor.fetchall()
        return [self._to_pending(row) for row in rows]

    @transient()
    def due_pending(self, now: float, limit: int = 100) -> list[PendingInterrupt]:
        with self._cursor("listing due timers") as cursor:
            rows = self._execute(cursor, "due_pending", lambda: sa.select(
                *schema.pending_interrupts.columns).where(
                schema.pending_interrupts.c.due_at <= sa.bindparam("now")).order_by(
                schema.pending_interrupts.c.due_at, schema.pending_interrupts.c.execution_id,
                schema.pending_interrupts.c.checkpoint_id).limit(sa.bindparam("n")),
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
              comment: str | None = None, channel: str | None = None) -> Claim | None:
        """``DELETE ... RETURNING`` of the one pending row in a write transaction that first
        locks the run row (SQLite: BEGIN IMMEDIATE holds the database's write lock, so it is
        atomic across processes; PostgreSQL: ``FOR UPDATE`` on the run row, then the row lock
        of the DELETE). The losers' DELETE returns nothing. Not retried on a lost connection:
        a claim that may have committed is reported as lost by the caller, never doubled."""
        execution_id = pending.execution_id
        with self._cursor(f"claiming the interrupt of run {execution_id} at "
                          f"{pending.address}", write=True) as cursor:
            self._execute(cursor, "lock_run", lambda: sa.select(
                schema.runs.c.execution_id).where(
                schema.runs.c.execution_id == eid()).with_for_update(), eid=execution_id)
            row = self._execute(cursor, "claim", _claim_statement, eid=execution_id,
                                cid=pending.checkpoint_id).fetchone()
            if row is None:
                return None
            found = self._to_pending(row)
            self._execute(cursor, "insert_decision", lambda: sa.insert(schema.decisions),
                          execution_id=execution_id, checkpoint_id=found.checkpoint_id,
                          node_id=found.node_id, agent_path=found.agent_path,
                          value=to_json(answer) or "{}", resolver=resolver, comment=comment,
                          created_at=time.time())
            if channel is not None:
                self._execute(cursor, "insert_event", lambda: sa.insert(schema.run_events),
                              **event_values(answered_event(found, resolver, channel)))
            owned = owner is not None and self._acquire(
                cursor, "acquire", acquire_statement, execution_id, owner, until, now,
                steal_from)
            return Claim(found, owned)

    def _decisions(self, cursor: Any, execution_id: str) -> list[Decision]:
        rows = self._execute(cursor, "decisions", lambda: sa.select(
            *schema.decisions.columns).where(schema.decisions.c.execution_id == eid()).order_by(
            schema.decisions.c.created_at, schema.decisions.c.checkpoint_id),
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
            self._execute(cursor, "delete_decision", lambda: sa.delete(schema.decisions).where(
                schema.decisions.c.execution_id == eid(),
                schema.decisions.c.checkpoint_id == sa.bindparam("cid")),
                eid=decision.execution_id, cid=decision.checkpoint_id)
            self._execute(cursor, "insert_decision", lambda: sa.insert(schema.decisions),
                          execution_id=decision.execution_id,
                          checkpoint_id=decision.checkpoint_id, node_id=decision.node_id,
                          agent_path=decision.agent_path, value=to_json(decision.value) or "{}",
                          resolver=decision.resolver, comment=decision.comment,
                          created_at=decision.created_at.timestamp())

    # -- idempotency -------------------------------------------------------------------------
    @transient()
    def get_idempotent(self, execution_id: str, key: str) -> str | None:
        with self._cursor("reading the idempotency cache") as cursor:
            return self._cached(cursor, execution_id, key)

    def _cached(self, cursor: Any, execution_id: str, key: str) -> str | None:
        row = self._execute(cursor, "get_idempotent", lambda: sa.select(
            schema.idempotency_cache.c.value).where(sa.and_(
                schema.idempotency_cache.c.execution_id == eid(),
                schema.idempotency_cache.c.key == sa.bindparam("key"))),
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
                          lambda: self._insert_or_ignore(schema.idempotency_cache),
                          execution_id=execution_id, key=key, value=value_json,
                          created_at=time.time())
            current = self._cached(cursor, execution_id, key)
            return current if current is not None else value_json


__all__ = ["SQLRows", "row_written"]
