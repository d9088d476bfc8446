"""Creating runs on PostgreSQL: one statement, one round trip, on a small pool of connections.

Every start (``POST /api/workflows/{name}/runs``, ``tether submit``, ``Runner.submit`` and
``Runner.run``) inserts the run (``ON CONFLICT DO NOTHING RETURNING``: the primary key decides
a dedup key's one winner), stores its plan (``ON CONFLICT DO NOTHING``: plans are kept by
fingerprint) and, for a queued run, wakes the idle workers (``NOTIFY``). On the store's one hot
connection, under its lock, that was five round trips (the two INSERTs, the NOTIFY, the COMMIT
and the BEGIN sent with the first) and every start of the process waited for the one before
it. Here it is :func:`create_statement`, one statement in autocommit whose data-modifying
``WITH`` clauses insert the run and, only with a run inserted, the plan, and whose
``pg_notify`` is called once per run inserted, on a connection of a :class:`ConnectionPool`:
concurrent starts run side by side and PostgreSQL flushes their commits together.

Nothing changes for the records or for idempotency: the same rows are written in one
transaction (none when the id was taken), and a second insert of an execution id (a dedup
key) still waits for the first's transaction and then inserts nothing (``ExecutionExists``:
the caller returns the first run).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import Float, String, bindparam, func, literal_column, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql import ClauseElement

from tether.stores.schema import plans, runs


def create_statement(notify: bool) -> ClauseElement:
    """``WITH r AS (INSERT the run ON CONFLICT DO NOTHING RETURNING execution_id), p AS
    (INSERT the plan for each row of r ON CONFLICT DO NOTHING) SELECT r.execution_id[,
    pg_notify(:channel, '')] FROM r``: a row when the run was inserted, and nothing at all
    written when its id was taken (as the transaction it replaces, which rolled back). Binds:
    the run's columns by name, ``plan``, ``plan_created_at`` and (``notify``) ``channel``."""
    run = pg_insert(runs).values(
        {column.name: bindparam(column.name, type_=column.type) for column in runs.columns},
    ).on_conflict_do_nothing().returning(runs.c.execution_id).cte("r")
    plan = pg_insert(plans).from_select(["fingerprint", "plan", "created_at"], select(
        bindparam("plan_fingerprint", type_=String), bindparam("plan", type_=String),
        bindparam("plan_created_at", type_=Float)).select_from(run),
    ).on_conflict_do_nothing().cte("p")
    columns: list[Any] = [run.c.execution_id]
    if notify:
        columns.append(func.pg_notify(bindparam("channel", type_=String), literal_column("''")))
    return select(*columns).select_from(run).add_cte(plan)


class ConnectionPool:
    """Up to ``size`` autocommit connections made by ``connect``, each used by one thread at
    a time (the last one returned is lent first); a caller beyond ``size`` waits for one. A
    connection is dropped when a use of it fails and it is broken or left in a transaction."""

    def __init__(self, connect: Callable[[], Any], size: int) -> None:
        self._connect = connect
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max(1, size))

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        with self._slots:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None or connection.closed:
                connection = self._connect()
            try:
                yield connection
            except BaseException:
                if connection.broken or connection.closed or \
                        connection.info.transaction_status.name != "IDLE":
                    _close(connection)
                    raise
                self._keep(connection)
                raise
            self._keep(connection)

    def _keep(self, connection: Any) -> None:
        with self._lock:
            self._idle.append(connection)

    def close(self) -> None:
        """Close the idle connections (one lent out at the time is kept when it comes back;
        a store may be used after ``close``, and the pool then opens connections again)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            _close(connection)


def _close(connection: Any) -> None:
    with contextlib.suppress(Exception):  # already broken: nothing more to release
        connection.close()


__all__ = ["ConnectionPool", "create_statement"]
