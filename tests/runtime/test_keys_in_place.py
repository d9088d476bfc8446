"""Concurrency keys in the runtime: the key rendered at submission, runs started in place
(``Runner.run``) waiting for their key or cancelling the older run at a node boundary, the
history telling why; on the in-memory, SQLite and PostgreSQL stores (``store`` fixture) and
on one SQLite file shared by threads (``shared_url``)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import tether
from tether import ConcurrencyLimitReached, Runner, open_checkpointer
from tether.errors import InputError
from tether.runtime.concurrency import render_key
from tether.runtime.history import EventKind
from tether.runtime.history_build import build_history
from tether.stores.base import Checkpointer

KEYED = """\
tether: 1
name: deploy
inputs:
  branch: {{type: string}}
  tag: {{type: string, default: ""}}
concurrency: {{key: "{key}", limit: {limit}, on_conflict: {policy}}}
nodes:
  first: {{task: gate, with: {{tag: "{{{{ inputs.tag }}}}"}}}}
  second: {{task: record, needs: first, with: {{tag: "{{{{ inputs.tag }}}}"}}}}
"""

GATES: dict[str, threading.Event] = {}
ENTERED: dict[str, threading.Event] = {}
RECORDED: list[str] = []


def gate(tag: str) -> str:
    if tag in GATES:
        ENTERED[tag].set()
        assert GATES[tag].wait(30)
    RECORDED.append(f"first {tag}")
    return tag


def record(tag: str) -> str:
    RECORDED.append(f"second {tag}")
    return tag


TASKS = {"gate": gate, "record": record}


def workflow(tmp_path: Path, policy: str = "queue", limit: int = 1,
             key: str = "{{ inputs.branch }}") -> Path:
    path = tmp_path / f"deploy_{policy}.yaml"
    path.write_text(KEYED.format(key=key, limit=limit, policy=policy), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _clean() -> None:
    GATES.clear()
    ENTERED.clear()
    RECORDED.clear()


def _hold(tag: str) -> threading.Event:
    GATES[tag], ENTERED[tag] = threading.Event(), threading.Event()
    return GATES[tag]


def test_the_key_is_rendered_and_stored_with_the_run(store: Checkpointer,
                                                      tmp_path: Path) -> None:
    runner = Runner(workflow(tmp_path, limit=3), store, TASKS)
    run = store.get_run(runner.submit({"branch": "main"}))
    assert run is not None
    assert (run.concurrency_key, run.concurrency_limit) == ("main", 3)


def test_a_key_rendering_null_or_empty_leaves_the_run_unkeyed(tmp_path: Path) -> None:
    plan = tether.compile(workflow(tmp_path, key="{{ inputs.tag or none }}"))
    assert render_key(plan, {"branch": "x", "tag": ""}) is None
    assert render_key(plan, {"branch": "x", "tag": "v1"}) == "v1"
    long = tether.compile(workflow(tmp_path, key="{{ inputs.branch * 600 }}"))
    with pytest.raises(InputError, match="at most 1,000"):
        render_key(long, {"branch": "ab"})


def test_a_plan_without_concurrency_keeps_its_json(tmp_path: Path) -> None:
    keyed = tether.compile(workflow(tmp_path))
    assert keyed.concurrency is not None
    assert json.loads(keyed.to_json())["concurrency"] == {
        "key": "{{ inputs.branch }}", "limit": 1, "on_conflict": "queue"}
    plain = tmp_path / "plain.yaml"
    plain.write_text("tether: 1\nname: p\nnodes:\n  a: {task: gate}\n", encoding="utf-8")
    assert "concurrency" not in json.loads(tether.compile(plain).to_json())


def test_reject_and_cancel_new_through_submit_with_the_reason_in_the_history(
        store: Checkpointer, tmp_path: Path) -> None:
    rejecting = Runner(workflow(tmp_path, "reject"), store, TASKS)
    first = rejecting.submit({"branch": "main"})
    with pytest.raises(ConcurrencyLimitReached, match="concurrency key 'main'"):
        rejecting.submit({"branch": "main"})
    dropping = Runner(workflow(tmp_path, "cancel_new"), store, TASKS)
    dropped = dropping.submit_run({"branch": "main"})
    assert dropped.status == "cancelled"
    history = build_history(store, dropped.execution_id)
    [event] = [e for e in history.events if e.kind == EventKind.CONCURRENCY]
    assert event.reason is not None and "cancel_new" in event.reason
    assert first in (event.detail or {})["holders"]


def test_run_in_place_waits_for_the_key_then_runs(shared_url: str, tmp_path: Path) -> None:
    """``queue``: a second ``Runner.run`` of the key waits (nothing stored) until the first
    ends, then runs; the history says it waited."""
    path = workflow(tmp_path)
    release = _hold("a")
    results: dict[str, Any] = {}

    def run(tag: str) -> None:
        store = open_checkpointer(shared_url)
        try:
            results[tag] = Runner(path, store, TASKS).run({"branch": "main", "tag": tag})
        finally:
            store.close()

    first = threading.Thread(target=run, args=("a",))
    first.start()
    assert ENTERED["a"].wait(30)
    second = threading.Thread(target=run, args=("b",))
    second.start()
    second.join(1.0)
    assert second.is_alive() and "first b" not in RECORDED  # waiting for the key
    release.set()
    first.join(30)
    second.join(30)
    assert [results[t].status for t in "ab"] == ["completed", "completed"]
    assert RECORDED == ["first a", "second a", "first b", "second b"]
    store = open_checkpointer(shared_url)
    try:
        events = build_history(store, results["b"].execution_id).events
    finally:
        store.close()
    assert any(e.kind == EventKind.CONCURRENCY and "waited" in (e.reason or "")
               for e in events)


def test_cancel_running_in_place_stops_the_older_run_at_its_next_node_boundary(
        shared_url: str, tmp_path: Path) -> None:
    """``cancel_running``: the older run, inside node ``first``, finishes that node and is
    cancelled before ``second``; the newer run starts once it stopped and completes."""
    path = workflow(tmp_path, "cancel_running")
    release = _hold("old")
    results: dict[str, Any] = {}

    def run(tag: str) -> None:
        store = open_checkpointer(shared_url)
        try:
            results[tag] = Runner(path, store, TASKS).run({"branch": "main", "tag": tag})
        finally:
            store.close()

    old = threading.Thread(target=run, args=("old",))
    old.start()
    assert ENTERED["old"].wait(30)
    new = threading.Thread(target=run, args=("new",))
    new.start()
    store = open_checkpointer(shared_url)
    try:
        asked = threading.Event()
        while not asked.wait(0.02):  # until the newer run asked the older one to cancel
            if any(r.cancel_requested_at is not None for r in store.find_runs(limit=10)
                   if r.inputs.get("tag") == "old"):
                asked.set()
        release.set()
        old.join(30)
        new.join(30)
        assert results["old"].status == "cancelled"
        assert results["new"].status == "completed"
        assert RECORDED == ["first old", "first new", "second new"]
        events = build_history(store, results["old"].execution_id).events
        assert any(e.kind == EventKind.CANCEL_REQUESTED and e.channel == "concurrency"
                   for e in events)
    finally:
        store.close()


def test_runs_stuck_says_which_runs_hold_the_key(store: Checkpointer, tmp_path: Path) -> None:
    """`tether runs --stuck` (``stuck_runs``): a queued run behind a running run of its key
    is reported with the key and the holder; the holder itself is not stuck."""
    from tether.stores.queueing import WorkerRecord
    from tether.workers.stuck import stuck_runs

    runner = Runner(workflow(tmp_path), store, TASKS)
    first = runner.submit({"branch": "main"})
    second = runner.submit({"branch": "main"})
    now = time.time()
    store.register_worker(WorkerRecord("w1", "host", 1, ("default",), 4, now, now))
    assert [c.run.execution_id for c in store.claim_runs("w1", ["default"], 4, now,
                                                         now + 60)] == [first]
    [stuck] = stuck_runs(store, now, 30.0)
    assert stuck.run.execution_id == second
    assert stuck.reasons == (f"waits for concurrency key 'main': 1 run(s) running (limit 1): "
                             f"{first}",)
    history = build_history(store, second).events
    assert any(e.kind == EventKind.CONCURRENCY and "waits for concurrency key 'main'"
               in (e.reason or "") for e in history)


def test_the_checks_policies_are_the_plans() -> None:
    """The compiler checks `on_conflict` against its own list (so `check` imports no plan
    models); it must name exactly the policies the plan accepts, in the same order."""
    from tether.compiler.concurrency import POLICIES
    from tether.compiler.plan import ON_CONFLICT

    assert POLICIES == ON_CONFLICT
