"""The SQL statements of concurrency keys (see ``keys.py`` for the rules they keep).

Serialisation per key: PostgreSQL takes a transaction-scoped advisory lock per key
(:func:`lock_keys`: a submission waits for it; a claimer only tries it, so a claimer never
waits while it holds candidate rows ``FOR UPDATE``, and a submitter that waits for such a
row holds only its own key's lock: no cycle, no deadlock). SQLite needs none: every write
transaction (``BEGIN IMMEDIATE``) is alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, bindparam, func, literal_column, or_, select
from sqlalchemy.sql import ColumnElement

from tether.status import RunStatus
from tether.stores.keys import IN_PROGRESS, KeyHolder, lock_id
from tether.stores.schema import runs

if TYPE_CHECKING:
    from tether.stores.sql import SQLCheckpointer

_OTHER = runs.alias("keyed")


def has_room() -> ColumnElement[bool]:
    """A run without a key, or whose key has fewer than its limit of runs ``running`` (as
    this statement's snapshot sees them: the claim counts again under the key's lock)."""
    running = select(func.count()).select_from(_OTHER).where(and_(
        _OTHER.c.concurrency_key == runs.c.concurrency_key,
        _OTHER.c.status == RunStatus.RUNNING.value)).scalar_subquery()
    return or_(runs.c.concurrency_key.is_(None), running < runs.c.concurrency_limit)


def serialises(store: SQLCheckpointer) -> bool:
    """Whether claims and keyed submissions must lock their keys (PostgreSQL)."""
    return bool(store.engine.dialect.name == "postgresql")


def lock_keys(store: SQLCheckpointer, cursor: Any, keys: Iterable[str],
              wait: bool) -> set[str]:
    """Lock ``keys`` until the transaction ends, in one global order; returns the keys
    locked (with ``wait`` False, those no other transaction held). SQLite: all of them."""
    wanted = sorted(set(keys), key=lock_id)
    if not serialises(store):
        return set(wanted)
    locked: set[str] = set()
    for key in wanted:
        if wait:
            store.sql_execute(cursor, "key_lock", lambda: select(
                func.pg_advisory_xact_lock(bindparam("k"))), k=lock_id(key))
            locked.add(key)
        elif store.sql_execute(cursor, "key_try_lock", lambda: select(
                func.pg_try_advisory_xact_lock(bindparam("k"))), k=lock_id(key)).fetchone()[0]:
            locked.add(key)
    return locked


def running_counts(store: SQLCheckpointer, cursor: Any, keys: Iterable[str]) -> Counter[str]:
    """How many runs of each of ``keys`` are ``running`` (held or orphaned)."""
    wanted = sorted(set(keys))
    if not wanted:
        return Counter()
    count = len(wanted)
    rows = store.sql_execute(cursor, f"key_running:{count}", lambda: select(
        runs.c.concurrency_key, func.count()).where(and_(
            runs.c.concurrency_key.in_([bindparam(f"k{i}") for i in range(count)]),
            runs.c.status == RunStatus.RUNNING.value)).group_by(runs.c.concurrency_key),
        **{f"k{i}": key for i, key in enumerate(wanted)}).fetchall()
    return Counter({str(key): int(n) for key, n in rows})


def holders(store: SQLCheckpointer, cursor: Any, key: str) -> tuple[list[KeyHolder], int]:
    """The runs of ``key`` in progress (not asked to cancel), oldest first, and how many
    runs of the key are ``running``."""
    rows = store.sql_execute(cursor, "key_holders", lambda: select(
        runs.c.execution_id, runs.c.status, runs.c.cancel_requested_at).where(and_(
            runs.c.concurrency_key == bindparam("k"),
            or_(*(runs.c.status == value for value in IN_PROGRESS)))).order_by(
        runs.c.created_at, runs.c.execution_id), k=key).fetchall()
    found = [KeyHolder(str(eid), str(status)) for eid, status, asked in rows if asked is None]
    return found, sum(1 for _, status, _ in rows if status == RunStatus.RUNNING.value)


def run_exists(store: SQLCheckpointer, cursor: Any, execution_id: str) -> bool:
    return store.sql_execute(cursor, "run_exists", lambda: select(literal_column("1")).where(
        runs.c.execution_id == bindparam("eid")), eid=execution_id).fetchone() is not None
