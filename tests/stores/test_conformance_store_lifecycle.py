"""Store conformance, part 2: interrupts and the claim, idempotency, leases, ending, pruning.

Every test runs against the in-memory, SQLite and PostgreSQL checkpointers.

Checks the protocols RunStore, IdempotencyStore, QueueStore (``tether.stores.contracts``).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from helpers import (
    footprint,
    new_run,
    orphans,
    pause,
    pending_for,
    row,
    run_end,
)

from tether.errors import LeaseLost, StoreError
from tether.status import RUN_END
from tether.stores.base import Checkpointer

pytestmark = pytest.mark.protocol("RunStore", "IdempotencyStore", "QueueStore")

# -- record_interrupt and pause_run ------------------------------------------------------------


def test_record_interrupt_writes_the_row_and_the_pending_row_and_keeps_the_owner(
        store: Checkpointer) -> None:
    """One call: interrupted checkpoint + pending row; the run stays with its owner (other
    branches may go on) until pause_run."""
    eid = new_run(store, owner="me", lease_until=time.time() + 60)
    interrupted = row(eid, "review", status="interrupted", step_type="hitl_pause",
                      reason="approve", context={"amount": 5})
    store.record_interrupt(interrupted, pending_for(interrupted), "me")
    assert list(store.rows(eid)) == [interrupted]
    pending = store.get_pending(eid)
    assert pending is not None
    assert (pending.checkpoint_id, pending.node_id, pending.reason, pending.context) == (
        interrupted.checkpoint_id, "review", "approve", {"amount": 5})
    assert pending.as_dict() == {"reason": "approve", "context": {"amount": 5},
                                 "node_id": "review", "agent_path": ""}
    assert dict(pending) == pending.as_dict() and pending["reason"] == "approve"
    run = store.get_run(eid)
    assert run is not None and (run.status, run.owner) == ("running", "me")


def test_pause_run_pauses_and_releases_only_its_owners_lease(store: Checkpointer) -> None:
    """pause_run marks the run paused and releases the caller's lease, never another's."""
    eid = new_run(store, owner="me", lease_until=time.time() + 60)
    interrupted = pause(store, eid, owner="me")
    run = store.get_run(eid)
    assert run is not None and (run.status, run.owner, run.lease_until) == ("paused", None, None)
    until = time.time() + 60
    other = new_run(store, owner="other", lease_until=until)
    pause(store, other)
    run = store.get_run(other)
    assert run is not None and (run.status, run.owner, run.lease_until) == ("paused", "other",
                                                                            until)
    assert store.get_pending(eid) is not None
    assert store.get_pending(eid).checkpoint_id == interrupted.checkpoint_id  # type: ignore


def test_pause_run_returns_answers_claimed_meanwhile_and_changes_nothing(
        store: Checkpointer) -> None:
    """An answer claimed between the owner's last look and its pause is handed back: the run
    is not paused, the owner keeps it."""
    eid = new_run(store, owner="me", lease_until=time.time() + 60)
    interrupted = row(eid, "review", status="interrupted", step_type="hitl_pause")
    store.record_interrupt(interrupted, pending_for(interrupted), "me")
    pending = store.get_pending(eid)
    assert pending is not None
    claim = store.claim(pending, {"approved": True}, owner="web", until=time.time() + 60,
                        now=time.time(), resolver="ada")
    assert claim is not None and not claim.owned  # "me" holds the run
    [answered] = store.pause_run(eid, "me", [interrupted.checkpoint_id])
    assert (answered.checkpoint_id, answered.value, answered.resolver) == (
        interrupted.checkpoint_id, {"approved": True}, "ada")
    run = store.get_run(eid)
    assert run is not None and (run.status, run.owner) == ("running", "me")


def test_several_units_of_one_run_may_wait_at_once_but_each_only_once(
        store: Checkpointer) -> None:
    """Pending rows are per unit: two units wait side by side; a second pause of the same unit
    (same agent_path and node) is refused and writes nothing."""
    eid = new_run(store)
    store.put(row(eid, "a"))
    first = pause(store, eid, "first")
    second = pause(store, eid, "second")
    assert [p.node_id for p in store.list_pending(eid)] == ["first", "second"]
    assert [p.checkpoint_id for p in store.list_pending(eid)] == [first.checkpoint_id,
                                                                  second.checkpoint_id]
    before = footprint(store, eid)
    again = row(eid, "first", status="interrupted", step_type="hitl_pause", reason="again")
    with pytest.raises(StoreError):
        store.record_interrupt(again, pending_for(again, "again"), None)
    assert footprint(store, eid) == before
    assert store.get(eid, again.checkpoint_id) is None


def test_the_frozen_context_cannot_be_changed_through_the_objects_passed_or_returned(
        store: Checkpointer) -> None:
    """The store keeps its own copy of a pending interrupt: mutating the record given to
    record_interrupt, or one read back, changes nothing stored."""
    eid = new_run(store)
    interrupted = row(eid, "review", status="interrupted", step_type="hitl_pause")
    given = pending_for(interrupted, context={"amount": 5, "lines": [1]})
    store.record_interrupt(interrupted, given, None)
    given.context["amount"] = 999
    read = store.get_pending(eid)
    assert read is not None
    read.context["lines"].append(2)
    store.list_pending()[0].context["new"] = True
    again = store.get_pending(eid)
    assert again is not None and again.context == {"amount": 5, "lines": [1]}
    claimed = store.delete_pending_interrupt_atomic(eid)
    assert claimed is not None and claimed.context == {"amount": 5, "lines": [1]}


def test_records_read_from_the_store_are_copies(store: Checkpointer) -> None:
    """Mutating a returned run or checkpoint changes nothing stored."""
    eid = new_run(store, inputs={"amount": 5})
    store.put(row(eid, "a"))
    run = store.get_run(eid)
    assert run is not None
    run.inputs["amount"] = 999
    store.list(eid)[0].state_snapshot["nodes"]["a"]["status"] = "failed"
    last = store.get_last(eid)
    assert last is not None
    last.state_snapshot["inputs"]["amount"] = 7
    fresh = store.get_run(eid)
    assert fresh is not None and fresh.inputs == {"amount": 5}
    assert store.list(eid)[0].state_snapshot == {"inputs": {"amount": 5}, "nodes": {
        "a": {"status": "completed"}}, "counters": {}}


# -- the claim --------------------------------------------------------------------------------


def test_the_claim_returns_the_pending_row_once_then_none(store: Checkpointer) -> None:
    """delete_pending_interrupt_atomic hands the row to one caller; later calls get None."""
    eid = new_run(store)
    interrupted = pause(store, eid)
    claimed = store.delete_pending_interrupt_atomic(eid)
    assert claimed is not None and claimed.checkpoint_id == interrupted.checkpoint_id
    assert store.get_pending(eid) is None
    assert store.delete_pending_interrupt_atomic(eid) is None
    assert store.delete_pending_interrupt_atomic("no-such-run") is None
    assert list(store.rows(eid)) == [interrupted]


def test_a_claim_records_the_decision_and_takes_a_free_run(store: Checkpointer) -> None:
    """The claim stores the answer (with who answered, and why) bound to the interrupted
    checkpoint, and takes the lease of a run nobody holds; one attempt more is counted."""
    eid = new_run(store)
    interrupted = pause(store, eid)
    pending = store.get_pending(eid)
    assert pending is not None
    claim = store.claim(pending, {"approved": True}, owner="me", until=1e12, now=100.0,
                        resolver="ada", comment="looks fine")
    assert claim is not None and claim.owned and claim.pending == pending
    run = store.get_run(eid)
    assert run is not None
    assert (run.status, run.owner, run.lease_until, run.attempt) == ("running", "me", 1e12, 2)
    [decision] = store.decisions(eid)
    assert (decision.checkpoint_id, decision.node_id, decision.value, decision.resolver,
            decision.comment) == (interrupted.checkpoint_id, "review", {"approved": True},
                                  "ada", "looks fine")
    store.replace_decision(replace(decision, value={"approved": False}), "me")
    assert [d.value for d in store.decisions(eid)] == [{"approved": False}]


def test_a_claim_on_a_run_another_attempt_holds_records_the_answer_only(
        store: Checkpointer) -> None:
    """A live holder keeps the run: the claim records the answer and does not take it."""
    eid = new_run(store, owner="other", lease_until=1e12)
    pause(store, eid, owner="other")
    store.acquire(eid, "other", until=1e12, now=100.0)
    pending = store.get_pending(eid)
    assert pending is not None
    claim = store.claim(pending, {"ok": 1}, owner="me", until=1e12, now=100.0)
    assert claim is not None and not claim.owned
    run = store.get_run(eid)
    assert run is not None and run.owner == "other"
    assert [d.value for d in store.decisions(eid)] == [{"ok": 1}]


def test_a_failed_claim_changes_nothing(store: Checkpointer) -> None:
    """Claiming a pending row that is gone neither takes the run nor stores a decision."""
    eid = new_run(store)
    pause(store, eid)
    pending = store.get_pending(eid)
    assert pending is not None
    assert store.claim(pending, {"v": 1}) is not None
    before = (footprint(store, eid), store.decisions(eid))
    assert store.claim(pending, {"v": 2}, owner="me", until=1e12, now=100.0) is None
    assert (footprint(store, eid), store.decisions(eid)) == before


def test_exactly_one_of_many_concurrent_claimers_gets_the_row(store: Checkpointer) -> None:
    """Threads racing to claim one pending interrupt: one winner, every other gets None; the
    winner's answer is the one recorded and the winner holds the run."""
    eid = new_run(store)
    pause(store, eid)
    pending = store.get_pending(eid)
    assert pending is not None
    gate = threading.Barrier(12)

    def claim(index: int) -> bool:
        gate.wait()
        return store.claim(pending, {"value": index}, owner=f"worker-{index}", until=1e12,
                           now=100.0) is not None

    with ThreadPoolExecutor(12) as pool:
        wins = list(pool.map(claim, range(12)))
    assert wins.count(True) == 1
    run = store.get_run(eid)
    winner = wins.index(True)
    assert run is not None and run.owner == f"worker-{winner}"
    assert [d.value for d in store.decisions(eid)] == [{"value": winner}]


