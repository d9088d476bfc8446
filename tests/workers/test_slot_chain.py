"""A worker's slot on PostgreSQL claims its next run itself when its run ends
(``workers/chain.py``): every run of a backlog is claimed once and each node runs once; the
worker's bookkeeping follows the run the slot holds now (cancel, ``tether workers``, a lost
lease, a stop).

In process (a ``Worker`` in a thread, one slot), so a run's body can block, stop the worker
or be counted; each property is observed through the store (run rows, run events, the
workers table) and the worker's counters, never by timing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import chain_workflow, wait_for
from tether.runtime.plans import load_plan
from tether.runtime.runner import Runner
from tether.stores.base import Checkpointer
from tether.stores.events import RunEventKind
from tether.stores.open import open_checkpointer
from tether.workers.loop import Worker

NODES = 2


@dataclass
class Bodies:
    """The task body's calls (rid, node), and a hook run before a chosen call returns."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    hooks: dict[int, Callable[[], None]] = field(default_factory=dict)  # call number: hook
    lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self, rid: str, node: str, x: int = 0) -> int:
        with self.lock:
            self.calls.append((rid, node))
            hook = self.hooks.get(len(self.calls))
        if hook is not None:
            hook()
        return x + 1

    def block_at(self, call: int) -> tuple[threading.Event, threading.Event]:
        """Call number ``call`` sets the first event and waits for the second."""
        entered, gate = threading.Event(), threading.Event()

        def block() -> None:
            entered.set()
            gate.wait(60)
        self.hooks[call] = block
        return entered, gate


@dataclass
class Setup:
    store: Checkpointer
    url: str
    runner: Runner
    bodies: Bodies

    def submit(self, count: int, first: int = 0) -> list[str]:
        return [self.runner.submit({"rid": f"r{first + i}"}) for i in range(count)]

    def worker(self, lease_seconds: float | None = None) -> tuple[Worker, threading.Thread]:
        worker = Worker(self.url, {"step": self.bodies.step}, concurrency=1,
                        poll_seconds=0.1, lease_seconds=lease_seconds)
        return worker, threading.Thread(target=worker.run_forever, daemon=True)


@pytest.fixture
def setup(pg_schema: tuple[str, str], tmp_path: Path) -> Iterator[Setup]:
    url, schema = pg_schema
    store_url = f"{url}?schema={schema}"
    store = open_checkpointer(store_url)
    plan = load_plan(str(chain_workflow(tmp_path, NODES)))
    try:
        yield Setup(store, store_url, Runner(plan, store), Bodies())
    finally:
        store.close()


def _claims(store: Checkpointer, eid: str) -> list[str]:
    """The workers named by the run's ``claimed`` events."""
    return [e.data.get("worker", "") for e in store.events(eid)
            if e.kind == RunEventKind.CLAIMED]


def _stop(worker: Worker, thread: threading.Thread) -> None:
    worker.stop()
    thread.join(60)
    assert not thread.is_alive(), "the worker did not stop"


def test_one_slot_drains_a_backlog_by_claiming_each_next_run_itself(setup: Setup) -> None:
    """Only the first run is claimed by the worker's loop; the slot claims every later one
    when its run ends. Each run is claimed once, by this worker, completes, and runs each
    of its nodes once. Once the slot's claim finds nothing, the slot is the loop's again:
    a run submitted later is claimed by the loop."""
    runs = setup.submit(12)
    worker, thread = setup.worker()
    thread.start()
    try:
        wait_for(lambda: worker.finished == len(runs), 120, "the worker to drain the runs")
        assert worker.chained == len(runs) - 1
        wait_for(lambda: worker.busy_slots() == 0, 60, "the slot to go back to the loop")
        runs += setup.submit(1, first=len(runs))
        wait_for(lambda: worker.finished == len(runs), 60, "the loop to claim the last run")
    finally:
        _stop(worker, thread)
    assert worker.chained == len(runs) - 2
    for eid in runs:
        run = setup.store.get_run(eid)
        assert run is not None and run.status == "completed" and run.owner is None
        assert _claims(setup.store, eid) == [worker.worker_id]
    assert Counter(setup.bodies.calls) == Counter(
        {(f"r{i}", f"n{n}"): 1 for i in range(len(runs)) for n in range(NODES)})


