"""A worker's slots on PostgreSQL run a lone body inline in the slot's thread; a lease lost
while such a body still runs is given up by the worker at once (logged, no longer reported
as held), and the stale attempt writes nothing once the body returns.

In process (a ``Worker`` in a thread), so it needs no root: the network-partition proof
(``test_partition.py``) shows the same with real processes and a cut link.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from conftest import wait_for
from tether.compiler.plan import Plan, TaskNode, with_fingerprint
from tether.runtime.runner import Runner
from tether.status import RUN_END
from tether.stores.open import open_checkpointer
from tether.workers.loop import Worker


def _plan() -> Plan:
    nodes = (TaskNode(id="n0", index=0, task="hang"),
             TaskNode(id="n1", index=1, task="hang", needs=("n0",), waits_for=("n0",),
                      generation=1))
    return with_fingerprint(Plan(name="hang2", nodes=nodes, generations=(("n0",), ("n1",))))


def test_a_lease_lost_while_an_inline_body_hangs_is_given_up_at_once(
        pg_schema: tuple[str, str], caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    url, schema = pg_schema
    store_url = f"{url}?schema={schema}"
    entered, gate = threading.Event(), threading.Event()
    bodies: list[str] = []

    def hang() -> int:
        bodies.append(threading.current_thread().name)
        entered.set()
        gate.wait(60)
        return 1

    store = open_checkpointer(store_url)
    worker = Worker(store_url, {"hang": hang}, concurrency=1, lease_seconds=0.9,
                    poll_seconds=0.1)
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    caplog.set_level(logging.WARNING, logger="tether.workers")
    try:
        eid = Runner(_plan(), store).submit({})
        thread.start()
        assert entered.wait(30), "the worker did not start the body"
        now = time.time()
        assert store.acquire(eid, "thief", now + 60, now + 5)  # as after the lease expired

        def given_up() -> bool:
            [record] = store.list_workers()
            return "lost its lease" in caplog.text and eid not in record.held

        wait_for(given_up, 30, "the worker to give the run up while its body hangs")
        assert not gate.is_set() and len(bodies) == 1
        assert bodies[0].startswith("tether-worker-slot"), "the body ran in a thread hop"
        gate.set()
        wait_for(lambda: worker.finished == 1, 30, "the stale drive to end")
        assert store.list(eid) == [], "the stale attempt wrote a checkpoint"
        run = store.get_run(eid)
        assert run is not None and run.owner == "thief"
        assert caplog.text.count("lost its lease") == 1
    finally:
        gate.set()
        worker.stop()
        thread.join(30)
        store.close()


def test_with_group_commit_the_slots_share_a_write_group_reported_as_it_stops(
        pg_schema: tuple[str, str], caplog: pytest.LogCaptureFixture) -> None:
    """With ``group_commit``, every checkpoint row the slots write, the runs' ends
    included, goes through the worker's write group, and the worker logs how many writes
    went in how many statements when it stops: per run of two nodes, the first node's row,
    then the run's end with the last node's row (one write, two rows); no claim goes with
    an end (``pg_end_claim.py`` is for stores without a group)."""
    url, schema = pg_schema
    store_url = f"{url}?schema={schema}"
    store = open_checkpointer(store_url)
    worker = Worker(store_url, {"hang": lambda: 1}, concurrency=4, poll_seconds=0.1,
                    group_commit=True)
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    caplog.set_level(logging.INFO, logger="tether.workers")
    try:
        runner = Runner(_plan(), store)
        runs = [runner.submit({}) for _ in range(8)]
        thread.start()
        wait_for(lambda: worker.finished == len(runs), 60, "the worker to finish the runs")
        assert worker._writes is not None and worker._writes.items == 8 * 2
        assert worker.claimed_with_end == 0  # the ends stay in the group's batches
    finally:
        worker.stop()
        thread.join(30)
    try:
        rows = sum(1 for eid in runs for _ in store.list(eid))
        ends = sum(1 for eid in runs for row in store.list(eid) if row.step_type == RUN_END)
        [line] = [r.getMessage() for r in caplog.records if "checkpoint writes" in r.getMessage()]
        written, statements = (int(word) for word in line.split() if word.isdigit())
        assert rows == 8 * 3 and written == 8 * 2 and ends == 8
        assert 1 <= statements <= written
    finally:
        store.close()
