"""Helpers shared by the conformance suites (tests/stores and tests/runtime).

Nothing here mocks a store or the runner: these only build real records, write real workflow
files, and read back what a real store holds, so tests can compare it before and after.
Runtime tests load this module through ``tests/runtime/conftest.py`` (under a unique module
name, so it never collides with another ``helpers`` module).
"""

from __future__ import annotations

import copy
import json
import textwrap
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from tether.runtime.ids import new_checkpoint_id, new_execution_id
from tether.runtime.journal import Journal
from tether.stores.base import Checkpointer
from tether.stores.memory import InMemoryCheckpointer
from tether.stores.records import (
    RUN_END,
    CheckpointRow,
    PendingInterrupt,
    RunRecord,
)
from tether.stores.schema import checkpoints, idempotency_cache, pending_interrupts, runs
from tether.stores.sql import SQLCheckpointer

PLAN_JSON = '{"plan": "stand-in"}'


ASK_THEN_AFTER = """
    tether: 1
    name: one
    nodes:
      ask: {task: t.ask}
      after:
        needs: [ask]
        task: t.after
        with: {x: "{{ nodes.ask.output }}"}
    output: "{{ nodes.after.output }}"
"""
"""Two task nodes, the second reading the first (tasks ``t.ask`` and ``t.after``)."""


def write_workflow(directory: Path, text: str, name: str = "wf.yaml") -> Path:
    """Write a workflow file (dedented) and return its path."""
    path = directory / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


# -- records ----------------------------------------------------------------------------------
def new_run(store: Checkpointer, execution_id: str | None = None, *, status: str = "running",
            fingerprint: str = "f" * 64, plan_json: str = PLAN_JSON, inputs: Any = None,
            created_at: float | None = None, owner: str | None = None,
            lease_until: float | None = None, workflow: str = "wf") -> str:
    """Create a run in ``store`` and return its execution id."""
    execution_id = execution_id or new_execution_id()
    moment = datetime.fromtimestamp(created_at if created_at is not None else time.time(),
                                    tz=UTC)
    store.create_run(RunRecord(
        execution_id=execution_id, workflow=workflow, plan_fingerprint=fingerprint,
        status=status, inputs={"n": 1} if inputs is None else inputs, created_at=moment,
        updated_at=moment, owner=owner, lease_until=lease_until), plan_json)
    return execution_id


def row(execution_id: str, node_id: str = "a", *, checkpoint_id: str | None = None,
        status: str = "completed", step_type: str = "node", state: Any = None,
        node_index: int = 0, agent_path: str = "", reason: str | None = None,
        context: Any = None) -> CheckpointRow:
    """A full-snapshot row (its own base)."""
    checkpoint_id = checkpoint_id or new_checkpoint_id()
    body = state if state is not None else {"nodes": {node_id: {"status": status}},
                                            "counters": {}}
    return CheckpointRow(
        execution_id=execution_id, checkpoint_id=checkpoint_id, node_id=node_id,
        node_index=node_index, step_type=step_type, status=status, base_id=checkpoint_id,
        is_full=True, state=json.dumps(body), created_at=time.time(),
        node_output=json.dumps({"from": node_id}), agent_path=agent_path,
        interrupt_reason=reason, interrupt_context=None if context is None
        else json.dumps(context))


def run_end(execution_id: str, status: str = "completed") -> CheckpointRow:
    return row(execution_id, RUN_END, status=status, step_type=RUN_END, node_index=99)


def pending_for(interrupted: CheckpointRow, reason: str = "approve",
                context: Any = None) -> PendingInterrupt:
    return PendingInterrupt(
        interrupted.execution_id, interrupted.checkpoint_id, interrupted.node_id,
        interrupted.agent_path, reason, {"amount": 5} if context is None else context,
        datetime.fromtimestamp(interrupted.created_at, tz=UTC))


def pause(store: Checkpointer, execution_id: str, node_id: str = "review",
          owner: str | None = None, created_at: float | None = None) -> CheckpointRow:
    """Record an interrupt for ``execution_id`` and pause the run (releasing ``owner``'s
    lease); return the interrupted row (written at ``created_at``, default now)."""
    interrupted = row(execution_id, node_id, status="interrupted", step_type="hitl_pause",
                      reason="approve", context={"amount": 5})
    if created_at is not None:
        interrupted = interrupted._replace(created_at=created_at)
    store.record_interrupt(interrupted, pending_for(interrupted), owner)
    store.pause_run(execution_id, owner, [interrupted.checkpoint_id])
    return interrupted


