"""``due_pending`` on every backend: the pending rows whose ``due_at`` has come, soonest
first, and never a pause without a due time."""

from __future__ import annotations

from pathlib import Path

from tether.runtime.runner import Runner
from tether.stores.base import Checkpointer

WORKFLOW = """
tether: 1
name: timers
nodes:
  short: {sleep: 1h}
  long: {sleep: 2h}
  ask: {approval: {reason: ok?}}
"""


def test_due_pending_lists_due_timers_soonest_first(store: Checkpointer,
                                                    tmp_path: Path) -> None:
    path = tmp_path / "timers.yaml"
    path.write_text(WORKFLOW)
    result = Runner(str(path), store, park_timers=True).run()
    assert result.status == "paused"
    rows = {row.node_id: row for row in store.list_pending()}
    assert rows["ask"].due_at is None
    short, long = rows["short"].due_at, rows["long"].due_at
    assert short is not None and long is not None and short < long
    assert store.due_pending(short - 1) == []
    assert [r.node_id for r in store.due_pending(short)] == ["short"]
    assert [r.node_id for r in store.due_pending(long + 1)] == ["short", "long"]
    assert [r.node_id for r in store.due_pending(long + 1, limit=1)] == ["short"]