def test_list_pending_is_oldest_first_and_shows_only_waiting_units(store: Checkpointer) -> None:
    """list_pending returns every pending interrupt, oldest first; claimed ones disappear."""
    first, second, third = new_run(store), new_run(store), new_run(store)
    base = time.time()
    for n, eid in enumerate((first, second, third)):
        pause(store, eid, created_at=base + n)
    assert [p.execution_id for p in store.list_pending()] == [first, second, third]
    store.delete_pending_interrupt_atomic(second)
    assert [p.execution_id for p in store.list_pending()] == [first, third]
    assert [p.execution_id for p in store.list_pending(third)] == [third]


# -- fencing ----------------------------------------------------------------------------------


def test_every_write_of_an_owner_that_lost_the_run_is_refused_and_writes_nothing(
        store: Checkpointer) -> None:
    """After another attempt took the run, each write fenced on the old token raises
    LeaseLost and changes nothing: checkpoint, interrupt, pause, idempotency entry, plan
    switch, decision, run end."""
    eid = new_run(store, owner="old", lease_until=50.0)
    store.put(row(eid, "a"), "old")
    assert store.acquire(eid, "new", until=1e12, now=100.0)
    before = footprint(store, eid)
    interrupted = row(eid, "review", status="interrupted", step_type="hitl_pause")
    writes = [
        lambda: store.put(row(eid, "b"), "old"),
        lambda: store.record_interrupt(interrupted, pending_for(interrupted), "old"),
        lambda: store.pause_run(eid, "old", []),
        lambda: store.put_idempotent(eid, "k", "1", owner="old"),
        lambda: store.set_run_plan(eid, "e" * 64, "{}", "old"),
        lambda: store.finish_run(run_end(eid), "completed", None, "old"),
        lambda: store.finish_run(run_end(eid), "completed", None, "old",
                                 last_node=row(eid, "c")),
    ]
    for write in writes:
        with pytest.raises(LeaseLost) as lost:
            write()
        assert lost.value.execution_id == eid
    assert footprint(store, eid) == before
    assert store.get_idempotent(eid, "k") is None
    assert not store.renew(eid, "old", 1e12)
    store.put(row(eid, "b"), "new")  # the holder writes


