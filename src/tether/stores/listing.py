"""The listing queries of the SQL stores: runs a page at a time (filtered, newest first), runs
in the order they changed (for watchers in other processes), and the approvals inbox.

Every page is a keyset page (``WHERE (t, id) < (:t, :id) ORDER BY t DESC, id DESC LIMIT n``,
with the row-value comparison spelled out for both dialects), so a page costs the same however
deep it is and never repeats or skips a row while rows are added. Each distinct shape of
filters is one statement, compiled once per dialect (``statements.py``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, or_, select
from sqlalchemy.sql import ClauseElement

from tether.stores.schema import pending_interrupts, runs


def _after(columns: tuple[ColumnElement[Any], ...], names: tuple[str, ...], *,
           descending: bool) -> ColumnElement[bool]:
    """``(c1, c2, ...) < (:n1, :n2, ...)`` (or ``>``), as ORs of ANDs for every dialect."""
    terms = []
    for i, column in enumerate(columns):
        equal = [columns[j] == bindparam(names[j]) for j in range(i)]
        step = column < bindparam(names[i]) if descending else column > bindparam(names[i])
        terms.append(and_(*equal, step))
    return or_(*terms)


def find_runs_statement(*, status: bool, workflow: bool, before: bool) -> ClauseElement:
    """Runs newest first; binds ``status``, ``workflow``, ``at`` and ``eid`` as used, and
    ``n``."""
    query = select(*runs.columns)
    if status:
        query = query.where(runs.c.status == bindparam("status"))
    if workflow:
        query = query.where(runs.c.workflow == bindparam("workflow"))
    if before:
        query = query.where(_after((runs.c.created_at, runs.c.execution_id), ("at", "eid"),
                                   descending=True))
    return query.order_by(runs.c.created_at.desc(), runs.c.execution_id.desc()).limit(
        bindparam("n"))


def runs_changed_statement(*, after: bool) -> ClauseElement:
    """Runs in the order they changed; binds ``at`` and ``eid`` (with ``after``), ``n``.
    ``at`` is the stored time of the cursor's run, read exactly (not through a datetime)."""
    query = select(*runs.columns)
    if after:
        query = query.where(_after((runs.c.updated_at, runs.c.execution_id), ("at", "eid"),
                                   descending=False))
    return query.order_by(runs.c.updated_at, runs.c.execution_id).limit(bindparam("n"))


def pending_page_statement(*, before: bool) -> ClauseElement:
    """Pending rows newest first, joined to their run's workflow name (served by the
    ``pending_created`` index and the runs primary key); binds ``at``, ``eid``, ``cid``
    (with ``before``) and ``n``."""
    p = pending_interrupts.c
    query = select(*pending_interrupts.columns, runs.c.workflow).select_from(
        pending_interrupts.join(runs, runs.c.execution_id == p.execution_id))
    if before:
        query = query.where(_after((p.created_at, p.execution_id, p.checkpoint_id),
                                   ("at", "eid", "cid"), descending=True))
    return query.order_by(p.created_at.desc(), p.execution_id.desc(),
                          p.checkpoint_id.desc()).limit(bindparam("n"))
