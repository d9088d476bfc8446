"""Runtime conformance, part 1: where checkpoints are written, and how resume decides.

Every test drives real workflows through ``tether.Runner`` against each backend (the ``store``
fixture: in-memory, SQLite, PostgreSQL) and checks what the store holds afterwards.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import (
    Calls,
    Crash,
    committed,
    footprint,
    node_rows,
    run_ends,
    write_workflow,
)

import tether
from tether.errors import AlreadyResumed, ResumeError, RunNotFound
from tether.stores.base import Checkpointer

LINEAR = """
    tether: 1
    name: linear
    inputs:
      n: {type: integer}
    nodes:
      a:
        task: t.a
        with: {x: "{{ inputs.n }}"}
      b:
        needs: [a]
        task: t.b
        with: {x: "{{ nodes.a.output }}"}
      c:
        needs: [b]
        task: t.c
        with: {x: "{{ nodes.b.output }}"}
    output: {result: "{{ nodes.c.output }}"}
"""

APPROVAL = """
    tether: 1
    name: approve
    nodes:
      a:
        task: t.a
        with: {x: 1}
      review:
        needs: [a]
        approval:
          reason: manager_approval
          context: {amount: "{{ nodes.a.output }}"}
          form:
            approved: {type: boolean}
            note: {type: string, default: ""}
      b:
        needs: [review]
        task: t.b
        with: {x: "{{ nodes.review.output.approved }}"}
    output: "{{ nodes.b.output }}"
"""

ASK = """
    tether: 1
    name: ask
    nodes:
      a:
        task: t.a
        with: {x: 1}
      ask:
        needs: [a]
        task: t.ask
      after:
        needs: [ask]
        task: t.after
        with: {x: "{{ nodes.ask.output }}"}
    output: "{{ nodes.after.output }}"
