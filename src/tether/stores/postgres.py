"""PostgreSQL: the store for many processes on many machines.

The claim of a pending interrupt is a single ``DELETE ... RETURNING`` (the row lock decides
the one winner); leases are compare-and-set ``UPDATE``s; schema set-up takes a transaction-level
advisory lock so any number of processes may call it at once. Checkpoint writes go through a
dedicated autocommit connection: one round trip per checkpoint. While the server is
unreachable (a restart, a dropped connection), operations are retried on a fresh connection for
up to ``retry_seconds`` (see ``retry.py``); a checkpoint write whose first attempt did commit is
recognised by its unique id, so no checkpoint is written twice or half.

The schema name must be a plain identifier and is quoted by the dialect wherever it is written
into SQL. The password is never shown: not in ``repr()``, and not in any error, whose message
and causes are masked (libpq can quote the connection string in its messages).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Connection,
    Engine,
    Insert,
    Table,
    create_engine,
    insert,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from tether.errors import ExecutionExists, StoreError, StoreUnavailable, StoreURLError
from tether.status import RunStatus
from tether.stores.base import Checkpointer, SeenCancel
from tether.stores.events import RunEvent
from tether.stores.pg_end_claim import (
    EndClaims,
    batch_found,
    end_statement,
    end_with_claim,
    end_written,
    outcome_of,
)
from tether.stores.pg_fenced import (
    ROW_FIELDS,
    fenced_batch_sql,
    fenced_insert_seen,
    finish_fenced,
)
from tether.stores.pg_sessions import (
    SessionTimeouts,
    dead_peer_options,
    session_timeouts,
    start_options,
)
from tether.stores.pg_starts import ConnectionPool, create_statement
from tether.stores.records import CheckpointRow, FencedWrite, RunEnd, RunRecord
from tether.stores.retry import transient
from tether.stores.schema import run_events
from tether.stores.sql import SQLCheckpointer
from tether.stores.sql_events import event_values
from tether.stores.urls import StoreURL, check_identifier, parse_store_url, redact_exception
from tether.stores.write_group import WriteGroup

if TYPE_CHECKING:
    from tether.stores.pg_hot import HotStatement, HotStatements

log = logging.getLogger("tether.stores")

_ADVISORY_KEY = 7_432_001  # "tether schema set-up"
_PLACEHOLDER = re.compile(r"%([s%])")
_SEEN_LIMIT = 256
_SEEN_NAMES = ("eid", "owner", *ROW_FIELDS)
_PUT_NAMES = {len(ROW_FIELDS): (*ROW_FIELDS,), len(ROW_FIELDS) + 2: (*ROW_FIELDS, "eid", "owner")}
_OPEN_FOR = "tether_transaction_open_for"  # set by _mark_lost on a session lost in a block


def server_placeholders(sql: str) -> str:
    """``sql`` with psycopg's client-side placeholders (``%s``, and ``%%`` for a literal
    ``%``) written as PostgreSQL's own (``$1``, ``$2``, ...), for a ``RawCursor``: psycopg
    then sends the text as it is, instead of parsing it again at every execution (it
    caches that parse only for statements under 4,096 characters and 50 parameters, which
    the claim and a write group's batch are not: the parse was a third of a claim's CPU)."""
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(1) == "%":
            return "%"
        count += 1
        return f"${count}"
    return _PLACEHOLDER.sub(number, sql)


def normalise_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` URLs select the psycopg 3 driver."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def _parse(dsn: str | URL) -> StoreURL:
    parsed = parse_store_url(dsn)
    if parsed.kind != "postgresql":
        raise StoreURLError(f"{parsed} is not a PostgreSQL URL", parameter="scheme")
    return parsed


GENERIC_PLANS = "SET plan_cache_mode = force_generic_plan"
"""A worker's connections plan each prepared statement once, for any parameters. By
default (``auto``) PostgreSQL plans a statement anew at each execution while its plan for
the values at hand is estimated cheaper than a plan for any values; the claim's is, always
(its generic plan's estimate counts ``LIMIT $n`` and the status and time comparisons by
default selectivities), so every claim was planned again: about half of a claim's server CPU,
for the same plan (docs/decisions.md, "The leaner worker, third pass"). Every statement a
worker runs reads by key or by an index in the index's order (``ORDER BY ... LIMIT``), so
the plan for any values is the plan for these."""


class PostgresCheckpointer(EndClaims, SQLCheckpointer):
    """Checkpointer in a PostgreSQL database (psycopg 3), optionally in its own schema."""

    paramstyle = "%s"

    def __init__(self, dsn_or_engine: str | URL | Engine, *, schema: str | None = None,
                 pool_size: int = 5, max_overflow: int = 10, connect_timeout: int | None = None,
                 retry_seconds: float | None = None, create: bool = True,
                 timeouts: SessionTimeouts | None = None) -> None:
        """``schema``, ``connect_timeout`` and ``retry_seconds`` default to the URL's options
        (``?schema=``, ...), then to no schema, 10 s and 15 s. With ``create=False`` a schema
        that does not exist is an error instead of being created. ``timeouts``: the
        sessions' idle-in-transaction and lock timeouts (``pg_sessions.py``; default: the
        URL's options, else derived from the lease)."""
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise StoreError("PostgreSQL needs psycopg 3: pip install 'tether[postgres]'") \
                from exc
        self._psycopg = psycopg
        if isinstance(dsn_or_engine, Engine):
            engine, parsed = dsn_or_engine, None
        else:
            parsed = _parse(dsn_or_engine)
            schema = schema if schema is not None else parsed.schema
            timeout = connect_timeout or parsed.connect_timeout
            timeouts = timeouts or session_timeouts(idle=parsed.idle_in_transaction_timeout,
                                                    lock=parsed.lock_timeout)
            engine = create_engine(
                parsed.url, pool_size=pool_size, max_overflow=max_overflow, pool_pre_ping=True,
                connect_args={"connect_timeout": timeout,
                              **dead_peer_options(parsed.url.query, timeout),
                              **start_options(timeouts, parsed.url.query)})
        self.timeouts = timeouts or session_timeouts()
        self.schema = check_identifier(schema) if schema is not None else None
        self.retry_seconds = retry_seconds if retry_seconds is not None else (
            parsed.retry_seconds if parsed else 15.0)
        self._create = create
        if self.schema is not None:
            engine = engine.execution_options(schema_translate_map={None: self.schema})
        self._password = engine.url.password
        self._connect_args = {
            **engine.url.translate_connect_args(database="dbname", username="user"),
            **engine.url.query,
            "connect_timeout": connect_timeout or (parsed.connect_timeout if parsed else 10)}
        self._connect_args = {**dead_peer_options(self._connect_args,
                                                   int(self._connect_args["connect_timeout"])),
                              **self._connect_args,
                              **start_options(self.timeouts, self._connect_args)}
        self._hot_connection: Any = None
        self._hot_cursor: Any = None
        self._seen: dict[str, tuple[float, float | None]] = {}  # take_cancel_seen's readings
        self._hot_lock = threading.Lock()
        self._batch_sql: dict[tuple[int, bool], str] = {}  # fenced_batch_sql by (rows, ends)
        self._server_sql: dict[str, str] = {}  # _text's conversions
        self._generic_plans = False  # use_for_worker turns it on
        self._starts = ConnectionPool(self._connect, pool_size)
        """Connections for creating runs (``pg_starts.py``), as many as ``pool_size``."""
        super().__init__(engine)

    def __repr__(self) -> str:
        schema = f", schema={self.schema!r}" if self.schema else ""
        return f"PostgresCheckpointer({self.engine.url.render_as_string()!r}{schema})"

    def _quoted_schema(self) -> str:
        assert self.schema is not None
        return str(self.engine.dialect.identifier_preparer.quote_identifier(self.schema))

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """The shared mapping of driver errors, with the password masked in the message of
        the error and of everything chained to it."""
        try:
            with super()._errors(what):
                yield
        except StoreUnavailable as exc:
            redact_exception(exc, self._password)
            ended = self._session_ended(exc, what)
            if ended is None:
                raise
            raise ended from exc
        except Exception as exc:
            redact_exception(exc, self._password)
            raise

    def _session_ended(self, exc: StoreUnavailable, what: str) -> StoreUnavailable | None:
        """The error (and a log line) for a session the server ended while this process
        left it idle inside a transaction, or a statement that outwaited ``lock_timeout``;
        None for other outages. Nothing of such a transaction was committed."""
        original = getattr(exc.__cause__, "orig", exc.__cause__)
        errors = self._psycopg.errors
        if isinstance(original, errors.IdleInTransactionSessionTimeout) or \
                hasattr(original, _OPEN_FOR):
            idle = self.timeouts.idle_in_transaction
            opened = getattr(original, _OPEN_FOR, None)
            held = f" (open {opened:.1f} s)" if opened is not None else ""
            log.warning("%s: the database ended this process's session: it sat inside a "
                        "transaction%s for more than the idle-in-transaction timeout (%g s; "
                        "was the process stopped?); the transaction was rolled back, "
                        "reconnecting", what, held, idle)
            return StoreUnavailable(f"{what}: the database ended the session after it sat "
                                    f"inside a transaction for more than {idle:g} s "
                                    f"(rolled back)")
        if isinstance(original, errors.LockNotAvailable):
            return StoreUnavailable(f"{what}: another session held a lock it needs for more "
                                    f"than lock_timeout ({self.timeouts.lock:g} s)")
        return None

    def _connect(self) -> Any:
        """A new autocommit driver connection whose search path is the store's schema, on
        generic plans once the store is a worker's (:meth:`use_for_worker`)."""
        connection = self._psycopg.connect(autocommit=True, **self._connect_args)
        settings = [f"SET search_path TO {self._quoted_schema()}"] if self.schema else []
        if self._generic_plans:
            settings.append(GENERIC_PLANS)
        if settings:
            connection.execute("; ".join(settings))
        return connection

    def use_for_worker(self, *, write_group: WriteGroup[FencedWrite, tuple[bool, float | None]]
                       | None = None) -> None:
        """As every store's, and: this store's connections plan its prepared statements
        once (``plan_cache_mode = force_generic_plan``; :data:`GENERIC_PLANS`)."""
        super().use_for_worker(write_group=write_group)
        self._generic_plans = True
        with self._errors("planning a worker's statements once"), self._lock:
            hot = self._hot_connection
            if hot is not None and not hot.closed:
                hot.execute(GENERIC_PLANS)

    def share_statements(self, other: Checkpointer) -> None:
        """As every store's, with the server forms of the statements' texts
        (:func:`server_placeholders`) and, in the same schema, the fenced batches' texts
        (they name their tables with it)."""
        super().share_statements(other)
        if type(other) is type(self):
            assert isinstance(other, PostgresCheckpointer)
            self._server_sql = other._server_sql
            if other.schema == self.schema:
                self._batch_sql = other._batch_sql

    def _hot(self) -> Any:
        if self._hot_connection is None or self._hot_connection.closed:
            self._hot_connection = self._connect()
            self._hot_cursor = self._new_cursor(self._hot_connection)
        return self._hot_connection

    def _new_cursor(self, connection: Any) -> Any:
        return self._psycopg.RawCursor(connection)

    def _text(self, sql: str) -> str:
        text = self._server_sql.get(sql)
        if text is None:
            text = self._server_sql[sql] = server_placeholders(sql)
        return text

    def _insert_run(self, run: RunRecord, plan_json: str) -> None:
        """The plan, the run and (queued) the NOTIFY in one statement on a connection of the
        start pool, outside the hot connection's lock (``pg_starts.py``)."""
        queued = run.status == RunStatus.QUEUED
        statement = self._sql.get(f"create_run_{queued}", lambda: create_statement(queued))
        values = {**self._run_values(run), "plan": plan_json, "plan_created_at": time.time(),
                  "channel": self.notify_channel}
        what = f"creating run {run.execution_id}"
        with self._errors(what):
            try:
                with self._starts.connection() as connection:
                    row = connection.execute(statement.sql, statement.params(values),
                                             prepare=True).fetchone()
            except self._psycopg.OperationalError as exc:  # mapped here: the shared mapping
                # would reset the hot connection, which other threads may be using
                raise StoreUnavailable(f"{what}: the database is unreachable: {exc}") from exc
        if row is None:
            raise ExecutionExists(run.execution_id)

    def _run(self, connection: Any, sql: str, params: Any) -> Any:
        """Execute a prepared statement on ``connection``; on the hot connection through one
        cursor kept with it (``Connection.execute`` makes a cursor per call, which cost about
        as much CPU as the rest of a checkpoint INSERT's client side). Callers hold
        ``_lock``, as every use of the hot connection does."""
        cursor = self._hot_cursor if connection is self._hot_connection else \
            self._new_cursor(connection)
        return cursor.execute(self._text(sql), params, prepare=True)

    def _reset_hot(self) -> None:
        connection, self._hot_connection, self._hot_cursor = self._hot_connection, None, None
        if connection is not None:
            with contextlib.suppress(Exception):  # already broken; nothing more to release
                connection.close()

    @property
    def notify_channel(self) -> str:
        """The LISTEN/NOTIFY channel enqueues are announced on (one per schema)."""
        return f"tether_runs_{self.schema}" if self.schema else "tether_runs"

    def _notify(self, cursor: Any) -> None:
        cursor.execute(f'NOTIFY "{self.notify_channel}"')

    def _put(self, connection: Any, sql: str, params: Any) -> bool:
        """A checkpoint INSERT (``tether run``'s fenced one, every node) on the hot
        connection without the cursor (:meth:`_hot_statement`): its parameters are the row's
        columns, then the fenced INSERT's run and owner."""
        names = _PUT_NAMES.get(len(params)) if connection is self._hot_connection else None
        if names is not None and isinstance(params, tuple):
            count = self._hot_statement(self._text(sql), names).count(params)
            if count is not None:
                return bool(count == 1)
        return bool(self._run(connection, sql, params).rowcount == 1)

    concurrent_connections = True
    claims_in_one_statement = True
    _seen_sql: str | None = None
    """``_put_seen``'s server text once its parameters' order is known: set on a worker's
    store at its first write (a class default, not set in ``__init__``: one attribute more
    in every store's ``__init__`` cost the in-process path 1.3% of W0's instructions per
    node, ``bench/w0_instructions.py``)."""
    _hot_statements: HotStatements | None = None
    """The statements prepared on the hot connection by ``pg_hot.py`` (a
    ``HotStatements``, made anew with each new hot connection)."""

    def _hot_statement(self, sql: str, names: Sequence[str]) -> HotStatement:
        """``sql`` (server text) on the hot connection's libpq connection, without
        psycopg's cursor (``pg_hot.py``: a third of a worker's Python time went to the
        cursor layer around its checkpoint write). The caller holds ``_lock``."""
        return self._hot_set().get(sql, names)

    def _hot_set(self) -> HotStatements:
        """The hot connection's :class:`HotStatements` (the caller holds ``_lock``)."""
        statements = self._hot_statements
        if statements is None or statements.connection is not self._hot_connection:
            from tether.stores.pg_hot import HotStatements as Made
            statements = self._hot_statements = Made(self._hot_connection)
        return statements

    def _put_fenced(self, connection: Any, row: CheckpointRow, owner: str) -> bool:
        """The fenced INSERT as a CTE that also returns the run row's
        ``cancel_requested_at`` from the row it locked ``FOR SHARE`` (the newest committed
        version: a cancel request committing meanwhile is waited for and seen), kept for the
        worker's next node boundary (:meth:`take_cancel_seen`): one round trip per node
        instead of a write and a read. Only when :attr:`reads_cancel_on_write` (a worker's
        store); otherwise the plain fenced INSERT. With a :attr:`write_group`, the writes
        of the group's stores that overlap go in one statement (``write_group.py``)."""
        if not self.reads_cancel_on_write:
            return super()._put_fenced(connection, row, owner)
        group = self.write_group
        if group is None:
            written, requested_at = self._put_seen(connection, row, owner)
        else:
            written, requested_at = group.submit(FencedWrite(row, owner), self._put_batch)
        if written:
            seen = self._seen
            if len(seen) >= _SEEN_LIMIT:  # readings no boundary took (a run's last node)
                floor = time.monotonic() - 1.0
                for key in [k for k, (at, _) in seen.items() if at < floor]:
                    seen.pop(key, None)
            seen[row.execution_id] = (time.monotonic(), requested_at)
        return bool(written)

    def _put_seen(self, connection: Any, row: CheckpointRow, owner: str,
                  ) -> tuple[bool, float | None]:
        seen_sql = self._seen_sql
        if seen_sql is None:
            statement = self._sql.get("put_fenced_seen", fenced_insert_seen)
            if statement.names == _SEEN_NAMES:  # the row's own tuple in order: no mapping
                seen_sql = self._seen_sql = self._text(statement.sql)
        if seen_sql is not None and connection is self._hot_connection:
            values = (row.execution_id, owner, *row)
            found = self._hot_statement(seen_sql, _SEEN_NAMES).first(values)
            if found is not None:  # count(*) and cancel_requested_at, as text
                return found[0] != b"0", None if found[1] is None else float(found[1])
            written, requested_at = self._hot_cursor.execute(
                seen_sql, values, prepare=True).fetchone()
            return bool(written), requested_at
        statement = self._sql.get("put_fenced_seen", fenced_insert_seen)
        params = statement.params({**row._asdict(), "eid": row.execution_id, "owner": owner})
        written, requested_at = self._run(connection, statement.sql, params).fetchone()
        return bool(written), requested_at

    def _put_batch(self, items: Sequence[FencedWrite],
                   ) -> list[tuple[bool, float | None] | BaseException]:
        """Write a write group's batch on this store's hot connection (the caller holds
        ``_lock``): one item alone as :meth:`_put_seen` (a run's end as
        :meth:`_end_alone`); several in one statement (:func:`fenced_batch_sql`, with the
        runs' ends when the batch has one). If that statement fails for another reason than
        the connection, each item is written alone, so an error is its own item's; that
        fallback is logged (a warning naming the error's class: its message may quote the
        rows' values) and counted by the group (:meth:`WriteGroup.fell_back`)."""
        connection = self._hot()
        if len(items) == 1:
            item = items[0]
            if item.end is None:  # a node's checkpoint alone: the path of most steps
                return [self._put_seen(connection, item.row, item.owner)]
            return [self._write_alone(connection, item, alone=True)]
        try:
            found = self._write_batch(connection, items)
        except Exception as exc:
            if self._is_disconnect(exc):
                raise
            log.warning("a batch of %d checkpoint writes failed (%s); writing them one by "
                        "one", len(items), type(exc).__name__)
            if self.write_group is not None:
                self.write_group.fell_back()
            return [self._write_alone(connection, item) for item in items]
        return [outcome_of(found, item) for item in items]

    def _write_batch(self, connection: Any, items: Sequence[FencedWrite],
                     ) -> dict[str, tuple[bool, float | None]]:
        """``items`` in one statement (:meth:`_batch_statement`); what each row's
        ``written`` and reading were, by checkpoint id."""
        return batch_found(self._run(connection, *self._batch_statement(items)).fetchall())

    def _batch_statement(self, items: Sequence[FencedWrite]) -> tuple[str, list[Any]]:
        """:func:`fenced_batch_sql` for ``items`` (an item's ``before`` row first, as a row
        of its own), and its parameters."""
        ends = any(item.end is not None for item in items)
        count = len(items) + sum(item.before is not None for item in items)
        key = (count, ends)
        sql = self._batch_sql.get(key)
        if sql is None:
            sql = self._batch_sql[key] = fenced_batch_sql(
                count, self._qualified, self.engine.dialect, ends)
        params: list[Any] = []
        for row, owner, end, before in items:
            if before is not None:
                params += before
                params.append(owner)
                params += (None, None, None)  # (ends: a row with an end has ends on)
            params += row
            params.append(owner)
            if ends:
                params += end if end is not None else (None, None, None)
        return sql, params

    def _write_alone(self, connection: Any, item: FencedWrite, alone: bool = False,
                     ) -> tuple[bool, float | None] | BaseException:
        """One item in a statement of its own; its error as its result (``alone``: raised,
        as the caller's own write would)."""
        try:
            if item.end is not None:
                return self._end_alone(connection, item), None
            return self._put_seen(connection, item.row, item.owner)
        except Exception as exc:
            if alone or self._is_disconnect(exc):
                raise
            return exc

    def _finish_fenced(self, row: CheckpointRow, status: str, error: str | None,
                       owner: str, last_node: CheckpointRow | None) -> bool:
        """``finish_run`` fenced on ``owner`` in one round trip (:func:`finish_fenced`)
        instead of BEGIN, the fence, the insert, the update and COMMIT; with a
        :attr:`write_group`, in the group's statement with the other slots' writes that
        overlap it. With ``last_node``, both rows and the update in one statement
        (:func:`fenced_batch_sql` with ends)."""
        end = RunEnd(status, error, time.time())
        write = FencedWrite(row, owner, end, last_node)
        group = self.write_group
        if group is not None and self.reads_cancel_on_write:
            written, _ = group.submit(write, self._put_batch)
            return written
        armed = self._armed_for(row.execution_id)  # one end only (a retry is alone)
        if armed is not None:
            return end_with_claim(self, write, armed)
        return self._end_alone(self._hot(), write)

    def _end_alone(self, connection: Any, write: FencedWrite) -> bool:
        """A run's end in a statement of its own (``pg_end_claim.end_statement``); without
        the last node's row, on the hot connection without the cursor (``pg_hot.py``)."""
        sql, params = end_statement(self, write)
        if write.before is None and connection is self._hot_connection and \
                isinstance(params, tuple):
            names = self._sql.get("finish_fenced", finish_fenced).names
            assert names is not None
            found = self._hot_statement(self._text(sql), names).first(params)
            if found is not None:  # the two counts, as text
                return found[0] != b"0" and found[1] != b"0"
        return end_written(write, self._run(connection, sql, params).fetchall())

    @transient()
    def add_event(self, event: RunEvent) -> None:
        """One INSERT in autocommit on the hot connection, a transaction of its own: one
        round trip instead of BEGIN, the INSERT and COMMIT (a run's claim event is written
        as each attempt starts, so every run paid the two extra)."""
        statement = self._sql.get("insert_event", lambda: insert(run_events))
        with self._errors(f"recording a {event.kind} event of run {event.execution_id}"), \
                self._lock:
            self._run(self._hot(), statement.sql, statement.params(event_values(event)))

    def take_cancel_seen(self, execution_id: str, max_age: float) -> SeenCancel | None:
        reading = self._seen.pop(execution_id, None)
        if reading is None or time.monotonic() - reading[0] > max_age:
            return None
        return SeenCancel(reading[1])

    def _qualified(self, table: str) -> str:
        quote = self.engine.dialect.identifier_preparer.quote
        return f"{quote(self.schema)}.{quote(table)}" if self.schema else str(quote(table))

    def _transaction(self, connection: Any) -> contextlib.AbstractContextManager[Any]:
        """psycopg's transaction block: BEGIN, then COMMIT (or ROLLBACK on an exception),
        timed (:class:`_Timed`) so that a session lost inside it can be recognised."""
        return _Timed(self, connection.transaction())

    def _mark_lost(self, exc: BaseException, started: float) -> None:
        """Mark ``exc`` (``_OPEN_FOR``) when it lost the connection inside a transaction open
        longer than the idle-in-transaction timeout: the server most likely ended the
        session while this process was stopped (libpq reports only "server closed the
        connection")."""
        idle = self.timeouts.idle_in_transaction
        elapsed = time.monotonic() - started
        if idle > 0 and elapsed > idle and isinstance(exc, Exception) and \
                self._is_disconnect(exc):
            setattr(exc, _OPEN_FOR, elapsed)

    def _begin_write(self, connection: Connection) -> None:
        """PostgreSQL begins a transaction with the first statement."""

    def _insert_or_ignore(self, table: Table) -> Insert:
        return pg_insert(table).on_conflict_do_nothing()

    def _lock_schema(self, connection: Connection) -> None:
        """The set-up's advisory lock, waited for as long as another process's migration
        takes (``lock_timeout`` off for this transaction)."""
        connection.exec_driver_sql("SET LOCAL lock_timeout = 0")
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_ADVISORY_KEY})")
        if not self.schema:
            return
        if self._create:
            connection.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {self._quoted_schema()}")
        elif connection.exec_driver_sql("SELECT 1 FROM pg_namespace WHERE nspname = %(name)s",
                                        {"name": self.schema}).first() is None:
            raise StoreError(f"the database has no schema {self.schema!r} (nothing was "
                             "created; check the URL's ?schema=)")

    def _is_duplicate(self, exc: BaseException) -> bool:
        original = getattr(exc, "orig", exc)
        return isinstance(original, self._psycopg.errors.UniqueViolation)

    def _is_disconnect(self, exc: BaseException) -> bool:
        """A lost connection, a session the server ended (idle in a transaction too long:
        ``pg_sessions.py``), or a lock waited for longer than ``lock_timeout``: each is
        retried on a new connection like an outage."""
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            return True
        original = getattr(exc, "orig", exc)
        errors = self._psycopg.errors
        return isinstance(original, (self._psycopg.OperationalError,
                                     errors.IdleInTransactionSessionTimeout))

    def close(self) -> None:
        with self._lock:
            self._reset_hot()
        self._starts.close()
        super().close()


class _Timed:
    """A psycopg transaction block that notes when it began and hands an exception that
    ends it to :meth:`PostgresCheckpointer._mark_lost`. A class, not a generator context
    manager: a lease renewal costs 4k instructions more than psycopg's block alone, 10k with
    the generator (docs/performance.md, txn26)."""

    __slots__ = ("_inner", "_started", "_store")

    def __init__(self, store: PostgresCheckpointer, inner: Any) -> None:
        self._store, self._inner, self._started = store, inner, 0.0

    def __enter__(self) -> Any:
        self._started = time.monotonic()
        return self._inner.__enter__()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: Any) -> bool:
        try:
            return bool(self._inner.__exit__(kind, exc, traceback))
        except Exception as raised:
            self._store._mark_lost(raised, self._started)
            raise
        finally:
            if exc is not None:
                self._store._mark_lost(exc, self._started)
