"""``compat`` and ``upgrade`` for runs mid-loop and mid-for_each (C116), on every backend."""

from __future__ import annotations

from pathlib import Path

from compat_support import FAN, LOOP, MAIN, SUB, Tasks, write

import tether
from tether.runtime.compat import check, upgrade
from tether.stores.base import Checkpointer


def _loop_run(store: Checkpointer, tmp_path: Path, tasks: Tasks, passes: int) -> str:
    """A run paused at ``gate`` on pass ``passes`` (1: before the loop first closed)."""
    runner = tether.Runner(write(tmp_path, "v1.yaml", LOOP), store, tasks=tasks.registry)
    eid = runner.run().execution_id
    for _ in range(passes - 1):
        assert tether.Runner(None, store, tasks=tasks.registry).resume(
            eid, tether.Resume(ok=True)).status == "paused"
    return eid


def _finish_loop(store: Checkpointer, eid: str, tasks: Tasks) -> None:
    runner = tether.Runner(None, store, tasks=tasks.registry)
    result = runner.resume(eid, tether.Resume(ok=True))
    while result.status == "paused":
        result = runner.resume(eid, tether.Resume(ok=True))
    assert result.status == "completed"


def test_a_run_inside_a_loop_whose_bound_changed_stays_pinned(store: Checkpointer,
                                                              tmp_path: Path) -> None:
    tasks = Tasks()
    (tmp_path / "in").mkdir()
    inside = _loop_run(store, tmp_path / "in", tasks, passes=2)
    first = _loop_run(store, tmp_path, tasks, passes=1)
    new = tether.compile(write(tmp_path, "v2.yaml", LOOP.replace(
        "max_iterations: 3}", "max_iterations: 5}").replace("iteration < 3", "iteration < 5")))
    report = check(store, new)
    assert [f.code for f in report.pinned[inside]] == ["C116"]
    assert report.movable == [first]  # the loop never closed: its closing node not started
    moved = upgrade(store, new)
    assert moved.moved == [first]
    before = tasks.calls["D"]
    _finish_loop(store, inside, tasks)  # on its old plan: 3 passes in all
    assert tasks.calls["D"] - before == 1 and tasks.calls["P"] == 1
    _finish_loop(store, first, tasks)  # on the new plan: 5 passes in all
    assert tasks.calls["D"] - before == 1 + 4 and tasks.calls["P"] == 2


def test_a_run_inside_a_loop_whose_body_after_it_changed_can_move(store: Checkpointer,
                                                                  tmp_path: Path) -> None:
    """Changing a node after the loop concerns no pass: the run moves mid-loop, and the
    passes already made are not repeated."""
    tasks = Tasks()
    inside = _loop_run(store, tmp_path, tasks, passes=2)
    new = tether.compile(write(tmp_path, "v2.yaml", LOOP.replace("label: P", "label: P2")))
    assert upgrade(store, new).moved == [inside]
    _finish_loop(store, inside, tasks)
    assert (tasks.calls["D"], tasks.calls["P"], tasks.calls["P2"]) == (3, 0, 1)


def test_a_for_each_with_elements_done_and_a_changed_source_stays_pinned(
        store: Checkpointer, tmp_path: Path) -> None:
    tasks = Tasks(failing={"y"})
    result = tether.Runner(write(tmp_path, "v1.yaml", FAN), store, tasks=tasks.registry).run()
    assert result.status == "failed"
    changed = tether.compile(write(tmp_path, "v2.yaml", FAN.replace('"z"]', '"z", "w"]')))
    report = check(store, changed)
    assert [f.code for f in report.pinned[result.execution_id]] == ["C116"]
    after_only = tether.compile(write(tmp_path, "v3.yaml", FAN.replace("label: done",
                                                                        "label: finished")))
    assert upgrade(store, after_only).moved == [result.execution_id]
    final = tether.Runner(None, store, tasks=tasks.registry).resume(result.execution_id)
    assert final.status == "completed"
    assert (tasks.calls["x"], tasks.calls["y"], tasks.calls["z"]) == (1, 2, 1)
    assert (tasks.calls["done"], tasks.calls["finished"]) == (0, 1)


def test_a_sub_workflow_is_checked_recursively(store: Checkpointer, tmp_path: Path) -> None:
    """Paused inside the sub-run: a change to the sub-workflow's started node pins the run
    (C117, naming the inner reason); a change after the sub-run's position lets it move."""
    old_dir, before_dir, after_dir = (tmp_path / "v1", tmp_path / "v2", tmp_path / "v3")
    for folder, sub in ((old_dir, SUB), (before_dir, SUB.replace("label: S1", "label: S1b")),
                        (after_dir, SUB.replace("label: S2", "label: S2b"))):
        folder.mkdir()
        write(folder, "main.yaml", MAIN)
        write(folder, "sub.yaml", sub)
    tasks = Tasks()
    result = tether.Runner(old_dir / "main.yaml", store, tasks=tasks.registry).run()
    assert result.status == "paused"
    eid = result.execution_id
    pinned = check(store, tether.compile(before_dir / "main.yaml"))
    (finding,) = pinned.pinned[eid]
    assert finding.code == "C117" and "`s1`" in finding.message
    assert upgrade(store, tether.compile(after_dir / "main.yaml")).moved == [eid]
    final = tether.Runner(None, store, tasks=tasks.registry).resume(eid, tether.Resume(ok=True))
    assert final.status == "completed"
    assert (tasks.calls["S1"], tasks.calls["S2"], tasks.calls["S2b"]) == (1, 0, 1)
