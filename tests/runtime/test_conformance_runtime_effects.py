"""Runtime conformance, part 3: side effects happen once, forks leave the original alone,
and prune never takes what a live run needs; on every backend.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import Calls, Crash, committed, footprint, run_ends, write_workflow

import tether
from tether.errors import AlreadyResumed, CheckpointNotFound
from tether.runtime.idempotent import default_key
from tether.stores.base import Checkpointer

PAY = """
    tether: 1
    name: pay
    inputs:
      amount: {type: integer, default: 5}
    nodes:
      pay:
        task: t.pay
        with: {amount: "{{ inputs.amount }}"}
    output: "{{ nodes.pay.output }}"
"""


def _pay_runner(tmp_path: Path, store: Checkpointer, body: Any) -> tether.Runner:
    return tether.Runner(write_workflow(tmp_path, PAY), store, tasks={"t.pay": body})


# -- @idempotent ------------------------------------------------------------------------------


def test_an_idempotent_body_runs_once_per_key_across_suspend_and_resume(
        store: Checkpointer, tmp_path: Path) -> None:
    """The node re-executes from its top on resume; the idempotent call inside it does not."""
    calls = Calls()

    @tether.idempotent
    def charge(amount: int) -> dict[str, Any]:
        calls.hit("charge")
        return {"charged": amount, "token": uuid.uuid4().hex}

    def pay(amount: int) -> Any:
        calls.hit("pay")
        receipt = charge(amount)
        answer = tether.interrupt("confirm", receipt)
        return {"receipt": receipt, "ok": answer["ok"]}

    runner = _pay_runner(tmp_path, store, pay)
    paused = runner.run()
    receipt = paused.pending_interrupt["context"] if paused.pending_interrupt else None
    result = runner.resume(paused.execution_id, tether.Resume(ok=True))
    assert result.output == {"receipt": receipt, "ok": True}
    assert (calls["pay"], calls["charge"]) == (2, 1)
    cached = store.get_idempotent(paused.execution_id, default_key(charge, (5,), {}))
    assert cached is not None and cached.startswith('{"charged":5')


def test_positional_and_keyword_calls_share_one_key(store: Checkpointer, tmp_path: Path) -> None:
    """charge(5), charge(5, "EUR") and charge(amount=5, currency="EUR") are one call."""
    calls = Calls()

    @tether.idempotent
    def charge(amount: int, currency: str = "EUR") -> int:
        return calls.hit("charge")

    def pay(amount: int) -> Any:
        return [charge(amount), charge(amount, "EUR"), charge(amount=amount, currency="EUR"),
                charge(currency="EUR", amount=amount), charge(amount, "USD")]

    result = _pay_runner(tmp_path, store, pay).run()
    assert result.output == [1, 1, 1, 1, 2]
    assert calls["charge"] == 2


def test_the_default_key_includes_the_module(store: Checkpointer, tmp_path: Path) -> None:
    """Two functions with the same name and arguments in different modules do not collide."""
    calls = Calls()

    def make(module: str) -> Any:
        def charge(amount: int) -> str:
            calls.hit(module)
            return module
        charge.__module__ = module
        return tether.idempotent(charge)

    billing, refunds = make("billing"), make("refunds")
    assert default_key(billing, (5,), {}) != default_key(refunds, (5,), {})
    result = _pay_runner(tmp_path, store, lambda amount: [billing(amount), refunds(amount),
                                                          billing(amount)]).run()
    assert result.output == ["billing", "refunds", "billing"]
    assert dict(calls.counts) == {"billing": 1, "refunds": 1}


def test_a_cached_none_is_a_hit(store: Checkpointer, tmp_path: Path) -> None:
    """A function that returned None does not run again in the same run."""
    calls = Calls()

    @tether.idempotent
    def notify(amount: int) -> None:
        calls.hit("notify")

    def pay(amount: int) -> Any:
        notify(amount)
        return tether.interrupt("confirm", {})["ok"] if notify(amount) is None else "miss"

    runner = _pay_runner(tmp_path, store, pay)
    eid = runner.run().execution_id
    assert runner.resume(eid, tether.Resume(ok=True)).output is True
    assert calls["notify"] == 1
    assert store.get_idempotent(eid, default_key(notify, (5,), {})) == "null"


def test_a_non_json_idempotent_result_fails_the_node_with_not_json_error(
        store: Checkpointer, tmp_path: Path) -> None:
    """An idempotent function returning a set fails its node with a clear NotJSONError."""
    @tether.idempotent
    def tags(amount: int) -> set[int]:
        return {amount}

    result = _pay_runner(tmp_path, store, lambda amount: tags(amount)).run()
    assert result.status == "failed" and result.error is not None
    assert result.error["type"] == "NotJSONError" and result.error["node_id"] == "pay"
    assert "idempotent function" in result.error["message"]
    assert "set has no JSON form" in result.error["message"]
    assert store.get_idempotent(result.execution_id, default_key(tags, (5,), {})) is None


def test_another_execution_or_no_run_at_all_is_a_miss(store: Checkpointer,
                                                       tmp_path: Path) -> None:
    """The cache belongs to one execution: a second run, or a call outside any run, re-runs."""
    calls = Calls()

    @tether.idempotent
    def charge(amount: int) -> int:
        return calls.hit("charge")

    runner = _pay_runner(tmp_path, store, lambda amount: charge(amount))
    assert [runner.run().output, runner.run().output] == [1, 2]
    assert [charge(5), charge(5)] == [3, 4]


def test_an_idempotent_node_caches_its_task_result_per_execution(
        store: Checkpointer, tmp_path: Path) -> None:
    """`idempotent: true`: a node re-run after a crash returns the cached result, body once."""
    calls = Calls()
    started, crashing = threading.Event(), threading.Event()

    def pay(amount: int) -> dict[str, Any]:
        calls.hit("pay")
        started.set()
        crashing.wait(30)  # still running in its thread when the sibling crashes the run
        return {"token": uuid.uuid4().hex}

    async def boom() -> str:
        if calls.hit("boom") == 1:
            await asyncio.to_thread(started.wait, 30)  # pay's body is running
            crashing.set()
            raise Crash()
        return "ok"

    path = write_workflow(tmp_path, """
        tether: 1
        name: effects
        nodes:
          pay:
            task: t.pay
            idempotent: true
            with: {amount: 5}
          boom: {task: t.boom}
        output: "{{ nodes.pay.output }}"
    """)
    runner = tether.Runner(path, store, tasks={"t.pay": pay, "t.boom": boom})
    with pytest.raises(Crash):
        runner.run()
    [run] = store.list_runs()
    assert committed(store, run.execution_id) == []  # pay's body ran, its node did not commit
    cached = store.get_idempotent(run.execution_id, default_key(pay, (), {"amount": 5}))
    assert cached is not None and calls["pay"] == 1
    result = runner.resume(run.execution_id)
    assert result.status == "completed" and result.output == {"token": cached[10:-2]}
    assert calls["pay"] == 1
    assert runner.run().output != result.output  # another execution: the body runs again
    assert calls["pay"] == 2


# -- fork -------------------------------------------------------------------------------------

LINEAR = """
    tether: 1
    name: linear
    inputs:
      n: {type: integer}
    nodes:
      a:
        task: t.step
        with: {x: "{{ inputs.n }}", name: a}
      b:
        needs: [a]
        task: t.step
        with: {x: "{{ nodes.a.output }}", name: b}
      c:
        needs: [b]
        task: t.step
        with: {x: "{{ nodes.b.output }}", name: c}
    output: "{{ nodes.c.output }}"
