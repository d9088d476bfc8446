"""Store conformance, part 3: schedules (put, get, list, remove, advance's compare-and-set).

Every test runs against the in-memory, SQLite and PostgreSQL checkpointers.

Checks the protocol ScheduleStore (``tether.stores.contracts``).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta

import pytest
from helpers import new_run

from tether.stores.base import Checkpointer
from tether.stores.schedule_records import ScheduleRecord

pytestmark = pytest.mark.protocol("ScheduleStore")

PLAN = '{"name": "nightly"}'


def schedule(name: str = "nightly", **changes: object) -> ScheduleRecord:
    base = ScheduleRecord(name=name, plan_fingerprint="f" * 64, cron="0 3 * * *",
                          timezone="Europe/Paris", catchup="latest", inputs={"region": "eu"},
                          queue=None, created_at=100.0, updated_at=100.0, last_tick=100.0,
                          next_tick=3600.0)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_put_get_list_remove_round_trip(store: Checkpointer) -> None:
    """A schedule reads back as it was put, its plan with it; list is by name; remove says
    whether there was one."""
    store.put_schedule(schedule("b"), PLAN)
    store.put_schedule(schedule("a", queue="nightly", inputs={"n": [1, {"x": None}]}), PLAN)
    assert store.get_schedule("b") == schedule("b")
    assert [s.name for s in store.list_schedules()] == ["a", "b"]
    assert store.list_schedules()[0].inputs == {"n": [1, {"x": None}]}
    assert store.list_schedules()[0].queue == "nightly"
    assert store.get_plan("f" * 64) == PLAN
    assert store.get_schedule("missing") is None
    assert store.remove_schedule("a") is True
    assert store.remove_schedule("a") is False
    assert [s.name for s in store.list_schedules()] == ["b"]


def test_put_updates_but_keeps_created_at_and_last_tick(store: Checkpointer) -> None:
    """Registering a workflow again changes its cron, plan and inputs; the ticks already
    handled stay handled."""
    store.put_schedule(schedule(), PLAN)
    assert store.advance_schedule("nightly", 100.0, 200.0, 300.0)
    store.put_schedule(schedule(cron="*/5 * * * *", plan_fingerprint="e" * 64, created_at=500.0,
                                updated_at=500.0, last_tick=500.0, inputs={}), '{"v": 2}')
    found = store.get_schedule("nightly")
    assert found is not None
    assert (found.cron, found.plan_fingerprint, found.inputs) == ("*/5 * * * *", "e" * 64, {})
    assert (found.created_at, found.last_tick) == (100.0, 200.0)
    assert store.get_plan("e" * 64) == '{"v": 2}'


def test_advance_is_a_compare_and_set(store: Checkpointer) -> None:
    """advance moves last_tick only from the expected value; a stale caller gets False and
    changes nothing; an unknown schedule is False."""
    store.put_schedule(schedule(), PLAN)
    assert store.advance_schedule("nightly", 100.0, 200.0, 300.0) is True
    assert store.advance_schedule("nightly", 100.0, 250.0, 260.0) is False
    found = store.get_schedule("nightly")
    assert found is not None and (found.last_tick, found.next_tick) == (200.0, 300.0)
    assert store.advance_schedule("missing", 100.0, 200.0) is False
    store.put_schedule(schedule("fresh", last_tick=None), PLAN)
    assert store.advance_schedule("fresh", None, 5.0) is True
    assert store.advance_schedule("fresh", None, 6.0) is False


def test_concurrent_advances_of_one_tick_let_exactly_one_win(store: Checkpointer) -> None:
    """Eight threads advance the same tick at once: one True, seven False."""
    store.put_schedule(schedule(), PLAN)
    barrier = threading.Barrier(8)

    def advance(_: int) -> bool:
        barrier.wait()
        return store.advance_schedule("nightly", 100.0, 200.0, 300.0)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(advance, range(8)))
    assert results.count(True) == 1


def test_reading_schedules_beside_writes_of_other_threads_breaks_no_transaction(
        store: Checkpointer) -> None:
    """A worker lists schedules on its loop thread while task threads write idempotency
    entries through the same store (on SQLite: the same connection): every write commits."""
    store.put_schedule(schedule(), PLAN)
    eid = new_run(store)
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            store.list_schedules()
            store.get_schedule("nightly")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(300):
            store.put_idempotent(eid, f"k{i}", "1")
    finally:
        stop.set()
        reader.join()
    assert all(store.get_idempotent(eid, f"k{i}") == "1" for i in range(300))


def test_prune_keeps_the_plan_of_a_schedule(store: Checkpointer) -> None:
    """A schedule's plan has no run yet; pruning must not delete it."""
    store.put_schedule(schedule(), PLAN)
    new_run(store)
    store.prune(timedelta(0))
    assert store.get_plan("f" * 64) == PLAN
