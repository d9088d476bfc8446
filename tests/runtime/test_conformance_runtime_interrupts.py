"""Runtime conformance, part 2: the fine points of suspend and resume.

Several interrupts in one node, a claim followed by a crash or a failure, approval forms,
and siblings in flight when one of them suspends; on every backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import ASK_THEN_AFTER, Calls, Crash, committed, footprint, write_workflow

import tether
from tether.errors import AlreadyResumed, ResumeError, ResumeValueError
from tether.stores.base import Checkpointer


def _runner(tmp_path: Path, store: Checkpointer, ask: Any, calls: Calls) -> tether.Runner:
    def after(x: Any) -> Any:
        calls.hit("after")
        return x

    return tether.Runner(write_workflow(tmp_path, ASK_THEN_AFTER), store,
                         tasks={"t.ask": ask, "t.after": after})


# -- several interrupts in one node -----------------------------------------------------------


def test_a_second_interrupt_after_a_resume_suspends_again_with_a_new_pending_row(
        store: Checkpointer, tmp_path: Path) -> None:
    """The second interrupt() does not get the first answer back: it pauses the run again."""
    calls = Calls()

    def ask() -> Any:
        calls.hit("top")
        first = tether.interrupt("first", {"n": 1})
        calls.hit("between")
        second = tether.interrupt("second", {"first_was": first["v"]})
        return [first["v"], second["v"]]

    runner = _runner(tmp_path, store, ask, calls)
    paused = runner.run()
    eid = paused.execution_id
    first = store.get_pending(eid)
    assert first is not None and first.reason == "first"
    again = runner.resume(eid, tether.Resume(v="one"))
    assert again.status == "paused"
    assert again.pending_interrupt == {"reason": "second", "context": {"first_was": "one"},
                                       "node_id": "ask", "agent_path": ""}
    second = store.get_pending(eid)
    assert second is not None and second.checkpoint_id != first.checkpoint_id
    done = runner.resume(eid, tether.Resume(v="two"))
    assert (done.status, done.output) == ("completed", ["one", "two"])
    assert dict(calls.counts) == {"top": 3, "between": 2, "after": 1}


def test_answers_accumulate_in_order_across_several_pauses(
        store: Checkpointer, tmp_path: Path) -> None:
    """Each pause stores the answers so far; the re-run node receives them in order."""
    def ask() -> Any:
        return [tether.interrupt(f"q{i}", {"i": i})["a"] for i in range(4)]

    runner = _runner(tmp_path, store, ask, Calls())
    eid = runner.run().execution_id
    for index in range(4):
        paused_at = store.latest_resumable(eid)
        assert paused_at is not None and paused_at.interrupt_reason == f"q{index}"
        stored = paused_at.state_snapshot["nodes"]["ask"].get("answers", [])
        assert stored == [{"a": f"answer{i}"} for i in range(index)]
        result = runner.resume(eid, {"a": f"answer{index}"})
    assert (result.status, result.output) == ("completed", [f"answer{i}" for i in range(4)])
    assert [r for r in committed(store, eid) if r[1] == "interrupted"] == [("ask", "interrupted")
                                                                           ] * 4


def test_for_each_elements_that_ask_wait_side_by_side_and_are_answered_one_by_one(
        store: Checkpointer, tmp_path: Path) -> None:
    """Each element pauses under its own address <node>/item:<i>, all at once (one pending row
    each); a resume names the element it answers; every element gets its own answer."""
    path = write_workflow(tmp_path, """
        tether: 1
        name: fan
        nodes:
          each:
            for_each: [1, 2, 3]
            task: t.item
            with: {x: "{{ item }}"}
        output: "{{ nodes.each.output }}"
    """)
    calls = Calls()

    def item(x: int) -> int:
        calls.hit(f"item{x}")
        return x * tether.interrupt("ok?", {"x": x})["m"]

    runner = tether.Runner(path, store, tasks={"t.item": item}, max_concurrency=2)
    result = runner.run()
    eid = result.execution_id
    assert result.status == "paused"
    assert [p.node_id for p in result.pending] == ["each/item:0", "each/item:1", "each/item:2"]
    assert [p.context for p in store.list_pending(eid)] == [{"x": 1}, {"x": 2}, {"x": 3}]
    with pytest.raises(ResumeError, match="3 interrupts are pending"):
        runner.resume(eid, tether.Resume(m=1))
    for index, factor in ((2, 30), (0, 10)):
        result = runner.resume(eid, tether.Resume(m=factor), node=f"each/item:{index}")
        assert result.status == "paused"
    assert [p.node_id for p in result.pending] == ["each/item:1"]
    result = runner.resume(eid, tether.Resume(m=20))
    assert (result.status, result.output) == ("completed", [10, 40, 90])
    assert sorted(r for r in committed(store, eid) if r[1] == "completed" and "/" in r[0]) == [
        ("each/item:0", "completed"), ("each/item:1", "completed"), ("each/item:2", "completed")]
    assert dict(calls.counts) == {"item1": 2, "item2": 2, "item3": 2}


# -- claim, then crash ------------------------------------------------------------------------


def _answer_then(outcome: type[BaseException], calls: Calls, times: int = 1) -> Any:
    """A node that asks, then dies (``outcome``) the first ``times`` times it gets an answer."""
    def ask() -> Any:
        calls.hit("top")
        answer = tether.interrupt("approve", {"amount": 5})
        if calls.hit("answered") <= times:
            raise outcome("the node died after interrupt() returned")
        return answer["v"]
    return ask


@pytest.mark.parametrize("death", [Crash, RuntimeError], ids=["crash", "failure"])
def test_after_a_claim_then_a_death_resume_without_a_value_reuses_the_decision(
        store: Checkpointer, tmp_path: Path, death: type[BaseException]) -> None:
    """The claimed answer is durable: a later resume() gives the re-run node the same answer."""
    calls = Calls()
    runner = _runner(tmp_path, store, _answer_then(death, calls), calls)
    eid = runner.run().execution_id
    if death is Crash:
        with pytest.raises(Crash):
            runner.resume(eid, tether.Resume(v="yes"))
    else:
        assert runner.resume(eid, tether.Resume(v="yes")).status == "failed"
    assert store.get_pending(eid) is None
    result = runner.resume(eid)
    assert (result.status, result.output) == ("completed", "yes")
    assert (calls["top"], calls["answered"], calls["after"]) == (3, 2, 1)
    with pytest.raises(AlreadyResumed):
        runner.resume(eid)


@pytest.mark.parametrize("death", [Crash, RuntimeError], ids=["crash", "failure"])
def test_after_a_claim_then_a_death_resume_with_a_new_value_uses_the_new_one(
        store: Checkpointer, tmp_path: Path, death: type[BaseException]) -> None:
    """A new Resume(...) after the claimed attempt died replaces the stored decision."""
    calls = Calls()
    runner = _runner(tmp_path, store, _answer_then(death, calls), calls)
    eid = runner.run().execution_id
    if death is Crash:
        with pytest.raises(Crash):
            runner.resume(eid, tether.Resume(v="first"))
    else:
        assert runner.resume(eid, tether.Resume(v="first")).status == "failed"
    result = runner.resume(eid, tether.Resume(v="second"))
    assert (result.status, result.output) == ("completed", "second")
    assert [d.value for d in store.decisions(eid)] == [{"v": "second"}]
    assert (calls["top"], calls["answered"]) == (3, 2)


def test_a_run_that_keeps_dying_after_its_claim_is_never_stuck(
        store: Checkpointer, tmp_path: Path) -> None:
    """Crash after crash, resume keeps working (never ResumeError, never AlreadyResumed)."""
    calls = Calls()
    runner = _runner(tmp_path, store, _answer_then(Crash, calls, times=3), calls)
    eid = runner.run().execution_id
    with pytest.raises(Crash):
        runner.resume(eid, tether.Resume(v="ok"))
    for _ in range(2):
        with pytest.raises(Crash):
            runner.resume(eid)
        run = store.get_run(eid)
        assert run is not None and run.status == "running" and store.get_pending(eid) is None
    assert runner.resume(eid).output == "ok"
    assert calls["answered"] == 4


# -- approval forms ---------------------------------------------------------------------------

FORM = """
    tether: 1
    name: form
    nodes:
      review:
        approval:
          reason: manager_approval
          context: {amount: 500}
          form:
            approved: {type: boolean}
            note: {type: string, default: ""}
      act:
        needs: [review]
        task: t.act
        with: {decision: "{{ nodes.review.output }}"}
    output: "{{ nodes.act.output }}"
