"""PostgreSQL's fenced checkpoint statements: a row written only while its run names the
writer's owner token, checked in the same statement (``postgres.py`` runs them).

Each locks the run row (``FOR SHARE`` to write rows, ``FOR UPDATE`` or an ``UPDATE`` to end
the run) in the statement that writes, so a takeover's ``UPDATE`` of the owner is ordered
before or after the whole write: it waits for this commit, or this statement reads the
newer row, whose owner no longer matches, and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import and_, bindparam, exists, func, insert, literal_column, select, update
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement

from tether.stores.schema import checkpoints, runs

__all__ = ["ROW_FIELDS", "fenced_batch_sql", "fenced_insert_seen", "finish_fenced"]

ROW_FIELDS = [c.name for c in checkpoints.columns]


def fenced_insert_seen() -> ClauseElement:
    """``WITH held AS (the run row if it names the owner, FOR SHARE), ins AS (INSERT the
    checkpoint WHERE EXISTS held RETURNING 1) SELECT count(ins), held.cancel_requested_at``."""
    held = select(runs.c.cancel_requested_at).where(and_(
        runs.c.execution_id == bindparam("eid"), runs.c.owner == bindparam("owner"),
    )).with_for_update(read=True).cte("held")
    values = select(*[bindparam(name, type_=checkpoints.c[name].type) for name in ROW_FIELDS])
    ins = insert(checkpoints).from_select(
        ROW_FIELDS, values.where(exists(select(literal_column("1")).select_from(held))),
    ).returning(literal_column("1")).cte("ins")
    return select(select(func.count()).select_from(ins).scalar_subquery(),
                  select(held.c.cancel_requested_at).scalar_subquery())


def fenced_batch_sql(count: int, qualified: Callable[[str], str], dialect: Dialect,
                     ends: bool = False) -> str:
    """``count`` fenced checkpoint INSERTs in one statement (a write group's batch):
    ``WITH v AS (VALUES (row..., owner), ...), held AS (the runs rows of v, FOR SHARE),
    ins AS (INSERT the rows of v whose run's owner is the row's owner RETURNING
    checkpoint_id) SELECT checkpoint_id, cancel_requested_at, written`` for each row of v.
    Each run row is locked as in :func:`fenced_insert_seen` (a takeover's UPDATE waits for
    this commit, or the locked row is its newer version, whose owner no longer matches);
    a row whose run another owner holds is not written.

    With ``ends``, each row of v also has a run end (status, error, time; NULL for a plain
    checkpoint), and ``upd AS (UPDATE runs ... FROM v JOIN held)`` ends the runs of those
    rows under the same fence, as :func:`finish_fenced` does: such a row is written only
    with its run's update (the run row locked ``FOR SHARE`` first, then updated, in one
    statement, so a takeover is ordered before or after both)."""
    types = [checkpoints.c[name].type.compile(dialect=dialect) for name in ROW_FIELDS]
    extra = ("VARCHAR", "VARCHAR", "TEXT", "FLOAT") if ends else ("VARCHAR",)
    values = "(" + ", ".join(f"%s::{t}" for t in (*types, *extra)) + ")"
    names = ", ".join(ROW_FIELDS)
    runs_table = qualified("runs")
    update = (f", upd AS (UPDATE {runs_table} AS u SET status = v.end_status, "
              f"updated_at = v.end_at, error = v.end_error, owner = NULL, lease_until = NULL "
              f"FROM v JOIN held ON held.execution_id = v.execution_id "
              f"AND held.owner = v.owner WHERE u.execution_id = v.execution_id "
              f"AND v.end_status IS NOT NULL RETURNING u.execution_id)") if ends else ""
    written = "EXISTS (SELECT 1 FROM ins WHERE ins.checkpoint_id = v.checkpoint_id)"
    if ends:
        written += (" AND (v.end_status IS NULL OR EXISTS "
                    "(SELECT 1 FROM upd WHERE upd.execution_id = v.execution_id))")
    return (f"WITH v ({names}, owner{', end_status, end_error, end_at' if ends else ''}) "
            f"AS (VALUES {', '.join([values] * count)}), "
            f"held AS (SELECT r.execution_id, r.owner, r.cancel_requested_at "
            f"FROM {runs_table} AS r "
            f"WHERE r.execution_id IN (SELECT v.execution_id FROM v) FOR SHARE OF r), "
            f"ins AS (INSERT INTO {qualified('checkpoints')} ({names}) "
            f"SELECT {', '.join('v.' + n for n in ROW_FIELDS)} FROM v JOIN held "
            f"ON held.execution_id = v.execution_id AND held.owner = v.owner "
            f"RETURNING checkpoint_id){update} "
            f"SELECT v.checkpoint_id, held.cancel_requested_at, {written} "
            f"FROM v LEFT JOIN held ON held.execution_id = v.execution_id "
            f"AND held.owner = v.owner")


def finish_fenced() -> ClauseElement:
    """``finish_run`` as one statement: ``WITH held AS (the run row if it names the owner,
    FOR UPDATE), ins AS (INSERT the run_end row WHERE EXISTS held RETURNING 1), upd AS
    (UPDATE the run row's status, error, owner and lease FROM held) SELECT count(ins)``.
    The row lock orders it before or after any takeover, as the transaction's fence does."""
    held = select(runs.c.execution_id).where(and_(
        runs.c.execution_id == bindparam("eid"), runs.c.owner == bindparam("owner"),
    )).with_for_update().cte("held")
    values = select(*[bindparam(name, type_=checkpoints.c[name].type) for name in ROW_FIELDS])
    ins = insert(checkpoints).from_select(
        ROW_FIELDS, values.where(exists(select(literal_column("1")).select_from(held))),
    ).returning(literal_column("1")).cte("ins")
    upd = update(runs).where(runs.c.execution_id == held.c.execution_id).values(
        status=bindparam("status"), updated_at=bindparam("now"), error=bindparam("error"),
        owner=None, lease_until=None).returning(literal_column("1")).cte("upd")
    return select(select(func.count()).select_from(ins).scalar_subquery(),
                  select(func.count()).select_from(upd).scalar_subquery())
