"""Reading a run back from the store and the effects file, for the tests' assertions.

A *unit* (one execution of a node, a for_each element, or a loop pass of a node) is identified
by ``(task name, canonical JSON of its rendered arguments)``: the checkpoint row of a completed
unit stores its arguments as ``node_input``, and the recorder writes the same arguments, so a
committed checkpoint and a recorded body execution can be matched exactly.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from harness.tasks import canonical
from tether.compiler.plan import Plan, TaskNode
from tether.runtime.state import locate_unit
from tether.stores.base import Checkpointer
from tether.stores.records import CheckpointRow

Unit = tuple[str, str]


def task_of(plan: Plan, agent_path: str, address: str) -> str | None:
    """The task a unit calls (None for approvals, sub-workflow and for_each summary rows)."""
    level, _ = locate_unit(plan, {"nodes": {}}, agent_path, address)
    node = level.node(address.partition("/item:")[0])
    return node.task if isinstance(node, TaskNode) else None


def unit_of(plan: Plan, row: CheckpointRow) -> Unit | None:
    """The unit a ``completed`` task checkpoint row commits (None for other rows)."""
    if row.step_type != "node" or row.status != "completed" or row.node_input is None:
        return None
    task = task_of(plan, row.agent_path, row.node_id)
    return (task, canonical(json.loads(row.node_input))) if task is not None else None


def committed_units(store: Checkpointer, plan: Plan, execution_id: str) -> Counter[Unit]:
    """The units whose ``completed`` checkpoint is in the store (with multiplicity)."""
    units: Counter[Unit] = Counter()
    for row in store.rows(execution_id):
        unit = unit_of(plan, row)
        if unit is not None:
            units[unit] += 1
    return units


def executions(effects: Iterable[dict[str, Any]], pids: set[int] | None = None,
               exclude: set[int] | None = None, eid: str | None = None) -> Counter[Unit]:
    """Recorded body executions, optionally only of (or not of) some processes, of one run."""
    found: Counter[Unit] = Counter()
    for line in effects:
        if eid is not None and line["eid"] != eid:
            continue
        if pids is not None and line["pid"] not in pids:
            continue
        if exclude is not None and line["pid"] in exclude:
            continue
        found[(line["task"], line["args"])] += 1
    return found


def run_ends(store: Checkpointer, execution_id: str) -> list[str]:
    """The statuses of the run's run_end rows, oldest first."""
    return [row.status for row in store.rows(execution_id) if row.node_id == "run_end"]


def describe(store: Checkpointer, execution_id: str) -> str:
    """The run's rows, one line each (for failure messages)."""
    return "\n".join(f"  {r.checkpoint_id[-12:]} {r.node_id:<14} {r.step_type:<10} {r.status:<11}"
                     f" counters={r.iteration_counters} input={r.node_input}"
                     for r in store.rows(execution_id))