"""


def linear_tasks(calls: Calls, fail_b: int = 0, crash_b: int = 0) -> dict[str, Any]:
    """Tasks of LINEAR: each adds one; b fails its first ``fail_b`` calls or crashes."""
    def step(name: str) -> Any:
        def body(x: int) -> int:
            count = calls.hit(name)
            if name == "b" and count <= fail_b:
                raise ValueError(f"b failed (call {count})")
            if name == "b" and count <= crash_b:
                raise Crash()
            return x + 1
        return body
    return {f"t.{n}": step(n) for n in "abc"}


def simple_tasks(calls: Calls) -> dict[str, Any]:
    def a(x: Any) -> Any:
        calls.hit("a")
        return x

    def b(x: Any) -> Any:
        calls.hit("b")
        return {"got": x}

    return {"t.a": a, "t.b": b}


def ask_tasks(calls: Calls) -> dict[str, Any]:
    def ask() -> Any:
        calls.hit("ask:top")  # code before interrupt(): runs again on resume
        answer = tether.interrupt("confirm", {"asked": calls["ask:top"]})
        calls.hit("ask:answered")
        return answer["value"]

    def after(x: Any) -> Any:
        calls.hit("after")
        return {"final": x}

    return {"t.a": lambda x: calls.hit("a"), "t.ask": ask, "t.after": after}


# -- write points -----------------------------------------------------------------------------


def test_each_node_writes_one_completed_checkpoint_with_its_post_node_state(
        store: Checkpointer, tmp_path: Path) -> None:
    """One completed `node` row per node: post-node snapshot, plan index, counters, I/O."""
    calls = Calls()
    path = write_workflow(tmp_path, LINEAR)
    plan = tether.compile(path)
    result = tether.Runner(path, store, tasks=linear_tasks(calls)).run({"n": 1})
    assert (result.status, result.output) == ("completed", {"result": 4})
    rows = store.list(result.execution_id)
    assert [(c.node_id, c.step_type, c.status) for c in rows] == [
        ("a", "node", "completed"), ("b", "node", "completed"), ("c", "node", "completed"),
        ("run_end", "run_end", "completed")]
    nodes: dict[str, Any] = {}
    for checkpoint, (node_id, value) in zip(rows, [("a", 2), ("b", 3), ("c", 4)], strict=False):
        nodes[node_id] = {"status": "completed", "output": value}
        assert checkpoint.node_index == plan.node(node_id).index
        assert checkpoint.state_snapshot == {"inputs": {"n": 1}, "nodes": nodes, "counters": {}}
        assert checkpoint.iteration_counters == {}
        assert (checkpoint.node_input, checkpoint.node_output) == ({"x": value - 1}, value)
        assert checkpoint.agent_path == ""
        assert checkpoint.execution_id == result.execution_id
    assert rows[-1].node_index == len(plan.nodes)
    assert rows[-1].node_output == {"result": 4}


def test_a_failed_attempt_writes_one_failed_run_end_with_the_error(
        store: Checkpointer, tmp_path: Path) -> None:
    """A failing node: a failed node row, one failed run_end carrying {type, message, node_id}."""
    calls = Calls()
    path = write_workflow(tmp_path, LINEAR)
    result = tether.Runner(path, store, tasks=linear_tasks(calls, fail_b=1)).run({"n": 1})
    error = {"type": "ValueError", "message": "b failed (call 1)", "node_id": "b"}
    assert (result.status, result.error) == ("failed", error)
    assert committed(store, result.execution_id) == [
        ("a", "completed"), ("b", "failed"), ("run_end", "failed")]
    last = store.get_last(result.execution_id)
    assert last is not None and last.node_output == error
    run = store.get_run(result.execution_id)
    assert run is not None and (run.status, run.error) == ("failed", error)


def test_each_attempt_that_ends_writes_exactly_one_run_end(
        store: Checkpointer, tmp_path: Path) -> None:
    """A failed attempt and the resumed attempt that completes each leave one run_end."""
    calls = Calls()
    path = write_workflow(tmp_path, LINEAR)
    runner = tether.Runner(path, store, tasks=linear_tasks(calls, fail_b=1))
    eid = runner.run({"n": 1}).execution_id
    assert runner.resume(eid).status == "completed"
    assert [r.status for r in run_ends(store, eid)] == ["failed", "completed"]
    assert [r.node_id for r in store.rows(eid)][-1] == "run_end"


def test_a_failure_after_the_last_node_writes_a_failed_run_end(
        store: Checkpointer, tmp_path: Path) -> None:
    """An output that cannot be rendered fails the run with a failed run_end, no node_id."""
    path = write_workflow(tmp_path, """
        tether: 1
        name: bad_output
        nodes:
          a: {task: t.a}
        output: "{{ nodes.a.output.missing }}"
    """)
    result = tether.Runner(path, store, tasks={"t.a": lambda: {"present": 1}}).run()
    assert result.status == "failed"
    assert result.error == {"type": "RenderError", "node_id": None, "message":
                            "cannot evaluate `output`: 'dict object' has no attribute 'missing'"}
    assert committed(store, result.execution_id) == [("a", "completed"), ("run_end", "failed")]


def test_a_pause_writes_one_interrupted_row_and_a_pending_row_but_no_run_end(
        store: Checkpointer, tmp_path: Path) -> None:
    """A paused run's whole footprint: its completed rows, one interrupted row, one pending row."""
    calls = Calls()
    path = write_workflow(tmp_path, APPROVAL)
    result = tether.Runner(path, store, tasks=simple_tasks(calls)).run()
    assert result.status == "paused"
    assert result.pending_interrupt == {"reason": "manager_approval", "context": {"amount": 1},
                                        "node_id": "review", "agent_path": ""}
    rows = store.list(result.execution_id)
    assert [(c.node_id, c.step_type, c.status) for c in rows] == [
        ("a", "node", "completed"), ("review", "hitl_pause", "interrupted")]
    assert (rows[-1].interrupt_reason, rows[-1].interrupt_context) == ("manager_approval",
                                                                       {"amount": 1})
    pending = store.get_pending(result.execution_id)
    assert pending is not None and pending.checkpoint_id == rows[-1].checkpoint_id
    run = store.get_run(result.execution_id)
    assert run is not None and run.status == "paused"
    assert calls["b"] == 0


