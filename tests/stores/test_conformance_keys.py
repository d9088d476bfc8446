"""Store conformance: concurrency keys (``stores/keys.py``): the keyed insert of each
``on_conflict`` and the claim that lets at most ``limit`` runs of a key run.

Every test runs against the in-memory, SQLite and PostgreSQL checkpointers. Checks the
protocol QueueStore (``create_keyed_run``, ``claim_runs``).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from helpers import PLAN_JSON, new_run

from tether.errors import ConcurrencyLimitReached, ExecutionExists
from tether.runtime.ids import new_execution_id
from tether.status import RunStatus
from tether.stores.base import Checkpointer
from tether.stores.records import RunRecord

pytestmark = pytest.mark.protocol("QueueStore")


def keyed_run(key: str = "main", limit: int = 1, *, status: str = "queued",
              owner: str | None = None, execution_id: str | None = None,
              at: float | None = None) -> RunRecord:
    moment = datetime.fromtimestamp(at if at is not None else time.time(), tz=UTC)
    return RunRecord(
        execution_id=execution_id or new_execution_id(), workflow="deploy",
        plan_fingerprint="f" * 64, status=status, inputs={"branch": key},
        created_at=moment, updated_at=moment, attempt=0 if status == "queued" else 1,
        queue="default", owner=owner, lease_until=time.time() + 30 if owner else None,
        concurrency_key=key, concurrency_limit=limit)


def submit(store: Checkpointer, policy: str = "queue", key: str = "main", limit: int = 1,
           at: float | None = None) -> str:
    run = keyed_run(key, limit, at=at)
    store.create_keyed_run(run, PLAN_JSON, policy, time.time())
    return run.execution_id


def status(store: Checkpointer, execution_id: str) -> str:
    run = store.get_run(execution_id)
    assert run is not None
    return str(run.status)


def claim(store: Checkpointer, n: int = 10) -> list[str]:
    now = time.time()
    return [c.run.execution_id for c in store.claim_runs("w", ["default"], n, now, now + 30)]


def test_queue_lets_one_run_of_a_key_run_and_the_next_when_it_ends(
        store: Checkpointer) -> None:
    """``queue``: of three runs of one key (limit 1) a claim takes the oldest only; others
    keys and unkeyed runs are not held up; the next starts once the first ended."""
    start = time.time() - 10
    first, second, third = (submit(store, at=start + i) for i in range(3))
    other = submit(store, key="dev", at=start + 3)
    assert status(store, second) == "queued"
    assert claim(store) == [first, other]
    assert claim(store) == []
    store.request_cancel(first, time.time())  # held: asked; the holder ends it
    assert claim(store) == []
    run = store.get_run(first)
    assert run is not None and run.owner is not None
    store.release(first, run.owner)
    assert store.request_cancel(first, time.time()) is not None
    assert status(store, first) == "cancelled"
    assert claim(store) == [second]
    assert status(store, third) == "queued"


def test_a_limit_of_two_runs_two_at_once(store: Checkpointer) -> None:
    start = time.time() - 10
    ids = [submit(store, limit=2, at=start + i) for i in range(4)]
    assert claim(store, 1) == ids[:1]
    assert claim(store) == ids[1:2]
    assert claim(store) == []


def test_cancel_new_records_the_newcomer_cancelled_with_the_reason(
        store: Checkpointer) -> None:
    """``cancel_new``: a key with ``limit`` runs in progress (queued counts) stores the new
    run cancelled, its error naming the key and the holder; another key is not affected."""
    first = submit(store, "cancel_new")
    second = submit(store, "cancel_new")
    assert status(store, first) == "queued"
    assert status(store, second) == "cancelled"
    run = store.get_run(second)
    assert run is not None and run.error["type"] == "RunCancelled"
    assert "concurrency key 'main'" in run.error["message"] and first in run.error["message"]
    assert status(store, submit(store, "cancel_new", key="dev")) == "queued"
    claimed = claim(store)
    assert first in claimed and second not in claimed


def test_reject_raises_and_stores_nothing(store: Checkpointer) -> None:
    first = submit(store, "reject")
    run = keyed_run()
    with pytest.raises(ConcurrencyLimitReached) as raised:
        store.create_keyed_run(run, PLAN_JSON, "reject", time.time())
    assert raised.value.holders == (first,) and raised.value.key == "main"
    assert store.get_run(run.execution_id) is None
    assert "limit 1" in str(raised.value)


def test_cancel_running_cancels_older_runs_queued_at_once_held_at_a_boundary(
        store: Checkpointer) -> None:
    """``cancel_running``: the older running (held) run is asked to cancel, an older queued
    one is cancelled at once; the newcomer waits until the held one stops."""
    start = time.time() - 10
    running = submit(store, "cancel_running", at=start)
    assert claim(store) == [running]
    waiting = submit(store, "cancel_running", at=start + 1)
    assert status(store, waiting) == "queued"
    run = store.get_run(running)
    assert run is not None and run.cancel_requested_at is not None
    assert run.status == "running"
    newest = submit(store, "cancel_running", at=start + 2)
    assert status(store, waiting) == "cancelled"
    gone = store.get_run(waiting)
    assert gone is not None and newest in gone.error["message"]
    assert claim(store) == []  # the held one still runs
    assert run.owner is not None
    store.release(running, run.owner)
    store.request_cancel(running, time.time())
    assert status(store, running) == "cancelled"
    assert claim(store) == [newest]


def test_an_in_place_start_joins_the_end_of_the_line(store: Checkpointer) -> None:
    """A run started in place (``running``) is stored only while its key's window has room:
    a queued run of the key ahead of it, or one running, makes it wait (nothing stored)."""
    first = submit(store)
    here = keyed_run(status="running", owner="me@h/1")
    assert not store.create_keyed_run(here, PLAN_JSON, "queue", time.time()).created
    assert store.get_run(here.execution_id) is None
    assert claim(store) == [first]
    assert not store.create_keyed_run(here, PLAN_JSON, "queue", time.time()).created
    run = store.get_run(first)
    assert run is not None and run.owner is not None
    store.release(first, run.owner)
    store.request_cancel(first, time.time())
    started = store.create_keyed_run(here, PLAN_JSON, "queue", time.time())
    assert started.created and started.status == RunStatus.RUNNING
    later = submit(store)
    assert claim(store) == [] and status(store, later) == "queued"


def test_keyed_and_plain_runs_are_created_by_one_store_in_any_order(
        store: Checkpointer) -> None:
    """The keyed insert and the plain one are different statements (a store caches each)."""
    keyed = submit(store)
    plain = new_run(store, status="queued")
    again = submit(store, key="other")
    assert [status(store, i) for i in (keyed, plain, again)] == ["queued"] * 3
    run = store.get_run(plain)
    assert run is not None and run.concurrency_key is None


def test_a_taken_id_raises_execution_exists_and_cancels_nothing(store: Checkpointer) -> None:
    first = submit(store, "cancel_running")
    with pytest.raises(ExecutionExists):
        store.create_keyed_run(keyed_run(execution_id=first), PLAN_JSON, "cancel_running",
                               time.time())
    assert status(store, first) == "queued"


@pytest.mark.parametrize("policy", ["queue", "cancel_new", "reject", "cancel_running"])
def test_racing_submissions_and_claims_never_run_more_than_the_limit(
        store: Checkpointer, policy: str) -> None:
    """16 threads submit one key while 3 claimers claim and finish runs: at no claim are
    more than ``limit`` runs of the key running, and each policy ends as it says."""
    limit = 2 if policy == "queue" else 1
    stop = threading.Event()
    seen: list[int] = []
    rejected: list[str] = []

    def submitter(i: int) -> None:
        try:
            submit(store, policy, limit=limit)
        except ConcurrencyLimitReached:
            rejected.append(str(i))

    def claimer() -> None:
        while not stop.is_set():
            now = time.time()
            for c in store.claim_runs("w", ["default"], 2, now, now + 30):
                running = [r for r in store.find_runs(status="running", limit=100)
                           if r.concurrency_key == "main"]
                seen.append(len(running))
                time.sleep(0.002)
                store.release(c.run.execution_id, c.owner)
                store.request_cancel(c.run.execution_id, time.time())  # ends it
            time.sleep(0.001)

    with ThreadPoolExecutor(19) as pool:
        claimers = [pool.submit(claimer) for _ in range(3)]
        list(pool.map(submitter, range(16)))
        deadline = time.time() + 30
        while time.time() < deadline and any(
                r.status in ("queued", "running") for r in store.find_runs(limit=100)):
            time.sleep(0.01)
        stop.set()
        for future in claimers:
            future.result()
    runs = store.find_runs(limit=100)
    assert seen and max(seen) <= limit
    assert all(r.status == "cancelled" for r in runs)
    if policy == "reject":
        assert len(runs) + len(rejected) == 16 and rejected
    else:
        assert len(runs) == 16