def test_a_run_asked_to_cancel_that_a_slot_claims_ends_cancelled_at_its_first_boundary(
        setup: Setup) -> None:
    """A run whose holder died after ``tether cancel`` asked (``cancel_requested_at`` set,
    lease still live) is recovered by the slot's own claim once the lease expires, and ends
    ``cancelled`` before any of its nodes runs."""
    entered, gate = setup.bodies.block_at(1)
    [first] = setup.submit(1)
    worker, thread = setup.worker()
    thread.start()
    try:
        assert entered.wait(60), "the worker did not start the first run"
        [doomed] = setup.submit(1, first=1)
        now = time.time()
        assert setup.store.acquire(doomed, "dead-owner", now + 1.0, now)
        outcome = setup.store.request_cancel(doomed, now)
        assert outcome is not None
        run = setup.store.get_run(doomed)
        assert run is not None and run.status == "running" and run.cancel_requested_at
        wait_for(lambda: time.time() > now + 1.5, 10, "the dead owner's lease to expire")
        gate.set()
        wait_for(lambda: worker.finished == 2, 60, "the slot to claim and end the run")
    finally:
        gate.set()
        _stop(worker, thread)
    assert worker.chained == 1
    assert _claims(setup.store, doomed) == [worker.worker_id]
    ended = setup.store.get_run(doomed)
    assert ended is not None and ended.status == "cancelled"
    assert all(rid == "r0" for rid, _ in setup.bodies.calls), "a node of it ran"
    done = setup.store.get_run(first)
    assert done is not None and done.status == "completed"


def test_stopping_while_a_slot_chains_hands_its_run_back_and_claims_nothing_more(
        setup: Setup) -> None:
    """The worker stops during the first node of the slot's second run (one it claimed
    itself): that run stops at its next boundary and is handed back, the slot claims no
    more, the worker returns and no run is left owned."""
    runs = setup.submit(5)
    worker, thread = setup.worker()
    setup.bodies.hooks[NODES + 1] = worker.stop
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the worker did not stop"
    assert worker.chained == 1
    states = [setup.store.get_run(eid) for eid in runs]
    assert all(run is not None and run.owner is None for run in states), "a run is owned"
    assert [run.status for run in states if run is not None] == \
        ["completed", "running"] + ["queued"] * 3
    assert [len(_claims(setup.store, eid)) for eid in runs] == [1, 1, 0, 0, 0]
    assert setup.bodies.calls == [("r0", "n0"), ("r0", "n1"), ("r1", "n0")]
    assert setup.store.list_workers() == []


def test_the_heartbeat_lists_the_run_the_slot_claimed_itself(setup: Setup) -> None:
    """``tether workers`` (the workers table) shows the run a slot holds now: the second
    run, which the slot claimed when the first ended, not the first."""
    entered, gate = setup.bodies.block_at(NODES + 1)
    first, second = setup.submit(2)
    worker, thread = setup.worker()
    thread.start()
    try:
        assert entered.wait(60), "the slot did not start the second run"

        def held() -> tuple[str, ...]:
            [record] = setup.store.list_workers()
            return tuple(record.held)

        wait_for(lambda: held() == (second,), 60, "the heartbeat to list the second run")
        assert worker.chained == 1 and worker.busy_slots() == 1
    finally:
        gate.set()
        _stop(worker, thread)
    assert first != second


def test_a_lease_lost_by_a_run_the_slot_claimed_is_reported_once_and_the_slot_goes_on(
        setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    """The second run's lease is taken by another owner while its body hangs: the worker
    logs it once and gives the run up (no longer held), the stale attempt writes nothing
    once the body returns, and the slot claims and completes the third run."""
    entered, gate = setup.bodies.block_at(NODES + 1)
    caplog.set_level(logging.WARNING, logger="tether.workers")
    first, stolen, third = setup.submit(3)
    worker, thread = setup.worker(lease_seconds=3.0)  # renewed each second: finds the theft
    thread.start()
    try:
        assert entered.wait(60), "the slot did not start the second run"
        now = time.time()
        assert setup.store.acquire(stolen, "thief", now + 60, now + 5)  # as once expired

        def given_up() -> bool:
            [record] = setup.store.list_workers()
            return "lost its lease" in caplog.text and stolen not in record.held

        wait_for(given_up, 60, "the worker to give the stolen run up")
        gate.set()
        wait_for(lambda: worker.finished == 3, 60, "the slot to go on with the third run")
    finally:
        gate.set()
        _stop(worker, thread)
    assert caplog.text.count("lost its lease") == 1
    assert worker.chained == 2
    assert setup.store.list(stolen) == [], "the stale attempt wrote a checkpoint"
    taken = setup.store.get_run(stolen)
    assert taken is not None and taken.owner == "thief"
    for eid in (first, third):
        run = setup.store.get_run(eid)
        assert run is not None and run.status == "completed"
    assert _claims(setup.store, third) == [worker.worker_id]
