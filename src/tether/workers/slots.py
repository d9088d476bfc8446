"""A worker's run slots: one thread, event loop and store connection per concurrent run.

Every store call is synchronous, so the runs one event loop drives never overlap their round
trips. On a store whose connections do overlap (PostgreSQL,
``Checkpointer.concurrent_connections``) a :class:`~tether.workers.loop.Worker` therefore
drives each claimed run in a :class:`Slot` of its own: a thread running its own event loop,
with its own store (opened once, kept for the worker's life) and its own ``Runner`` on it.
The worker's own loop claims runs for its free slots, heartbeats, fires schedules and timers;
a slot drives one run at a time and, when it ends, claims the next one itself on its own
connection (``chain.py``), going back to the worker's free slots only when that finds none.
A slot's one runnable body runs inline in its loop (several runnable at once run in
threads), so a lease lost while such a body hangs cannot stop the drive before the body
returns: the worker gives the run up at once and the slot stays taken until then.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from tether.runtime.runner import Runner
from tether.stores.base import Checkpointer

CLOSE_SECONDS = 10.0  # how long closing a slot waits for what its loop still runs


class Slot:
    """One thread with its own event loop, store and runner (see the module docstring)."""

    def __init__(self, store: Checkpointer, runner: Runner, name: str) -> None:
        self.store = store
        self.runner = runner
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def submit(self, coroutine: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None]:
        """Run ``coroutine`` on this slot's loop."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def close(self) -> None:
        """Cancel what the loop still runs (nothing, after a graceful stop), stop the thread
        and close the store."""
        try:
            if self._thread.is_alive():
                with contextlib.suppress(RuntimeError, concurrent.futures.TimeoutError):
                    self.submit(_cancel_others()).result(CLOSE_SECONDS)
                with contextlib.suppress(RuntimeError):  # the loop has closed
                    self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join(CLOSE_SECONDS)
        finally:
            self.store.close()


async def _cancel_others() -> None:
    mine = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not mine]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


class Slots:
    """The free and busy slots of one worker: ``count`` of them, opened at once."""

    def __init__(self, open_store: Callable[[], Checkpointer],
                 make_runner: Callable[[Checkpointer], Runner], count: int) -> None:
        self._free: list[Slot] = []
        self._all: list[Slot] = []
        try:
            for i in range(count):
                store = open_store()
                try:
                    runner = make_runner(store)
                except BaseException:
                    store.close()
                    raise
                self._all.append(Slot(store, runner, f"tether-worker-slot-{i}"))
        except BaseException:
            self.close()
            raise
        self._free = list(self._all)

    @property
    def free(self) -> int:
        """How many slots are free."""
        return len(self._free)

    def take(self) -> Slot:
        """A free slot (the worker claims no more runs than it has slots)."""
        return self._free.pop()

    def give(self, slot: Slot) -> None:
        self._free.append(slot)

    def close(self) -> None:
        for slot in self._all:
            with contextlib.suppress(Exception):
                slot.close()
