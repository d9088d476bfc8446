"""``Checkpointer.page``: a run's checkpoints a page at a time (issue 8, item 13: `tether
show` on a run with 135k checkpoints), on every backend.

A page equals the same slice of ``list()`` (full snapshots folded across delta chains that
start before the page), and reads only its own rows plus the chain of its first row.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import journal_history, new_run

from tether.stores.base import Checkpointer
from tether.stores.records import CheckpointRow
from tether.stores.sqlite import SQLiteCheckpointer


def test_pages_are_slices_of_the_full_list(store: Checkpointer) -> None:
    """Every (after, limit) pair over a 23-row run whose snapshots come every 4 rows."""
    eid = new_run(store)
    steps = [{"node": f"n{i}", "value": {"i": i}} if i % 5 else {"counter": "loop", "value": i}
             for i in range(23)]
    journal_history(store, eid, steps, snapshot_every=4)
    everything = store.list(eid)
    ids = [c.checkpoint_id for c in everything]
    for limit in (1, 2, 5, 23, 50):
        for start in range(len(ids) + 1):
            after = ids[start - 1] if start else None
            assert store.page(eid, after, limit) == everything[start:start + limit]


def test_walking_pages_yields_every_checkpoint_once(store: Checkpointer) -> None:
    eid = new_run(store)
    journal_history(store, eid, [{"node": f"n{i}", "value": i} for i in range(17)],
                    snapshot_every=3)
    seen: list[str] = []
    after = None
    while page := store.page(eid, after, 4):
        seen.extend(c.checkpoint_id for c in page)
        after = page[-1].checkpoint_id
    assert seen == [c.checkpoint_id for c in store.list(eid)]


def test_an_unknown_run_or_the_end_of_a_run_is_an_empty_page(store: Checkpointer) -> None:
    eid = new_run(store)
    journal_history(store, eid, [{"node": "a", "value": 1}])
    assert store.page("no-such-run") == []
    assert store.page(eid, store.list(eid)[-1].checkpoint_id) == []


class CountingSQLite(SQLiteCheckpointer):
    """A real SQLite store that also counts the rows its reads return."""

    rows_read = 0

    def _rows(self, execution_id: str, first: str | None = None,
              last: str | None = None) -> list[CheckpointRow]:
        rows = super()._rows(execution_id, first, last)
        self.rows_read += len(rows)
        return rows

    def _page_rows(self, execution_id: str, after: str | None,
                   limit: int) -> list[CheckpointRow]:
        rows = super()._page_rows(execution_id, after, limit)
        self.rows_read += len(rows)
        return rows


def test_a_page_reads_its_rows_and_one_chain_not_the_run(tmp_path: Path) -> None:
    """Of a 3,000-row run, a page of 50 in the middle reads at most 50 + the snapshot
    interval rows."""
    store = CountingSQLite(tmp_path / "t.db")
    eid = new_run(store)
    journal_history(store, eid, [{"node": f"n{i % 7}", "value": i} for i in range(3000)],
                    snapshot_every=10)
    middle = store.rows(eid)[1503].checkpoint_id
    store.rows_read = 0
    page = store.page(eid, middle, 50)
    assert len(page) == 50 and store.rows_read <= 50 + 10
    alone = store.get(eid, page[0].checkpoint_id)
    assert alone is not None and page[0].state_snapshot == alone.state_snapshot
    store.close()


@pytest.mark.parametrize("limit", [1, 3])
def test_page_limit_is_respected_in_memory_too(limit: int) -> None:
    from tether.stores.memory import InMemoryCheckpointer

    store = InMemoryCheckpointer()
    eid = new_run(store)
    journal_history(store, eid, [{"node": "a", "value": i} for i in range(5)])
    assert len(store.page(eid, None, limit)) == limit