def test_the_frozen_context_does_not_change_when_the_caller_mutates_the_result(
        store: Checkpointer, tmp_path: Path) -> None:
    """The context is frozen at suspend time: editing RunResult.pending_interrupt changes
    neither the pending row nor the interrupted checkpoint."""
    path = write_workflow(tmp_path, APPROVAL)
    result = tether.Runner(path, store, tasks=simple_tasks(Calls())).run()
    assert result.pending_interrupt is not None
    result.pending_interrupt["context"]["amount"] = 999
    pending = store.get_pending(result.execution_id)
    assert pending is not None and pending.context == {"amount": 1}
    paused_at = store.latest_resumable(result.execution_id)
    assert paused_at is not None and paused_at.interrupt_context == {"amount": 1}


SHIPPING = """
    tether: 1
    name: shipping
    inputs:
      parcel: {type: string}
    nodes:
      quote:
        task: t.quote
        with: {parcel: "{{ inputs.parcel }}"}
      book:
        needs: [quote]
        task: t.book
        with: {carrier: "{{ nodes.quote.output }}"}
    output: "{{ nodes.book.output }}"
"""

CHECK = """
      check:
        needs: [book]
        approval: {reason: check_booking, context: "{{ nodes.book.output }}"}
"""


def _order_workflow(tmp_path: Path, approval: bool = False) -> Path:
    shipping = SHIPPING.replace("    output:", CHECK.strip("\n") + "\n    output:") \
        if approval else SHIPPING
    write_workflow(tmp_path, shipping, "shipping.yaml")
    return write_workflow(tmp_path, """
        tether: 1
        name: order
        nodes:
          take: {task: t.take}
          ship:
            needs: [take]
            workflow: shipping.yaml
            with: {parcel: "{{ nodes.take.output }}"}
          confirm:
            needs: [ship]
            task: t.confirm
            with: {tracking: "{{ nodes.ship.output }}"}
        output: "{{ nodes.confirm.output }}"
    """, "order.yaml")


SUB_TASKS = {"t.take": lambda: "P1", "t.quote": lambda parcel: f"dhl:{parcel}",
             "t.book": lambda carrier: f"T-{carrier}", "t.confirm": lambda tracking: tracking}


def test_a_sub_workflow_checkpoints_into_the_parents_run_under_its_agent_path(
        store: Checkpointer, tmp_path: Path) -> None:
    """Sub-run rows share the execution id, carry workflow:<parent>/node:<id>, write no run_end."""
    path = _order_workflow(tmp_path)
    result = tether.Runner(path, store, tasks=SUB_TASKS).run()
    assert (result.status, result.output) == ("completed", "T-dhl:P1")
    rows = store.list(result.execution_id)
    assert [(c.node_id, c.agent_path) for c in rows] == [
        ("take", ""), ("quote", "workflow:order/node:ship"),
        ("book", "workflow:order/node:ship"), ("ship", ""), ("confirm", ""), ("run_end", "")]
    assert {c.execution_id for c in rows} == {result.execution_id}
    assert len(run_ends(store, result.execution_id)) == 1


def test_a_pause_inside_a_sub_workflow_is_addressed_by_its_agent_path_and_resumes(
        store: Checkpointer, tmp_path: Path) -> None:
    """An approval in a sub-run pauses the whole run; resume re-enters the sub-run."""
    path = _order_workflow(tmp_path, approval=True)
    runner = tether.Runner(path, store, tasks=SUB_TASKS)
    paused = runner.run()
    assert paused.pending_interrupt == {"reason": "check_booking", "context": "T-dhl:P1",
                                        "node_id": "check",
                                        "agent_path": "workflow:order/node:ship"}
    done = runner.resume(paused.execution_id, tether.Resume(ok=True))
    assert (done.status, done.output) == ("completed", "T-dhl:P1")
    assert [(n, a) for n, a in ((r.node_id, r.agent_path)
                                for r in store.rows(paused.execution_id))
            if n in ("quote", "book")] == [("quote", "workflow:order/node:ship"),
                                           ("book", "workflow:order/node:ship")]
    assert len(run_ends(store, paused.execution_id)) == 1


