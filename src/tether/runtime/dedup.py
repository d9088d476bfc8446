"""Deduplicated submission: a second submission with the same key returns the first run.

The key *is* the run's execution id (checked as a new one: docs/runtime.md, *Ids*), so the
store's primary key makes the choice atomic, on every store and across processes and hosts,
without a table of keys: of any number of racing submissions one inserts the run and the
others find it (PostgreSQL makes them wait for the first to commit; ``create_run`` is
``ON CONFLICT DO NOTHING``). A key is remembered as long as its run is stored (``tether gc``
deleting the run frees it). A key naming a run of another workflow is refused
(:class:`~tether.errors.DedupKeyTaken`); a run of the same workflow is returned whatever
inputs the second submission carried: the first submission wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tether.errors import DedupKeyTaken, ExecutionExists, RunNotFound
from tether.runtime.concurrency import start_keyed
from tether.runtime.submission import check_dedup_key as check_dedup_key
from tether.status import RunStatus
from tether.stores.base import Checkpointer
from tether.stores.records import RunRecord

if TYPE_CHECKING:
    from tether.compiler.plan import Plan


@dataclass(frozen=True)
class Submitted:
    """What a submission did: the run's execution id, whether this submission created it
    (False: a run with the same dedup key existed and is returned), and its status."""

    execution_id: str
    created: bool
    status: RunStatus


def create_once(store: Checkpointer, run: RunRecord, plan_json: str,
                deduplicate: bool, plan: Plan | None = None) -> Submitted:
    """Insert ``run``; with ``deduplicate``, a run already stored under its id (of the same
    workflow) is returned instead of raising :class:`ExecutionExists`. A run with a
    concurrency key (``plan`` has ``concurrency``) is inserted as its ``on_conflict``
    decides (``concurrency.py``): ``cancel_new`` stores it cancelled, ``reject`` raises."""
    try:
        if plan is not None and run.concurrency_key is not None:
            status = start_keyed(store, plan, run, plan_json).status
            return Submitted(run.execution_id, True, RunStatus(status or run.status))
        store.create_run(run, plan_json)
    except ExecutionExists:
        if not deduplicate:
            raise
        first = store.get_run(run.execution_id)
        if first is None:  # deleted between the insert and the read: gc freed the key
            raise RunNotFound(run.execution_id) from None
        if first.workflow != run.workflow:
            raise DedupKeyTaken(run.execution_id, first.workflow) from None
        return Submitted(first.execution_id, False, RunStatus(first.status))
    return Submitted(run.execution_id, True, RunStatus(run.status))
