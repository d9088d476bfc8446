"""Group commit for the checkpoint writes of several stores on one database.

A worker drives each of its runs on a store and connection of its own (``workers/slots.py``).
Each fenced checkpoint write is then one statement and one commit, and on a busy worker most
of them overlap. A :class:`WriteGroup` shared by those stores lets the writes that arrive
while one is in flight go to the database together, as one statement (each row still fenced
on its own run's owner) and one commit: the first writer to find the group idle becomes the
leader and writes everything queued, on its own connection; the others wait for it and take
their own result. The database does one commit (and one WAL flush) for several steps, and
every writer waits no longer than one round trip more than it would alone.

Nothing changes for a single writer: it finds the group idle and writes its row alone.

A worker uses a group only when asked (``tether worker --group-commit``): one statement of
the worker in flight at a time costs more steps/s than the shared commits save on a small
machine; the group pays where the database server's CPU is the bottleneck
(docs/workers.md, "Checkpoint commits").

Each waiting writer is woken once, by name: when its row's batch is written, or when the
leader hands it the lead (the oldest writer still queued leads the next batch). A shared
condition woke every waiter at each batch's end, and the ones whose rows were not in it went
back to sleep: a thread wake-up and a lock hand-off each, for nothing.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

I = TypeVar("I")  # noqa: E741 - an item to write
R = TypeVar("R")  # its result

MAX_BATCH = 32  # rows per statement (bounds the statement's parameters)


class _Entry(Generic[I, R]):
    __slots__ = ("done", "item", "result", "wake")

    def __init__(self, item: I) -> None:
        self.item = item
        self.done = False  # written (result set); otherwise, once woken, it leads
        self.result: R | BaseException | None = None
        self.wake = threading.Lock()  # held until its writer may go on
        self.wake.acquire()


class WriteGroup(Generic[I, R]):
    """Leader-and-followers batching of writes (see the module docstring)."""

    def __init__(self, limit: int = MAX_BATCH) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._queue: deque[_Entry[I, R]] = deque()
        self._busy = False  # a leader is writing (or has been handed the lead)
        self.batches = 0  # statements written (a figure for benchmarks and tests)
        self.items = 0    # items written in them
        self.fallbacks = 0  # batches whose statement failed and were written item by item

    def fell_back(self) -> None:
        """Count a batch its writer wrote item by item after its statement failed (the
        worker's ``tether_write_batch_fallbacks`` metric reads :attr:`fallbacks`)."""
        with self._lock:
            self.fallbacks += 1

    def submit(self, item: I, write: Callable[[Sequence[I]], Sequence[R | BaseException]],
               ) -> R:
        """Write ``item``, with whatever else is queued when this writer leads. ``write``
        writes a batch on the caller's own connection and returns one result per item, in
        order (an exception in place of a result fails that item alone); an exception it
        raises fails every item of the batch. Returns this item's result or raises its
        error."""
        queue = self._queue
        with self._lock:
            if not self._busy:  # idle: lead at once, alone unless others queue meanwhile
                self._busy = True
                entry: _Entry[I, R] | None = None
            else:
                entry = _Entry(item)
                queue.append(entry)
        if entry is None:
            return self._lead_alone(item, write)
        entry.wake.acquire()  # until its batch is written, or it is handed the lead
        if entry.done:
            return _outcome(entry)
        batch = [entry]
        with self._lock:  # this writer leads: its own row and the oldest others
            while queue and len(batch) < self._limit:
                batch.append(queue.popleft())
        try:
            results: Sequence[R | BaseException] = write([e.item for e in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} writes gave {len(results)} "
                                   "results")
        except BaseException as exc:
            results = [exc] * len(batch)
        for queued, result in zip(batch, results, strict=True):
            queued.result, queued.done = result, True
        with self._lock:
            self.batches += 1
            self.items += len(batch)
            successor = queue.popleft() if queue else None
            self._busy = successor is not None
        for queued in batch[1:]:
            queued.wake.release()
        if successor is not None:
            successor.wake.release()  # not done: it leads the next batch
        return _outcome(entry)

    def _lead_alone(self, item: I, write: Callable[[Sequence[I]], Sequence[R | BaseException]],
                    ) -> R:
        """A writer that found the group idle: its item is the batch (what queues while it
        writes goes in the next batch, led by the oldest of those writers). No wake-up lock
        of its own: nobody waits for this writer's result but itself."""
        try:
            results: Sequence[R | BaseException] = write((item,))
            if len(results) != 1:
                raise RuntimeError(f"a batch of 1 write gave {len(results)} results")
            result = results[0]
        except BaseException as exc:
            result = exc
        with self._lock:
            self.batches += 1
            self.items += 1
            queue = self._queue
            successor = queue.popleft() if queue else None
            self._busy = successor is not None
        if successor is not None:
            successor.wake.release()  # not done: it leads the next batch
        if isinstance(result, BaseException):
            raise result
        return result


def _outcome(entry: _Entry[I, R]) -> R:
    result = entry.result
    if isinstance(result, BaseException):
        raise result
    return result  # type: ignore[return-value]
