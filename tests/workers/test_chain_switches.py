"""The chains' switches to their next runs (``workers/chain.py``, :class:`Switches`): queued
by slot threads without waking the worker's loop, applied on that loop in the order they
were queued when it settles them, and, once ``SETTLE_AFTER`` wait, applied by the loop
without anything else asking (the queue is bounded). Exercised with a real event loop in its
own thread and real slot threads; the worker-level behaviour (the heartbeat lists the run a
slot holds now, a lost lease of a chained run) is in ``test_slot_chain.py``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import pytest

from conftest import wait_for
from tether.stores.queueing import ClaimedRun, ClaimReason
from tether.stores.run_record import RunRecord
from tether.workers.chain import SETTLE_AFTER, Chain, Switches


def _claim(n: int) -> ClaimedRun:
    moment = datetime.now(UTC)
    run = RunRecord(execution_id=f"r{n}", workflow="wf", plan_fingerprint="f" * 64,
                    status="running", inputs={}, created_at=moment, updated_at=moment)
    return ClaimedRun(run, f"owner-{n}", 0.0, ClaimReason.QUEUED)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    made = asyncio.new_event_loop()
    thread = threading.Thread(target=made.run_forever, daemon=True)
    thread.start()
    try:
        yield made
    finally:
        made.call_soon_threadsafe(made.stop)
        thread.join(10)
        made.close()


class Applied:
    def __init__(self) -> None:
        self.switches: list[tuple[str, str]] = []
        self.threads: set[int] = set()
        self.lock = threading.Lock()

    def __call__(self, chain: Chain, old: ClaimedRun, new: ClaimedRun) -> None:
        with self.lock:
            self.switches.append((old.run.execution_id, new.run.execution_id))
            self.threads.add(threading.get_ident())


def _chain(loop: asyncio.AbstractEventLoop) -> Chain:
    return cast(Chain, SimpleNamespace(loop=loop))  # Switches reads only the chain's loop


def _on_loop(loop: asyncio.AbstractEventLoop, call: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(_call(call), loop).result(10)


async def _call(call: Any) -> Any:
    return call()


def test_queued_switches_wait_for_the_loop_and_apply_in_order(
        loop: asyncio.AbstractEventLoop) -> None:
    applied = Applied()
    switches = Switches(applied)
    chain = _chain(loop)
    for n in range(SETTLE_AFTER - 1):
        switches.queue(chain, _claim(n), _claim(n + 1))
    _on_loop(loop, lambda: None)  # the loop has turned: nothing was applied by itself
    assert applied.switches == [] and len(switches) == SETTLE_AFTER - 1
    _on_loop(loop, switches.settle)
    assert applied.switches == [(f"r{n}", f"r{n + 1}") for n in range(SETTLE_AFTER - 1)]
    assert len(switches) == 0 and applied.threads == {_on_loop(loop, threading.get_ident)}


def test_once_the_bound_is_reached_the_loop_applies_them_unasked(
        loop: asyncio.AbstractEventLoop) -> None:
    """Four slot threads queue switches concurrently; the loop applies each of them exactly
    once, on its own thread, in each thread's order, without the test settling."""
    applied = Applied()
    switches = Switches(applied)
    chain = _chain(loop)
    per_thread = SETTLE_AFTER * 3

    def slot(k: int) -> None:
        for n in range(per_thread):
            switches.queue(chain, _claim(k * 10_000 + n), _claim(k * 10_000 + n + 1))

    slots = [threading.Thread(target=slot, args=(k,)) for k in range(4)]
    for thread in slots:
        thread.start()
    for thread in slots:
        thread.join(30)
    # the last few (fewer than the bound) may wait for the next settle: the rest do not
    wait_for(lambda: len(applied.switches) >= 4 * per_thread - SETTLE_AFTER, 30,
             "the loop to apply the switches")
    _on_loop(loop, switches.settle)
    assert len(applied.switches) == 4 * per_thread
    assert len(set(applied.switches)) == 4 * per_thread
    for k in range(4):
        mine = [old for old, _ in applied.switches if int(old[1:]) // 10_000 == k]
        assert mine == [f"r{k * 10_000 + n}" for n in range(per_thread)]
    assert applied.threads == {_on_loop(loop, threading.get_ident)}
