"""Runtime conformance, part 5: values are JSON, retries and timeouts, sandboxed templates,
and running without a checkpointer; on every backend.
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import Calls, committed, footprint, write_workflow
from pydantic import BaseModel

import tether
from tether.compiler.plan import Plan, with_fingerprint
from tether.errors import (
    InterruptSignal,
    InvalidId,
    NotJSONError,
    RunNotFound,
    TetherError,
    WorkflowError,
)
from tether.stores.base import Checkpointer

TWO = """
    tether: 1
    name: two
    inputs:
      s: {type: string, default: ok}
    nodes:
      good:
        task: t.good
        with: {s: "{{ inputs.s }}"}
      bad:
        needs: [good]
        task: t.bad
      after:
        needs: [bad]
        task: t.good
        with: {s: "{{ nodes.bad.output.name }}"}
    output: "{{ nodes.after.output }}"
"""


def _two(tmp_path: Path, store: Checkpointer | None, bad: Any) -> tether.Runner:
    return tether.Runner(write_workflow(tmp_path, TWO), store,
                         tasks={"t.good": lambda s: {"name": s}, "t.bad": bad})


# -- values -----------------------------------------------------------------------------------

NOT_JSON = {
    "nan": (lambda: {"score": math.nan}, "NaN and infinite numbers have no JSON form"),
    "infinity": (lambda: [math.inf], "NaN and infinite numbers have no JSON form"),
    "nul": (lambda: {"name": "a\x00b"}, "a string contains a NUL character (\\u0000)"),
    "set": (lambda: {"tags": {1, 2}}, "a set has no JSON form (use a list)"),
    "bytes": (lambda: b"raw", "bytes have no JSON form (decode them to a string)"),
    "object": (lambda: object(), "an object of type object has no JSON form"),
    "int-key": (lambda: {"name": "x", "by_id": {1: "a"}},
                "a mapping has a key that is not a string"),
}


@pytest.mark.parametrize("case", sorted(NOT_JSON))
def test_a_non_json_output_fails_its_node_with_not_json_error_and_damages_nothing(
        store: Checkpointer, tmp_path: Path, case: str) -> None:
    """The node fails with the same NotJSONError on every backend; stored rows stay intact."""
    produce, reason = NOT_JSON[case]
    result = _two(tmp_path, store, produce).run()
    assert result.status == "failed"
    assert result.error == {"type": "NotJSONError", "node_id": "bad",
                            "message": f"the output of node 'bad' is not JSON: {reason}"}
    eid = result.execution_id
    assert committed(store, eid) == [("good", "completed"), ("bad", "failed"),
                                     ("run_end", "failed")]
    good = store.list(eid)[0]
    assert (good.node_output, good.state_snapshot["nodes"]) == (
        {"name": "ok"}, {"good": {"status": "completed", "output": {"name": "ok"}}})
    last = store.get_last(eid)
    assert last is not None and last.node_output == result.error
    run = store.get_run(eid)
    assert run is not None and run.error == result.error


def test_a_non_json_output_fails_the_same_way_without_a_checkpointer(tmp_path: Path) -> None:
    """The in-memory run (no store) gives the very same error as every backend."""
    produce, reason = NOT_JSON["nul"]
    result = _two(tmp_path, None, produce).run()
    assert result.error == {"type": "NotJSONError", "node_id": "bad",
                            "message": f"the output of node 'bad' is not JSON: {reason}"}


def test_a_non_json_interrupt_context_fails_the_node(store: Checkpointer,
                                                     tmp_path: Path) -> None:
    """interrupt() freezes its context as JSON; a context that is not JSON fails the node."""
    result = _two(tmp_path, store, lambda: tether.interrupt("ask", {"when": math.nan})).run()
    assert result.status == "failed" and result.error is not None
    assert (result.error["type"], result.error["node_id"]) == ("NotJSONError", "bad")
    assert store.get_pending(result.execution_id) is None


@pytest.mark.parametrize("reason", ["re\x00ason"], ids=["nul"])
def test_an_interrupt_reason_no_store_can_hold_fails_the_node_the_same_everywhere(
        store: Checkpointer, tmp_path: Path, reason: str) -> None:
    """A reason with a NUL fails its node with NotJSONError on every backend (PostgreSQL
    cannot store it), and the run ends cleanly with a run_end."""
    result = _two(tmp_path, store, lambda: tether.interrupt(reason, {})).run()
    assert result.status == "failed" and result.error is not None
    assert (result.error["type"], result.error["node_id"]) == ("NotJSONError", "bad")
    assert "the reason of interrupt" in result.error["message"]
    assert committed(store, result.execution_id)[-2:] == [("bad", "failed"),
                                                          ("run_end", "failed")]
    assert store.get_pending(result.execution_id) is None


def test_a_long_reason_is_stored_whole(store: Checkpointer, tmp_path: Path) -> None:
    """Reasons have no length limit on any backend: 5,000 characters round-trip unchanged."""
    result = _two(tmp_path, store, lambda: tether.interrupt("é" * 5000, {})).run()
    pending = store.get_pending(result.execution_id)
    assert pending is not None and pending.reason == "é" * 5000


@pytest.mark.parametrize("execution_id", ["x\x00y", "e" * 201], ids=["nul", "long"])
def test_an_execution_id_no_store_can_hold_is_refused_before_anything_is_written(
        store: Checkpointer, tmp_path: Path, execution_id: str) -> None:
    """run(execution_id=...) refuses ids over 200 characters or holding a NUL, on every
    backend, and nothing is stored; looking such an id up finds no run."""
    runner = _two(tmp_path, store, lambda: {"name": "x"})
    with pytest.raises(TetherError, match="execution id"):
        runner.run(execution_id=execution_id)
    assert store.list_runs() == []
    with pytest.raises(RunNotFound):
        runner.resume(execution_id)
    assert runner.run(execution_id="e" * 200).execution_id == "e" * 200


@pytest.mark.parametrize("execution_id", [
    "x/live", "p/approvals/q", "..", ".x", "a..b", "a\\b", "a b", "a\tb", "a\uff0fb",
    "a\u2215b", "%2F", "%2e%2e", "\u0430dmin"])
def test_a_new_run_id_is_data_not_a_path_on_every_backend(
        store: Checkpointer, tmp_path: Path, execution_id: str) -> None:
    """run() and submit() refuse ids outside ASCII letters, digits and -_.:@+= (or starting
    with '.', or holding '..') with InvalidId naming the id; nothing is stored."""
    runner = _two(tmp_path, store, lambda: {"name": "x"})
    with pytest.raises(InvalidId) as raised:
        runner.run(execution_id=execution_id)
    assert raised.value.value == execution_id and isinstance(raised.value, ValueError)
    assert str(raised.value).startswith("an execution id ")
    with pytest.raises(InvalidId):
        runner.submit({}, execution_id=execution_id)
    assert store.list_runs() == []
    assert runner.run(execution_id="ok-1.2:a@b+c=d_e").status == "completed"


def test_inputs_that_are_not_json_are_refused_before_anything_is_stored(
        store: Checkpointer, tmp_path: Path) -> None:
    """A NUL in a run input raises NotJSONError at start; no run is created."""
    with pytest.raises(NotJSONError):
        _two(tmp_path, store, lambda: {}).run({"s": "a\x00b"})
    assert store.list_runs() == []


def test_an_error_message_holding_a_nul_is_stored_and_read_back_the_same_everywhere(
        store: Checkpointer, tmp_path: Path) -> None:
    """Errors are stored as JSON text, so even a NUL in a message survives every backend."""
    def bad() -> None:
        raise ValueError("bad\x00byte")

    result = _two(tmp_path, store, bad).run()
    error = {"type": "ValueError", "message": "bad\x00byte", "node_id": "bad"}
    assert result.error == error
    last = store.get_last(result.execution_id)
    run = store.get_run(result.execution_id)
    assert last is not None and last.node_output == error
    assert run is not None and run.error == error


class Receipt(BaseModel):
    name: str
    amount: float
    tags: list[str]


def test_a_pydantic_model_output_is_stored_as_its_json_form(store: Checkpointer,
                                                            tmp_path: Path) -> None:
    """A model returned by a task becomes its JSON dict, in state, rows and templates."""
    result = _two(tmp_path, store, lambda: Receipt(name="r1", amount=2.5, tags=["x"])).run()
    assert (result.status, result.output) == ("completed", {"name": "r1"})
    dumped = {"name": "r1", "amount": 2.5, "tags": ["x"]}
    bad = next(c for c in store.list(result.execution_id) if c.node_id == "bad")
    assert bad.node_output == dumped
    assert bad.state_snapshot["nodes"]["bad"]["output"] == dumped
    assert result.state["nodes"]["bad"]["output"] == dumped


# -- retries and timeouts ---------------------------------------------------------------------

FLAKY = """
    tether: 1
    name: flaky
    nodes:
      flaky:
        task: t.flaky
        retry: {max_attempts: 3, backoff: 50ms}
        SETTINGS
    output: "{{ nodes.flaky.output }}"
