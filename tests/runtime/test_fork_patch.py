"""A fork whose patch cannot take effect is refused before anything is written, on every
store (the ``store`` fixture); which inputs a node reads is read from its templates without
ever refusing a patch a template could read; and an agent's tool approval refuses edited
arguments its frozen schema refuses, where the tool's module is not imported."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

import tether
from tether.errors import IneffectivePatch, UsageError
from tether.runtime.agent.answers import field_problems
from tether.runtime.fork_patch import reads_inputs
from tether.stores.base import Checkpointer
from tether.stores.records import PendingInterrupt

FLOW = """\
tether: 1
name: two
inputs:
  amount: {type: number}
  code: {type: string, default: c}
nodes:
  first:
    task: fp.echo
    with: {value: "{{ inputs.code }}"}
  review:
    approval: {reason: check, context: {amount: "{{ inputs.amount }}"}}
  last:
    needs: [review]
    task: fp.echo
    with: {value: "{{ nodes.review.output }}"}
"""


@pytest.fixture
def runner(tmp_path: Path, store: Checkpointer) -> tether.Runner:
    path = tmp_path / "two.yaml"
    path.write_text(textwrap.dedent(FLOW))
    return tether.Runner(path, store, {"fp.echo": lambda value: value})


def _count(store: Checkpointer) -> int:
    return len(store.find_runs(limit=1000))


def test_forking_a_finished_run_with_a_patch_is_refused_and_writes_nothing(
        runner: tether.Runner, store: Checkpointer) -> None:
    """Every node finished: the branch would run nothing, so the patch is refused."""
    paused = runner.run({"amount": 5})
    done = runner.resume(paused.execution_id, {"approved": True})
    assert done.status == "completed"
    before = _count(store)
    with pytest.raises(IneffectivePatch) as caught:
        runner.fork(done.execution_id, None, {"inputs": {"amount": 6}})
    assert isinstance(caught.value, UsageError)
    assert "every node has finished" in str(caught.value)
    assert "nothing was written" in str(caught.value)
    assert _count(store) == before
    plain = runner.fork(done.execution_id)  # without a patch a fork stays allowed
    assert plain.status == "completed"


def test_inputs_and_outputs_nothing_left_reads_are_refused(runner: tether.Runner,
                                                           store: Checkpointer) -> None:
    """Paused at review: `first` finished and nothing left to run reads `inputs.code` or
    `nodes.first`; `inputs.amount` (review reads it) and a re-opened `first` are fine."""
    paused = runner.run({"amount": 5})
    before = _count(store)
    for patch, reason in [({"inputs": {"code": "x"}}, "reads 'inputs.code'"),
                          ({"nodes": {"first": {"output": "y"}}}, "'nodes.first' stays"),
                          ({"state": {}}, "'state' is not part of a run's state")]:
        with pytest.raises(IneffectivePatch, match=reason):
            runner.fork(paused.execution_id, None, patch)
    assert _count(store) == before
    branch = runner.fork(paused.execution_id, None, {"inputs": {"amount": 9}})
    assert branch.status == "paused" and branch.pending[0].context == {"amount": 9}
    rerun = runner.fork(paused.execution_id, None, {
        "inputs": {"code": "x"}, "nodes": {"first": {"status": "pending"}}})
    assert rerun.status == "paused" and rerun.state["nodes"]["first"]["output"] == "x"


@pytest.mark.parametrize(("template", "read"), [
    ("{{ inputs.amount }}", {"amount"}),
    ("{{ inputs['code'] }} and {{ inputs[\"amount\"] }}", {"code", "amount"}),
    ("{{ inputs.get('code') }}", {"amount", "code"}),
    ("{{ inputs | tojson }}", {"amount", "code"}),
    ("{{ inputs[key] }}", {"amount", "code"}),
    ("{{ nodes.x.output }}", set()),
    ("{{ my_inputs.amount }}", set()),
])
def test_reads_inputs_never_misses_a_read(template: str, read: set[str]) -> None:
    """Names read by name are exact; every other use of `inputs` reads them all."""
    assert reads_inputs({"with": {"a": template}}, ["amount", "code"]) == read


def _tool_pause(parameters: object) -> PendingInterrupt:
    return PendingInterrupt(
        execution_id="r", checkpoint_id="c", node_id="payer/turn:1/tool:pay",
        agent_path="agent:payer/tool:pay", reason="approve_tool",
        context={"call_id": "call_1", "tool": "pay", "tool_name": "pay",
                 "arguments": {"amount": 1}, "parameters": parameters},
        created_at=datetime(2026, 12, 5, tzinfo=UTC))


def test_edited_arguments_are_checked_against_the_frozen_schema_without_the_tool() -> None:
    """No task module loaded: the schema frozen with the pause decides."""
    pause = _tool_pause({"type": "object", "properties": {"amount": {"type": "number"}},
                         "required": ["amount"]})
    assert field_problems({}, pause, {"arguments": {"amount": 3}}) == []
    problems = field_problems({}, pause, {"arguments": {"amount": "lots"}})
    assert problems == [("arguments", "amount: 'lots' is not of type 'number'")]
    assert field_problems({}, pause, {"arguments": {}})[0][0] == "arguments"
    assert field_problems({}, _tool_pause(None), {"arguments": {"amount": "x"}}) == []


def test_the_python_api_takes_unique_prefixes_of_run_and_checkpoint_ids(
        runner: tether.Runner, store: Checkpointer) -> None:
    """Runner.fork and Runner.resume accept what the CLI and the console accept: a unique
    prefix of 8+ characters of a run's id, and of a checkpoint's; a short one that is no id
    prefix is not found; the result names the whole ids."""
    paused = runner.run({"amount": 5})
    eid = paused.execution_id
    checkpoint = store.list(eid)[0].checkpoint_id
    shortest = next(n for n in range(8, len(checkpoint) + 1)
                    if [c.checkpoint_id for c in store.list(eid)
                        if c.checkpoint_id.startswith(checkpoint[:n])] == [checkpoint])
    branch = runner.fork(eid[:20], checkpoint[:shortest])
    assert branch.status == "paused" and branch.execution_id != eid
    assert store.get_run(branch.execution_id).parent_execution_id == eid  # type: ignore[union-attr]
    with pytest.raises(tether.RunNotFound):
        runner.resume("nope", {"approved": True})
    others = [r.execution_id for r in store.find_runs(limit=1000) if r.execution_id != eid]
    unique = next(n for n in range(8, len(eid) + 1)
                  if not any(o.startswith(eid[:n]) for o in others))
    done = runner.resume(eid[:unique], {"approved": True})
    assert (done.status, done.execution_id) == ("completed", eid)
