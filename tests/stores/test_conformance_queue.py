"""Store conformance, part 3: queued runs, the workers' claim, cancel requests, workers.

Every test runs against the in-memory, SQLite and PostgreSQL checkpointers.

Checks the protocol QueueStore (``tether.stores.contracts``).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from helpers import new_run, pause, row

from tether.errors import LeaseLost
from tether.stores.base import Checkpointer, SeenCancel
from tether.stores.events import RunEventKind
from tether.stores.owners import new_owner, parse_owner
from tether.stores.queueing import CancelOutcome, ClaimReason, QueueRecord, WorkerRecord
from tether.stores.records import RunRecord

pytestmark = pytest.mark.protocol("QueueStore")


def queued(store: Checkpointer, execution_id: str | None = None, *, queue: str = "default",
           priority: int = 0, available_at: float | None = None) -> str:
    eid = new_run(store, execution_id, status="queued")
    assert store.enqueue_run(eid, queue, priority, available_at)
    return eid


def _run(store: Checkpointer, eid: str) -> RunRecord:
    run = store.get_run(eid)
    assert run is not None
    return run


def test_a_claim_takes_queued_runs_by_priority_then_age_with_fresh_tokens(
        store: Checkpointer) -> None:
    """Higher priority first, then older; each claimed run is running under its own token
    and lease, its attempt counted; other queues and future runs are left alone."""
    now = time.time()
    old, new = queued(store), queued(store)
    urgent = queued(store, priority=5)
    queued(store, queue="other")
    queued(store, available_at=now + 3600)
    claimed = store.claim_runs("w1", ["default"], 2, now, now + 30)
    assert [c.run.execution_id for c in claimed] == [urgent, old]
    assert {c.reason for c in claimed} == {ClaimReason.QUEUED}
    assert len({c.owner for c in claimed}) == 2
    for claim in claimed:
        run = _run(store, claim.run.execution_id)
        assert (run.status, run.owner, run.lease_until) == ("running", claim.owner, now + 30)
        assert run.attempt == claim.run.attempt
    assert [c.run.execution_id for c in store.claim_runs("w1", ["default"], 5, now,
                                                         now + 30)] == [new]
    assert store.claim_runs("w1", ["default"], 5, now, now + 30) == []


def test_a_claimed_token_is_random_and_names_this_process(store: Checkpointer) -> None:
    """Each claimed run's token is 32 random hex digits and this process's ``@host/pid/...``
    (as ``new_owner``'s), so a holder that died on this machine is recognised as dead."""
    now = time.time()
    ids = {queued(store) for _ in range(3)}
    claimed = store.claim_runs("w1", ["default"], 3, now, now + 30)
    assert {c.run.execution_id for c in claimed} == ids
    mine = parse_owner(new_owner())
    assert mine is not None
    tokens = set()
    for claim in claimed:
        owner = parse_owner(claim.owner)
        assert owner is not None and len(owner.token) == 32
        int(owner.token, 16)
        assert (owner.host, owner.pid, owner.start) == (mine.host, mine.pid, mine.start)
        assert owner.boot_id == mine.boot_id and owner.pid_namespace == mine.pid_namespace
        tokens.add(owner.token)
    assert len(tokens) == 3


@pytest.mark.parametrize("limited", [False, True], ids=["plain", "limited"])
def test_a_claim_writes_each_claimed_runs_claimed_event(store: Checkpointer,
                                                        limited: bool) -> None:
    """With the claim (PostgreSQL: in the claim's statement for queues without limits, in
    its transaction for limited ones): owner the run's token, the attempt, reason
    ``claimed`` and the worker, at the claim's time; one event per claimed run, none for
    the runs left queued."""
    if limited:
        store.put_queue(QueueRecord("default", concurrency=5, created_at=1.0))
    now = time.time()
    ids = [queued(store) for _ in range(3)]
    claimed = store.claim_runs("worker-1", ["default"], 2, now, now + 30)
    assert [c.run.execution_id for c in claimed] == ids[:2]
    for claim in claimed:
        (event,) = store.events(claim.run.execution_id)
        assert (event.kind, event.owner, event.created_at) == (
            RunEventKind.CLAIMED, claim.owner, now)
        assert event.data == {"attempt": claim.run.attempt, "reason": "claimed",
                              "worker": "worker-1"}
        assert event.event_id[:19] == f"{int(now * 1e9):019d}" and len(event.event_id) == 27
    assert store.events(ids[2]) == []


def test_a_claim_recovers_expired_or_released_runs_and_answered_pauses(
        store: Checkpointer) -> None:
    """A running run whose lease expired (or was released) is claimed for recovery; a
    paused run only once a decision newer than its pause exists; a held run never."""
    now = time.time()
    expired = new_run(store, owner="dead", lease_until=now - 1)
    held = new_run(store, owner="alive", lease_until=now + 60)
    waiting = new_run(store, owner="me", lease_until=now + 60)
    for eid in (expired, held, waiting):
        store.enqueue_run(eid, "default")
    pause(store, waiting, owner="me")
    claimed = store.claim_runs("w", ["default"], 10, time.time(), time.time() + 30)
    assert [(c.run.execution_id, c.reason) for c in claimed] == [
        (expired, ClaimReason.RECOVERED)]
    pending = store.get_pending(waiting)
    assert pending is not None
    time.sleep(0.01)  # the decision's stored time must be after the pause's (clock ticks)
    assert store.claim(pending, {"approved": True}) is not None
    claimed = store.claim_runs("w", ["default"], 10, time.time(), time.time() + 30)
    assert [(c.run.execution_id, c.reason) for c in claimed] == [
        (waiting, ClaimReason.ANSWERED)]
    assert _run(store, held).owner == "alive"


def test_a_claim_orders_every_kind_of_claimable_run_together(store: Checkpointer) -> None:
    """Queued, recovered and answered runs are taken in one order, priority first then age,
    whatever their kind, and a claim of n takes the first n of all of them (the claim reads
    the first n of each kind in index order, then the first n of those)."""
    start = time.time() - 100
    oldest, older = (new_run(store, status="queued", created_at=start + i) for i in (0, 1))
    urgent = new_run(store, status="queued", created_at=start + 5)
    expired = new_run(store, owner="dead", lease_until=start, created_at=start + 2)
    waiting = new_run(store, owner="me", lease_until=time.time() + 60, created_at=start + 3)
    late = new_run(store, owner="dead", lease_until=start, created_at=start + 4)
    for eid, priority in ((oldest, 0), (older, 0), (urgent, 3), (expired, 2), (waiting, 1),
                          (late, 0)):
        assert store.enqueue_run(eid, "default", priority)
    pause(store, waiting, owner="me")
    pending = store.get_pending(waiting)
    assert pending is not None
    time.sleep(0.01)  # the decision's stored time must be after the pause's (clock ticks)
    assert store.claim(pending, {"approved": True}) is not None
    taken = []
    for _ in range(4):
        now = time.time()
        taken.append([(c.run.execution_id, c.reason)
                      for c in store.claim_runs("w", ["default"], 2, now, now + 30)])
    assert taken == [[(urgent, ClaimReason.QUEUED), (expired, ClaimReason.RECOVERED)],
                     [(waiting, ClaimReason.ANSWERED), (oldest, ClaimReason.QUEUED)],
                     [(older, ClaimReason.QUEUED), (late, ClaimReason.RECOVERED)],
                     []]


def test_runs_in_place_are_not_claimed(store: Checkpointer) -> None:
    """A run without a queue (tether run) is never claimed, even with its lease expired."""
    new_run(store, owner="dead", lease_until=time.time() - 1)
    assert store.claim_runs("w", ["default"], 10, time.time(), time.time() + 30) == []


def test_concurrent_claimers_never_get_the_same_run(store: Checkpointer) -> None:
    """Eight threads claiming at once from 40 queued runs: each run is claimed once."""
    eids = {queued(store) for _ in range(40)}
    barrier = threading.Barrier(8)

    def claim(_: int) -> list[str]:
        barrier.wait()
        got: list[str] = []
        while True:
            batch = store.claim_runs("w", ["default"], 3, time.time(), time.time() + 30)
            if not batch:
                return got
            got.extend(c.run.execution_id for c in batch)

    with ThreadPoolExecutor(8) as pool:
        results = [eid for got in pool.map(claim, range(8)) for eid in got]
    assert sorted(results) == sorted(eids)


def test_cancel_of_a_queued_run_is_at_once_and_of_a_held_run_a_request(
        store: Checkpointer) -> None:
    """Queued: cancelled at once and never claimed. Held: only the request is recorded.
    Finished: nothing changes. Unknown: None."""
    now = time.time()
    waiting = queued(store)
    assert store.request_cancel(waiting, now) == CancelOutcome.CANCELLED
    run = _run(store, waiting)
    assert (run.status, run.cancel_requested_at) == ("cancelled", now)
    assert run.error["type"] == "RunCancelled"
    assert store.claim_runs("w", ["default"], 10, now, now + 30) == []
    assert store.request_cancel(waiting, now) == CancelOutcome.FINISHED
    held = new_run(store, owner="me", lease_until=now + 60)
    assert store.request_cancel(held, now) == CancelOutcome.REQUESTED
    run = _run(store, held)
    assert (run.status, run.owner, run.cancel_requested_at) == ("running", "me", now)
    assert store.request_cancel("no-such-run", now) is None


def test_a_fenced_write_hands_its_reading_of_the_cancel_request_to_one_boundary(
        store: Checkpointer) -> None:
    """Where a fenced checkpoint write reads ``cancel_requested_at`` in its statement
    (PostgreSQL, once a worker called ``use_for_worker``), the next
    ``take_cancel_seen`` gets it once, newest write first; a write fenced out, a reading too
    old, the flag off and other stores give None (the boundary reads)."""
    now = time.time()
    held = new_run(store, owner="me", lease_until=now + 60)
    store.put(row(held, "off"), owner="me")
    assert store.take_cancel_seen(held, 60) is None  # `tether run`: plain fenced writes
    store.use_for_worker()
    store.put(row(held, "a"), owner="me")
    if not store.concurrent_connections:
        assert store.take_cancel_seen(held, 60) is None
        return
    assert store.take_cancel_seen(held, 60) == SeenCancel(None)
    assert store.take_cancel_seen(held, 60) is None  # handed out once
    assert store.request_cancel(held, now) == CancelOutcome.REQUESTED
    store.put(row(held, "b"), owner="me")
    store.put(row(held, "c"), owner="me")
    assert store.take_cancel_seen(held, 60) == SeenCancel(now)
    store.put(row(held, "d"), owner="me")
    time.sleep(0.02)
    assert store.take_cancel_seen(held, 0.01) is None  # too old
    with pytest.raises(LeaseLost):
        store.put(row(held, "e"), owner="someone else")
    assert store.take_cancel_seen(held, 60) is None


def test_a_paused_run_cancelled_loses_its_pending_interrupts(store: Checkpointer) -> None:
    eid = new_run(store, owner="me", lease_until=time.time() + 60)
    pause(store, eid, owner="me")
    assert store.request_cancel(eid, time.time()) == CancelOutcome.CANCELLED
    assert store.list_pending(eid) == []
    assert _run(store, eid).status == "cancelled"


def test_workers_register_heartbeat_list_and_deregister(store: Checkpointer) -> None:
    now = time.time()
    one = WorkerRecord("w1", "host-a", 11, ("default", "mail"), 4, now - 10, now - 10)
    two = WorkerRecord("w2", "host-b", 12, ("default",), 2, now - 5, now - 5)
    store.register_worker(one)
    store.register_worker(two)
    assert store.heartbeat_worker("w1", now, ["r1", "r2"])
    assert store.list_workers() == [replace(one, heartbeat_at=now, held=("r1", "r2")), two]
    assert [w.worker_id for w in store.list_workers(alive_since=now - 1)] == ["w1"]
    assert store.list_workers()[0].runs_held == 2
    store.deregister_worker("w1")
    assert not store.heartbeat_worker("w1", now, [])
    assert store.list_workers() == [two]


def test_enqueueing_a_failed_run_queues_it_again_for_a_claim(store: Checkpointer) -> None:
    """A failed run handed to the workers (``resume --enqueue``) is ``queued`` again and the
    next claim takes it; a completed or paused run keeps its status."""
    failed = new_run(store, status="failed")
    done = new_run(store, status="completed")
    assert not store.claim_runs("w", ["default"], 10, time.time(), time.time() + 30)
    assert store.enqueue_run(failed, "default") and store.enqueue_run(done, "default")
    assert (_run(store, failed).status, _run(store, done).status) == ("queued", "completed")
    [claim] = store.claim_runs("w", ["default"], 10, time.time(), time.time() + 30)
    assert (claim.run.execution_id, claim.reason) == (failed, ClaimReason.QUEUED)
    assert _run(store, failed).status == "running"
