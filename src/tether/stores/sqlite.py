"""SQLite: the default store. One file, WAL, safe across the processes of one machine.

Durability (``durability=``): ``"normal"`` (default) is WAL with ``synchronous=NORMAL``: a
committed checkpoint survives a process crash; the last commits before a power loss or OS crash
may be lost (the database stays consistent). ``"full"`` is ``synchronous=FULL``: every commit
is fsynced and survives power loss, at the cost of one fsync per checkpoint.

Concurrency: one connection per process, serialised by a lock; write transactions start with
``BEGIN IMMEDIATE``, which takes SQLite's write lock up front, so a read-then-write never
deadlocks and the claim of a pending interrupt is atomic across processes. ``busy_timeout``
makes writers wait for the lock instead of failing with "database is locked" (30 s, or the
URL's ``?busy_timeout=``); past it the error names the file and the likely holder. Nothing
can take the lock from a process stopped inside a transaction (SIGSTOP, a debugger): until
it continues or exits, writers fail after the busy timeout and readers go on (WAL). That is
SQLite's single-machine limit; fleets use PostgreSQL (``pg_sessions.py``).

Files: a database file tether creates is made ``0600`` (SQLite gives its ``-wal`` and ``-shm``
files the same mode) and each directory it creates for it ``0700``: runs hold inputs and
outputs. Existing files and directories keep their modes. With ``create=False`` (the read-only
commands) nothing is created: a missing file is an error naming it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tether.errors import StoreError, StoreUnavailable
from tether.stores.records import CheckpointRow, Decision
from tether.stores.sql import SQLCheckpointer
from tether.stores.sqlite_file import Durability, is_locked, locked_error
from tether.stores.sqlite_file import connect as _connect
from tether.stores.sqlite_file import identity as _identity
from tether.stores.sqlite_file import make_private as _make_private
from tether.stores.sqlite_statements import STATEMENTS
from tether.stores.statements import Compiled

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine, Insert, Table


class SQLiteCheckpointer(SQLCheckpointer):
    """Checkpointer in a SQLite file (created ``0600``, with its directory ``0700``, if
    missing; with ``create=False`` a missing file is a :class:`~tether.errors.StoreError`)."""

    paramstyle = "?"
    ready_statements: Mapping[str, Compiled] = STATEMENTS
    """The statements compiled ahead of time (``sqlite_statements.py``, generated): opening
    a current database and the commands' statements import no SQLAlchemy (issue 25). A
    subclass that builds a statement otherwise (another ``_insert_or_ignore``) sets it to
    ``{}``: a ready statement is used as it is, its builder never called."""
    _can_drop_columns = sqlite3.sqlite_version_info >= (3, 35, 0)

    def __init__(self, path: str | os.PathLike[str] = ".tether/tether.db", *,
                 durability: Durability = "normal", timeout: float = 30.0,
                 create: bool = True) -> None:
        self.path = os.fspath(path)
        self.timeout = timeout
        if durability not in ("normal", "full"):
            raise ValueError("durability must be 'normal' or 'full'")
        self.durability = durability
        try:
            if self.path != ":memory:" and create:
                _make_private(self.path)
            self._connection = _connect(self.path, timeout, durability, create)
        except OSError as exc:
            raise StoreUnavailable(f"cannot create the SQLite database {self.path}: "
                                   f"{exc.strerror or exc}") from exc
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open the SQLite database {self.path}: {exc}") \
                from exc
        self._identity = _identity(self.path)
        self._put_cursor = self._connection.cursor()  # kept: one per checkpoint costs more
        super().__init__(None, self.ready_statements)

    def _make_engine(self) -> Engine:
        """An engine over the store's one connection, made at its first use (schema set-up,
        migrations, prune, schedules, and the statements not compiled ahead of time)."""
        from sqlalchemy import create_engine
        from sqlalchemy.pool import StaticPool

        return create_engine("sqlite://", creator=lambda: self._connection,
                             poolclass=StaticPool)

    def _check_file(self, doing: str) -> None:
        """The database file must still be the one opened: SQLite writes on to a file that
        was deleted (or replaced) under it, so a run would "complete" with every checkpoint
        lost. Checked at each run-level write and lease renewal (one ``stat``)."""
        if self._identity is not None and _identity(self.path) != self._identity:
            raise StoreError(f"the SQLite database {self.path} was deleted or replaced while "
                             f"{doing}: nothing more is written (the run is not recorded as "
                             "ended)")

    def renew(self, execution_id: str, owner: str, until: float) -> bool:
        self._check_file(f"run {execution_id} was running")
        return super().renew(execution_id, owner, until)

    def pause_run(self, execution_id: str, owner: str | None,
                  waiting: Sequence[str]) -> list[Decision]:
        self._check_file(f"pausing run {execution_id}")
        return super().pause_run(execution_id, owner, waiting)

    def finish_run(self, row: CheckpointRow, status: str, error: Any,
                   owner: str | None, *, last_node: CheckpointRow | None = None) -> None:
        self._check_file(f"ending run {row.execution_id}")
        super().finish_run(row, status, error, owner, last_node=last_node)

    def __repr__(self) -> str:
        return f"SQLiteCheckpointer({self.path!r}, durability={self.durability!r})"

    def _hot(self) -> Any:
        return self._connection

    def _put(self, connection: Any, sql: str, params: Any) -> bool:
        """The checkpoint INSERT on a cursor kept for it (``Connection.execute`` makes a
        cursor per call). ``connection`` is always this store's one connection, the
        cursor's; callers hold ``_lock``."""
        return bool(self._put_cursor.execute(sql, params).rowcount == 1)

    def _begin_write(self, connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    @contextlib.contextmanager
    def _transaction(self, connection: Any) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` takes SQLite's write lock before the first read, so a
        read-then-write transaction never deadlocks and other processes wait (busy_timeout)."""
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def _insert_or_ignore(self, table: Table) -> Insert:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table).on_conflict_do_nothing()

    def _lock_schema(self, connection: Connection) -> None:
        """BEGIN IMMEDIATE already holds the database's write lock."""

    def _is_duplicate(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError)

    def _refused(self, what: str, exc: Exception) -> StoreError:
        """A write lock held past the busy timeout as an error naming the file and the
        likely holder (SQLite says only "database is locked")."""
        if is_locked(getattr(exc, "orig", exc)):
            return locked_error(what, self.path, self.timeout)
        return super()._refused(what, exc)

    def _is_disconnect(self, exc: BaseException) -> bool:
        original = getattr(exc, "orig", exc)
        return isinstance(original, sqlite3.OperationalError) and (
            "unable to open" in str(original) or "disk I/O" in str(original))

    def close(self) -> None:
        super().close()
        self._connection.close()