def test_a_fenced_write_on_a_run_nobody_holds_is_refused(store: Checkpointer) -> None:
    """Released (Ctrl-C) or expired-and-taken: an owner token that is not on the run row never
    writes, even while the row has no owner at all."""
    eid = new_run(store, owner="me", lease_until=1e12)
    store.release(eid, "me")
    with pytest.raises(LeaseLost):
        store.put(row(eid, "a"), "me")
    assert list(store.rows(eid)) == []


# -- idempotency ------------------------------------------------------------------------------


def test_idempotency_cache_first_writer_wins(store: Checkpointer) -> None:
    """put_idempotent keeps the first value and returns it to every later writer."""
    eid = new_run(store)
    assert store.get_idempotent(eid, "k") is None
    assert store.put_idempotent(eid, "k", '{"id":1}') == '{"id":1}'
    assert store.put_idempotent(eid, "k", '{"id":2}') == '{"id":1}'
    assert store.get_idempotent(eid, "k") == '{"id":1}'


def test_a_cached_null_is_a_hit(store: Checkpointer) -> None:
    """A function that returned None is cached as the text "null", not as a miss."""
    eid = new_run(store)
    store.put_idempotent(eid, "k", "null")
    assert store.get_idempotent(eid, "k") == "null"
    assert store.put_idempotent(eid, "k", "1") == "null"


