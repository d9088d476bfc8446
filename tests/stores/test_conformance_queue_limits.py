"""Store conformance, part 4: queue limits enforced by the claim, queue configuration, the
plan filter, blocked reasons and the recovery backoff.

Every test runs against the in-memory, SQLite and PostgreSQL checkpointers.

Checks the protocol QueueStore (``tether.stores.contracts``).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import new_run
from test_conformance_queue import queued

from tether.stores.base import Checkpointer
from tether.stores.queueing import ClaimReason, QueueCounts, QueueRecord

pytestmark = pytest.mark.protocol("QueueStore")


def _claim(store: Checkpointer, n: int = 10, now: float | None = None,
           queue: str = "default", **kw: object) -> list[str]:
    at = time.time() if now is None else now
    return [c.run.execution_id for c in store.claim_runs(
        "w", [queue], n, at, at + 30, **kw)]  # type: ignore[arg-type]


def test_queues_are_configured_listed_replaced_and_removed(store: Checkpointer) -> None:
    assert store.list_queues() == [] and store.get_queue("q") is None
    store.put_queue(QueueRecord("q", concurrency=2, created_at=10.0))
    store.put_queue(QueueRecord("a", rate_limit=0.5, rate_window=60.0, created_at=11.0))
    store.put_queue(QueueRecord("q", per_workflow=1, start_timeout=5.0, created_at=99.0))
    assert store.list_queues() == [
        QueueRecord("a", rate_limit=0.5, rate_window=60.0, created_at=11.0),
        QueueRecord("q", per_workflow=1, start_timeout=5.0, created_at=10.0)]
    assert store.remove_queue("q") and not store.remove_queue("q")
    assert [q.name for q in store.list_queues()] == ["a"]


def test_concurrency_limit_counts_held_runs_and_frees_on_release(store: Checkpointer) -> None:
    """At most 2 held at once: a claim of 10 takes 2, the next none; releasing one (a
    finished or stopped run) frees one slot; an expired lease frees its slot too (and that
    run is itself claimable for recovery, within the limit)."""
    store.put_queue(QueueRecord("default", concurrency=2))
    ids = [queued(store) for _ in range(5)]
    now = time.time()
    first = store.claim_runs("w", ["default"], 10, now, now + 30)
    assert [c.run.execution_id for c in first] == ids[:2]
    assert _claim(store) == []
    store.release(first[0].run.execution_id, first[0].owner)
    got = store.claim_runs("w", ["default"], 10, time.time(), time.time() + 30)
    assert [(c.run.execution_id, c.reason) for c in got] == [
        (ids[0], ClaimReason.RECOVERED)]
    assert store.queue_counts(time.time()) == [QueueCounts("default", 3, 2)]
    later = time.time() + 60  # every lease above has expired by then
    assert len(_claim(store, now=later)) == 2


def test_per_workflow_limit_lets_other_workflows_through(store: Checkpointer) -> None:
    store.put_queue(QueueRecord("default", per_workflow=1))
    a1 = new_run(store, status="queued", workflow="a")
    a2 = new_run(store, status="queued", workflow="a")
    b1 = new_run(store, status="queued", workflow="b")
    for eid in (a1, a2, b1):
        store.enqueue_run(eid, "default")
    assert _claim(store) == [a1, b1]
    assert _claim(store) == []


def test_rate_limit_bounds_starts_in_any_window_but_not_recoveries(
        store: Checkpointer) -> None:
    """2 starts per 10 s window: a claim starts 2; within the window nothing more starts;
    a recovery (a released run) is not a start; after the window two more start."""
    store.put_queue(QueueRecord("default", rate_limit=0.2, rate_window=10.0))
    ids = [queued(store) for _ in range(5)]
    now = time.time()
    claimed = store.claim_runs("w", ["default"], 10, now, now + 30)
    assert [c.run.execution_id for c in claimed] == ids[:2]
    assert {store.get_run(i).started_at for i in ids[:2]} == {now}  # type: ignore[union-attr]
    store.release(ids[0], claimed[0].owner)
    assert _claim(store, now=now + 5) == [ids[0]]  # recovered, not started
    assert _claim(store, now=now + 10.5) == ids[2:4]


def test_concurrent_claimers_of_a_limited_queue_never_exceed_it(store: Checkpointer) -> None:
    """Eight threads claim at once from a queue limited to 3: 3 runs are taken in all."""
    store.put_queue(QueueRecord("default", concurrency=3))
    for _ in range(20):
        queued(store)
    barrier = threading.Barrier(8)

    def claim(_: int) -> int:
        barrier.wait()
        return len(_claim(store, 2))

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(claim, range(8))) == 3


def test_plan_filter_block_runs_and_claimable_plans(store: Checkpointer) -> None:
    """A claim narrowed to plans takes only their runs; claimable_plans lists the others;
    block_runs records a reason once; a claim clears it."""
    mine = new_run(store, status="queued", fingerprint="a" * 64)
    other = new_run(store, status="queued", fingerprint="b" * 64)
    for eid in (mine, other):
        store.enqueue_run(eid, "default")
    now = time.time()
    assert store.claimable_plans(["default"], now) == ["a" * 64, "b" * 64]
    assert store.claimable_plans(["default"], now, {"a" * 64}) == ["b" * 64]
    assert _claim(store, plans=set()) == []
    assert _claim(store, plans={"a" * 64}) == [mine]
    assert store.block_runs("b" * 64, ["default"], "lacks tasks: x", now) == 1
    assert store.block_runs("b" * 64, ["default"], "again", now) == 0
    run = store.get_run(other)
    assert run is not None and (run.status, run.blocked_reason) == ("queued", "lacks tasks: x")
    assert _claim(store) == [other]
    assert store.get_run(other).blocked_reason is None  # type: ignore[union-attr]


def test_retry_later_backs_off_and_counts_failures(store: Checkpointer) -> None:
    eid = queued(store)
    now = time.time()
    [claim] = store.claim_runs("w", ["default"], 1, now, now + 30)
    assert not store.retry_later(eid, "someone-else", now + 100, "boom")
    assert store.retry_later(eid, claim.owner, now + 100, "recovery failed: boom")
    run = store.get_run(eid)
    assert run is not None
    assert (run.owner, run.recovery_failures, run.blocked_reason) == (
        None, 1, "recovery failed: boom")
    assert _claim(store, now=now + 50) == []
    assert _claim(store, now=now + 101) == [eid]
