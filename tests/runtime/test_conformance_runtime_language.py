"""Runtime conformance, part 6: the language's run context under resume and fork.

``run.attempt`` comes from the run row (the store counts each attempt that takes the run), so
it is 1 for the first execution, one more per resume (a crash recovery included), 1 again in
a fork; the run state never holds it. On every backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import Calls, Crash, write_workflow

import tether
from tether.stores.base import Checkpointer

RUN_CONTEXT = """
    tether: 1
    name: context
    nodes:
      first:
        task: t.see
        with: {attempt: "{{ run.attempt }}", parent: "{{ run.parent_id }}"}
      gate:
        needs: [first]
        approval: {reason: go}
      second:
        needs: [gate]
        task: t.see
        with: {attempt: "{{ run.attempt }}", parent: "{{ run.parent_id }}"}
      third:
        needs: [second]
        task: t.crash_once
        with: {attempt: "{{ run.attempt }}", parent: "{{ run.parent_id }}"}
    output: "{{ run.attempt }}"
"""


def test_run_attempt_counts_executions_from_the_run_row_and_restarts_at_one_in_a_fork(
        store: Checkpointer, tmp_path: Path) -> None:
    """Run (1), answer the approval (2), crash, recover (3); a fork of it runs at 1."""
    seen: list[tuple[str, int, Any]] = []
    calls = Calls()

    def see(attempt: int, parent: Any) -> int:
        seen.append(("see", attempt, parent))
        return attempt

    def crash_once(attempt: int, parent: Any) -> int:
        seen.append(("third", attempt, parent))
        if calls.hit("third") == 1:
            raise Crash()
        return attempt

    runner = tether.Runner(write_workflow(tmp_path, RUN_CONTEXT), store,
                           tasks={"t.see": see, "t.crash_once": crash_once})
    paused = runner.run()
    eid = paused.execution_id
    assert paused.status == "paused"
    with pytest.raises(Crash):
        runner.resume(eid, tether.Resume(approved=True))
    done = runner.resume(eid)
    assert (done.status, done.output) == ("completed", 3)
    assert seen == [("see", 1, None), ("see", 2, None), ("third", 2, None),
                    ("third", 3, None)]
    [run] = store.list_runs()
    assert run.attempt == 3
    for row in store.rows(eid):  # the run state never carries the attempt
        snapshot = store.get(eid, row.checkpoint_id)
        assert snapshot is not None and "attempt" not in snapshot.state_snapshot

    seen.clear()
    checkpoint = next(r for r in store.rows(eid) if r.node_id == "second")
    forked = runner.fork(eid, checkpoint.checkpoint_id)
    assert (forked.status, forked.output) == ("completed", 1)
    assert seen == [("third", 1, eid)]
