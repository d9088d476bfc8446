"""Store conformance, part 4: run events (``run_events``, migration 8): append, page, the
``answered`` event a claim writes in its own transaction, and prune.

Every test runs against the in-memory, SQLite and PostgreSQL checkpointers.

Checks the protocol EventStore (``tether.stores.contracts``).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from helpers import new_run, pause, pending_for, row, run_end

from tether.stores.base import Checkpointer
from tether.stores.events import AnswerChannel, RunEvent, RunEventKind

pytestmark = pytest.mark.protocol("EventStore")


def test_events_read_back_in_order_with_every_field(store: Checkpointer) -> None:
    """Events come back oldest first (by event id), each field as written, per run."""
    eid, other = new_run(store), new_run(store)
    first = RunEvent(eid, RunEventKind.CLAIMED, 100.0, owner="tok@h/1/2/3/4",
                     data={"attempt": 1, "reason": "started", "worker": None})
    second = RunEvent(eid, RunEventKind.CANCEL_REQUESTED, 101.0, actor="ana",
                      data={"note": "ünï"})
    store.add_event(second)
    store.add_event(first)
    store.add_event(RunEvent(other, RunEventKind.RELEASED, 100.5))
    assert store.events(eid) == [first, second]
    assert store.events(eid)[0].kind is RunEventKind.CLAIMED
    assert store.events(eid, after=first.event_id) == [second]
    assert store.events(eid, limit=1) == [first]
    assert store.events("missing") == []


def test_a_claim_with_a_channel_records_the_answer_event_with_it(store: Checkpointer) -> None:
    """claim(..., channel=...) writes one ``answered`` event naming resolver and channel; a
    claim without a channel, or a lost claim, writes none."""
    eid = new_run(store)
    interrupted = pause(store, eid)
    pending = pending_for(interrupted)
    assert store.claim(pending, {"approved": True}, resolver="ana",
                       channel=AnswerChannel.CONSOLE) is not None
    assert store.claim(pending, {"approved": False}, resolver="bob",
                       channel=AnswerChannel.CLI) is None  # lost: nothing recorded
    (event,) = store.events(eid)
    assert (event.kind, event.actor, event.channel) == (RunEventKind.ANSWERED, "ana", "console")
    assert event.data == {"address": "review", "checkpoint_id": interrupted.checkpoint_id,
                          "reason": "approve"}
    other = new_run(store)
    assert store.claim(pending_for(pause(store, other)), {}) is not None
    assert store.events(other) == []


def test_concurrent_claims_record_exactly_one_answer_event(store: Checkpointer) -> None:
    """Eight threads claim one pause, each through its own channel: one wins, and the one
    event names the winner's channel."""
    eid = new_run(store)
    pending = pending_for(pause(store, eid))
    channels = [AnswerChannel.CLI, AnswerChannel.CONSOLE, AnswerChannel.API,
                AnswerChannel.LINK] * 2
    won: list[str] = []
    barrier = threading.Barrier(len(channels))

    def claim(channel: AnswerChannel) -> None:
        barrier.wait()
        if store.claim(pending, {"approved": True}, channel=channel) is not None:
            won.append(channel)

    threads = [threading.Thread(target=claim, args=(c,)) for c in channels]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert [e.channel for e in store.events(eid)] == won


def test_prune_deletes_a_runs_events_with_it(store: Checkpointer) -> None:
    """A pruned run leaves no event behind; a kept run keeps its events."""
    gone, kept = new_run(store), new_run(store)
    for eid in (gone, kept):
        store.add_event(RunEvent(eid, RunEventKind.CLAIMED, data={"attempt": 1}))
    store.put(row(gone, "a"))
    store.finish_run(run_end(gone, "completed"), "completed", None, None)
    assert store.prune_before(datetime.now(UTC) + timedelta(seconds=1)).runs == 1
    assert store.events(gone) == []
    assert len(store.events(kept)) == 1