"""


def _flaky(tmp_path: Path, store: Checkpointer, body: Any, settings: str = "") -> tether.Runner:
    path = write_workflow(tmp_path, FLAKY.replace("SETTINGS", settings))
    return tether.Runner(path, store, tasks={"t.flaky": body})


def test_a_retried_task_succeeds_on_a_later_attempt_after_backing_off(
        store: Checkpointer, tmp_path: Path) -> None:
    """Attempts 1 and 2 fail, attempt 3 succeeds; the waits are 50ms then 100ms."""
    calls = Calls()

    def flaky() -> str:
        if calls.hit("flaky") < 3:
            raise ConnectionError("try again")
        return "done"

    started = time.monotonic()
    result = _flaky(tmp_path, store, flaky).run()
    assert (result.status, result.output) == ("completed", "done")
    assert calls["flaky"] == 3
    assert time.monotonic() - started >= 0.15
    assert committed(store, result.execution_id) == [("flaky", "completed"),
                                                     ("run_end", "completed")]


def test_exhausted_retries_fail_the_run_with_the_error_in_its_run_end(
        store: Checkpointer, tmp_path: Path) -> None:
    """After max_attempts failures: a failed run_end carrying {type, message, node_id}."""
    calls = Calls()

    def flaky() -> str:
        raise ConnectionError(f"down (attempt {calls.hit('flaky')})")

    result = _flaky(tmp_path, store, flaky).run()
    assert calls["flaky"] == 3
    assert result.status == "failed" and result.error is not None
    assert {k: result.error[k] for k in ("type", "message", "node_id")} == {
        "type": "ConnectionError", "message": "down (attempt 3)", "node_id": "flaky"}
    marker = store.get_last(result.execution_id)
    assert marker is not None and marker.is_run_end and marker.status == "failed"
    assert marker.node_output == result.error


def test_a_timeout_fails_the_attempt_and_a_retry_can_then_succeed(
        store: Checkpointer, tmp_path: Path) -> None:
    """An attempt that outlives `timeout` fails with TimeoutError; the next attempt runs."""
    calls = Calls()

    async def slow_then_fast() -> str:
        if calls.hit("flaky") == 1:
            try:
                await asyncio.Event().wait()  # never set: only the timeout ends this attempt
            except asyncio.CancelledError:
                calls.hit("cancelled")
                raise
        return "fast"

    result = _flaky(tmp_path, store, slow_then_fast, "timeout: 100ms").run()
    assert (result.status, result.output, calls["flaky"]) == ("completed", "fast", 2)
    assert calls["cancelled"] == 1  # the first attempt was stopped by its timeout


def test_a_task_that_always_times_out_fails_the_run_with_timeout_error(
        store: Checkpointer, tmp_path: Path) -> None:
    """Every attempt timing out fails the node with a TimeoutError naming it."""
    async def slow() -> str:
        await asyncio.Event().wait()  # never set: only the timeout ends each attempt
        return "never"

    result = _flaky(tmp_path, store, slow, "timeout: 50ms").run()
    assert result.status == "failed" and result.error is not None
    assert (result.error["type"], result.error["node_id"]) == ("TimeoutError", "flaky")
    assert "timed out after 0.05s" in result.error["message"]


# -- sandboxed templates ----------------------------------------------------------------------

ESCAPES = ["{{ inputs.x.__class__ }}",
           "{{ inputs.x.__class__.__mro__[1].__subclasses__() }}",
           "{{ inputs['__class__'] }}",
           "{{ lipsum.__globals__ }}",
           "{{ cycler.__init__.__globals__.os }}"]


@pytest.mark.parametrize("escape", ESCAPES)
def test_the_compiler_refuses_a_template_that_reads_private_attributes(
        tmp_path: Path, escape: str) -> None:
    """tether.check reports E408 at the escape's line; tether.compile raises."""
    path = write_workflow(tmp_path, f"""
        tether: 1
        name: escape
        inputs:
          x: {{type: integer}}
        nodes:
          a:
            task: t.a
            with: {{x: "{escape}"}}
    """)
    refused = [d for d in tether.check(path) if d.code == "E408"]
    assert refused and all(d.is_error and d.span.line == 8 for d in refused)
    assert "cannot read private attributes" in refused[0].message
    with pytest.raises(WorkflowError):
        tether.compile(path)


