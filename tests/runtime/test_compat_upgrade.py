"""``compat`` and ``upgrade`` (issue 24): every change class against runs paused, queued and
failed, on every backend. The verdict; then each moved run finishes on the new plan with no
node repeated, and each pinned run finishes on its old plan."""

from __future__ import annotations

import collections
import textwrap
from pathlib import Path
from typing import Any

import pytest
from compat_support import Tasks

import tether
from tether.runtime.compat import check, upgrade
from tether.stores.base import Checkpointer

V1 = """
    tether: 1
    name: deploy
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
        with: {label: B}
    output: ["{{ nodes.a.output }}", "{{ nodes.b.output }}"]
"""

CHANGES: dict[str, tuple[str, str]] = {
    # name: (old text, new text) replaced in V1
    "b_changed": ("label: B}", "label: B2}"),
    "a_changed": ("label: A}", "label: A2}"),
    "a_renamed_bare": ("  a:\n", "  first:\n"),
    "a_renamed_declared": ("  a:\n", "  first:\n    renamed_from: a\n"),
    "review_renamed_declared": ("  review:\n", "  gate:\n    renamed_from: review\n"),
    "form_changed": ("approval: {reason: check}",
                     "approval: {reason: check, form: {ok: {type: boolean}}}"),
    "required_input": ("nodes:\n", "inputs:\n  region: {type: string}\nnodes:\n"),
    "optional_input": ("nodes:\n", "inputs:\n  region: {type: string, default: eu}\nnodes:\n"),
    "node_added": ('output:', "  c:\n    needs: [b]\n    task: t.tag\n    with: {label: C}\n"
                   "output:"),
    "title_edited": ("  a:\n", "  a:\n    title: The first step\n"),
    "a_retry_changed": ("label: A}\n", "label: A}\n    retry: {max_attempts: 3}\n"),
    "b_renamed_declared": ("  b:\n", "  last:\n    renamed_from: b\n"),
}
"""Each change of V1. A renamed node's readers are renamed too (see :func:`_text`)."""

MOVE = "move"
VERDICTS: dict[str, dict[str, str]] = {
    # change: {position: expected code, or "move"}
    "b_changed": {"paused": MOVE, "queued": MOVE, "failed": MOVE},
    "a_changed": {"paused": "C110", "queued": MOVE, "failed": "C110"},
    "a_renamed_bare": {"paused": "C111", "queued": MOVE, "failed": "C111"},
    "a_renamed_declared": {"paused": MOVE, "queued": MOVE, "failed": MOVE},
    "review_renamed_declared": {"paused": MOVE, "queued": MOVE, "failed": MOVE},
    "form_changed": {"paused": "C112", "queued": MOVE, "failed": MOVE},
    "required_input": {"paused": "C114", "queued": "C114", "failed": "C114"},
    "optional_input": {"paused": MOVE, "queued": MOVE, "failed": MOVE},
    "node_added": {"paused": MOVE, "queued": MOVE, "failed": MOVE},
    "title_edited": {"paused": MOVE, "queued": MOVE, "failed": MOVE},
    "a_retry_changed": {"paused": "C110", "queued": MOVE, "failed": "C110"},
    "b_renamed_declared": {"paused": MOVE, "queued": MOVE, "failed": MOVE},
}
for _verdicts in VERDICTS.values():  # a paused run a worker holds now: the same verdict
    _verdicts["held"] = _verdicts["paused"]


def _text(change: str) -> str:
    old, new = CHANGES[change]
    text = textwrap.dedent(V1).replace(old, new, 1)
    if change.startswith("a_renamed"):
        text = text.replace("needs: [a]", "needs: [first]").replace("nodes.a.", "nodes.first.")
    if change.startswith("review_renamed"):
        text = text.replace("needs: [review]", "needs: [gate]")
    if change.startswith("b_renamed"):
        text = text.replace("nodes.b.", "nodes.last.")
    return text


def _start(position: str, path: Path, store: Checkpointer, tasks: Tasks) -> str:
    runner = tether.Runner(path, store, tasks=tasks.registry)
    if position == "queued":
        return str(runner.submit({}))
    if position == "failed":
        tasks.failing.add("A")
        result = runner.run()
        assert result.status == "failed"
        return result.execution_id
    result = runner.run()
    assert result.status == "paused"
    if position == "held":  # an attempt (a worker's) holds it now
        assert store.acquire(result.execution_id, "busy-worker", until=4e9, now=1.0)
    return result.execution_id


def _finish(store: Checkpointer, eid: str, tasks: Tasks) -> Any:
    """Drive the run to its end on whatever plan its row names now."""
    runner = tether.Runner(None, store, tasks=tasks.registry)
    result = runner.resume(eid, tether.Resume(ok=True)) if store.list_pending(eid) \
        else runner.resume(eid)
    if result.status == "paused":
        result = runner.resume(eid, tether.Resume(ok=True))
    assert result.status == "completed", result
    return result.output


