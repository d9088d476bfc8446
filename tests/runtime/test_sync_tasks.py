"""`def` tasks on the fast path: a sync task alone in the run is called inline, yet parallel
sync branches still overlap, a timeout still holds inline-or-not, and every kind of callable
(async ``__call__``, unhashable objects) is still told apart correctly; on every backend.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from conformance_helpers import write_workflow

import tether
from tether.stores.base import Checkpointer

PARALLEL = """
    tether: 1
    name: parallel
    nodes:
      left: {task: t.left}
      right: {task: t.right}
      join:
        needs: [left, right]
        task: t.join
        with: {a: "{{ nodes.left.output }}", b: "{{ nodes.right.output }}"}
    output: "{{ nodes.join.output }}"
"""

ALONE = """
    tether: 1
    name: alone
    nodes:
      first: {task: t.quick}
      slow:
        needs: [first]
        task: t.slow
        SETTINGS
"""

BESIDE = """
    tether: 1
    name: beside
    nodes:
      slow:
        task: t.slow
        timeout: 100ms
      other: {task: t.quick}
"""


def test_two_parallel_def_branches_run_at_the_same_time(store: Checkpointer,
                                                        tmp_path: Path) -> None:
    """Both branches wait on one barrier of two: it only opens if they run at once (run one
    after the other, the first would wait alone and the barrier would break)."""
    barrier = threading.Barrier(2, timeout=30)
    threads: set[str] = set()

    def side(name: str) -> Any:
        def body() -> str:
            threads.add(threading.current_thread().name)
            barrier.wait()
            return name
        return body

    def join(a: str, b: str) -> str:
        return f"{a}+{b}"

    runner = tether.Runner(write_workflow(tmp_path, PARALLEL), store,
                           tasks={"t.left": side("left"), "t.right": side("right"),
                                  "t.join": join})
    result = runner.run()
    assert (result.status, result.output) == ("completed", "left+right"), result.error
    assert len(threads) == 2


def _slow(release: threading.Event) -> Any:
    def slow() -> str:
        release.wait(30)  # set by the test once the run has ended, so the thread returns
        return "late"
    return slow


def test_a_def_task_alone_in_the_run_still_times_out(store: Checkpointer,
                                                      tmp_path: Path) -> None:
    """The only ready node (which a sync task without a timeout runs inline) with a timeout
    runs where it can be abandoned: the run fails with TimeoutError instead of waiting."""
    release = threading.Event()
    path = write_workflow(tmp_path, ALONE.replace("SETTINGS", "timeout: 100ms"))
    runner = tether.Runner(path, store, tasks={"t.quick": lambda: 1, "t.slow": _slow(release)})
    try:
        result = runner.run()
    finally:
        release.set()
    assert result.status == "failed" and result.error is not None
    assert (result.error["type"], result.error["node_id"]) == ("TimeoutError", "slow")
    assert "timed out after 0.1s" in result.error["message"]


def test_a_def_task_beside_another_still_times_out(store: Checkpointer,
                                                   tmp_path: Path) -> None:
    """A sync task with a timeout that runs beside another unit times out too; the other
    branch completes."""
    release = threading.Event()
    runner = tether.Runner(write_workflow(tmp_path, BESIDE), store,
                           tasks={"t.quick": lambda: 1, "t.slow": _slow(release)})
    try:
        result = runner.run()
    finally:
        release.set()
    assert result.status == "failed" and result.error is not None
    assert (result.error["type"], result.error["node_id"]) == ("TimeoutError", "slow")
    assert result.state["nodes"]["other"]["status"] == "completed"


class AsyncCall:
    """A callable object whose ``__call__`` is a coroutine function."""

    async def __call__(self) -> str:
        await asyncio.sleep(0)
        return "async call"


class Unhashable:
    """A sync callable object that cannot be a dict key."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unhashable) and other.answer == self.answer

    def __call__(self) -> str:
        return self.answer


def test_callable_objects_async_and_unhashable_run_as_what_they_are(
        store: Checkpointer, tmp_path: Path) -> None:
    """An object with an async ``__call__`` is awaited; an unhashable sync callable is
    called; each twice (the second time from what was learnt about it the first)."""
    path = write_workflow(tmp_path, PARALLEL)
    runner = tether.Runner(path, store, tasks={"t.left": AsyncCall(),
                                               "t.right": Unhashable("sync call"),
                                               "t.join": lambda a, b: [a, b]})
    for _ in range(2):
        result = runner.run()
        assert (result.status, result.output) == ("completed", ["async call", "sync call"])
