"""A run's templates read what started it as ``trigger.*``: set by every start path, stored
with the run, the same after a resume in another process's Runner, kept by a fork; on every
backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import write_workflow

import tether
from tether.stores.base import Checkpointer
from tether.trigger import Trigger, TriggerKind, os_user

READS = """
    tether: 1
    name: reads-trigger
    on:
      manual: true
      webhook: {verify: github, secret: HOOK_SECRET, headers: [X-GitHub-Event]}
    nodes:
      first:
        task: t.echo
        with:
          kind: "{{ trigger.kind }}"
          actor: "{{ trigger.actor }}"
          ref: "{{ trigger.payload.ref if trigger.payload else none }}"
          event: "{{ trigger.headers['X-GitHub-Event'] | default('none') }}"
      gate:
        needs: [first]
        approval: {reason: go}
      after:
        needs: [gate]
        task: t.echo
        with: {kind: "{{ trigger.kind }}", delivery: "{{ trigger.delivery }}",
               tick: "{{ trigger.tick }}"}
"""


def echo(**values: Any) -> dict[str, Any]:
    return values


TASKS = {"t.echo": echo}


def outputs(store: Checkpointer, execution_id: str) -> dict[str, Any]:
    return {c.node_id: c.node_output for c in store.list(execution_id)
            if c.step_type == "node" and c.status == "completed"}


def test_a_default_start_is_python_by_the_os_user(tmp_path: Path, store: Checkpointer) -> None:
    """``Runner.run`` without a trigger: kind ``python``, the OS user, no payload."""
    path = write_workflow(tmp_path, READS)
    result = tether.Runner(path, store, TASKS).run()
    assert result.status == "paused"
    assert outputs(store, result.execution_id)["first"] == {
        "kind": "python", "actor": os_user(), "ref": None, "event": "none"}
    run = store.get_run(result.execution_id)
    assert run is not None and run.trigger is not None
    assert (run.trigger.kind, run.trigger.actor) == ("python", os_user())


HOOK = Trigger(TriggerKind.WEBHOOK, "webhook:deploy", {"ref": "refs/heads/main"},
               {"x-github-event": "push"}, "d-1", "github")


def test_a_resume_in_a_new_runner_reads_the_stored_trigger(
        tmp_path: Path, store: Checkpointer) -> None:
    """The trigger is the run's: a node after the pause, run by another Runner (as a worker
    would), reads the same ``trigger`` as the first node did."""
    path = write_workflow(tmp_path, READS)
    result = tether.Runner(path, store, TASKS).run(trigger=HOOK)
    assert outputs(store, result.execution_id)["first"] == {
        "kind": "webhook", "actor": "webhook:deploy", "ref": "refs/heads/main",
        "event": "push"}
    resumed = tether.Runner(path, store, TASKS).resume(result.execution_id, {})
    assert resumed.status == "completed"
    assert outputs(store, result.execution_id)["after"] == {
        "kind": "webhook", "delivery": "d-1", "tick": None}


def test_a_fork_keeps_the_origins_trigger(tmp_path: Path, store: Checkpointer) -> None:
    """A fork is the same start, branched: its trigger and its templates' ``trigger`` are
    the origin's, not the forker's."""
    path = write_workflow(tmp_path, READS)
    first = tether.Runner(path, store, TASKS).run(trigger=HOOK)
    branch = tether.Runner(path, store, TASKS).fork(first.execution_id)
    run = store.get_run(branch.execution_id)
    assert run is not None and run.parent_execution_id == first.execution_id
    assert run.trigger == HOOK
    resumed = tether.Runner(path, store, TASKS).resume(branch.execution_id, {})
    assert outputs(store, resumed.execution_id)["after"]["delivery"] == "d-1"


def test_submit_stores_the_trigger_it_is_given(tmp_path: Path, store: Checkpointer) -> None:
    path = write_workflow(tmp_path, READS)
    manual = Trigger(TriggerKind.MANUAL, "ada")
    execution_id = tether.Runner(path, store).submit(trigger=manual)
    run = store.get_run(execution_id)
    assert run is not None and run.trigger == manual
    default = store.get_run(tether.Runner(path, store).submit())
    assert default is not None and default.trigger is not None
    assert default.trigger.kind == "python"


def test_a_run_stored_without_a_trigger_reads_kind_unknown(
        tmp_path: Path, store: Checkpointer) -> None:
    """A run from before triggers were stored (no trigger on its row) renders ``trigger``
    as kind ``unknown`` with every other field null, rather than failing."""
    import dataclasses

    path = write_workflow(tmp_path, READS)
    runner = tether.Runner(path, store, TASKS)
    original = store.create_run

    def without_trigger(run: Any, plan_json: str) -> None:
        original(dataclasses.replace(run, trigger=None), plan_json)

    store.create_run = without_trigger  # type: ignore[method-assign]
    try:
        result = runner.run()
    finally:
        del store.create_run
    resumed = tether.Runner(path, store, TASKS).resume(result.execution_id, {})
    assert outputs(store, resumed.execution_id)["after"] == {
        "kind": "unknown", "delivery": None, "tick": None}


@pytest.mark.parametrize("field", ["kind", "payload", "received_at"])
def test_trigger_is_in_the_namespace_of_every_template(tmp_path: Path, field: str) -> None:
    """Without a checkpointer too (in memory), ``trigger`` is defined."""
    path = write_workflow(tmp_path, f"""
        tether: 1
        name: mem
        nodes:
          a: {{task: t.echo, with: {{v: "{{{{ trigger.{field} is defined }}}}"}}}}
        output: "{{{{ nodes.a.output.v }}}}"
    """)
    assert tether.Runner(path, None, TASKS).run().output is True