def test_idempotency_rows_belong_to_one_execution(store: Checkpointer) -> None:
    """The same key in another execution is a miss."""
    one, two = new_run(store), new_run(store)
    store.put_idempotent(one, "k", "1")
    assert store.get_idempotent(two, "k") is None
    assert store.put_idempotent(two, "k", "2") == "2"


def test_concurrent_idempotency_writers_all_see_the_first_value(store: Checkpointer) -> None:
    """Racing put_idempotent calls agree on one stored value."""
    eid = new_run(store)
    gate = threading.Barrier(8)

    def put(index: int) -> str:
        gate.wait()
        return store.put_idempotent(eid, "k", str(index))

    with ThreadPoolExecutor(8) as pool:
        seen = set(pool.map(put, range(8)))
    assert len(seen) == 1
    assert store.get_idempotent(eid, "k") == seen.pop()


# -- leases -----------------------------------------------------------------------------------


def test_a_free_lease_is_acquired_and_marks_the_run_running(store: Checkpointer) -> None:
    """acquire on a run with no owner takes it and sets status running."""
    eid = new_run(store, status="paused")
    assert store.acquire(eid, "me", until=200.0, now=100.0)
    run = store.get_run(eid)
    assert run is not None and (run.owner, run.lease_until, run.status) == ("me", 200.0,
                                                                            "running")


def test_a_live_lease_of_another_owner_is_refused_and_unchanged(store: Checkpointer) -> None:
    """acquire fails on a lease held by someone else that has not expired."""
    eid = new_run(store, owner="other", lease_until=500.0, status="paused")
    before = footprint(store, eid)
    assert not store.acquire(eid, "me", until=900.0, now=100.0)
    assert footprint(store, eid) == before
    assert not store.acquire("no-such-run", "me", until=900.0, now=100.0)


def test_expired_own_and_dead_leases_can_be_taken(store: Checkpointer) -> None:
    """An expired lease, our own lease, and a lease of a named dead owner are all free."""
    eid = new_run(store, owner="other", lease_until=50.0)
    assert store.acquire(eid, "me", until=300.0, now=100.0)  # expired
    assert store.acquire(eid, "me", until=400.0, now=100.0)  # ours
    assert not store.acquire(eid, "third", until=500.0, now=100.0)
    assert store.acquire(eid, "third", until=500.0, now=100.0, steal_from="me")  # dead owner
    run = store.get_run(eid)
    assert run is not None and (run.owner, run.lease_until, run.attempt) == ("third", 500.0, 3)


def test_renew_and_release_only_work_for_the_holder(store: Checkpointer) -> None:
    """renew extends only our lease; release by another owner is a no-op."""
    eid = new_run(store, owner="me", lease_until=100.0)
    assert store.renew(eid, "me", 300.0)
    assert not store.renew(eid, "other", 900.0)
    store.release(eid, "other")
    run = store.get_run(eid)
    assert run is not None and (run.owner, run.lease_until) == ("me", 300.0)
    store.release(eid, "me")
    run = store.get_run(eid)
    assert run is not None and (run.owner, run.lease_until) == (None, None)
    assert not store.renew(eid, "me", 900.0)


def test_taking_the_lease_of_a_completed_run_never_makes_it_look_running(
        store: Checkpointer) -> None:
    """A finished run stays completed even if a resumer briefly takes its lease."""
    eid = new_run(store)
    store.finish_run(run_end(eid), "completed", None, None)
    assert store.acquire(eid, "me", until=200.0, now=100.0)
    store.release(eid, "me")
    run = store.get_run(eid)
    assert run is not None and run.status == "completed"
    assert [r.execution_id for r in store.list_runs(status="running")] == []