def test_a_sub_workflow_run_per_element_carries_the_element_in_its_agent_path(
        store: Checkpointer, tmp_path: Path) -> None:
    """for_each over a sub-workflow: rows under workflow:<parent>/node:<id>/item:<i>."""
    write_workflow(tmp_path, SHIPPING, "shipping.yaml")
    path = write_workflow(tmp_path, """
        tether: 1
        name: batch
        nodes:
          ship:
            for_each: [p1, p2]
            workflow: shipping.yaml
            with: {parcel: "{{ item }}"}
        output: "{{ nodes.ship.output }}"
    """)
    result = tether.Runner(path, store, tasks=SUB_TASKS, max_concurrency=1).run()
    assert (result.status, result.output) == ("completed", ["T-dhl:p1", "T-dhl:p2"])
    assert [(r.node_id, r.agent_path) for r in store.rows(result.execution_id)] == [
        ("quote", "workflow:batch/node:ship/item:0"), ("book", "workflow:batch/node:ship/item:0"),
        ("ship/item:0", ""),
        ("quote", "workflow:batch/node:ship/item:1"), ("book", "workflow:batch/node:ship/item:1"),
        ("ship/item:1", ""), ("ship", ""), ("run_end", "")]


FOR_EACH = """
    tether: 1
    name: fan
    nodes:
      each:
        for_each: [10, 20, 30]
        task: t.item
        with: {x: "{{ item }}"}
    output: "{{ nodes.each.output }}"
"""


def test_for_each_writes_one_row_per_finished_element(
        store: Checkpointer, tmp_path: Path) -> None:
    """Each element is checkpointed as <node>/item:<i>; then the node itself."""
    path = write_workflow(tmp_path, FOR_EACH)
    result = tether.Runner(path, store, tasks={"t.item": lambda x: x + 1},
                           max_concurrency=1).run()
    assert (result.status, result.output) == ("completed", [11, 21, 31])
    rows = store.list(result.execution_id)
    assert [(c.node_id, c.node_output) for c in rows] == [
        ("each/item:0", 11), ("each/item:1", 21), ("each/item:2", 31), ("each", [11, 21, 31]),
        ("run_end", [11, 21, 31])]


def test_a_crash_inside_for_each_does_not_redo_finished_elements(
        store: Checkpointer, tmp_path: Path) -> None:
    """Elements checkpointed before a crash are not run again on resume."""
    calls = Calls()

    def item(x: int) -> int:
        if calls.hit(f"item{x}") == 1 and x == 20:
            raise Crash()
        return x + 1

    path = write_workflow(tmp_path, FOR_EACH)
    runner = tether.Runner(path, store, tasks={"t.item": item}, max_concurrency=1)
    with pytest.raises(Crash):
        runner.run()
    [run] = store.list_runs()
    assert committed(store, run.execution_id) == [("each/item:0", "completed")]
    result = runner.resume(run.execution_id)
    assert (result.status, result.output) == ("completed", [11, 21, 31])
    assert dict(calls.counts) == {"item10": 1, "item20": 2, "item30": 1}


# -- the resume decision table ----------------------------------------------------------------


def test_resuming_a_finished_run_raises_already_resumed_and_writes_nothing(
        store: Checkpointer, tmp_path: Path) -> None:
    """Finished run + anything -> AlreadyResumed; the store is byte-for-byte unchanged."""
    calls = Calls()
    path = write_workflow(tmp_path, LINEAR)
    runner = tether.Runner(path, store, tasks=linear_tasks(calls))
    eid = runner.run({"n": 1}).execution_id
    before = footprint(store, eid)
    for attempt in (None, tether.Resume(approved=True)):
        with pytest.raises(AlreadyResumed):
            runner.resume(eid, attempt)
        with pytest.raises(AlreadyResumed):
            tether.Runner(None, store, tasks=linear_tasks(calls)).resume(eid, attempt)
    assert footprint(store, eid) == before
    assert sum(calls.counts.values()) == 3


def test_resume_with_a_value_reruns_the_interrupted_node_from_its_top(
        store: Checkpointer, tmp_path: Path) -> None:
    """Interrupted + Resume: the node re-runs from its top, interrupt() returns the value,
    downstream nodes run normally, upstream ones do not run again."""
    calls = Calls()
    path = write_workflow(tmp_path, ASK)
    runner = tether.Runner(path, store, tasks=ask_tasks(calls))
    paused = runner.run()
    assert paused.pending_interrupt is not None
    assert paused.pending_interrupt["context"] == {"asked": 1}
    done = runner.resume(paused.execution_id, tether.Resume(value=42))
    assert (done.status, done.output) == ("completed", {"final": 42})
    assert dict(calls.counts) == {"a": 1, "ask:top": 2, "ask:answered": 1, "after": 1}
    assert store.get_pending(paused.execution_id) is None
    assert committed(store, paused.execution_id) == [
        ("a", "completed"), ("ask", "interrupted"), ("ask", "completed"),
        ("after", "completed"), ("run_end", "completed")]


