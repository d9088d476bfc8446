"""The sync API over the async one: one event loop per thread, kept between calls.

A call runs its coroutine as a task of this thread's loop, in a copy of the caller's context.
On the main thread, Ctrl-C while it runs behaves as under :func:`asyncio.run`: the first one
cancels the task (the driver releases the run's lease and lets sync bodies in threads return,
see ``driver.py``) and the call raises :class:`KeyboardInterrupt`; a second one raises
:class:`KeyboardInterrupt` at once. A task that never waits (sync bodies called in the loop's
thread, one after another) would not see the cancel until its run ended, so the scheduler also
asks :func:`interrupted` before each node starts. The handler is our own rather than
:meth:`asyncio.Runner.run`'s: the signal module formats the ``repr`` of the handler it replaces,
and the runner's handler holds the task, whose ``repr`` holds its result: the whole run state,
formatted twice per call.

After a call that ended with an exception, what is left of it is cancelled and awaited, so
nothing of that call runs on afterwards.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import signal
import threading
from collections.abc import Coroutine
from types import FrameType
from typing import Any, TypeVar

from tether.errors import TetherError

T = TypeVar("T")
_LOOPS = threading.local()


def _event_loop_runner() -> asyncio.Runner:
    runner: asyncio.Runner | None = getattr(_LOOPS, "runner", None)
    if runner is None:
        runner = asyncio.Runner()
        _LOOPS.runner = runner
        if threading.current_thread() is threading.main_thread():
            atexit.register(runner.close)
    return runner


def _abandon(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


class _Interrupt:
    """SIGINT while a sync call runs: cancel its task (once), then interrupt for real."""

    __slots__ = ("count", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.count = 0

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count == 1 and not self.task.done():
            self.task.cancel()
            self.task.get_loop().call_soon_threadsafe(lambda: None)  # wake a waiting select
            return
        raise KeyboardInterrupt()

    def __repr__(self) -> str:
        return "<tether: Ctrl-C stops the running call>"


_ACTIVE: list[_Interrupt] = []  # the handler of the sync call running on the main thread


def interrupted() -> bool:
    """Whether Ctrl-C asked the sync call running on the main thread to stop."""
    return bool(_ACTIVE) and _ACTIVE[-1].count > 0 and \
        threading.current_thread() is threading.main_thread()


def _install(task: asyncio.Task[Any]) -> _Interrupt | None:
    """Our SIGINT handler for ``task``, where Python's default one is in place (the main
    thread; a program with a handler of its own keeps it)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None
    handler = _Interrupt(task)
    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:  # pragma: no cover - signals refused (an embedded interpreter)
        return None
    return handler


def _run(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
    task = loop.create_task(coroutine, context=contextvars.copy_context())
    handler = _install(task)
    if handler is not None:
        _ACTIVE.append(handler)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        if handler is not None and handler.count > 0 and task.uncancel() == 0:
            raise KeyboardInterrupt() from None
        raise
    finally:
        if handler is not None:
            _ACTIVE.remove(handler)
            if signal.getsignal(signal.SIGINT) is handler:
                signal.signal(signal.SIGINT, signal.default_int_handler)


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on this thread's loop; refuse inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        loop = _event_loop_runner().get_loop()
        try:
            return _run(loop, coroutine)
        except BaseException:
            _abandon(loop)
            raise
    coroutine.close()
    raise TetherError("the sync API cannot be called from a running event loop; "
                      "await arun/aresume/afork instead")
