"""Group commit of a worker's checkpoint writes (``stores/write_group.py``).

The group on its own, with threads; then PostgreSQL stores sharing a group as a worker's
slots do: overlapping fenced writes go in one statement, and each row is still fenced on its
own run's owner, read its own cancel request, and fails alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from helpers import new_run, row, run_end

from tether.errors import LeaseLost, StoreError
from tether.status import RUN_END
from tether.stores.postgres import PostgresCheckpointer, fenced_batch_sql, server_placeholders
from tether.stores.records import CheckpointRow, FencedWrite
from tether.stores.write_group import WriteGroup

WAIT = 30.0


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def _queued(group: WriteGroup[Any, Any]) -> int:
    with group._lock:
        return len(group._queue)


def test_a_lone_writer_writes_its_item_alone() -> None:
    group: WriteGroup[int, int] = WriteGroup()
    seen: list[list[int]] = []

    def write(items: Sequence[int]) -> list[int | BaseException]:
        seen.append(list(items))
        return [i * 10 for i in items]

    assert [group.submit(i, write) for i in (1, 2)] == [10, 20]
    assert seen == [[1], [2]]
    assert (group.batches, group.items) == (2, 2)


def test_a_lone_writers_item_error_is_raised_to_it_and_leaves_the_group_idle() -> None:
    """A writer that finds the group idle writes without a wake-up lock of its own: its
    item's error (a result, not raised by ``write``) still reaches it, and the group is
    idle again for the next writer."""
    group: WriteGroup[int, int] = WriteGroup()

    def write(items: Sequence[int]) -> list[int | BaseException]:
        return [ValueError(f"bad {i}") if i < 0 else i for i in items]

    with pytest.raises(ValueError, match="bad -1"):
        group.submit(-1, write)
    assert not group._busy and _queued(group) == 0
    assert group.submit(7, write) == 7
    assert (group.batches, group.items) == (2, 2)


def test_a_write_giving_the_wrong_number_of_results_fails_its_writer() -> None:
    group: WriteGroup[int, int] = WriteGroup()
    with pytest.raises(RuntimeError, match="gave 2 results"):
        group.submit(1, lambda items: [1, 2])
    assert group.submit(3, lambda items: list(items)) == 3


def test_writes_that_arrive_while_one_is_in_flight_go_together_each_to_its_writer() -> None:
    """The first writer leads alone; the three that queue meanwhile are written as one
    batch by one of them; every writer gets its own item's result."""
    group: WriteGroup[int, int] = WriteGroup()
    batches: list[list[int]] = []
    release = threading.Event()

    def write(items: Sequence[int]) -> list[int | BaseException]:
        if not batches:
            release.wait(WAIT)
        batches.append(sorted(items))
        return [i * 10 for i in items]

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(group.submit, 0, write)
        _until(lambda: group._busy)
        others = [pool.submit(group.submit, i, write) for i in (1, 2, 3)]
        _until(lambda: _queued(group) == 3)
        release.set()
        assert [f.result(WAIT) for f in (first, *others)] == [0, 10, 20, 30]
    assert batches == [[0], [1, 2, 3]]
    assert (group.batches, group.items) == (2, 4)


def test_an_item_error_fails_its_writer_alone_and_a_batch_error_fails_the_batch() -> None:
    group: WriteGroup[int, int] = WriteGroup()
    release = threading.Event()
    calls = 0

    def write(items: Sequence[int]) -> list[int | BaseException]:
        nonlocal calls
        calls += 1
        if calls == 1:
            release.wait(WAIT)
            return [i for i in items]
        if 99 in items:
            raise ConnectionError("the batch failed")
        return [ValueError(f"bad {i}") if i == 2 else i for i in items]

    with ThreadPoolExecutor(4) as pool:
        lead = pool.submit(group.submit, 0, write)
        _until(lambda: group._busy)
        futures = {i: pool.submit(group.submit, i, write) for i in (1, 2, 3)}
        _until(lambda: _queued(group) == 3)
        release.set()
        assert lead.result(WAIT) == 0
        assert futures[1].result(WAIT) == 1 and futures[3].result(WAIT) == 3
        with pytest.raises(ValueError, match="bad 2"):
            futures[2].result(WAIT)
    with pytest.raises(ConnectionError, match="the batch failed"):
        group.submit(99, write)
    assert group.submit(5, write) == 5  # the group is idle again after a failed batch


