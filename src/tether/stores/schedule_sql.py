"""The schedule methods of the SQL stores (a mixin of :class:`~tether.stores.sql.SQLCheckpointer`).

Not on the hot path: each method opens a SQLAlchemy connection. ``advance_schedule`` is one
``UPDATE ... WHERE last_tick = :expected``, a compare-and-set the database serialises, so of
processes handling one tick at once exactly one moves it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tether.stores.lazy import LazyModule
from tether.stores.schedule_records import ScheduleRecord

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy import Connection, Engine, Insert, Table

    from tether.stores import schema
else:  # imported when a statement is first built (SQLite: rarely, see lazy.py)
    sa = LazyModule("sqlalchemy")
    schema = LazyModule("tether.stores.schema")


class SQLSchedules:
    """Schedules in the ``schedules`` table; their plans in ``plans``."""

    _lock: threading.RLock

    @property
    def engine(self) -> Engine:
        raise NotImplementedError

    def _errors(self, what: str) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError

    def _engine_write(self, what: str) -> contextlib.AbstractContextManager[Connection]:
        raise NotImplementedError

    def _insert_or_ignore(self, table: Table) -> Insert:
        raise NotImplementedError

    @contextlib.contextmanager
    def _reading(self, what: str) -> Iterator[Connection]:
        # under the store's lock: on SQLite every connection is the one shared connection,
        # and releasing it rolls back, which would end another thread's transaction
        with self._errors(what), self._lock, self.engine.connect() as connection:
            yield connection

    def put_schedule(self, schedule: ScheduleRecord, plan_json: str) -> None:
        values = _values(schedule)
        changed = {k: v for k, v in values.items()
                   if k not in ("name", "created_at", "last_tick")}
        with self._engine_write(f"registering schedule {schedule.name}") as connection:
            connection.execute(self._insert_or_ignore(schema.plans).values(
                fingerprint=schedule.plan_fingerprint, plan=plan_json, created_at=time.time()))
            schedules = schema.schedules
            connection.execute(self._insert_or_ignore(schedules).values(**values))
            connection.execute(sa.update(schedules).where(
                schedules.c.name == schedule.name).values(**changed))

    def get_schedule(self, name: str) -> ScheduleRecord | None:
        with self._reading(f"reading schedule {name}") as connection:
            row = connection.execute(sa.select(schema.schedules).where(
                schema.schedules.c.name == name)).first()
        return _record(row._mapping) if row is not None else None

    def list_schedules(self) -> list[ScheduleRecord]:
        with self._reading("listing schedules") as connection:
            rows = connection.execute(sa.select(schema.schedules).order_by(
                schema.schedules.c.name)).all()
        return [_record(row._mapping) for row in rows]

    def remove_schedule(self, name: str) -> bool:
        with self._engine_write(f"removing schedule {name}") as connection:
            result = connection.execute(sa.delete(schema.schedules).where(
                schema.schedules.c.name == name))
        return bool(result.rowcount)

    def advance_schedule(self, name: str, expected_last_tick: float | None,
                         new_last_tick: float, next_tick: float | None = None) -> bool:
        schedules = schema.schedules
        expected = (schedules.c.last_tick.is_(None) if expected_last_tick is None
                    else schedules.c.last_tick == expected_last_tick)
        with self._engine_write(f"advancing schedule {name}") as connection:
            result = connection.execute(
                sa.update(schedules).where(sa.and_(schedules.c.name == name, expected))
                .values(last_tick=new_last_tick, next_tick=next_tick, updated_at=time.time()))
        return bool(result.rowcount)


def _values(schedule: ScheduleRecord) -> dict[str, Any]:
    return {"name": schedule.name, "plan_fingerprint": schedule.plan_fingerprint,
            "cron": schedule.cron, "timezone": schedule.timezone,
            "inputs": json.dumps(schedule.inputs, sort_keys=True), "catchup": schedule.catchup,
            "queue": schedule.queue, "created_at": schedule.created_at,
            "updated_at": schedule.updated_at, "last_tick": schedule.last_tick,
            "next_tick": schedule.next_tick}


def _record(row: Any) -> ScheduleRecord:
    return ScheduleRecord(
        name=row["name"], plan_fingerprint=row["plan_fingerprint"], cron=row["cron"],
        timezone=row["timezone"], catchup=row["catchup"], inputs=json.loads(row["inputs"]),
        queue=row["queue"], created_at=row["created_at"], updated_at=row["updated_at"],
        last_tick=row["last_tick"], next_tick=row["next_tick"])


__all__ = ["SQLSchedules"]
