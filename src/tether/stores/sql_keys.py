"""The SQL statements of concurrency keys (see ``keys.py`` for the rules they keep).

The claim needs no lock of its own: a queued keyed run is claimable only inside its key's
window (:func:`has_room`), read in the claim's one statement with ``FOR UPDATE SKIP
LOCKED``. The submissions of one key are serialised (:func:`lock_key`), so the runs of a
key are queued in the order of their creation times and every claimer sees the same line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, bindparam, case, exists, func, literal_column, or_, select
from sqlalchemy.sql import ColumnElement, Select

from tether.status import RunStatus
from tether.stores.keys import IN_PROGRESS, KeyHolder, lock_id
from tether.stores.schema import runs

if TYPE_CHECKING:
    from tether.stores.sql import SQLCheckpointer

_OTHER = runs.alias("keyed")


def _count(where: ColumnElement[bool]) -> Any:
    """How many runs of the same key match ``where`` (an index range of
    ``runs_concurrency``)."""
    return select(func.count()).select_from(_OTHER).where(and_(
        _OTHER.c.concurrency_key == runs.c.concurrency_key, where)).scalar_subquery()


def has_room() -> ColumnElement[bool]:
    """A queued run without a key, or inside its key's window: the runs of the key
    ``running`` or ``paused`` (``held``), plus its queued runs ahead of it (created earlier,
    not asked to cancel), are fewer than its limit (see ``keys.py``, *The claim*). When one
    place is left (a limit of 1, the usual case), "none ahead" is one index probe."""
    other = _OTHER.c
    held = _count(or_(other.status == RunStatus.RUNNING.value,
                      other.status == RunStatus.PAUSED.value))
    ahead_where = and_(other.status == RunStatus.QUEUED.value,
                       other.cancel_requested_at.is_(None),
                       or_(other.created_at < runs.c.created_at,
                           and_(other.created_at == runs.c.created_at,
                                other.execution_id < runs.c.execution_id)))
    ahead: Select[Any] = select(literal_column("1")).select_from(_OTHER).where(and_(
        other.concurrency_key == runs.c.concurrency_key, ahead_where))
    places = runs.c.concurrency_limit - held
    window = case((places == 1, ~exists(ahead)), else_=_count(ahead_where) < places)
    return or_(runs.c.concurrency_key.is_(None),
               and_(runs.c.concurrency_key.not_in(_full_keys()), places > 0, window))


def _full_keys() -> Any:
    """The keys whose running and paused runs fill their limit, read once per statement
    (uncorrelated: PostgreSQL hashes it), so the runs waiting behind them are passed over
    with a hash probe each rather than a count each."""
    full = runs.alias("full_key")
    return select(full.c.concurrency_key).where(and_(
        full.c.concurrency_key.is_not(None),
        or_(full.c.status == RunStatus.RUNNING.value,
            full.c.status == RunStatus.PAUSED.value))).group_by(
        full.c.concurrency_key).having(func.count() >= func.min(full.c.concurrency_limit))


def lock_key(store: SQLCheckpointer, cursor: Any, key: str) -> None:
    """Serialise the submissions of ``key`` until the transaction ends (PostgreSQL: a
    transaction-scoped advisory lock; SQLite: its write transaction already is alone)."""
    if store.engine.dialect.name == "postgresql":
        store.sql_execute(cursor, "key_lock", lambda: select(
            func.pg_advisory_xact_lock(bindparam("k"))), k=lock_id(key))


def holders(store: SQLCheckpointer, cursor: Any, key: str,
            ) -> tuple[list[KeyHolder], int, float | None]:
    """The runs of ``key`` in progress (not asked to cancel), oldest first; how many runs
    of the key occupy it (running or paused, or queued and not asked to cancel); the
    latest creation time among them."""
    rows = store.sql_execute(cursor, "key_holders", lambda: select(
        runs.c.execution_id, runs.c.status, runs.c.cancel_requested_at,
        runs.c.created_at).where(and_(
            runs.c.concurrency_key == bindparam("k"),
            or_(*(runs.c.status == value for value in IN_PROGRESS)))).order_by(
        runs.c.created_at, runs.c.execution_id), k=key).fetchall()
    found = [KeyHolder(str(eid), str(status)) for eid, status, asked, _ in rows
             if asked is None]
    occupied = sum(1 for _, status, asked, _ in rows
                   if status != RunStatus.QUEUED.value or asked is None)
    return found, occupied, max((float(r[3]) for r in rows), default=None)


def run_exists(store: SQLCheckpointer, cursor: Any, execution_id: str) -> bool:
    return store.sql_execute(cursor, "run_exists", lambda: select(literal_column("1")).where(
        runs.c.execution_id == bindparam("eid")), eid=execution_id).fetchone() is not None