def test_a_full_queue_is_written_in_batches_of_the_limit() -> None:
    group: WriteGroup[int, int] = WriteGroup(limit=2)
    release = threading.Event()
    sizes: list[int] = []

    def write(items: Sequence[int]) -> list[int | BaseException]:
        if not sizes:
            release.wait(WAIT)
        sizes.append(len(items))
        return list(items)

    with ThreadPoolExecutor(5) as pool:
        first = pool.submit(group.submit, 0, write)
        _until(lambda: group._busy)
        rest = [pool.submit(group.submit, i, write) for i in range(1, 5)]
        _until(lambda: _queued(group) == 4)
        release.set()
        assert [f.result(WAIT) for f in (first, *rest)] == [0, 1, 2, 3, 4]
    assert sizes == [1, 2, 2]


# -- PostgreSQL stores sharing a group, as a worker's slots ----------------------------------
@pytest.fixture
def slot_stores(pg_schema: tuple[str, str]) -> Iterator[list[PostgresCheckpointer]]:
    url, schema = pg_schema
    group: WriteGroup[FencedWrite, tuple[bool, float | None]] = WriteGroup()
    stores = [PostgresCheckpointer(url, schema=schema) for _ in range(4)]
    for store in stores:
        store.use_for_worker(write_group=group)
    yield stores
    for store in stores:
        store.close()


def _hold_run_row(url: str, schema: str, execution_id: str) -> psycopg.Connection[object]:
    """A transaction holding the run row ``FOR UPDATE``: a fenced write of the run waits."""
    connection: psycopg.Connection[object] = psycopg.connect(url)
    connection.execute(f'SELECT 1 FROM "{schema}".runs WHERE execution_id = %s FOR UPDATE',
                       (execution_id,))
    return connection


def _write_while_the_first_waits(stores: list[PostgresCheckpointer], rows: list[CheckpointRow],
                                 pg_schema: tuple[str, str], ends: Sequence[int] = (),
                                 last_nodes: dict[int, CheckpointRow] | None = None,
                                 ) -> list[BaseException | None]:
    """Each store writes its row (as ``owner-<i>``) while the first write waits on its run
    row, so the others queue behind it and go as one batch; each write's outcome, in order.
    The stores at ``ends`` end their run with their row instead (``finish_run``, with
    ``last_nodes[i]`` as its last node's row if given)."""
    last_nodes = last_nodes or {}
    url, schema = pg_schema
    group = stores[0].write_group
    assert group is not None

    def write(i: int) -> None:
        if i in ends:
            stores[i].finish_run(rows[i], "completed", None, f"owner-{i}",
                                 last_node=last_nodes.get(i))
        else:
            stores[i].put(rows[i], f"owner-{i}")
    blocker = _hold_run_row(url, schema, rows[0].execution_id)
    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            lead = pool.submit(write, 0)
            _until(lambda: group._busy)
            others = [pool.submit(write, i) for i in range(1, len(stores))]
            _until(lambda: _queued(group) == len(others))
            blocker.commit()
            return [future.exception(WAIT) for future in (lead, *others)]
    finally:
        blocker.close()


def test_overlapping_fenced_writes_share_one_statement_each_fenced_on_its_own_owner(
        slot_stores: list[PostgresCheckpointer], pg_schema: tuple[str, str]) -> None:
    """Four slots write at once while the first write waits on its run row: the other
    three go as one statement. The run whose owner changed writes nothing (LeaseLost); the
    run with a cancel request hands it to its next boundary; the others are written once."""
    url, schema = pg_schema
    first, *stores = slot_stores
    now = time.time()
    runs = [new_run(first, owner=f"owner-{i}", lease_until=now + 60) for i in range(4)]
    taken_over, cancelled = runs[2], runs[3]
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'UPDATE "{schema}".runs SET owner = %s WHERE execution_id = %s',
                      ("someone-else", taken_over))
        admin.execute(f'UPDATE "{schema}".runs SET cancel_requested_at = %s '
                      "WHERE execution_id = %s", (now, cancelled))
    rows = [row(eid, "a") for eid in runs]
    outcomes = _write_while_the_first_waits(slot_stores, rows, pg_schema)
    assert outcomes[:2] == [None, None] and outcomes[3] is None
    assert isinstance(outcomes[2], LeaseLost)
    group = first.write_group
    assert group is not None and (group.batches, group.items) == (2, 4)
    for eid, store, expected in zip(runs, slot_stores, (1, 1, 0, 1), strict=True):
        assert len(store._rows(eid)) == expected, eid
    seen = stores[2].take_cancel_seen(cancelled, 60)
    assert seen is not None and seen.requested_at == pytest.approx(now)
    assert stores[0].take_cancel_seen(runs[1], 60) is not None
    assert stores[0].take_cancel_seen(runs[1], 60) is None  # handed out once


