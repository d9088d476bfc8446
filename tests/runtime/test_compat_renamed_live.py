"""``tether upgrade`` of runs whose live state sits in a node the new plan renames
(``renamed_from:``, issue 24): a run paused in, failed at, inside the loop closed by, or
half-way through the ``for_each`` of a renamed node moves, and finishes on the new plan with
no node repeated. Its pending interrupt answers to the new id (the old one is mapped), on
every backend."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from compat_support import FAN, LOOP, MAIN, SUB, Tasks, write

import tether
from tether.runtime.compat import check, upgrade
from tether.stores.base import Checkpointer
from tether.stores.events import RunEventKind

FLOW = textwrap.dedent("""\
    tether: 1
    name: renames
    nodes:
      a:
        task: t.tag
        with: {label: A}
      review:
        needs: [a]
        approval: {reason: check}
      b:
        needs: [review]
        task: t.tag
        with: {label: "{{ nodes.a.output }}-B"}
    output: ["{{ nodes.a.output }}", "{{ nodes.b.output }}"]
""")
"""``a`` renamed to ``first`` and ``review`` to ``gate`` by the new file (see :func:`_v2`)."""


def _v2(text: str, renames: dict[str, str]) -> str:
    """``text`` with each node renamed (declared with ``renamed_from``), its readers too."""
    for old, new in renames.items():
        text = text.replace(f"  {old}:\n", f"  {new}:\n    renamed_from: {old}\n", 1)
        text = text.replace(f"needs: [{old}]", f"needs: [{new}]")
        text = text.replace(f"nodes.{old}.", f"nodes.{new}.").replace(f"to: {old},",
                                                                        f"to: {new},")
    return text


def _upgraded(store: Checkpointer, eid: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in store.events(eid) if e.kind == RunEventKind.UPGRADED]


def _move(store: Checkpointer, eid: str, new: tether.Plan) -> None:
    """compat says the run can move; upgrade moves it, with one upgraded event."""
    report = check(store, new)
    assert (report.movable, report.pinned) == ([eid], {}), report.pinned
    assert upgrade(store, new).moved == [eid]
    run = store.get_run(eid)
    assert run is not None and run.plan_fingerprint == new.fingerprint
    assert len(_upgraded(store, eid)) == 1


@pytest.mark.parametrize("address", ["gate", "review", None],
                         ids=["new-id", "old-id-mapped", "no-address"])
def test_a_run_paused_in_a_renamed_approval_moves_and_answers_to_the_new_id(
        store: Checkpointer, tmp_path: Path, address: str | None) -> None:
    tasks = Tasks()
    paused = tether.Runner(write(tmp_path, "v1.yaml", FLOW), store, tasks=tasks.registry).run()
    assert paused.status == "paused"
    eid = paused.execution_id
    new = tether.compile(write(tmp_path, "v2.yaml", _v2(FLOW, {"review": "gate"})))
    _move(store, eid, new)
    (pending,) = store.list_pending(eid)
    assert (pending.node_id, pending.address) == ("gate", "gate")
    assert _upgraded(store, eid)[0]["renamed"] == {"review": "gate"}

    runner = tether.Runner(None, store, tasks=tasks.registry)
    done = runner.resume(eid, tether.Resume(ok=True), node=address)
    assert done.status == "completed", done
    assert done.output == ["a", "a-b"]
    assert (tasks.calls["A"], tasks.calls["a-B"]) == (1, 1)  # nothing repeated
    last = store.get_last(eid)
    assert last is not None
    nodes = last.state_snapshot["nodes"]
    assert "gate" in nodes and "review" not in nodes
    assert nodes["gate"]["status"] == "completed"
    (decision,) = store.decisions(eid)
    assert decision.node_id == "gate"


def test_an_address_no_node_has_is_still_refused_after_a_rename(store: Checkpointer,
                                                                tmp_path: Path) -> None:
    tasks = Tasks()
    eid = tether.Runner(write(tmp_path, "v1.yaml", FLOW), store,
                        tasks=tasks.registry).run().execution_id
    new = tether.compile(write(tmp_path, "v2.yaml", _v2(FLOW, {"review": "gate"})))
    _move(store, eid, new)
    with pytest.raises(tether.TetherError, match="not waiting for input"):
        tether.Runner(None, store, tasks=tasks.registry).resume(
            eid, tether.Resume(ok=True), node="elsewhere")
    run = store.get_run(eid)
    assert run is not None and run.status == "paused"


def test_a_run_failed_at_a_renamed_node_moves_and_resumes_there(store: Checkpointer,
                                                                tmp_path: Path) -> None:
    tasks = Tasks(failing={"A"})
    failed = tether.Runner(write(tmp_path, "v1.yaml", FLOW), store, tasks=tasks.registry).run()
    assert failed.status == "failed"
    eid = failed.execution_id
    new = tether.compile(write(tmp_path, "v2.yaml", _v2(FLOW, {"a": "first"})))
    _move(store, eid, new)
    runner = tether.Runner(None, store, tasks=tasks.registry)
    paused = runner.resume(eid)
    assert paused.status == "paused"
    (pending,) = store.list_pending(eid)
    assert pending.node_id == "review"
    done = runner.resume(eid, tether.Resume(ok=True))
    assert done.status == "completed" and done.output == ["a", "a-b"]
    assert (tasks.calls["A"], tasks.calls["a-B"]) == (2, 1)  # the failed attempt, then one
    last = store.get_last(eid)
    assert last is not None and "a" not in last.state_snapshot["nodes"]


FAN_READ = FAN.replace("label: done", 'label: "n{{ nodes.each.output | length }}"')
"""The for_each node's reader names it (renamed with it)."""


