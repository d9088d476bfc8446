"""The lease methods of the SQL stores (a mixin of :class:`~tether.stores.sql.SQLCheckpointer`).

A run is held by the attempt whose owner token its row names until ``lease_until``. Taking a
lease is one ``UPDATE ... WHERE <lease is free>``, a compare-and-set the database serialises;
a fenced write locks the run row first and refuses to go on unless its owner still holds it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tether.errors import LeaseLost
from tether.stores.events import RunEvent
from tether.stores.lazy import LazyModule
from tether.stores.owners import describe_owner
from tether.stores.records import RunRecord, RunStatus
from tether.stores.retry import transient

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy import BindParameter, ClauseElement, ColumnElement

    from tether.stores import schema
else:  # imported when a statement is first built (SQLite: rarely, see lazy.py)
    sa = LazyModule("sqlalchemy")
    schema = LazyModule("tether.stores.schema")


def eid() -> BindParameter[str]:
    """The ``:eid`` parameter (a run's execution id) of most statements."""
    return sa.bindparam("eid")


def acquire_statement() -> ClauseElement:
    """The lease compare-and-set: free, expired, ours, or held by a dead owner. Its SET: a
    completed run keeps its status."""
    runs = schema.runs
    free = sa.or_(runs.c.owner.is_(None), runs.c.owner == sa.bindparam("owner"),
                  runs.c.lease_until < sa.bindparam("now"),
                  runs.c.owner == sa.bindparam("steal"))
    take: dict[str, Any] = {
        "owner": sa.bindparam("owner"), "lease_until": sa.bindparam("until"),
        "status": sa.case((runs.c.status == RunStatus.COMPLETED.value, runs.c.status),
                          else_=RunStatus.RUNNING.value),
        "attempt": sa.case((runs.c.owner == sa.bindparam("owner"), runs.c.attempt),
                           else_=runs.c.attempt + 1),
        "updated_at": sa.bindparam("now"),
    }
    return sa.update(runs).where(sa.and_(runs.c.execution_id == eid(),
                                         free)).values(**take)


def _held() -> ColumnElement[bool]:
    """The run ``:eid``, while ``:holder`` holds it."""
    runs = schema.runs
    return sa.and_(runs.c.execution_id == eid(), runs.c.owner == sa.bindparam("holder"))


def _lost_reason(holder: str | None) -> str:
    return f"the run is now held by {describe_owner(holder)}" if holder else \
        "the run is no longer held by this attempt"



class SQLLeases:
    """Leases on rows of the ``runs`` table: take, renew, release, and fence a write."""

    # the plumbing and runs of SQLCheckpointer (sql.py), and SQLEvents._insert_event
    retry_seconds: float
    _insert_event: Callable[[Any, RunEvent], None]

    def _cursor(self, what: str, *, write: bool = False,
                ) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _execute(self, cursor: Any, name: str, build: Callable[[], ClauseElement], /,
                 **values: Any) -> Any:
        raise NotImplementedError

    def get_run(self, execution_id: str) -> RunRecord | None:
        raise NotImplementedError

    @transient()
    def acquire(self, execution_id: str, owner: str, until: float, now: float,
                steal_from: str | None = None) -> bool:
        """One ``UPDATE ... WHERE <lease is free>``: a compare-and-set the database serialises.
        A completed run keeps its status."""
        with self._cursor(f"taking run {execution_id}", write=True) as cursor:
            return self._acquire(cursor, "acquire", acquire_statement, execution_id, owner,
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
        row = self._execute(cursor, "fence", lambda: sa.select(schema.runs.c.owner).where(
            schema.runs.c.execution_id == eid()).with_for_update(), eid=execution_id).fetchone()
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
            self._execute(cursor, "renew", lambda: sa.update(schema.runs).where(_held()).values(
                lease_until=sa.bindparam("until")), eid=execution_id, holder=owner, until=until)
            return bool(cursor.rowcount == 1)

    @transient()
    def release(self, execution_id: str, owner: str, event: RunEvent | None = None) -> None:
        """The release and ``event`` (if given and the release took effect) in one
        transaction; a retry after a lost commit finds the owner gone and adds nothing."""
        with self._cursor(f"releasing run {execution_id}", write=True) as cursor:
            self._release(cursor, execution_id, owner)
            if event is not None and cursor.rowcount == 1:
                self._insert_event(cursor, event)

    def _release(self, cursor: Any, execution_id: str, owner: str | None) -> None:
        self._execute(cursor, "release", lambda: sa.update(schema.runs).where(_held()).values(
            owner=None, lease_until=None), eid=execution_id, holder=owner)


__all__ = ["SQLLeases", "acquire_statement", "eid"]