def test_a_row_that_fails_in_a_batch_fails_its_own_write_alone(
        slot_stores: list[PostgresCheckpointer], pg_schema: tuple[str, str],
        caplog: pytest.LogCaptureFixture) -> None:
    """A batch whose statement fails for one row (its checkpoint id already written) is
    written row by row: that write raises StoreError, the others are written. The fallback
    is logged once, naming the error's class and not the rows' values, and counted by the
    group."""
    first = slot_stores[0]
    now = time.time()
    runs = [new_run(first, owner=f"owner-{i}", lease_until=now + 60) for i in range(4)]
    rows = [row(eid, "a") for eid in runs]
    first.put(rows[2], "owner-2")  # the same checkpoint again below: a unique violation
    outcomes = _write_while_the_first_waits(slot_stores, rows, pg_schema)
    assert outcomes[:2] == [None, None] and outcomes[3] is None
    assert isinstance(outcomes[2], StoreError) and rows[2].checkpoint_id in str(outcomes[2])
    assert [len(first._rows(eid)) for eid in runs] == [1, 1, 1, 1]
    group = first.write_group
    assert group is not None and group.fallbacks == 1
    fallbacks = [r for r in caplog.records if "one by one" in r.getMessage()]
    assert len(fallbacks) == 1 and fallbacks[0].levelname == "WARNING"
    assert fallbacks[0].getMessage() == ("a batch of 3 checkpoint writes failed "
                                         "(UniqueViolation); writing them one by one")
    assert rows[2].checkpoint_id not in caplog.text


def _four_runs_the_last_taken(store: PostgresCheckpointer, pg_schema: tuple[str, str],
                              ) -> list[str]:
    """Four runs held by ``owner-<i>``, the last one taken over by another owner since."""
    url, schema = pg_schema
    now = time.time()
    runs = [new_run(store, owner=f"owner-{i}", lease_until=now + 60) for i in range(4)]
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'UPDATE "{schema}".runs SET owner = %s WHERE execution_id = %s',
                      ("someone-else", runs[3]))
    return runs


def test_a_runs_end_goes_in_the_batch_fenced_like_its_rows(
        slot_stores: list[PostgresCheckpointer], pg_schema: tuple[str, str]) -> None:
    """``finish_run`` of a slot goes in the batch with the other slots' writes: its row is
    written and its run ends (status, no owner, no lease) in the same statement; an end
    whose run another owner took writes nothing and raises LeaseLost, its run untouched."""
    first = slot_stores[0]
    runs = _four_runs_the_last_taken(first, pg_schema)
    rows = [row(eid, "a") for eid in runs]
    outcomes = _write_while_the_first_waits(slot_stores, rows, pg_schema, ends=(1, 3))
    assert outcomes[:3] == [None, None, None] and isinstance(outcomes[3], LeaseLost)
    group = first.write_group
    assert group is not None and (group.batches, group.items) == (2, 4)
    ended, plain, lost = (first.get_run(eid) for eid in (runs[1], runs[2], runs[3]))
    assert ended is not None and (ended.status, ended.owner, ended.lease_until) == (
        "completed", None, None)
    assert plain is not None and (plain.status, plain.owner) == ("running", "owner-2")
    assert lost is not None and (lost.status, lost.owner) == ("running", "someone-else")
    assert [len(first._rows(eid)) for eid in runs] == [1, 1, 1, 0]