"""


@pytest.mark.parametrize("values", [{"approved": "yes"}, {"note": "x"},
                                    {"approved": True, "extra": 1}],
                         ids=["wrong-type", "missing", "unknown-field"])
def test_a_resume_that_does_not_match_the_form_is_refused_and_the_run_stays_paused(
        store: Checkpointer, tmp_path: Path, values: dict[str, Any]) -> None:
    """ResumeValueError, nothing changed (pending row intact); a correct Resume then works."""
    calls = Calls()
    runner = tether.Runner(write_workflow(tmp_path, FORM), store,
                           tasks={"t.act": lambda decision: calls.hit("act") and decision})
    eid = runner.run().execution_id
    before = footprint(store, eid)
    with pytest.raises(ResumeValueError) as caught:
        runner.resume(eid, tether.Resume(**values))
    assert caught.value.node_id == "review" and caught.value.problems
    assert footprint(store, eid) == before
    assert before.run is not None and before.run.status == "paused"
    result = runner.resume(eid, tether.Resume(approved=True))
    assert (result.status, result.output) == ("completed", {"approved": True, "note": ""})
    assert calls["act"] == 1


# -- parallel siblings ------------------------------------------------------------------------

SIBLINGS = """
    tether: 1
    name: siblings
    nodes:
      root: {task: t.root}
      s1: {needs: [root], task: t.s1}
      s2:
        needs: [root]
        task: t.slow
        with: {name: s2}
      s3:
        needs: [root]
        task: t.slow
        with: {name: s3}
      late:
        needs: [s2]
        task: t.late
      join:
        needs: [s1, s2, s3, late]
        task: t.join
    output: "{{ nodes.join.output }}"
