"""Runtime conformance, part 4: iteration counters of bounded loops, and plan pinning;
on every backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import Calls, Crash, committed, footprint, write_workflow

import tether
from tether.errors import PlanMismatch
from tether.stores.base import Checkpointer

LOOP = """
    tether: 1
    name: loop
    inputs:
      target: {type: integer}
    nodes:
      draft:
        task: t.draft
        with: {attempt: "{{ iteration }}"}
      critique:
        needs: [draft]
        task: t.critique
        with: {text: "{{ nodes.draft.output }}"}
        loop:
          to: draft
          while: "{{ nodes.critique.output < inputs.target }}"
          max_iterations: 3
          on_exhausted: EXHAUSTED
      publish:
        needs: [critique]
        task: t.publish
        with: {score: "{{ nodes.critique.output }}"}
    output: "{{ nodes.publish.output }}"
"""


def _loop(tmp_path: Path, store: Checkpointer, calls: Calls, exhausted: str = "continue",
          crash_critique_at: int = 0) -> tether.Runner:
    def draft(attempt: int) -> str:
        calls.hit("draft")
        return f"draft {attempt}"

    def critique(text: str) -> int:
        count = calls.hit("critique")
        if count == crash_critique_at:
            raise Crash()
        return int(text.split()[1])  # the score is the attempt number

    def publish(score: int) -> str:
        calls.hit("publish")
        return f"published at {score}"

    path = write_workflow(tmp_path, LOOP.replace("EXHAUSTED", exhausted))
    return tether.Runner(path, store, tasks={"t.draft": draft, "t.critique": critique,
                                             "t.publish": publish})


def test_a_loop_runs_its_body_exactly_max_iterations_times_then_continues(
        store: Checkpointer, tmp_path: Path) -> None:
    """on_exhausted: continue -> the body runs max_iterations times, the next node once."""
    calls = Calls()
    result = _loop(tmp_path, store, calls).run({"target": 100})
    assert (result.status, result.output) == ("completed", "published at 3")
    assert dict(calls.counts) == {"draft": 3, "critique": 3, "publish": 1}


def test_an_exhausted_loop_fails_the_run_when_asked_to(
        store: Checkpointer, tmp_path: Path) -> None:
    """on_exhausted: fail -> the closing node fails with LoopExhausted; nothing after runs."""
    calls = Calls()
    result = _loop(tmp_path, store, calls, exhausted="fail").run({"target": 100})
    assert result.status == "failed" and result.error is not None
    assert (result.error["type"], result.error["node_id"]) == ("LoopExhausted", "critique")
    assert dict(calls.counts) == {"draft": 3, "critique": 3}
    assert committed(store, result.execution_id)[-2:] == [("critique", "failed"),
                                                           ("run_end", "failed")]


def test_a_loop_stops_as_soon_as_its_condition_is_false(
        store: Checkpointer, tmp_path: Path) -> None:
    """The body runs again only while the condition holds."""
    calls = Calls()
    result = _loop(tmp_path, store, calls).run({"target": 2})
    assert result.output == "published at 2"
    assert dict(calls.counts) == {"draft": 2, "critique": 2, "publish": 1}


def test_every_checkpoint_carries_the_loop_counters(store: Checkpointer, tmp_path: Path) -> None:
    """iteration_counters of each row equal the counters of its snapshot, pass by pass."""
    result = _loop(tmp_path, store, Calls()).run({"target": 100})
    rows = store.list(result.execution_id)
    for checkpoint in rows:
        assert checkpoint.iteration_counters == checkpoint.state_snapshot["counters"]
    assert [(c.node_id, c.iteration_counters.get("critique", 1)) for c in rows] == [
        ("draft", 1), ("critique", 2), ("draft", 2), ("critique", 3), ("draft", 3),
        ("critique", 3), ("publish", 3), ("run_end", 3)]
    assert [c.node_input for c in rows if c.node_id == "draft"] == [
        {"attempt": 1}, {"attempt": 2}, {"attempt": 3}]


def test_a_loop_resumed_after_a_crash_continues_mid_cycle_within_its_bound(
        store: Checkpointer, tmp_path: Path) -> None:
    """The counters are run state: after a crash in pass 2 the loop still stops at 3 passes."""
    calls = Calls()
    runner = _loop(tmp_path, store, calls, crash_critique_at=2)
    with pytest.raises(Crash):
        runner.run({"target": 100})
    [run] = store.list_runs()
    last = store.get_last(run.execution_id)
    assert last is not None and (last.node_id, last.iteration_counters) == ("draft",
                                                                           {"critique": 2})
    result = runner.resume(run.execution_id)
    assert result.output == "published at 3"
    assert dict(calls.counts) == {"draft": 3, "critique": 4, "publish": 1}


# -- plan pinning -----------------------------------------------------------------------------

PINNED = """
    tether: 1
    name: pinned
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