def journal_history(store: Checkpointer, execution_id: str, steps: list[dict[str, Any]], *,
                    snapshot_every: int = 3) -> list[dict[str, Any]]:
    """Write one row per step through a real Journal; return the state after each row.

    A step is ``{"node": id, "value": output}`` (sets that node's entry) or
    ``{"counter": id, "value": n}`` (sets a loop counter).
    """
    state: dict[str, Any] = {"inputs": {"n": 1}, "nodes": {}, "counters": {}}
    journal = Journal(store, execution_id, state, snapshot_every=snapshot_every)
    expected = []
    for index, step in enumerate(steps):
        if "counter" in step:
            state["counters"][step["counter"]] = step["value"]
            journal.mark(("counters", step["counter"]))
            node_id = step["counter"]
        else:
            node_id = step["node"]
            state["nodes"][node_id] = {"status": "completed", "output": step["value"]}
            # as the runtime marks a node it completed: with the entry's JSON already made
            # (every other step, so rows are also built from the state itself)
            journal.mark(("nodes", node_id),
                         json.dumps(state["nodes"][node_id]) if index % 2 else None)
        journal.put(node_id=node_id, node_index=index, step_type="node", status="completed",
                    counters=state["counters"])
        expected.append(copy.deepcopy(state))
    return expected


# -- reading everything a run has in a store -----------------------------------------------------
@dataclass(frozen=True)
class Footprint:
    """Everything a store holds about one run, for before/after comparisons."""

    rows: tuple[CheckpointRow, ...]
    pending: tuple[PendingInterrupt, ...]
    run: RunRecord | None


def footprint(store: Checkpointer, execution_id: str) -> Footprint:
    return Footprint(tuple(store.rows(execution_id)), tuple(store.list_pending(execution_id)),
                     store.get_run(execution_id))


def orphans(store: Checkpointer) -> dict[str, set[str]]:
    """Execution ids that checkpoint, pending or idempotency rows name but no run row has."""
    if isinstance(store, InMemoryCheckpointer):
        known = set(store._runs)
        found = {
            "checkpoints": {e for e, rows in store._chains.items() if rows},
            "pending": {e for e, waiting in store._pending.items() if waiting},
            "idempotency": {e for e, _ in store._cache},
        }
        return {name: ids - known for name, ids in found.items()}
    assert isinstance(store, SQLCheckpointer)
    with store.engine.connect() as connection:
        known = {r[0] for r in connection.execute(select(runs.c.execution_id))}
        found = {
            name: {r[0] for r in connection.execute(select(table.c.execution_id))}
            for name, table in (("checkpoints", checkpoints), ("pending", pending_interrupts),
                                ("idempotency", idempotency_cache))
        }
    return {name: ids - known for name, ids in found.items()}


def node_rows(store: Checkpointer, execution_id: str) -> list[CheckpointRow]:
    """The rows of a run that are not run_end markers."""
    return [r for r in store.rows(execution_id) if r.node_id != RUN_END]


def run_ends(store: Checkpointer, execution_id: str) -> list[CheckpointRow]:
    return [r for r in store.rows(execution_id) if r.node_id == RUN_END]


# -- running workflows --------------------------------------------------------------------------
class Crash(KeyboardInterrupt):
    """Raised by a task to stop the attempt there, as the operator's Ctrl-C would: nothing is
    recorded for the unit and the lease is released, so the run is left as a killed process
    leaves it once its lease is gone (in-process; real kills are in test_crash.py)."""


class Calls:
    """Counts task-body executions by name (thread-safe: sync tasks run in worker threads)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.order: list[str] = []
        self._lock = threading.Lock()

    def hit(self, name: str) -> int:
        """Count one execution of ``name``; return how many there have been."""
        with self._lock:
            self.counts[name] += 1
            self.order.append(name)
            return self.counts[name]

    def __getitem__(self, name: str) -> int:
        return self.counts[name]


def committed(store: Checkpointer, execution_id: str) -> list[tuple[str, str]]:
    """(node_id, status) of every row of a run, in order."""
    return [(r.node_id, r.status) for r in store.rows(execution_id)]