"""


def _sibling_tasks(calls: Calls, s2_asks: bool = False) -> dict[str, Any]:
    async def s1() -> Any:
        calls.hit("s1")
        return tether.interrupt("s1?", {})["v"]

    async def slow(name: str) -> Any:
        calls.hit(name)
        if s2_asks and name == "s2":
            return tether.interrupt("s2?", {})["v"]
        return name

    return {"t.root": lambda: calls.hit("root"), "t.s1": s1, "t.slow": slow,
            "t.late": lambda: calls.hit("late"), "t.join": lambda: calls.hit("join")}


def test_a_pause_holds_only_its_own_branch(store: Checkpointer, tmp_path: Path) -> None:
    """s1 asks: its siblings, and the node after s2, run and commit while it waits; only the
    join (which needs s1) waits. After the answer every node has run exactly once."""
    calls = Calls()
    runner = tether.Runner(write_workflow(tmp_path, SIBLINGS), store,
                           tasks=_sibling_tasks(calls))
    paused = runner.run()
    eid = paused.execution_id
    assert paused.status == "paused" and [p.node_id for p in paused.pending] == ["s1"]
    done = {node for node, status in committed(store, eid) if status == "completed"}
    assert done == {"root", "s2", "s3", "late"}
    assert ("s1", "interrupted") in committed(store, eid) and calls["join"] == 0
    assert [p.execution_id for p in store.list_pending()] == [eid]
    run = store.get_run(eid)
    assert run is not None and (run.status, run.owner) == ("paused", None)
    result = runner.resume(eid, tether.Resume(v=1))
    assert result.status == "completed"
    assert dict(calls.counts) == {"root": 1, "s1": 2, "s2": 1, "s3": 1, "late": 1, "join": 1}


def test_two_branches_wait_at_once_and_each_answer_releases_its_own(
        store: Checkpointer, tmp_path: Path) -> None:
    """s1 and s2 both ask: two pending interrupts, the run paused once nothing else can run.
    Answering s2 runs the node after it and leaves the run paused on s1; answering s1 ends it."""
    calls = Calls()
    runner = tether.Runner(write_workflow(tmp_path, SIBLINGS), store,
                           tasks=_sibling_tasks(calls, s2_asks=True))
    first = runner.run()
    eid = first.execution_id
    assert first.status == "paused"
    assert sorted(p.node_id for p in first.pending) == ["s1", "s2"]
    assert first.pending_interrupt == first.pending[0]
    assert calls["late"] == 0 and calls["s3"] == 1
    second = runner.resume(eid, tether.Resume(v=2), node="s2")
    assert second.status == "paused" and [p.node_id for p in second.pending] == ["s1"]
    assert calls["late"] == 1 and calls["join"] == 0
    result = runner.resume(eid, tether.Resume(v=1))
    assert result.status == "completed"
    assert result.state["nodes"]["s1"]["output"] == 1
    assert result.state["nodes"]["s2"]["output"] == 2
    assert dict(calls.counts) == {"root": 1, "s1": 2, "s2": 2, "s3": 1, "late": 1, "join": 1}
