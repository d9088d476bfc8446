"""A worker that gives a claimed run back unused closes the claim's ``claimed`` event with a
``released`` one (``stores/events.released_event``), written in the release's transaction
and only while the claim still holds the run, on every store; the history every surface
renders (``build_history``: ``tether show --history``, the API, the console) shows it as it
shows any released attempt, and a later claim does not count the released one as abandoned.

The run given back: its owner died after writing the run's end checkpoint and before ending
its row, so a worker recovering it finds it finished (``AlreadyResumed``)."""

from __future__ import annotations

import json
import threading
import time

from conftest import wait_for
from tether.compiler.plan import Plan, TaskNode, with_fingerprint
from tether.runtime.history import EventKind
from tether.runtime.history_build import build_history
from tether.runtime.history_text import describe
from tether.runtime.ids import new_checkpoint_id
from tether.runtime.runner import Runner
from tether.status import RUN_END
from tether.stores.base import Checkpointer
from tether.stores.events import RunEventKind, released_event
from tether.stores.records import CheckpointRow
from tether.workers.loop import Worker


def _plan() -> Plan:
    return with_fingerprint(Plan(name="one", nodes=(TaskNode(id="n0", index=0, task="t"),),
                                 generations=(("n0",),)))


def _run_end(execution_id: str) -> CheckpointRow:
    checkpoint_id = new_checkpoint_id()
    return CheckpointRow(execution_id=execution_id, checkpoint_id=checkpoint_id,
                         node_id=RUN_END, node_index=99, step_type=RUN_END,
                         status="completed", base_id=checkpoint_id, is_full=True,
                         state=json.dumps({"nodes": {}, "counters": {}}),
                         created_at=time.time())


def test_a_claim_given_back_is_closed_by_a_released_event(store: Checkpointer) -> None:
    eid = Runner(_plan(), store).submit({})
    now = time.time()
    assert store.acquire(eid, "dead-owner", now - 1, now)  # its lease has expired
    store.put(_run_end(eid), "dead-owner")
    worker = Worker(store, {"t": lambda: 1}, concurrency=1, poll_seconds=0.05)
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    thread.start()

    def claims() -> list[tuple[RunEventKind, str | None]]:
        return [(e.kind, e.owner) for e in store.events(eid)
                if e.kind in (RunEventKind.CLAIMED, RunEventKind.RELEASED)]
    try:
        wait_for(lambda: RunEventKind.RELEASED in dict(claims()), 60,
                 "the worker to give the run back")
    finally:
        worker.stop()
        thread.join(30)
    seen = claims()
    assert len(seen) >= 2 and [kind for kind, _ in seen[:2]] == [
        RunEventKind.CLAIMED, RunEventKind.RELEASED]
    for (claimed, owner), (released, same) in zip(seen[::2], seen[1::2], strict=False):
        assert (claimed, released, same) == (RunEventKind.CLAIMED, RunEventKind.RELEASED,
                                            owner)  # each claim closed by its own owner
    event = next(e for e in store.events(eid) if e.kind == RunEventKind.RELEASED)
    assert event.data["worker"] == worker.worker_id and event.data["reason"] == "claimed"
    assert event.data["why"].startswith("given back: ")
    history = build_history(store, eid)
    kinds = [e.kind for e in history.events]
    assert EventKind.RELEASED in kinds and EventKind.NODE_ABANDONED not in kinds
    shown = next(e for e in history.events if e.kind == EventKind.RELEASED)
    assert shown.reason == event.data["why"]
    assert describe(shown).endswith(f": {event.data['why']}")  # show's line, the console's


def test_a_release_records_its_event_only_while_the_owner_holds_the_run(
        store: Checkpointer) -> None:
    """``release(eid, owner, event)``: the event with the release; nothing from an owner
    the run no longer names (taken over meanwhile)."""
    eid = Runner(_plan(), store).submit({})
    now = time.time()
    assert store.acquire(eid, "first", now + 60, now)
    store.release(eid, "first", released_event(eid, "first", 1, "w", "given back: test"))
    assert store.acquire(eid, "second", now + 60, now)
    store.release(eid, "first", released_event(eid, "first", 1, "w", "given back: late"))
    released = [e for e in store.events(eid) if e.kind == RunEventKind.RELEASED]
    assert [(e.owner, e.data["why"]) for e in released] == [("first", "given back: test")]
    run = store.get_run(eid)
    assert run is not None and run.owner == "second"


def test_retry_later_records_its_event_only_while_the_owner_holds_the_run(
        store: Checkpointer) -> None:
    """``retry_later(..., event)``: the ``released`` event with the backoff, atomically; an
    owner the run no longer names changes nothing and records nothing."""
    eid = Runner(_plan(), store).submit({})
    now = time.time()
    assert store.acquire(eid, "first", now + 60, now)
    assert store.retry_later(eid, "first", now + 1, "recovery failed 1 time(s)",
                             released_event(eid, "first", 1, "w", "recovery failed 1 time(s)"))
    assert store.acquire(eid, "second", now + 60, now + 2)
    assert not store.retry_later(eid, "first", now + 5, "late",
                                 released_event(eid, "first", 1, "w", "late"))
    released = [e for e in store.events(eid) if e.kind == RunEventKind.RELEASED]
    assert [(e.owner, e.data["why"]) for e in released] == [
        ("first", "recovery failed 1 time(s)")]
    run = store.get_run(eid)
    assert run is not None and (run.owner, run.recovery_failures) == ("second", 1)


def test_a_claim_whose_drive_fails_is_closed_by_a_released_event(store: Checkpointer) -> None:
    """A worker whose drive of a claimed run fails for a reason other than fencing (here the
    run's last checkpoint holds a state that cannot be read) puts the run back with a
    backoff (``retry_later``) and closes its claim with a ``released`` event saying why."""
    eid = Runner(_plan(), store).submit({})
    now = time.time()
    assert store.acquire(eid, "dead-owner", now - 1, now)  # its lease has expired
    checkpoint_id = new_checkpoint_id()
    store.put(CheckpointRow(execution_id=eid, checkpoint_id=checkpoint_id, node_id="n0",
                            node_index=0, step_type="task", status="completed",
                            base_id=checkpoint_id, is_full=True, state="{not json",
                            created_at=time.time()), "dead-owner")
    worker = Worker(store, {"t": lambda: 1}, concurrency=1, poll_seconds=0.05)
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    thread.start()
    try:
        wait_for(lambda: any(e.kind == RunEventKind.RELEASED for e in store.events(eid)), 60,
                 "the worker to put the run back")
    finally:
        worker.stop()
        thread.join(30)
    seen = [(e.kind, e.owner) for e in store.events(eid)
            if e.kind in (RunEventKind.CLAIMED, RunEventKind.RELEASED)]
    assert [kind for kind, _ in seen[:2]] == [RunEventKind.CLAIMED, RunEventKind.RELEASED]
    assert seen[0][1] == seen[1][1]  # closed by the claim's own owner
    event = next(e for e in store.events(eid) if e.kind == RunEventKind.RELEASED)
    assert event.data["why"].startswith("recovery failed 1 time(s), next try in ")
    run = store.get_run(eid)
    assert run is not None and run.recovery_failures >= 1 and run.owner is None
    assert run.blocked_reason is not None and run.blocked_reason.startswith("recovery failed")