# -- finish_run -------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["completed", "failed"])
def test_finish_run_writes_the_marker_sets_the_status_and_releases_the_lease(
        store: Checkpointer, status: str) -> None:
    """finish_run: the run_end row, the final status and error, and no owner, together."""
    eid = new_run(store, owner="me", lease_until=time.time() + 60)
    store.put(row(eid, "a"))
    error = {"type": "ValueError", "message": "bad", "node_id": "a"} if status == "failed" \
        else None
    marker = run_end(eid, status)
    store.finish_run(marker, status, error, "me")
    last = store.get_last(eid)
    assert last is not None and last.checkpoint_id == marker.checkpoint_id
    run = store.get_run(eid)
    assert run is not None
    assert (run.status, run.error, run.owner, run.lease_until) == (status, error, None, None)


@pytest.mark.parametrize("owner", ["me", None], ids=["fenced", "unfenced"])
def test_finish_run_writes_the_last_nodes_row_before_the_marker_in_one_transaction(
        store: Checkpointer, owner: str | None) -> None:
    """finish_run with ``last_node``: that row, then the run_end row, the final status and
    no owner, together; read back in that order, as two writes would have left them."""
    eid = new_run(store, owner=owner, lease_until=time.time() + 60 if owner else None)
    store.put(row(eid, "a"), owner)
    last = row(eid, "b")
    marker = run_end(eid)
    store.finish_run(marker, "completed", None, owner, last_node=last)
    assert [(r.node_id, r.checkpoint_id) for r in store.rows(eid)][-2:] == [
        ("b", last.checkpoint_id), (RUN_END, marker.checkpoint_id)]
    run = store.get_run(eid)
    assert run is not None and (run.status, run.owner, run.lease_until) == (
        "completed", None, None)


def test_finish_run_whose_marker_exists_writes_neither_row(store: Checkpointer) -> None:
    """A finish_run whose run_end row is already stored (a retry after a commit whose reply
    was lost) fails whole: the last node's row is not written a second time or alone."""
    eid = new_run(store, owner="me", lease_until=time.time() + 60)
    marker = run_end(eid)
    store.put(marker, "me")
    with pytest.raises(StoreError):
        store.finish_run(marker, "completed", None, "me", last_node=row(eid, "b"))
    assert [r.node_id for r in store.rows(eid)] == [RUN_END]


# -- list_runs --------------------------------------------------------------------------------


def test_list_runs_is_newest_first_with_a_status_filter_and_a_limit(store: Checkpointer) -> None:
    """list_runs orders by creation time (newest first), filters by status, honours limit."""
    base = time.time()
    old = new_run(store, created_at=base - 30)
    middle = new_run(store, created_at=base - 20, status="paused")
    new = new_run(store, created_at=base - 10)
    assert [r.execution_id for r in store.list_runs()] == [new, middle, old]
    assert [r.execution_id for r in store.list_runs(status="running")] == [new, old]
    assert [r.execution_id for r in store.list_runs(status="paused")] == [middle]
    assert [r.execution_id for r in store.list_runs(limit=2)] == [new, middle]
    assert store.list_runs(status="completed") == []


def test_list_runs_breaks_creation_time_ties_by_execution_id(store: Checkpointer) -> None:
    """Runs created at the same instant come back in descending execution id order."""
    moment = time.time()
    ids = [new_run(store, created_at=moment) for _ in range(4)]
    assert [r.execution_id for r in store.list_runs()] == sorted(ids, reverse=True)


# -- prune ------------------------------------------------------------------------------------


def _soon(seconds: float = 1.0) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def test_prune_takes_a_duration_and_refuses_a_number_or_a_moment(store: Checkpointer) -> None:
    """prune(older_than) is a timedelta: a Unix time or a datetime is a TypeError naming the
    fix (it once deleted a run that had finished a second earlier), and nothing is deleted."""
    eid = _finished(store)
    for wrong in (time.time() + 1, 7, datetime.now(UTC)):
        with pytest.raises(TypeError, match="timedelta"):
            store.prune(wrong)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timezone-aware"):
        store.prune_before(datetime.now())
    assert store.prune(timedelta(days=7)).runs == 0
    assert store.get_run(eid) is not None
    assert store.prune(timedelta(0)).execution_ids == (eid,)


def _finished(store: Checkpointer, status: str = "completed", fingerprint: str = "f" * 64,
              rows: int = 3) -> str:
    eid = new_run(store, fingerprint=fingerprint)
    for index in range(rows):
        store.put(row(eid, f"n{index}"))
    store.put_idempotent(eid, "k", "1")
    store.finish_run(run_end(eid, status), status, None, None)
    return eid


