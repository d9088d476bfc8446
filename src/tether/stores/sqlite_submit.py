"""``tether submit`` on SQLite without SQLAlchemy: the plan and the queued run, inserted with
the standard library's ``sqlite3`` (issue 25, fast start).

Used only when it writes exactly what the full store would (``SQLiteCheckpointer.create_run``
through ``dedup.create_once``): the URL is a plain ``sqlite:///PATH`` naming an existing file
whose schema is this release's (the one SELECT the full store makes first), and the run has
no concurrency key. Anything else, and any SQLite error before the insert is committed,
returns None and the caller uses the full store, which creates, migrates or reports; but a
write lock held past the busy timeout is reported at once (the full store would wait as long
again for the same lock and say the same). A
failed COMMIT is reported (a :class:`~tether.errors.StoreError` worded as the store's), never
retried through the full store: the run may have been written.

The statements are ``sql_text.py``'s (the text SQLAlchemy compiles for the SQLite store) and
the row is ``sql_text.run_values``; the transaction is the store's (``BEGIN IMMEDIATE``, the
plan then the run, rolled back when the execution id is taken). A dedup key already taken by
a run of the same workflow returns that run; of another workflow it raises
:class:`~tether.errors.DedupKeyTaken`, as ``create_once`` does.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from tether.errors import DedupKeyTaken, ExecutionExists, RunNotFound, StoreError
from tether.stores.run_record import RunRecord
from tether.stores.sql_text import (
    PLAN_COLUMNS,
    RUN_COLUMNS,
    SCHEMA_VERSION,
    SQLITE_INSERT_PLAN,
    SQLITE_INSERT_RUN,
    SQLITE_RUN_KIND,
    SQLITE_SCHEMA_VERSION,
    run_values,
)
from tether.stores.sqlite_file import connect, is_locked, locked_error_of

__all__ = ["Inserted", "insert_queued", "open_current", "plain_sqlite_path"]

_PLAIN = re.compile(r"[\w./+-]+", re.ASCII)
_TIMEOUT = 30.0  # SQLiteCheckpointer's default


@dataclass(frozen=True)
class Inserted:
    """What the insert did: the run's id, whether this call created it, its status."""

    execution_id: str
    created: bool
    status: str


def plain_sqlite_path(url: str) -> str | None:
    """The file a plain ``sqlite:///PATH`` URL names (no query, no escapes, no
    ``:memory:``), as ``parse_store_url`` reads it; None for any other URL."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return None
    path = url[len(prefix):]
    return path if _PLAIN.fullmatch(path) else None


def open_current(url: str) -> sqlite3.Connection | None:
    """A connection to the existing SQLite file ``url`` names when its schema is current
    (opened as the store opens it); None when the full store must be used."""
    path = plain_sqlite_path(url)
    if path is None or not Path(path).is_file():
        return None
    try:
        connection = connect(path, _TIMEOUT, "normal", create=False)
    except sqlite3.Error:
        return None
    try:
        row = connection.execute(SQLITE_SCHEMA_VERSION).fetchone()
    except sqlite3.Error:
        row = None
    if row is None or row[0] != SCHEMA_VERSION:
        connection.close()
        return None
    return connection


def _commit(connection: sqlite3.Connection, execution_id: str) -> None:
    """COMMIT; a failure is the store's error, not a reason to try the full store: whether
    the run was written is then unknown, and trying again could insert a second run."""
    try:
        connection.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(f"creating run {execution_id}: {exc}") from exc


def insert_queued(connection: sqlite3.Connection, run: RunRecord, plan_json: str, *,
                  deduplicate: bool) -> Inserted | None:
    """Insert the plan (unless stored) and the queued ``run`` (no concurrency key) in one
    transaction; None when nothing was committed because SQLite failed (the caller then
    uses the full store)."""
    assert run.concurrency_key is None
    values = run_values(run)
    plan_row = dict(zip(PLAN_COLUMNS, (run.plan_fingerprint, plan_json, time.time(), None),
                        strict=True))
    try:
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.execute(SQLITE_INSERT_PLAN, tuple(plan_row[c] for c in PLAN_COLUMNS))
            created = connection.execute(
                SQLITE_INSERT_RUN, tuple(values[c] for c in RUN_COLUMNS)).fetchone()
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        if created is None:
            connection.execute("ROLLBACK")
        else:
            _commit(connection, run.execution_id)
    except sqlite3.Error as exc:
        if is_locked(exc):  # the full store would wait as long again, then say the same
            raise locked_error_of(f"creating run {run.execution_id}", connection) from exc
        return None
    if created is not None:
        return Inserted(run.execution_id, True, str(run.status))
    if not deduplicate:
        raise ExecutionExists(run.execution_id)
    try:
        first = connection.execute(SQLITE_RUN_KIND, (run.execution_id,)).fetchone()
    except sqlite3.Error:
        return None
    if first is None:  # deleted between the insert and the read: gc freed the key
        raise RunNotFound(run.execution_id)
    if first[0] != run.workflow:
        raise DedupKeyTaken(run.execution_id, first[0])
    return Inserted(run.execution_id, False, str(first[1]))