"""


def _linear(tmp_path: Path, store: Checkpointer, calls: Calls,
            fail: str | None = None) -> tether.Runner:
    def step(x: int, name: str) -> int:
        if calls.hit(name) == 1 and name == fail:
            raise ValueError(f"{name} failed")
        return x + 1
    return tether.Runner(write_workflow(tmp_path, LINEAR), store, tasks={"t.step": step})


def test_a_fork_of_a_finished_run_is_a_new_run_and_leaves_the_original_untouched(
        store: Checkpointer, tmp_path: Path) -> None:
    """New execution id, a fork_origin row linked to the source, its own run_end."""
    calls = Calls()
    runner = _linear(tmp_path, store, calls)
    eid = runner.run({"n": 1}).execution_id
    source = store.latest_forkable(eid)
    before = footprint(store, eid)
    fork = runner.fork(eid)
    assert fork.execution_id != eid and (fork.status, fork.output) == ("completed", 4)
    origin = store.list(fork.execution_id)[0]
    assert source is not None
    assert (origin.step_type, origin.parent_checkpoint_id, origin.node_id) == (
        "fork_origin", source.checkpoint_id, "c")
    assert origin.state_snapshot == source.state_snapshot
    run = store.get_run(fork.execution_id)
    assert run is not None and (run.parent_execution_id, run.parent_checkpoint_id) == (
        eid, source.checkpoint_id)
    assert [r.status for r in run_ends(store, fork.execution_id)] == ["completed"]
    assert footprint(store, eid) == before
    assert sum(calls.counts.values()) == 3
    with pytest.raises(AlreadyResumed):
        runner.resume(fork.execution_id)


def test_a_fork_from_a_chosen_checkpoint_runs_the_nodes_after_it_with_the_patch_applied(
        store: Checkpointer, tmp_path: Path) -> None:
    """fork(checkpoint_id, state_patch): later nodes run again, on the patched state."""
    calls = Calls()
    runner = _linear(tmp_path, store, calls)
    eid = runner.run({"n": 1}).execution_id
    after_a = store.list(eid)[0]
    before = footprint(store, eid)
    fork = runner.fork(eid, after_a.checkpoint_id, {"nodes": {"a": {"output": 100}}})
    assert (fork.status, fork.output) == ("completed", 102)
    assert [c.node_id for c in store.list(fork.execution_id)] == ["a", "b", "c", "run_end"]
    origin = store.list(fork.execution_id)[0]
    assert origin.parent_checkpoint_id == after_a.checkpoint_id
    assert origin.state_snapshot["nodes"]["a"] == {"status": "completed", "output": 100}
    assert dict(calls.counts) == {"a": 1, "b": 2, "c": 2}
    assert footprint(store, eid) == before
    with pytest.raises(CheckpointNotFound):
        runner.fork(eid, str(uuid.uuid4()))


def test_a_failed_run_forks_and_its_failed_node_runs_again_in_the_branch(
        store: Checkpointer, tmp_path: Path) -> None:
    """The default fork point steps over the failed run_end; the original stays failed."""
    calls = Calls()
    runner = _linear(tmp_path, store, calls, fail="b")
    eid = runner.run({"n": 1}).execution_id
    failed_row = store.latest_forkable(eid)
    assert failed_row is not None and (failed_row.node_id, failed_row.status) == ("b", "failed")
    before = footprint(store, eid)
    fork = runner.fork(eid)
    assert (fork.status, fork.output) == ("completed", 4)
    origin = store.list(fork.execution_id)[0]
    assert (origin.step_type, origin.parent_checkpoint_id) == ("fork_origin",
                                                               failed_row.checkpoint_id)
    assert dict(calls.counts) == {"a": 1, "b": 2, "c": 1}
    assert footprint(store, eid) == before
    assert before.run is not None and before.run.status == "failed"


def test_a_fork_of_a_paused_run_asks_again_and_both_runs_resume_independently(
        store: Checkpointer, tmp_path: Path) -> None:
    """The branch re-runs the paused node (it pauses at the same approval, own pending row)."""
    path = write_workflow(tmp_path, """
        tether: 1
        name: approve
        nodes:
          review:
            approval: {reason: manager_approval, context: {amount: 5}}
          act:
            needs: [review]
            task: t.act
            with: {ok: "{{ nodes.review.output.ok }}"}
        output: "{{ nodes.act.output }}"
    """)
    runner = tether.Runner(path, store, tasks={"t.act": lambda ok: ok})
    eid = runner.run().execution_id
    before = footprint(store, eid)
    fork = runner.fork(eid)
    assert fork.status == "paused" and fork.execution_id != eid
    assert fork.pending_interrupt == {"reason": "manager_approval", "context": {"amount": 5},
                                      "node_id": "review", "agent_path": ""}
    assert footprint(store, eid) == before
    assert {p.execution_id for p in store.list_pending()} == {eid, fork.execution_id}
    assert run_ends(store, fork.execution_id) == []
    assert runner.resume(fork.execution_id, tether.Resume(ok="fork")).output == "fork"
    assert runner.resume(eid, tether.Resume(ok="original")).output == "original"


def test_a_fork_of_a_run_answered_then_failed_asks_again(
        store: Checkpointer, tmp_path: Path) -> None:
    """Answers belong to their run: a fork of a node that failed after its answer asks again."""
    calls = Calls()

    def ask(amount: int) -> Any:
        answer = tether.interrupt("confirm", {})
        if calls.hit("answered") == 1:
            raise RuntimeError("failed after the answer")
        return answer["v"]

    runner = _pay_runner(tmp_path, store, ask)
    eid = runner.run().execution_id
    assert runner.resume(eid, tether.Resume(v="original")).status == "failed"
    fork = runner.fork(eid)
    assert fork.status == "paused"
    assert runner.resume(fork.execution_id, tether.Resume(v="branch")).output == "branch"


# -- prune through the runtime ----------------------------------------------------------------


def test_paused_and_failed_runs_survive_prune_and_still_resume(
        store: Checkpointer, tmp_path: Path) -> None:
    """prune removes the finished run only; the paused one resumes afterwards, its
    idempotency rows intact (the side effect before the pause does not run again)."""
    calls = Calls()

    @tether.idempotent
    def charge(amount: int) -> int:
        return calls.hit("charge")

    def pay(amount: int) -> Any:
        charged = charge(amount)
        if amount == 5:
            return [charged, tether.interrupt("confirm", {})["ok"]]
        if amount == 6 and calls.hit("fail6") == 1:
            raise ValueError("first attempt fails")
        return [charged]

    runner = _pay_runner(tmp_path, store, pay)
    paused = runner.run({"amount": 5}).execution_id
    failed = runner.run({"amount": 6}).execution_id
    finished = runner.run({"amount": 7}).execution_id
    kept = [footprint(store, paused), footprint(store, failed)]
    result = store.prune(timedelta(0))
    assert result.execution_ids == (finished,)
    assert [footprint(store, paused), footprint(store, failed)] == kept
    assert store.get_run(finished) is None and store.list(finished) == []
    assert runner.resume(paused, tether.Resume(ok=True)).output == [1, True]
    assert runner.resume(failed).output == [2]
    assert calls["charge"] == 3
