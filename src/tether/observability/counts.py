"""Counts kept per thread, without a lock, for the metrics a run reports at every node.

prometheus-client's labelled ``Counter.inc`` and ``Histogram.observe`` cost about nine Python
calls and three lock acquisitions together: about 15,500 instructions a node, 2% of a
worker's step (issue 23). Here each thread counts into its own :class:`Shares` (plain lists of
floats in dicts, written only by that thread, so no lock), and a scrape adds every thread's
shares up under one lock (:class:`Registry`). A scrape reads another thread's dict with
``dict.copy()`` (one step under the GIL) and its cells' floats as they are; a count being
added as the scrape reads is in this scrape or the next, as with prometheus-client's own
metrics (whose sum and bucket of one observation are two separate locked steps).

A cell is a list of floats: ``[created, value, ...]``, its first element the time its label
set was first counted (``_created``); adding two cells keeps the earlier time and adds the
rest element by element. A thread that has ended has its shares folded into one retired
share, so the number kept follows the live threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Cells", "Registry", "Shares", "ThreadCounts"]

Cells = dict[tuple[str, ...], list[float]]


class Shares:
    """One thread's counts, by table (only that thread writes them)."""

    __slots__ = ("tables",)

    def __init__(self, tables: int) -> None:
        self.tables: tuple[Cells, ...] = tuple({} for _ in range(tables))

    def add(self, other: Shares) -> None:
        """Add ``other``'s counts to these (which no other thread writes)."""
        for mine, theirs in zip(self.tables, other.tables, strict=True):
            for key, cell in theirs.copy().items():
                into = mine.get(key)
                if into is None:
                    mine[key] = list(cell)
                    continue
                into[0] = min(into[0], cell[0])
                for i in range(1, len(cell)):
                    into[i] += cell[i]


class ThreadCounts(threading.local):
    """The calling thread's tables (``tables``), created and registered on first use."""

    tables: tuple[Cells, ...]

    def __init__(self, adopt: Callable[[], tuple[Cells, ...]]) -> None:
        self.tables = adopt()


class Registry:
    """Every thread's shares, and the sum of them at a scrape."""

    def __init__(self, tables: int, seed: Shares | None = None) -> None:
        self._tables = tables
        self._lock = threading.Lock()
        self._retired = seed or Shares(tables)
        self._live: list[tuple[threading.Thread, Shares]] = []
        self.local = ThreadCounts(self._adopt)

    def _adopt(self) -> tuple[Cells, ...]:
        shares = Shares(self._tables)
        with self._lock:
            self._retire()
            self._live.append((threading.current_thread(), shares))
        return shares.tables

    def _retire(self) -> None:
        """Fold the shares of threads that ended into the retired share (lock held)."""
        ended = [entry for entry in self._live if not entry[0].is_alive()]
        for entry in ended:
            self._retired.add(entry[1])
            self._live.remove(entry)

    def total(self) -> Shares:
        """Every thread's counts added up, now."""
        total = Shares(self._tables)
        with self._lock:
            self._retire()
            total.add(self._retired)
            for _, shares in self._live:
                total.add(shares)
        return total