def test_resuming_an_interrupted_run_without_a_value_raises_and_changes_nothing(
        store: Checkpointer, tmp_path: Path) -> None:
    """Interrupted + nothing -> ResumeError; rows, pending row and run record are untouched."""
    calls = Calls()
    path = write_workflow(tmp_path, ASK)
    runner = tether.Runner(path, store, tasks=ask_tasks(calls))
    eid = runner.run().execution_id
    before = footprint(store, eid)
    with pytest.raises(ResumeError) as caught:
        runner.resume(eid)
    assert caught.value.node_id == "ask" and "Resume(" in str(caught.value)
    assert footprint(store, eid) == before
    assert calls["ask:top"] == 1
    assert runner.resume(eid, tether.Resume(value=1)).status == "completed"


def test_resuming_after_a_crash_continues_with_the_nodes_not_yet_committed(
        store: Checkpointer, tmp_path: Path) -> None:
    """Completed latest + nothing: committed nodes are not re-run; the rest run once."""
    calls = Calls()
    path = write_workflow(tmp_path, LINEAR)
    runner = tether.Runner(path, store, tasks=linear_tasks(calls, crash_b=1))
    with pytest.raises(Crash):
        runner.run({"n": 1})
    [run] = store.list_runs()
    assert committed(store, run.execution_id) == [("a", "completed")]
    result = runner.resume(run.execution_id)
    assert (result.status, result.output) == ("completed", {"result": 4})
    assert dict(calls.counts) == {"a": 1, "b": 2, "c": 1}
    assert len(run_ends(store, run.execution_id)) == 1


def test_resuming_a_failed_run_runs_the_failed_node_again_and_not_the_committed_ones(
        store: Checkpointer, tmp_path: Path) -> None:
    """Failed latest + nothing: the failed node runs again; completed ones do not."""
    calls = Calls()
    path = write_workflow(tmp_path, LINEAR)
    runner = tether.Runner(path, store, tasks=linear_tasks(calls, fail_b=1))
    eid = runner.run({"n": 1}).execution_id
    result = tether.Runner(None, store, tasks=linear_tasks(calls, fail_b=1)).resume(eid)
    assert (result.status, result.output) == ("completed", {"result": 4})
    assert dict(calls.counts) == {"a": 1, "b": 2, "c": 1}


def test_a_value_for_a_run_that_is_not_waiting_is_refused_and_changes_nothing(
        store: Checkpointer, tmp_path: Path) -> None:
    """Completed/failed latest + Resume(...) -> ResumeError, nothing written."""
    calls = Calls()
    path = write_workflow(tmp_path, LINEAR)
    runner = tether.Runner(path, store, tasks=linear_tasks(calls, fail_b=1))
    eid = runner.run({"n": 1}).execution_id
    before = footprint(store, eid)
    with pytest.raises(ResumeError):
        runner.resume(eid, tether.Resume(value=1))
    assert footprint(store, eid) == before


def test_resuming_an_unknown_run_raises_run_not_found(store: Checkpointer) -> None:
    """resume of an execution id the store does not know -> RunNotFound."""
    with pytest.raises(RunNotFound):
        tether.Runner(None, store, tasks={}).resume("no-such-run")


def test_the_async_api_follows_the_same_table(store: Checkpointer, tmp_path: Path) -> None:
    """arun/aresume behave like run/resume: pause, then complete, then AlreadyResumed."""
    calls = Calls()
    path = write_workflow(tmp_path, ASK)
    runner = tether.Runner(path, store, tasks=ask_tasks(calls))

    async def scenario() -> None:
        paused = await runner.arun()
        done = await runner.aresume(paused.execution_id, tether.Resume(value="x"))
        assert done.output == {"final": "x"}
        with pytest.raises(AlreadyResumed):
            await runner.aresume(paused.execution_id)

    asyncio.run(scenario())
    assert len(node_rows(store, store.list_runs()[0].execution_id)) == 4
