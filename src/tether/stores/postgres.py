"""PostgreSQL: the store for many processes on many machines.

The claim of a pending interrupt is a single ``DELETE ... RETURNING`` (the row lock decides
the one winner); leases are compare-and-set ``UPDATE``s; schema set-up takes a transaction-level
advisory lock so any number of processes may call it at once. Checkpoint writes go through a
dedicated autocommit connection: one round trip per checkpoint. While the server is
unreachable (a restart, a dropped connection), operations are retried on a fresh connection for
up to ``retry_seconds`` (see ``retry.py``); a checkpoint write whose first attempt did commit is
recognised by its unique id, so no checkpoint is written twice or half.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from sqlalchemy import Connection, Engine, Insert, Table, create_engine
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from tether.errors import StoreError
from tether.stores.sql import SQLCheckpointer

_ADVISORY_KEY = 7_432_001  # "tether schema set-up"


def normalise_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` URLs select the psycopg 3 driver."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


class PostgresCheckpointer(SQLCheckpointer):
    """Checkpointer in a PostgreSQL database (psycopg 3), optionally in its own schema."""

    paramstyle = "%s"

    def __init__(self, dsn_or_engine: str | Engine, *, schema: str | None = None,
                 pool_size: int = 5, max_overflow: int = 10, connect_timeout: int = 10,
                 retry_seconds: float = 15.0) -> None:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise StoreError("PostgreSQL needs psycopg 3: pip install 'tether[postgres]'") \
                from exc
        self._psycopg = psycopg
        self.schema = schema
        self.retry_seconds = retry_seconds
        if isinstance(dsn_or_engine, str):
            engine = create_engine(
                normalise_url(dsn_or_engine), pool_size=pool_size, max_overflow=max_overflow,
                pool_pre_ping=True, connect_args={"connect_timeout": connect_timeout})
        else:
            engine = dsn_or_engine
        if schema is not None:
            engine = engine.execution_options(schema_translate_map={None: schema})
        self._conninfo = make_url(str(engine.url.render_as_string(hide_password=False))) \
            .set(drivername="postgresql").render_as_string(hide_password=False)
        self._connect_timeout = connect_timeout
        self._hot_connection: Any = None
        self._hot_lock = threading.Lock()
        super().__init__(engine)

    def __repr__(self) -> str:
        schema = f", schema={self.schema!r}" if self.schema else ""
        return f"PostgresCheckpointer({self.engine.url.render_as_string()!r}{schema})"

    def _hot(self) -> Any:
        if self._hot_connection is None or self._hot_connection.closed:
            connection = self._psycopg.connect(self._conninfo, autocommit=True,
                                               connect_timeout=self._connect_timeout)
            if self.schema:
                connection.execute(f'SET search_path TO "{self.schema}"')
            self._hot_connection = connection
        return self._hot_connection

    def _reset_hot(self) -> None:
        connection, self._hot_connection = self._hot_connection, None
        if connection is not None:
            with contextlib.suppress(Exception):  # already broken; nothing more to release
                connection.close()

    def _put(self, connection: Any, sql: str, params: Any) -> bool:
        return bool(connection.execute(sql, params, prepare=True).rowcount == 1)

    def _qualified(self, table: str) -> str:
        quote = self.engine.dialect.identifier_preparer.quote
        return f"{quote(self.schema)}.{quote(table)}" if self.schema else str(quote(table))

    def _transaction(self, connection: Any) -> contextlib.AbstractContextManager[Any]:
        """psycopg's transaction block: BEGIN, then COMMIT (or ROLLBACK on an exception)."""
        return connection.transaction()  # type: ignore[no-any-return]

    def _begin_write(self, connection: Connection) -> None:
        """PostgreSQL begins a transaction with the first statement."""

    def _insert_or_ignore(self, table: Table) -> Insert:
        return pg_insert(table).on_conflict_do_nothing()

    def _lock_schema(self, connection: Connection) -> None:
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_ADVISORY_KEY})")
        if self.schema:
            connection.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')

    def _is_duplicate(self, exc: BaseException) -> bool:
        original = getattr(exc, "orig", exc)
        return isinstance(original, self._psycopg.errors.UniqueViolation)

    def _is_disconnect(self, exc: BaseException) -> bool:
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            return True
        original = getattr(exc, "orig", exc)
        return isinstance(original, self._psycopg.OperationalError)

    def close(self) -> None:
        with self._lock:
            self._reset_hot()
        super().close()
