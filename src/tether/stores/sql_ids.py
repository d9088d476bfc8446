"""Ids given by a prefix on the SQL stores (a mixin of :class:`~tether.stores.sql.SQLCheckpointer`).

Each lookup is a range on a primary key (``id >= :low AND id < :high``, see ``idprefix.py``),
so it reads only the index entries that can match, however many runs the store holds; a
checkpoint's suffix is compared within its run (``execution_id = :eid`` first in the key).
Candidates are re-checked in Python, which keeps the answer exact should a database use a
collation that orders ids otherwise than code point by code point.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, func, or_, select
from sqlalchemy.sql import ClauseElement

from tether.stores.idprefix import IdMatches, select_matches, upper_bound
from tether.stores.retry import transient
from tether.stores.schema import checkpoints, runs
from tether.stores.sql_leases import SQLLeases


def _in_range(column: ColumnElement[str], bounded: bool) -> ColumnElement[bool]:
    low = column >= bindparam("low")
    return and_(low, column < bindparam("high")) if bounded else low


def _run_where(bounded: bool) -> ColumnElement[bool]:
    return _in_range(runs.c.execution_id, bounded)


def _checkpoint_where(bounded: bool) -> ColumnElement[bool]:
    cid = checkpoints.c.checkpoint_id
    tail = func.substr(cid, func.length(cid) - bindparam("n") + 1) == bindparam("low")
    return and_(checkpoints.c.execution_id == bindparam("eid"),
                or_(_in_range(cid, bounded), tail))


class SQLIds(SQLLeases):
    """The prefix lookups of :class:`~tether.stores.base.Checkpointer`."""

    @transient()
    def execution_ids_with_prefix(self, prefix: str, limit: int) -> IdMatches:
        high = upper_bound(prefix)
        bounded = high is not None

        def listed() -> ClauseElement:
            return select(runs.c.execution_id).where(_run_where(bounded)).order_by(
                runs.c.execution_id).limit(bindparam("limit"))

        def counted() -> ClauseElement:
            return select(func.count()).select_from(runs).where(_run_where(bounded))

        return self._matches(f"runs_prefix_{bounded}", listed, counted, prefix, limit,
                             suffix=False, low=prefix, high=high)

    @transient()
    def checkpoint_ids_matching(self, execution_id: str, text: str,
                                limit: int) -> IdMatches:
        high = upper_bound(text)
        bounded = high is not None

        def listed() -> ClauseElement:
            return select(checkpoints.c.checkpoint_id).where(_checkpoint_where(bounded)) \
                .order_by(checkpoints.c.checkpoint_id).limit(bindparam("limit"))

        def counted() -> ClauseElement:
            return select(func.count()).select_from(checkpoints).where(
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
