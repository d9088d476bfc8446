"""The resume protocol of a worker's claimed run (``resume.Claimed``): decided from the claim's
row, without reading the run again or taking the lease again, it still honours each row of
the decision table (``resume.py``); on every backend.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import ASK_THEN_AFTER, Calls, write_workflow

import tether
from tether.errors import LeaseLost
from tether.runtime.attempt import StopAtBoundary
from tether.runtime.bridge import run_sync
from tether.runtime.resume import Claimed, first_claim
from tether.stores.base import Checkpointer
from tether.stores.queueing import CancelOutcome, ClaimReason

LEASE = 30.0


def _runner(tmp_path: Path, store: Checkpointer, ask: Any, after: Any) -> tether.Runner:
    return tether.Runner(write_workflow(tmp_path, ASK_THEN_AFTER), store,
                         tasks={"t.ask": ask, "t.after": after})


def counted(calls: Calls, name: str, body: Any) -> Any:
    """``body``, counting its executions as ``name``."""
    def task(**kwargs: Any) -> Any:
        calls.hit(name)
        return body(**kwargs)
    return task


def _claim(store: Checkpointer, eid: str, reason: ClaimReason) -> Claimed:
    """The claim, as a worker holds it (``fresh`` by the worker's rule)."""
    sent = time.monotonic()
    now = time.time()
    [claim] = store.claim_runs("worker-1", ["default"], 1, now, now + LEASE)
    assert (claim.run.execution_id, claim.reason) == (eid, reason)
    return Claimed(claim.owner, claim.run, sent + LEASE,
                   fresh=first_claim(claim.reason, claim.run))


def _resume(runner: tether.Runner, held: Claimed, boundary: Any = None) -> Any:
    return run_sync(runner.aresume(held.run.execution_id, claimed=held, boundary=boundary))


def test_a_claimed_queued_run_runs_as_attempt_1_and_completes(
        store: Checkpointer, tmp_path: Path) -> None:
    calls = Calls()
    runner = _runner(tmp_path, store, counted(calls, "ask", lambda: 1),
                     counted(calls, "after", lambda x: x + 1))
    eid = runner.submit()
    held = _claim(store, eid, ClaimReason.QUEUED)
    result = _resume(runner, held)
    assert (result.status, result.output) == ("completed", 2)
    run = store.get_run(eid)
    assert run is not None
    assert (run.status, run.attempt, run.owner) == ("completed", 1, None)
    assert dict(calls.counts) == {"ask": 1, "after": 1}
    assert held.fresh  # a submitted run's first claim: nothing to read before it starts


def test_only_a_submitted_runs_first_claim_is_fresh(store: Checkpointer, tmp_path: Path) -> None:
    """A claim that takes a run some attempt held before reads what that attempt wrote: a
    failed run queued again, a run recovered after its holder's lease ran out."""
    runner = _runner(tmp_path, store, lambda: 1, lambda x: x)
    eid = runner.submit()
    assert _claim(store, eid, ClaimReason.QUEUED).fresh
    later = time.time() + 2 * LEASE  # its lease ran out: recovered by the next claim
    [again] = store.claim_runs("worker-2", ["default"], 1, later, later + LEASE)
    assert (again.reason, again.run.attempt) == (ClaimReason.RECOVERED, 2)
    assert not first_claim(again.reason, again.run)
    failing = tether.Runner(write_workflow(tmp_path, ASK_THEN_AFTER), store, tasks={
        "t.ask": lambda: 1, "t.after": counted(Calls(), "x", _fail)})
    failed = failing.run()
    assert failed.status == "failed"
    assert store.enqueue_run(failed.execution_id, "default")
    held = _claim(store, failed.execution_id, ClaimReason.QUEUED)
    assert held.run.attempt == 2 and not held.fresh


def _fail(x: int) -> int:
    raise RuntimeError("always")


def test_a_failed_run_queued_again_continues_from_its_checkpoint_as_attempt_2(
        store: Checkpointer, tmp_path: Path) -> None:
    calls = Calls()

    def after(x: int) -> int:
        calls.hit("after")
        if calls.counts["after"] == 1:
            raise RuntimeError("first time")
        return x + 1

    runner = _runner(tmp_path, store, counted(calls, "ask", lambda: 1), after)
    failed = runner.run()
    assert failed.status == "failed"
    assert store.enqueue_run(failed.execution_id, "default")
    held = _claim(store, failed.execution_id, ClaimReason.QUEUED)
    result = _resume(runner, held)
    assert (result.status, result.output) == ("completed", 2)
    run = store.get_run(failed.execution_id)
    assert run is not None and (run.status, run.attempt) == ("completed", 2)
    assert dict(calls.counts) == {"ask": 1, "after": 2}


def test_an_answered_pause_claimed_continues_with_the_answer(
        store: Checkpointer, tmp_path: Path) -> None:
    calls = Calls()

    def ask() -> Any:
        calls.hit("ask")
        return tether.interrupt("how many?", {})["n"]

    runner = _runner(tmp_path, store, ask, counted(calls, "after", lambda x: x * 10))
    paused = runner.run()
    assert paused.status == "paused"
    runner.answer(paused.execution_id, tether.Resume(n=4))
    assert store.enqueue_run(paused.execution_id, "default")
    held = _claim(store, paused.execution_id, ClaimReason.ANSWERED)
    result = _resume(runner, held)
    assert (result.status, result.output) == ("completed", 40)
    assert dict(calls.counts) == {"ask": 2, "after": 1}
    assert store.list_pending(paused.execution_id) == []


def test_a_half_recorded_pause_claimed_is_paused_under_the_claim(
        store: Checkpointer, tmp_path: Path) -> None:
    """The owner recorded the pending row and died before marking the run paused: the
    claim recovers it, nothing can run, so the run is paused (its lease released) and
    nothing ran again."""
    calls = Calls()

    def ask() -> Any:
        calls.hit("ask")
        return tether.interrupt("how many?", {})["n"]

    runner = _runner(tmp_path, store, ask, counted(calls, "after", lambda x: x))
    paused = runner.run()
    eid = paused.execution_id
    now = time.time()
    assert store.acquire(eid, "dead-owner", now - 1, now)  # running again, lease expired
    assert store.enqueue_run(eid, "default")
    held = _claim(store, eid, ClaimReason.RECOVERED)
    result = _resume(runner, held)
    assert result.status == "paused"
    run = store.get_run(eid)
    assert run is not None and (run.status, run.owner) == ("paused", None)
    assert len(store.list_pending(eid)) == 1
    assert dict(calls.counts) == {"ask": 1}


def test_a_cancel_requested_after_the_claim_stops_the_run_before_its_first_node(
        store: Checkpointer, tmp_path: Path) -> None:
    calls = Calls()
    runner = _runner(tmp_path, store, counted(calls, "ask", lambda: 1),
                     counted(calls, "after", lambda x: x))
    eid = runner.submit()
    held = _claim(store, eid, ClaimReason.QUEUED)
    assert store.request_cancel(eid, time.time()) == CancelOutcome.REQUESTED

    def boundary() -> None:
        if store.cancel_requested_at(eid) is not None:
            raise StopAtBoundary(eid, cancel=True)

    result = _resume(runner, held, boundary)
    assert result.status == "cancelled"
    run = store.get_run(eid)
    assert run is not None and run.status == "cancelled"
    assert dict(calls.counts) == {}


def test_a_claim_whose_lease_ran_out_and_was_taken_over_runs_nothing(
        store: Checkpointer, tmp_path: Path) -> None:
    """The claim's lease is out by the local clock and another attempt took the run: the
    attempt finds out before its first unit (the renewal is refused) and writes nothing."""
    calls = Calls()
    runner = _runner(tmp_path, store, counted(calls, "ask", lambda: 1),
                     counted(calls, "after", lambda x: x))
    eid = runner.submit()
    held = _claim(store, eid, ClaimReason.QUEUED)
    later = time.time() + LEASE + 1
    assert store.acquire(eid, "other-owner", later + LEASE, later)
    expired = Claimed(held.token, held.run, time.monotonic() - 1)
    with pytest.raises(LeaseLost):
        _resume(runner, expired)
    assert dict(calls.counts) == {}
    assert store.list(eid) == []
    run = store.get_run(eid)
    assert run is not None and run.owner == "other-owner"