def test_a_run_half_way_through_a_renamed_for_each_keeps_its_elements(
        store: Checkpointer, tmp_path: Path) -> None:
    tasks = Tasks(failing={"y"})
    failed = tether.Runner(write(tmp_path, "v1.yaml", FAN_READ), store, tasks=tasks.registry).run()
    assert failed.status == "failed"
    eid = failed.execution_id
    new = tether.compile(write(tmp_path, "v2.yaml", _v2(FAN_READ, {"each": "every"})))
    _move(store, eid, new)
    done = tether.Runner(None, store, tasks=tasks.registry).resume(eid)
    assert done.status == "completed", done
    assert (tasks.calls["x"], tasks.calls["y"], tasks.calls["z"], tasks.calls["n3"]) == \
        (1, 2, 1, 1)  # only the failed element again
    last = store.get_last(eid)
    assert last is not None
    assert set(last.state_snapshot["nodes"]) == {"every", "after"}


@pytest.mark.parametrize("renames", [{"critique": "review"}, {"draft": "write"},
                                     {"gate": "ask", "critique": "review"}],
                         ids=["closer", "loop-start", "paused-member-and-closer"])
def test_a_run_inside_a_loop_of_renamed_nodes_keeps_its_pass(
        store: Checkpointer, tmp_path: Path, renames: dict[str, str]) -> None:
    tasks = Tasks()
    runner = tether.Runner(write(tmp_path, "v1.yaml", LOOP), store, tasks=tasks.registry)
    eid = runner.run().execution_id
    assert runner.resume(eid, tether.Resume(ok=True)).status == "paused"  # pass 2, at gate
    assert (tasks.calls["D"], tasks.calls["C"]) == (2, 1)
    new = tether.compile(write(tmp_path, "v2.yaml", _v2(LOOP, renames)))
    _move(store, eid, new)
    again = tether.Runner(None, store, tasks=tasks.registry)
    result = again.resume(eid, tether.Resume(ok=True))
    while result.status == "paused":
        result = again.resume(eid, tether.Resume(ok=True))
    assert result.status == "completed"
    # three passes in all, as the run was on its second: not a fresh loop
    assert (tasks.calls["D"], tasks.calls["C"], tasks.calls["P"]) == (3, 3, 1)
    last = store.get_last(eid)
    assert last is not None
    assert not set(renames) & set(last.state_snapshot["nodes"])
    assert not set(renames) & set(last.state_snapshot["counters"])


def test_a_renamed_node_that_also_changed_keeps_the_run_pinned(store: Checkpointer,
                                                               tmp_path: Path) -> None:
    tasks = Tasks()
    eid = tether.Runner(write(tmp_path, "v1.yaml", FLOW), store,
                        tasks=tasks.registry).run().execution_id
    new = tether.compile(write(tmp_path, "v2.yaml", _v2(FLOW, {"review": "gate"}).replace(
        "reason: check", "reason: look again")))
    report = upgrade(store, new)
    assert report.moved == [] and [f.code for f in report.pinned[eid]] == ["C110"]
    assert _upgraded(store, eid) == []
    (pending,) = store.list_pending(eid)
    assert pending.node_id == "review"  # left as it was: the run stays on its plan