def test_prune_deletes_finished_runs_older_than_the_cutoff_with_all_their_rows(
        store: Checkpointer) -> None:
    """A completed run before the cutoff goes entirely: run, checkpoints, cached results."""
    eid = _finished(store)
    result = store.prune_before(_soon())
    assert (result.runs, result.checkpoints, result.idempotency_rows) == (1, 4, 1)
    assert result.execution_ids == (eid,)
    assert store.get_run(eid) is None
    assert store.list(eid) == []
    assert store.get_idempotent(eid, "k") is None
    assert orphans(store) == {"checkpoints": set(), "pending": set(), "idempotency": set()}


def test_prune_keeps_runs_that_finished_after_the_cutoff(store: Checkpointer) -> None:
    """Only runs whose last change is older than the cutoff are pruned."""
    cutoff = datetime.now(UTC) - timedelta(hours=1)
    eid = _finished(store)
    before = footprint(store, eid)
    assert store.prune_before(cutoff).runs == 0
    assert store.prune(timedelta(days=7)).runs == 0
    assert footprint(store, eid) == before


def test_prune_never_touches_paused_or_running_runs(store: Checkpointer) -> None:
    """Paused and running runs keep their checkpoints, pending row and cached results."""
    paused = new_run(store)
    store.put(row(paused, "a"))
    store.put_idempotent(paused, "k", "1")
    pause(store, paused)
    running = new_run(store)
    store.put(row(running, "a"))
    store.put_idempotent(running, "k", "2")
    before = [footprint(store, paused), footprint(store, running)]
    assert store.prune_before(_soon(3600), include_failed=True).runs == 0
    assert [footprint(store, paused), footprint(store, running)] == before
    assert (store.get_idempotent(paused, "k"), store.get_idempotent(running, "k")) == ("1", "2")
    assert store.get_plan("f" * 64) is not None


def test_prune_removes_failed_runs_only_when_asked(store: Checkpointer) -> None:
    """A failed run may still be resumed: it is pruned only with include_failed."""
    eid = _finished(store, "failed")
    before = footprint(store, eid)
    assert store.prune_before(_soon()).runs == 0
    assert footprint(store, eid) == before
    assert store.prune_before(_soon(), include_failed=True).execution_ids == (eid,)
    assert store.get_run(eid) is None and store.list(eid) == []


def test_a_pruned_run_that_once_paused_leaves_nothing_that_looks_paused(
        store: Checkpointer) -> None:
    """Prune removes whole runs: no leftover interrupted row or pending row survives."""
    eid = new_run(store)
    store.put(row(eid, "a"))
    pause(store, eid)
    assert store.delete_pending_interrupt_atomic(eid) is not None
    store.acquire(eid, "me", until=1e12, now=100.0)
    store.put(row(eid, "review"))
    store.finish_run(run_end(eid), "completed", None, "me")
    store.prune_before(_soon())
    assert store.get_run(eid) is None
    assert store.latest_resumable(eid) is None and store.rows(eid) == []
    assert store.get_pending(eid) is None
    assert eid not in {p.execution_id for p in store.list_pending()}
    assert orphans(store) == {"checkpoints": set(), "pending": set(), "idempotency": set()}


def test_prune_leaves_no_orphans_among_many_runs(store: Checkpointer) -> None:
    """After pruning a mix of runs, every remaining row belongs to a remaining run."""
    finished = [_finished(store) for _ in range(3)] + [_finished(store, "failed")]
    paused = new_run(store)
    pause(store, paused)
    store.put_idempotent(paused, "k", "1")
    result = store.prune_before(_soon())
    assert set(result.execution_ids) == set(finished[:3])
    assert orphans(store) == {"checkpoints": set(), "pending": set(), "idempotency": set()}
    remaining = {r.execution_id for r in store.list_runs()}
    assert remaining == {finished[3], paused}
    run = store.get_run(paused)
    assert run is not None and run.status == "paused" and store.get_pending(paused) is not None


def test_prune_removes_plans_no_remaining_run_uses(store: Checkpointer) -> None:
    """A plan goes with its last run; plans still used by a kept run stay."""
    _finished(store, fingerprint="a" * 64)
    _finished(store, fingerprint="b" * 64)
    kept = new_run(store, fingerprint="b" * 64)
    pause(store, kept)
    store.prune_before(_soon())
    assert store.get_plan("a" * 64) is None
    assert store.get_plan("b" * 64) is not None
