"""Store conformance, part 1: runs, checkpoint writes and reads, markers, folding.

Every test runs against the in-memory, SQLite and PostgreSQL checkpointers (the ``store``
fixture); the in-memory store is the reference the SQL stores must agree with.

Checks the protocol RunStore (``tether.stores.contracts``).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from helpers import (
    PLAN_JSON,
    footprint,
    journal_history,
    new_run,
    pause,
    row,
    run_end,
    write_workflow,
)

import tether
from tether.errors import ExecutionExists, StoreError
from tether.runtime import ids
from tether.runtime.ids import new_checkpoint_id
from tether.runtime.journal import Journal
from tether.stores.base import Checkpointer
from tether.stores.open import open_checkpointer

pytestmark = pytest.mark.protocol("RunStore")

# -- runs -------------------------------------------------------------------------------------


def test_create_run_round_trips_every_field(store: Checkpointer) -> None:
    """A created run reads back with the same fields it was written with."""
    eid = new_run(store, inputs={"amount": 5, "name": "Zoë"}, owner="host:1:2",
                  lease_until=123.5, workflow="refund")
    run = store.get_run(eid)
    assert run is not None
    assert (run.execution_id, run.workflow, run.plan_fingerprint, run.status) == (
        eid, "refund", "f" * 64, "running")
    assert run.inputs == {"amount": 5, "name": "Zoë"}
    assert (run.owner, run.lease_until, run.error, run.attempt) == ("host:1:2", 123.5, None, 1)
    assert store.get_plan("f" * 64) == PLAN_JSON


def test_create_run_with_a_taken_id_raises_execution_exists_and_keeps_the_first(
        store: Checkpointer) -> None:
    """A second create_run with the same execution id is refused; the first run is unchanged."""
    eid = new_run(store, inputs={"first": True})
    before = footprint(store, eid)
    with pytest.raises(ExecutionExists) as caught:
        new_run(store, eid, inputs={"second": True}, fingerprint="e" * 64, plan_json="{}")
    assert caught.value.execution_id == eid
    assert footprint(store, eid) == before
    assert store.get_plan("e" * 64) is None


def test_a_plan_is_stored_once_per_fingerprint(store: Checkpointer) -> None:
    """Runs sharing a fingerprint share the plan first stored under it."""
    new_run(store, plan_json='{"v": 1}')
    new_run(store, plan_json='{"v": 2}')
    assert store.get_plan("f" * 64) == '{"v": 1}'
    assert store.get_plan("0" * 64) is None


def test_an_unknown_run_has_nothing(store: Checkpointer) -> None:
    """Reading a run that does not exist returns None or empty, never raises."""
    assert store.get_run("nope") is None
    assert store.list("nope") == []
    assert store.get_last("nope") is None
    assert store.latest_resumable("nope") is None
    assert store.latest_forkable("nope") is None
    assert store.get_pending("nope") is None
    assert store.get("nope", new_checkpoint_id()) is None


def test_set_run_plan_switches_the_run_and_stores_the_new_plan(store: Checkpointer) -> None:
    """set_run_plan points the run at another fingerprint whose plan is then readable."""
    eid = new_run(store)
    store.set_run_plan(eid, "a" * 64, '{"v": 2}')
    run = store.get_run(eid)
    assert run is not None and run.plan_fingerprint == "a" * 64
    assert store.get_plan("a" * 64) == '{"v": 2}'


def test_a_sql_store_reopened_from_its_url_holds_exactly_what_was_written(
        shared_url: str) -> None:
    """SQLite and PostgreSQL: a new store on the same URL (as a new process would open it)
    sees every run, row, pending row and cached result, and can claim the interrupt."""
    first = open_checkpointer(shared_url)
    eid = new_run(first)
    first.put(row(eid, "a"))
    first.put_idempotent(eid, "k", '{"id":1}')
    pause(first, eid)
    before = footprint(first, eid)
    first.close()
    second = open_checkpointer(shared_url)
    try:
        assert footprint(second, eid) == before
        assert second.get_idempotent(eid, "k") == '{"id":1}'
        assert second.delete_pending_interrupt_atomic(eid) is not None
    finally:
        second.close()


# -- writing checkpoints ----------------------------------------------------------------------


def test_put_then_get_returns_every_field(store: Checkpointer) -> None:
    """A written row reads back as a Checkpoint with the same fields and its JSON decoded."""
    eid = new_run(store)
    written = row(eid, "a", node_index=3, agent_path="workflow:p/node:s")._replace(
        node_input=json.dumps({"x": "ünïcode ✓"}), iteration_counters='{"loop": 2}')
    store.put(written)
    checkpoint = store.get(eid, written.checkpoint_id)
    assert checkpoint is not None
    assert (checkpoint.node_id, checkpoint.node_index, checkpoint.step_type, checkpoint.status,
            checkpoint.agent_path) == ("a", 3, "node", "completed", "workflow:p/node:s")
    assert checkpoint.node_input == {"x": "ünïcode ✓"}
    assert checkpoint.node_output == {"from": "a"}
    assert checkpoint.iteration_counters == {"loop": 2}
    assert checkpoint.state_snapshot == {"inputs": {"n": 1}, "nodes": {
        "a": {"status": "completed"}}, "counters": {}}
    assert checkpoint.created_at.timestamp() == pytest.approx(written.created_at)
    assert list(store.rows(eid)) == [written]


def test_put_with_a_duplicate_checkpoint_id_raises_store_error_and_changes_nothing(
        store: Checkpointer) -> None:
    """A second row with an existing checkpoint id is refused; the stored rows are unchanged."""
    eid = new_run(store)
    first = row(eid, "a")
    store.put(first)
    store.put(row(eid, "b"))
    before = footprint(store, eid)
    with pytest.raises(StoreError):
        store.put(first._replace(node_id="evil", state='{"nodes":{}}'))
    assert footprint(store, eid) == before


def test_the_same_checkpoint_id_may_exist_in_two_runs(store: Checkpointer) -> None:
    """Checkpoint ids are unique per run: another run may reuse one."""
    shared = new_checkpoint_id()
    one, two = new_run(store), new_run(store)
    store.put(row(one, "a", checkpoint_id=shared))
    store.put(row(two, "b", checkpoint_id=shared))
    assert [r.node_id for r in store.rows(one)] == ["a"]
    assert [r.node_id for r in store.rows(two)] == ["b"]


def test_list_is_ordered_by_checkpoint_id_not_by_arrival(store: Checkpointer) -> None:
    """list() returns checkpoints in checkpoint id order whatever order they were put in."""
    eid = new_run(store)
    ids = [new_checkpoint_id() for _ in range(6)]
    for index in (3, 0, 5, 1, 4, 2):
        store.put(row(eid, f"n{index}", checkpoint_id=ids[index]))
    assert [c.checkpoint_id for c in store.list(eid)] == ids
    assert [c.node_id for c in store.list(eid)] == [f"n{i}" for i in range(6)]
    last = store.get_last(eid)
    assert last is not None and last.checkpoint_id == ids[-1]


def test_rows_written_in_a_burst_come_back_in_write_order(store: Checkpointer) -> None:
    """Ids minted in a tight loop (same millisecond) are unique and sort in write order."""
    eid = new_run(store)
    written = [row(eid, f"n{i}") for i in range(200)]
    for item in written:
        store.put(item)
    ids = [c.checkpoint_id for c in store.list(eid)]
    assert ids == [r.checkpoint_id for r in written]
    assert len(set(ids)) == 200
    last = store.get_last(eid)
    assert last is not None and last.node_id == "n199"


def test_rows_written_after_a_resume_sort_after_stored_rows_even_if_the_clock_is_behind(
        store: Checkpointer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A journal continuing a run mints ids above the run's newest id, whatever the clock."""
    monkeypatch.setattr(ids, "IDS", ids.IdGenerator())  # keep the process's ids on the clock
    eid = new_run(store)
    ahead = (time.time_ns() // 1_000_000 + 60_000)  # a row written by a clock 1 min ahead
    future = str(uuid.UUID(int=ids._uuid7_int(ahead, 0, 0)))
    store.put(row(eid, "before", checkpoint_id=future))
    journal = Journal(store, eid, {"inputs": {}, "nodes": {}, "counters": {}}, last_id=future)
    written = journal.put(node_id="after", node_index=1, step_type="node", status="completed")
    assert written.checkpoint_id > future
    last = store.get_last(eid)
    assert last is not None and last.node_id == "after"


# -- run_end markers --------------------------------------------------------------------------


def test_latest_resumable_steps_over_a_failed_run_end(store: Checkpointer) -> None:
    """A failed run_end is not an address: resume re-enters at the row before it."""
    eid = new_run(store)
    store.put(row(eid, "a"))
    failed_node = row(eid, "b", status="failed")
    store.put(failed_node)
    store.put(run_end(eid, "failed"))
    last = store.get_last(eid)
    assert last is not None and last.is_run_end and last.status == "failed"
    resumable = store.latest_resumable(eid)
    assert resumable is not None and resumable.checkpoint_id == failed_node.checkpoint_id


def test_latest_resumable_is_none_after_a_completed_run_end(store: Checkpointer) -> None:
    """A completed run_end means the run finished: there is nothing to resume."""
    eid = new_run(store)
    store.put(row(eid, "a"))
    store.put(run_end(eid, "failed"))
    store.put(row(eid, "a"))
    store.put(run_end(eid, "completed"))
    assert store.latest_resumable(eid) is None
    last = store.get_last(eid)
    assert last is not None and last.is_run_end and last.status == "completed"


@pytest.mark.parametrize("status", ["completed", "failed"])
def test_latest_forkable_skips_any_run_end(store: Checkpointer, status: str) -> None:
    """Fork's default checkpoint is the newest row that is not a marker, finished or not."""
    eid = new_run(store)
    store.put(row(eid, "a"))
    newest = row(eid, "b")
    store.put(newest)
    store.put(run_end(eid, status))
    forkable = store.latest_forkable(eid)
    assert forkable is not None and forkable.checkpoint_id == newest.checkpoint_id
    assert not forkable.is_run_end


def test_latest_resumable_returns_the_interrupted_row_of_a_paused_run(
        store: Checkpointer) -> None:
    """A paused run's resume address is its interrupted checkpoint."""
    eid = new_run(store)
    store.put(row(eid, "a"))
    interrupted = pause(store, eid)
    resumable = store.latest_resumable(eid)
    assert resumable is not None and resumable.checkpoint_id == interrupted.checkpoint_id
    assert resumable.status == "interrupted"
    assert resumable.interrupt_reason == "approve"
    assert resumable.interrupt_context == {"amount": 5}


# -- folding delta rows -----------------------------------------------------------------------

STEPS = [{"node": "a", "value": 1}, {"node": "b", "value": {"deep": [1, 2]}},
         {"counter": "loop", "value": 2}, {"node": "a", "value": "é"},
         {"node": "c", "value": None}, {"counter": "loop", "value": 3},
         {"node": "b", "value": {"deep": []}}, {"node": "d", "value": [True, 0.5]}]


@pytest.mark.parametrize("every", [1, 3, 100])
def test_folded_snapshots_equal_the_states_written(store: Checkpointer, every: int) -> None:
    """Whatever the delta layout, every read returns the full state the journal held."""
    eid = new_run(store)
    expected = journal_history(store, eid, STEPS, snapshot_every=every)
    stored = list(store.rows(eid))
    # a full row, then at most ``every`` deltas folded onto it
    assert [r.is_full for r in stored] == [i % (every + 1) == 0 for i in range(len(STEPS))]
    listed = store.list(eid)
    assert [c.state_snapshot for c in listed] == expected
    for checkpoint, state in zip(listed, expected, strict=True):
        single = store.get(eid, checkpoint.checkpoint_id)
        assert single is not None and single.state_snapshot == state
        assert checkpoint.iteration_counters == state["counters"]
    last = store.get_last(eid)
    assert last is not None and last.state_snapshot == expected[-1]


LINEAR = """
    tether: 1
    name: linear
    inputs:
      n: {type: integer}
    nodes:
      a:
        task: t.add
        with: {x: "{{ inputs.n }}"}
      b:
        needs: [a]
        task: t.add
        with: {x: "{{ nodes.a.output }}"}
      c:
        needs: [b]
        task: t.add
        with: {x: "{{ nodes.b.output }}"}
    output: "{{ nodes.c.output }}"
"""


def test_folded_snapshots_of_a_real_run_are_the_runner_state_after_each_node(
        store: Checkpointer, tmp_path) -> None:
    """A run stored as deltas reads back, row by row, the state the runner had at each node."""
    path = write_workflow(tmp_path, LINEAR)
    runner = tether.Runner(path, store, tasks={"t.add": lambda x: x + 1}, snapshot_every=2)
    result = runner.run({"n": 1})
    assert result.status == "completed"
    stored = list(store.rows(result.execution_id))
    assert [r.is_full for r in stored] == [True, False, False, True]
    nodes: dict[str, object] = {}
    for checkpoint, (node_id, value) in zip(store.list(result.execution_id),
                                            [("a", 2), ("b", 3), ("c", 4)], strict=False):
        nodes[node_id] = {"status": "completed", "output": value}
        assert checkpoint.state_snapshot == {"inputs": {"n": 1}, "nodes": nodes,
                                             "counters": {}}
    last = store.get_last(result.execution_id)
    assert last is not None and last.state_snapshot == result.state


def test_a_run_stored_as_deltas_reads_the_same_as_one_stored_as_snapshots(
        store: Checkpointer, tmp_path) -> None:
    """Loops and for_each runs fold to the same snapshots as with a full row every time."""
    path = write_workflow(tmp_path, """
        tether: 1
        name: mixed
        nodes:
          source:
            task: t.source
          each:
            needs: [source]
            for_each: "{{ nodes.source.output }}"
            task: t.double
            with: {x: "{{ item }}"}
          check:
            needs: [each]
            task: t.double
            with: {x: "{{ iteration }}"}
            loop: {to: each, while: "{{ iteration < 3 }}", max_iterations: 3}
    """)
    tasks = {"t.source": lambda: [1, 2, 3], "t.double": lambda x: 2 * x}
    snapshots = []
    for every in (1, 1000):
        result = tether.Runner(path, store, tasks=tasks, max_concurrency=1,
                               snapshot_every=every).run()
        assert result.status == "completed"
        snapshots.append([(c.node_id, c.state_snapshot, c.iteration_counters)
                          for c in store.list(result.execution_id)])
        stored = list(store.rows(result.execution_id))
        assert sum(r.is_full for r in stored) == (len(stored) + 1) // 2 if every == 1 else 1
    assert snapshots[0] == snapshots[1]
    assert len(snapshots[0]) == 1 + 3 * (3 + 2) + 1