class Crash(KeyboardInterrupt):
    """Stops the attempt inside the task, as a killed process would (its lease released)."""


def test_a_run_left_running_in_a_renamed_node_moves_and_runs_it_once_more(
        store: Checkpointer, tmp_path: Path) -> None:
    """The attempt died inside ``b`` (after ``a`` and the approval): the run is left running
    there, with no holder. ``b`` is renamed: the run moves, and resuming it runs ``b`` (now
    ``last``) and nothing before it again."""
    tasks = Tasks()
    runner = tether.Runner(write(tmp_path, "v1.yaml", FLOW), store, tasks=tasks.registry)
    eid = runner.run().execution_id

    def crash(label: str) -> str:
        tasks.calls[label] += 1
        raise Crash()

    crashing = tether.Runner(None, store, tasks={"t.tag": crash})
    with pytest.raises(Crash):
        crashing.resume(eid, tether.Resume(ok=True))
    run = store.get_run(eid)
    assert run is not None and (run.status, run.owner) == ("running", None)
    new = tether.compile(write(tmp_path, "v2.yaml", _v2(FLOW, {"b": "last"})))
    _move(store, eid, new)
    done = tether.Runner(None, store, tasks=tasks.registry).resume(eid)
    assert done.status == "completed" and done.output == ["a", "a-b"]
    assert (tasks.calls["A"], tasks.calls["a-B"]) == (1, 2)  # the crashed call, then one


FORM_SUB = SUB.replace("approval: {reason: inner}",
                       "approval: {reason: inner, form: {ok: {type: boolean}}}")


@pytest.mark.parametrize("address", ["workflow:parent/node:child/confirm",
                                     "workflow:parent/node:child/ask", None],
                         ids=["new-id", "old-id-mapped", "no-address"])
def test_a_run_paused_in_a_renamed_node_of_a_sub_workflow_moves(
        store: Checkpointer, tmp_path: Path, address: str | None) -> None:
    """The sub-workflow renames the approval its sub-run waits at: the pause is readdressed
    inside the sub-run, its form still checks the answer, and nothing runs twice."""
    for folder, sub in (("v1", FORM_SUB), ("v2", _v2(FORM_SUB, {"ask": "confirm"}))):
        (tmp_path / folder).mkdir()
        write(tmp_path / folder, "main.yaml", MAIN)
        write(tmp_path / folder, "sub.yaml", sub)
    tasks = Tasks()
    paused = tether.Runner(tmp_path / "v1" / "main.yaml", store, tasks=tasks.registry).run()
    assert paused.status == "paused"
    eid = paused.execution_id
    _move(store, eid, tether.compile(tmp_path / "v2" / "main.yaml"))
    (pending,) = store.list_pending(eid)
    assert pending.address == "workflow:parent/node:child/confirm"
    runner = tether.Runner(None, store, tasks=tasks.registry)
    with pytest.raises(tether.TetherError, match="ok"):  # the form is still checked
        runner.resume(eid, {"ok": "not a boolean"}, node=address)
    done = runner.resume(eid, tether.Resume(ok=True), node=address)
    assert done.status == "completed", done
    assert (tasks.calls["S1"], tasks.calls["S2"], tasks.calls["L"]) == (1, 1, 1)
    (decision,) = store.decisions(eid)
    assert decision.node_id == "confirm"


def test_a_moved_run_not_loaded_since_is_judged_by_its_new_ids(store: Checkpointer,
                                                               tmp_path: Path) -> None:
    """Moved to a plan renaming `review` to `gate` (its checkpoints still say `review`), the
    run is judged against a third version by the ids of the plan it is on: a change of `gate`
    pins it, as it would had the run been loaded in between."""
    tasks = Tasks()
    eid = tether.Runner(write(tmp_path, "v1.yaml", FLOW), store,
                        tasks=tasks.registry).run().execution_id
    renamed = _v2(FLOW, {"review": "gate"})
    _move(store, eid, tether.compile(write(tmp_path, "v2.yaml", renamed)))
    changed = tether.compile(write(tmp_path, "v3.yaml", renamed.replace(
        "reason: check", "reason: look again")))
    assert [f.code for f in check(store, changed).pinned[eid]] == ["C112"]
