"""Ids given by a prefix on the SQL stores (a mixin of :class:`~tether.stores.sql.SQLCheckpointer`).

Each lookup is a range on a primary key (``id >= :low AND id < :high``, see ``idprefix.py``),
so it reads only the index entries that can match, however many runs the store holds; a
checkpoint's suffix is compared within its run (``execution_id = :eid`` first in the key).
Candidates are re-checked in Python, which keeps the answer exact should a database use a
collation that orders ids otherwise than code point by code point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.stores.idprefix import IdMatches, select_matches, upper_bound
from tether.stores.lazy import LazyModule
from tether.stores.retry import transient
from tether.stores.sql_leases import SQLLeases

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy import ClauseElement, ColumnElement

    from tether.stores import schema
else:  # imported when a statement is first built (SQLite: rarely, see lazy.py)
    sa = LazyModule("sqlalchemy")
    schema = LazyModule("tether.stores.schema")


def _in_range(column: ColumnElement[str], bounded: bool) -> ColumnElement[bool]:
    low = column >= sa.bindparam("low")
    return sa.and_(low, column < sa.bindparam("high")) if bounded else low


def _run_where(bounded: bool) -> ColumnElement[bool]:
    return _in_range(schema.runs.c.execution_id, bounded)


def _checkpoint_where(bounded: bool) -> ColumnElement[bool]:
    cid = schema.checkpoints.c.checkpoint_id
    tail = sa.func.substr(cid, sa.func.length(cid) - sa.bindparam("n") + 1) == sa.bindparam("low")
    return sa.and_(schema.checkpoints.c.execution_id == sa.bindparam("eid"),
                sa.or_(_in_range(cid, bounded), tail))


class SQLIds(SQLLeases):
    """The prefix lookups of :class:`~tether.stores.base.Checkpointer`."""

    @transient()
    def execution_ids_with_prefix(self, prefix: str, limit: int) -> IdMatches:
        high = upper_bound(prefix)
        bounded = high is not None

        def listed() -> ClauseElement:
            return sa.select(schema.runs.c.execution_id).where(_run_where(bounded)).order_by(
                schema.runs.c.execution_id).limit(sa.bindparam("limit"))

        def counted() -> ClauseElement:
            return sa.select(sa.func.count()).select_from(schema.runs).where(_run_where(bounded))

        return self._matches(f"runs_prefix_{bounded}", listed, counted, prefix, limit,
                             suffix=False, low=prefix, high=high)

    @transient()
    def checkpoint_ids_matching(self, execution_id: str, text: str,
                                limit: int) -> IdMatches:
        high = upper_bound(text)
        bounded = high is not None

        def listed() -> ClauseElement:
            return sa.select(schema.checkpoints.c.checkpoint_id).where(_checkpoint_where(bounded)) \
                .order_by(schema.checkpoints.c.checkpoint_id).limit(sa.bindparam("limit"))

        def counted() -> ClauseElement:
            return sa.select(sa.func.count()).select_from(schema.checkpoints).where(
                _checkpoint_where(bounded))

        return self._matches(f"checkpoints_prefix_{bounded}", listed, counted, text, limit,
                             suffix=True, low=text, high=high, eid=execution_id,
                             n=len(text))

    def _matches(self, name: str, listed: Any, counted: Any, text: str, limit: int, *,
                 suffix: bool, **values: Any) -> IdMatches:
        if values.get("high") is None:
            values.pop("high")
        with self._cursor(f"looking up ids starting with {text!r}") as cursor:
            ids = [r[0] for r in self._execute(cursor, name, listed, limit=limit + 1,
                                               **values).fetchall()]
            found = select_matches(ids, text, limit, suffix=suffix)
            if len(ids) <= limit:
                return found
            total = self._execute(cursor, name + "_count", counted, **values).fetchone()[0]
        return IdMatches(found.ids, int(total))