@pytest.mark.parametrize("position", ["paused", "queued", "failed", "held"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_the_verdict_and_the_upgrade_of_each_change_class(
        store: Checkpointer, tmp_path: Path, change: str, position: str) -> None:
    old_path = tmp_path / "v1.yaml"
    old_path.write_text(textwrap.dedent(V1), encoding="utf-8")
    new_path = tmp_path / "v2.yaml"
    new_path.write_text(_text(change), encoding="utf-8")
    tasks = Tasks()
    eid = _start(position, old_path, store, tasks)
    old, new = tether.compile(old_path), tether.compile(new_path)
    expected = VERDICTS[change][position]

    report = check(store, new)
    if expected == MOVE and position == "held":
        assert (report.movable, report.held, report.pinned) == ([], [eid], {})
        held = upgrade(store, new)  # never switched under the worker
        assert (held.moved, held.held) == ([], [eid])
        assert [e for e in store.events(eid) if e.kind == "upgraded"] == []
    elif expected == MOVE:
        assert (report.movable, report.pinned) == ([eid], {})
    else:
        assert report.movable == []
        assert [f.code for f in report.pinned[eid]] == [expected]
    if position == "held":
        store.release(eid, "busy-worker")  # the worker let it go: the next upgrade moves it
    before = dict(tasks.calls)

    moved = upgrade(store, new)
    run = store.get_run(eid)
    assert run is not None
    if expected == MOVE:
        assert moved.moved == [eid] and run.plan_fingerprint == new.fingerprint
    else:
        assert moved.moved == [] and run.plan_fingerprint == old.fingerprint
        assert list(moved.pinned) == [eid]

    if expected == "C114":
        return  # pinned for want of an input: it finishes on its old plan like any other
    output = _finish(store, eid, tasks)
    done = tasks.calls - collections.Counter(before)
    if expected == MOVE:
        b_label = "b2" if change == "b_changed" else "b"
        assert output == ["a2" if change == "a_changed" else "a", b_label]
        assert tasks.calls["B2" if change == "b_changed" else "B"] == 1
        if change == "node_added":
            assert tasks.calls["C"] == 1
    else:
        assert output == ["a", "b"]  # the old plan: A, not A2; B once
        assert tasks.calls["A2"] == 0 and tasks.calls["B"] == 1
    if position in ("paused", "held"):
        assert done["A"] == 0  # a node the run finished is never repeated
    if change == "a_renamed_declared" and expected == MOVE:
        last = store.get_last(eid)  # the stored state holds the new id only
        assert last is not None
        assert "first" in last.state_snapshot["nodes"]
        assert "a" not in last.state_snapshot["nodes"]


def test_a_run_held_by_a_worker_is_not_moved_and_is_reported(
        store: Checkpointer, tmp_path: Path) -> None:
    """The move is refused while an attempt holds the run (never mid-node); once released,
    the next upgrade moves it."""
    old_path = tmp_path / "v1.yaml"
    old_path.write_text(textwrap.dedent(V1), encoding="utf-8")
    new_path = tmp_path / "v2.yaml"
    new_path.write_text(_text("b_changed"), encoding="utf-8")
    tasks = Tasks()
    eid = _start("paused", old_path, store, tasks)
    new = tether.compile(new_path)
    assert store.acquire(eid, "attacker-worker", until=4e9, now=1.0)
    report = upgrade(store, new)
    assert (report.moved, report.held) == ([], [eid])
    assert store.get_run(eid).plan_fingerprint != new.fingerprint  # type: ignore[union-attr]
    store.release(eid, "attacker-worker")
    assert upgrade(store, new).moved == [eid]


def test_a_run_that_moved_on_meanwhile_is_not_switched(store: Checkpointer,
                                                       tmp_path: Path) -> None:
    """The move is a compare-and-set on the run's plan: a run already switched by another
    upgrade (or finished) is left alone."""
    old_path = tmp_path / "v1.yaml"
    old_path.write_text(textwrap.dedent(V1), encoding="utf-8")
    tasks = Tasks()
    eid = _start("paused", old_path, store, tasks)
    new_path = tmp_path / "v2.yaml"
    new_path.write_text(_text("b_changed"), encoding="utf-8")
    new = tether.compile(new_path)
    assert not store.move_run_plan(eid, "0" * 64, new.fingerprint, new.to_json())
    _finish(store, eid, tasks)
    old = tether.compile(old_path)
    assert not store.move_run_plan(eid, old.fingerprint, new.fingerprint, new.to_json())
