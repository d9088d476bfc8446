"""Store conformance: what started a run (``runs.triggered_by``, migration 9) is stored with
it, read back by every read of the run (get, list, the workers' claim), and not shared with
the caller's objects.

Every test runs against the in-memory, SQLite and PostgreSQL checkpointers.

Checks the protocol RunStore (``tether.stores.contracts``).
"""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime

import pytest
from helpers import PLAN_JSON, new_run

from tether.runtime.ids import new_execution_id
from tether.stores.base import Checkpointer
from tether.stores.records import RunRecord
from tether.trigger import Trigger, TriggerKind

pytestmark = pytest.mark.protocol("RunStore")

HOOK = Trigger(TriggerKind.WEBHOOK, "webhook:deploy",
               {"ref": "refs/heads/main", "commits": [{"id": "abc", "msg": "Zoë"}]},
               {"x-github-event": "push"}, "72d3-1", "github", None,
               "2026-01-02T03:04:05+00:00")


def _create(store: Checkpointer, trigger: Trigger | None, status: str = "queued") -> str:
    eid = new_execution_id()
    now = datetime.now(UTC)
    store.create_run(RunRecord(
        execution_id=eid, workflow="wf", plan_fingerprint="f" * 64, status=status,
        inputs={"n": 1}, created_at=now, updated_at=now, attempt=0, queue="default",
        trigger=trigger), PLAN_JSON)
    return eid


def test_a_run_reads_back_with_its_trigger(store: Checkpointer) -> None:
    """Every field of the trigger round-trips: kind, actor, payload, headers, delivery,
    verify, tick, received_at."""
    eid = _create(store, HOOK)
    run = store.get_run(eid)
    assert run is not None and run.trigger == HOOK
    assert [r.trigger for r in store.list_runs() if r.execution_id == eid] == [HOOK]


def test_a_run_without_a_trigger_reads_none(store: Checkpointer) -> None:
    """A run created without one (as stored before migration 9) reads ``None``."""
    eid = new_run(store)
    run = store.get_run(eid)
    assert run is not None and run.trigger is None


def test_a_schedule_tick_round_trips(store: Checkpointer) -> None:
    tick = Trigger(TriggerKind.SCHEDULE, "schedule:nightly", tick="2026-01-02T03:00:00Z",
                   received_at="2026-01-02T03:00:01+00:00")
    run = store.get_run(_create(store, tick))
    assert run is not None and run.trigger == tick


def test_the_claim_returns_the_trigger(store: Checkpointer) -> None:
    """A worker's claim reads the run with its trigger (its templates need it)."""
    eid = _create(store, HOOK)
    now = time.time()
    claimed = store.claim_runs("w1", ["default"], 1, now, now + 30)
    assert [c.run.execution_id for c in claimed] == [eid]
    assert claimed[0].run.trigger == HOOK


def test_the_stored_trigger_is_not_the_callers_object(store: Checkpointer) -> None:
    """Changing the payload after create_run (or in a read copy) changes nothing stored."""
    payload = {"ref": "main"}
    trigger = dataclasses.replace(HOOK, payload=payload)
    eid = _create(store, trigger)
    payload["ref"] = "changed"
    first = store.get_run(eid)
    assert first is not None and first.trigger is not None
    first.trigger.payload["ref"] = "changed too"
    again = store.get_run(eid)
    assert again is not None and again.trigger is not None
    assert again.trigger.payload == {"ref": "main"}