@pytest.mark.parametrize("escape", [*ESCAPES, "{{ inputs.update({'x': 2}) }}"])
def test_the_runtime_sandbox_refuses_escapes_in_a_plan_built_by_hand(
        store: Checkpointer, tmp_path: Path, escape: str) -> None:
    """A plan that bypassed the compiler still cannot escape: the node fails, task not called."""
    calls = Calls()
    path = write_workflow(tmp_path, """
        tether: 1
        name: escape
        inputs:
          x: {type: integer}
        nodes:
          a:
            task: t.a
            with: {x: "{{ inputs.x }}"}
    """)
    data = tether.compile(path).model_dump(mode="json", by_alias=True)
    data["nodes"][0]["with"]["x"] = escape
    plan = with_fingerprint(Plan.model_validate(data))
    result = tether.Runner(plan, store, tasks={"t.a": lambda x: calls.hit("a")}).run({"x": 1})
    assert result.status == "failed" and result.error is not None
    assert (result.error["type"], result.error["node_id"]) == ("TemplateError", "a")
    message = result.error["message"]
    assert any(word in message for word in ("unsafe", "sandbox", "has no attribute")), message
    assert calls["a"] == 0
    assert committed(store, result.execution_id) == [("a", "failed"), ("run_end", "failed")]


