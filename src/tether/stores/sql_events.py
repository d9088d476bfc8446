"""Run events on the SQL stores (a mixin of :class:`~tether.stores.sql.SQLCheckpointer`).

One INSERT per event, never on a node's path (see ``stores/events.py``); reading pages by the
primary key ``(execution_id, event_id)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.stores.events import RunEvent, RunEventKind
from tether.stores.lazy import LazyModule
from tether.stores.retry import transient
from tether.stores.statements import from_json, to_json

if TYPE_CHECKING:
    import sqlalchemy as sa

    from tether.stores import schema
else:  # imported when a statement is first built (SQLite: rarely, see lazy.py)
    sa = LazyModule("sqlalchemy")
    schema = LazyModule("tether.stores.schema")


def event_values(event: RunEvent) -> dict[str, Any]:
    """The column values of ``event``."""
    return {"execution_id": event.execution_id, "event_id": event.event_id,
            "kind": str(event.kind), "created_at": event.created_at, "owner": event.owner,
            "actor": event.actor, "channel": event.channel,
            "data": to_json(event.data) or "{}"}


def _to_event(row: Any) -> RunEvent:
    execution_id, event_id, kind, created_at, owner, actor, channel, data = row
    return RunEvent(execution_id, RunEventKind(kind), created_at, owner, actor, channel,
                    from_json(data) or {}, event_id)


class SQLEvents:
    """``add_event`` and ``events`` of the SQL stores."""

    # the plumbing of SQLCheckpointer (sql.py)
    retry_seconds: float
    _cursor: Any
    _execute: Any

    def _insert_event(self, cursor: Any, event: RunEvent) -> None:
        """Insert ``event`` on ``cursor`` (inside the caller's transaction)."""
        self._execute(cursor, "insert_event", lambda: sa.insert(schema.run_events),
                      **event_values(event))

    @transient()
    def add_event(self, event: RunEvent) -> None:
        """Append one event to its run's history (one INSERT, its own transaction)."""
        with self._cursor(f"recording a {event.kind} event of run {event.execution_id}",
                          write=True) as cursor:
            self._insert_event(cursor, event)

    @transient()
    def events(self, execution_id: str, after: str | None = None,
               limit: int = 10_000) -> list[RunEvent]:
        """The run's events with ``event_id > after``, oldest first, at most ``limit``."""
        with self._cursor(f"reading the events of run {execution_id}") as cursor:
            rows = self._execute(
                cursor, "events", lambda: sa.select(*schema.run_events.columns).where(sa.and_(
                    schema.run_events.c.execution_id == sa.bindparam("eid"),
                    schema.run_events.c.event_id > sa.bindparam("after"))).order_by(
                    schema.run_events.c.event_id).limit(sa.bindparam("limit")),
                eid=execution_id, after=after or "", limit=limit).fetchall()
        return [_to_event(row) for row in rows]
