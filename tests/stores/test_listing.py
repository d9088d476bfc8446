"""Listing queries on every backend: runs a page at a time with filters (the console's runs
page), runs in the order they changed (the notifier watching other processes' work), and the
approvals inbox (pending interrupts newest first, with their workflow)."""

from __future__ import annotations

import time

from helpers import new_run, pause, row, run_end

from tether.stores.base import Checkpointer
from tether.stores.records import PendingCursor, RunCursor, RunRecord


def _ids(runs: list[RunRecord]) -> list[str]:
    return [r.execution_id for r in runs]


def _walk(store: Checkpointer, limit: int, **filters: str) -> list[str]:
    seen: list[str] = []
    before = None
    while page := store.find_runs(before=before, limit=limit, **filters):
        assert len(page) <= limit
        seen.extend(_ids(page))
        before = RunCursor.created(page[-1])
    return seen


def test_find_runs_filters_by_status_and_workflow_newest_first(store: Checkpointer) -> None:
    base = time.time()
    a1 = new_run(store, created_at=base - 50, workflow="a")
    b1 = new_run(store, created_at=base - 40, workflow="b", status="paused")
    a2 = new_run(store, created_at=base - 30, workflow="a", status="paused")
    b2 = new_run(store, created_at=base - 20, workflow="b")
    assert _ids(store.find_runs()) == [b2, a2, b1, a1]
    assert _ids(store.find_runs(workflow="a")) == [a2, a1]
    assert _ids(store.find_runs(status="paused")) == [a2, b1]
    assert _ids(store.find_runs(status="paused", workflow="b")) == [b1]
    assert store.find_runs(workflow="c") == []
    assert store.find_runs(limit=0) == []
    assert _ids(store.list_runs(status="running")) == [b2, a1]


def test_keyset_pages_of_runs_yield_every_run_once_across_creation_time_ties(
        store: Checkpointer) -> None:
    """Ten runs, several sharing one creation instant: pages of every size, filtered or not,
    walk them in the order of one unpaged query, none repeated or skipped."""
    base = time.time()
    moments = [base - 9, base - 5, base - 5, base - 5, base - 3, base - 3, base - 1,
               base - 1, base - 1, base]
    for index, moment in enumerate(moments):
        new_run(store, created_at=moment, workflow="even" if index % 2 == 0 else "odd")
    everything = _ids(store.find_runs(limit=100))
    assert len(everything) == 10
    for limit in (1, 2, 3, 7, 10, 11):
        assert _walk(store, limit) == everything
    odd = _ids(store.find_runs(workflow="odd", limit=100))
    assert len(odd) == 5
    assert _walk(store, 2, workflow="odd") == odd


def test_a_page_after_new_runs_arrive_continues_where_it_stopped(store: Checkpointer) -> None:
    base = time.time()
    old = [new_run(store, created_at=base - 10 + i) for i in range(4)]
    first = store.find_runs(limit=2)
    assert _ids(first) == [old[3], old[2]]
    new_run(store, created_at=base + 5)  # newer: belongs before the first page, not after
    assert _ids(store.find_runs(before=RunCursor.created(first[-1]), limit=5)) == \
        [old[1], old[0]]


def test_runs_changed_lists_runs_in_the_order_they_changed(store: Checkpointer) -> None:
    """A run that pauses or ends after the others moves to the end; the cursor returned
    with a page gives only later changes (it holds the stored time exactly, finer than a
    RunRecord's microseconds)."""
    first = new_run(store, created_at=time.time() - 30)
    second = new_run(store, created_at=time.time() - 20)
    seen, cursor = store.runs_changed()
    assert _ids(seen) == [first, second] and cursor is not None
    assert store.runs_changed(cursor) == ([], None)
    for i in range(20):  # each time.time() has its own sub-microsecond part
        pause(store, first, f"review{i}")
        changed, cursor = store.runs_changed(cursor)
        assert [(r.execution_id, r.status) for r in changed] == [(first, "paused")]
        store.acquire(first, "owner", time.time() + 30, time.time())
        store.release(first, "owner")
        assert _ids(store.runs_changed(cursor)[0]) == [first]
        cursor = store.runs_changed(cursor)[1]
    store.finish_run(run_end(second), "completed", None, None)
    later, _ = store.runs_changed(cursor)
    assert [(r.execution_id, r.status) for r in later] == [(second, "completed")]
    assert _ids(store.runs_changed(limit=1)[0]) == [first] or \
        _ids(store.runs_changed(limit=1)[0]) == [second]


def test_pending_page_is_the_inbox_newest_first_with_workflow_names(
        store: Checkpointer) -> None:
    runs = [new_run(store, workflow=f"wf{i}") for i in range(5)]
    pauses = [pause(store, eid, f"review{i}") for i, eid in enumerate(runs)]
    entries = store.pending_page(limit=10)
    assert [e.pending.checkpoint_id for e in entries] == \
        [p.checkpoint_id for p in reversed(pauses)]
    assert [e.workflow for e in entries] == [f"wf{i}" for i in reversed(range(5))]
    assert entries[0].pending.context == {"amount": 5}
    walked: list[str] = []
    before = None
    while page := store.pending_page(before, 2):
        walked.extend(e.pending.checkpoint_id for e in page)
        before = PendingCursor.of(page[-1].pending)
    assert walked == [e.pending.checkpoint_id for e in entries]
    claimed = store.claim(entries[0].pending, {"approved": True}, resolver="ada")
    assert claimed is not None
    assert [e.pending.checkpoint_id for e in store.pending_page()] == \
        [e.pending.checkpoint_id for e in entries[1:]]


def test_a_run_with_two_pending_units_shows_both_in_the_inbox(store: Checkpointer) -> None:
    eid = new_run(store, workflow="pair")
    first = row(eid, "left", status="interrupted", step_type="hitl_pause")
    second = row(eid, "right", status="interrupted", step_type="hitl_pause")
    from helpers import pending_for
    store.record_interrupt(first, pending_for(first), None)
    store.record_interrupt(second, pending_for(second), None)
    assert [(e.pending.node_id, e.workflow) for e in store.pending_page()] == \
        [("right", "pair"), ("left", "pair")]


def test_page_rows_and_last_row_are_the_stored_rows_unfolded(store: Checkpointer) -> None:
    """The timeline's reads: page_rows are slices of rows(), last_row its last entry (or the
    last before the run_end marker)."""
    from helpers import journal_history

    eid = new_run(store)
    journal_history(store, eid, [{"node": f"n{i}", "value": i} for i in range(7)],
                    snapshot_every=3)
    stored = list(store.rows(eid))
    assert store.page_rows(eid) == stored
    assert store.page_rows(eid, stored[2].checkpoint_id, 3) == stored[3:6]
    assert store.page_rows(eid, stored[-1].checkpoint_id) == []
    assert store.last_row(eid) == stored[-1]
    marker = run_end(eid)
    store.finish_run(marker, "completed", None, None)
    assert store.last_row(eid) == marker
    assert store.last_row(eid, skip_run_end=True) == stored[-1]
    assert store.last_row("no-such-run") is None