def test_a_runs_end_with_its_last_nodes_row_goes_in_the_batch_as_one_write(
        slot_stores: list[PostgresCheckpointer], pg_schema: tuple[str, str]) -> None:
    """``finish_run(..., last_node=...)`` in a batch: both of its rows and the run's end in
    the one statement (two rows for one run in it), beside another run's plain row; the same
    write for a run another owner took writes neither row (LeaseLost)."""
    first = slot_stores[0]
    runs = _four_runs_the_last_taken(first, pg_schema)
    last_nodes = {1: row(runs[1], "last"), 3: row(runs[3], "last")}
    rows = [row(eid, RUN_END if i in last_nodes else "a", step_type=RUN_END
                if i in last_nodes else "node") for i, eid in enumerate(runs)]
    outcomes = _write_while_the_first_waits(slot_stores, rows, pg_schema, ends=(1, 3),
                                            last_nodes=last_nodes)
    assert outcomes[:3] == [None, None, None] and isinstance(outcomes[3], LeaseLost)
    group = first.write_group
    assert group is not None and (group.batches, group.items) == (2, 4)
    assert group.fallbacks == 0
    ended, lost = first.get_run(runs[1]), first.get_run(runs[3])
    assert ended is not None and (ended.status, ended.owner) == ("completed", None)
    assert lost is not None and (lost.status, lost.owner) == ("running", "someone-else")
    assert [r.node_id for r in first._rows(runs[1])] == ["last", RUN_END]
    assert [len(first._rows(eid)) for eid in runs] == [1, 2, 1, 0]


def test_a_runs_end_with_its_last_nodes_row_alone_is_one_statement(
        pg_schema: tuple[str, str]) -> None:
    """On a worker's store without other writers: the two rows and the end in one
    statement, fenced; a lost owner writes neither."""
    url, schema = pg_schema
    group: WriteGroup[FencedWrite, tuple[bool, float | None]] = WriteGroup()
    store = PostgresCheckpointer(url, schema=schema)
    store.use_for_worker(write_group=group)
    try:
        mine = new_run(store, owner="me", lease_until=time.time() + 60)
        theirs = new_run(store, owner="them", lease_until=time.time() + 60)
        last = row(mine, "b")  # (made first: ids follow creation)
        store.finish_run(run_end(mine), "failed", {"message": "x"}, "me", last_node=last)
        last = row(theirs, "b")
        with pytest.raises(LeaseLost):
            store.finish_run(run_end(theirs), "completed", None, "me", last_node=last)
        assert [r.node_id for r in store._rows(mine)] == ["b", RUN_END]
        assert store._rows(theirs) == []
        run = store.get_run(mine)
        assert run is not None and (run.status, run.error, run.owner) == (
            "failed", {"message": "x"}, None)
        assert (group.batches, group.items, group.fallbacks) == (2, 2, 0)
    finally:
        store.close()


@pytest.mark.parametrize("ends", [False, True], ids=["rows", "with-ends"])
def test_a_batch_is_one_statement_that_runs_as_written(pg_schema: tuple[str, str],
                                                       ends: bool) -> None:
    """The batch statement itself (no row-by-row fallback): each row's outcome and cancel
    reading come back from the one statement; with ``ends``, the run of an end row ends in
    it and a plain row beside it leaves its run running."""
    url, schema = pg_schema
    store = PostgresCheckpointer(url, schema=schema)
    try:
        now = time.time()
        runs = [new_run(store, owner=f"owner-{i}", lease_until=now + 60) for i in range(3)]
        rows = [row(eid, "a") for eid in runs]
        sql = fenced_batch_sql(3, store._qualified, store.engine.dialect, ends)
        params: list[Any] = []
        for i, written in enumerate(rows):
            params += [*written, "someone-else" if i == 2 else f"owner-{i}"]
            if ends:
                params += ["completed", None, now] if i == 0 else [None, None, None]
        with psycopg.connect(url, autocommit=True) as connection:
            found = psycopg.RawCursor(connection).execute(server_placeholders(sql),
                                                          params).fetchall()
        assert sorted((c, w) for c, _, w in found) == sorted(
            [(rows[0].checkpoint_id, True), (rows[1].checkpoint_id, True),
             (rows[2].checkpoint_id, False)])
        assert [len(store._rows(eid)) for eid in runs] == [1, 1, 0]
        statuses = [getattr(store.get_run(eid), "status", None) for eid in runs]
        assert statuses == (["completed", "running", "running"] if ends else ["running"] * 3)
    finally:
        store.close()