TASKS: dict[str, Any] = {"t.tag": lambda label: label.lower()}


def _paused(tmp_path: Path, store: Checkpointer) -> tuple[Path, str]:
    path = write_workflow(tmp_path, PINNED)
    result = tether.Runner(path, store, tasks=TASKS).run()
    assert result.status == "paused"
    return path, result.execution_id


def test_a_run_resumes_with_its_stored_plan_after_the_file_changed(
        store: Checkpointer, tmp_path: Path) -> None:
    """The run stores its plan: Runner(None, store) resumes it as it was started."""
    path, eid = _paused(tmp_path, store)
    path.write_text(PINNED.replace("label: B", "label: CHANGED"))
    result = tether.Runner(None, store, tasks=TASKS).resume(eid, tether.Resume(ok=True))
    assert (result.status, result.output) == ("completed", ["a", "b"])


def test_a_run_resumes_after_its_source_file_was_deleted(
        store: Checkpointer, tmp_path: Path) -> None:
    """No source file is needed to resume: the plan comes from the store."""
    path, eid = _paused(tmp_path, store)
    path.unlink()
    result = tether.Runner(None, store, tasks=TASKS).resume(eid, tether.Resume(ok=True))
    assert result.output == ["a", "b"]


def test_a_runner_with_a_different_plan_is_refused_naming_both_plans_and_the_node(
        store: Checkpointer, tmp_path: Path) -> None:
    """PlanMismatch: both fingerprints and the first differing node; nothing changed."""
    path, eid = _paused(tmp_path, store)
    old = tether.compile(path)
    changed = write_workflow(tmp_path, PINNED.replace("label: B", "label: CHANGED"), "new.yaml")
    new = tether.compile(changed)
    before = footprint(store, eid)
    with pytest.raises(PlanMismatch) as caught:
        tether.Runner(changed, store, tasks=TASKS).resume(eid, tether.Resume(ok=True))
    error = caught.value
    assert (error.stored_fingerprint, error.given_fingerprint, error.node_id) == (
        old.fingerprint, new.fingerprint, "b")
    assert old.fingerprint[:12] in str(error) and new.fingerprint[:12] in str(error)
    assert "'b'" in str(error)
    assert footprint(store, eid) == before


def test_an_explicit_compatible_plan_is_accepted_and_pinned(
        store: Checkpointer, tmp_path: Path) -> None:
    """resume(plan=...) with a plan that changes only nodes not yet run: used and recorded."""
    _, eid = _paused(tmp_path, store)
    changed = write_workflow(tmp_path, PINNED.replace("label: B", "label: CHANGED"), "new.yaml")
    new = tether.compile(changed)
    result = tether.Runner(None, store, tasks=TASKS).resume(eid, tether.Resume(ok=True),
                                                            plan=changed)
    assert result.output == ["a", "changed"]
    run = store.get_run(eid)
    assert run is not None and run.plan_fingerprint == new.fingerprint
    assert store.get_plan(new.fingerprint) is not None


def test_an_explicit_plan_that_changes_a_node_already_run_is_refused(
        store: Checkpointer, tmp_path: Path) -> None:
    """resume(plan=...) with node `a` (already run) redefined -> PlanMismatch, nothing changed."""
    _, eid = _paused(tmp_path, store)
    changed = write_workflow(tmp_path, PINNED.replace("label: A", "label: CHANGED"), "new.yaml")
    before = footprint(store, eid)
    with pytest.raises(PlanMismatch) as caught:
        tether.Runner(None, store, tasks=TASKS).resume(eid, tether.Resume(ok=True),
                                                       plan=changed)
    assert caught.value.node_id == "a"
    assert footprint(store, eid) == before
    result = tether.Runner(None, store, tasks=TASKS).resume(eid, tether.Resume(ok=True))
    assert result.output == ["a", "b"]