# -- no checkpointer --------------------------------------------------------------------------


def test_without_a_checkpointer_a_run_executes_in_memory(tmp_path: Path) -> None:
    """Runner(plan, None) runs to completion with no store at all."""
    result = _two(tmp_path, None, lambda: {"name": "in memory"}).run()
    assert (result.status, result.output) == ("completed", {"name": "in memory"})
    assert result.state["nodes"]["bad"] == {"status": "completed",
                                            "output": {"name": "in memory"}}


def test_without_a_checkpointer_an_approval_raises_interrupt_signal(tmp_path: Path) -> None:
    """With nowhere to record a pause, interrupt() reaches the caller as InterruptSignal."""
    runner = _two(tmp_path, None, lambda: tether.interrupt("approve", {"amount": 5}))
    with pytest.raises(tether.InterruptSignal) as caught:
        runner.run()
    assert isinstance(caught.value, InterruptSignal) and not isinstance(caught.value, Exception)
    assert (caught.value.reason, caught.value.context, caught.value.node_id) == (
        "approve", {"amount": 5}, "bad")
    with pytest.raises(TetherError):
        runner.resume("anything", tether.Resume(ok=True))


def test_without_a_checkpointer_idempotent_calls_are_cached_per_run(tmp_path: Path) -> None:
    """@idempotent works in a store-less run (in-memory cache), and each run is separate."""
    calls = Calls()

    @tether.idempotent
    def charge(amount: int) -> int:
        return calls.hit("charge")

    runner = _two(tmp_path, None, lambda: {"name": str([charge(5), charge(amount=5)])})
    assert [runner.run().output, runner.run().output] == [{"name": "[1, 1]"},
                                                          {"name": "[2, 2]"}]


def test_a_store_is_unchanged_by_runs_of_a_runner_without_one(
        store: Checkpointer, tmp_path: Path) -> None:
    """A store-less run writes nowhere: a store that holds a run keeps exactly that."""
    eid = _two(tmp_path, store, lambda: {"name": "x"}).run().execution_id
    before = footprint(store, eid)
    _two(tmp_path, None, lambda: {"name": "y"}).run()
    assert footprint(store, eid) == before
    assert [r.execution_id for r in store.list_runs()] == [eid]
