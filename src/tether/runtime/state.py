"""Run state: plain JSON data the runtime reads, mutates, and checkpoints.

::

    {"inputs": {...},
     "nodes": {"<id>": {"status": ..., "output": ..., "error": ..., "answers": [...],
                        "items": {"<i>": <unit>}, "sub": <state of a sub-workflow run>}},
     "counters": {"<loop closing node>": <current pass, from 1>}}

A node that has not started has no entry. A *unit* (a node, or one ``for_each`` element) has a
status: ``pending``/``running``/``interrupted`` (not finished: it runs when resumed) or
``completed``/``skipped``/``failed``/``upstream_failed`` (finished). Resume re-enters exactly
the units that are not finished and whose dependencies are.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tether.compiler.plan import Plan

COMPLETED = "completed"
SKIPPED = "skipped"
FAILED = "failed"
UPSTREAM_FAILED = "upstream_failed"
PENDING = "pending"
RUNNING = "running"
INTERRUPTED = "interrupted"

FINISHED = frozenset({COMPLETED, SKIPPED, FAILED, UPSTREAM_FAILED})
NOT_OK = frozenset({FAILED, UPSTREAM_FAILED})

StatePath = tuple[str, ...]


def new_state(inputs: dict[str, Any]) -> dict[str, Any]:
    """The state of a run that has not started."""
    return {"inputs": inputs, "nodes": {}, "counters": {}}


def status_of(state: dict[str, Any], node_id: str) -> str:
    entry = state["nodes"].get(node_id)
    return str(entry.get("status", PENDING)) if entry else PENDING


def get_path(state: dict[str, Any], path: StatePath) -> Any:
    value: Any = state
    for key in path:
        value = value[key]
    return value


def parse_agent_path(agent_path: str) -> list[tuple[str, str | None]]:
    """``workflow:w/node:p/item:3/workflow:x/node:q`` -> ``[("p", "3"), ("q", None)]``."""
    steps: list[tuple[str, str | None]] = []
    for part in agent_path.split("/") if agent_path else []:
        kind, _, value = part.partition(":")
        if kind == "node":
            steps.append((value, None))
        elif kind == "item" and steps:
            steps[-1] = (steps[-1][0], value)
    return steps


def split_address(address: str) -> tuple[str, str | None]:
    """``enrich/item:3`` -> ``("enrich", "3")``; ``review`` -> ``("review", None)``."""
    node_id, _, item = address.partition("/item:")
    return node_id, (item or None)


def unit_path(node_id: str, item: str | None) -> StatePath:
    return ("nodes", node_id, "items", item) if item is not None else ("nodes", node_id)


def locate_unit(plan: Plan, state: dict[str, Any], agent_path: str,
                address: str) -> tuple[Plan, StatePath]:
    """The plan of the (sub-)run holding a unit, and the unit's absolute path in ``state``."""
    path: StatePath = ()
    for node_id, item in parse_agent_path(agent_path):
        node = plan.node(node_id)
        if node.workflow is None:
            raise KeyError(agent_path)
        plan = node.workflow.plan
        path = (*path, *unit_path(node_id, item), "sub")
    node_id, item = split_address(address)
    plan.node(node_id)
    return plan, (*path, *unit_path(node_id, item))


def ensure_unit(state: dict[str, Any], path: StatePath) -> dict[str, Any]:
    """The unit dict at ``path``, created (empty) with its parents when missing."""
    target = state
    for key in path:
        nxt = target.get(key)
        if not isinstance(nxt, dict):
            nxt = {}
            target[key] = nxt
        target = nxt
    return target


def _units(plan: Plan, state: dict[str, Any],
           prefix: StatePath) -> Iterator[tuple[Plan, StatePath, dict[str, Any]]]:
    """Every unit entry in ``state`` and nested sub-run states, with its plan and path."""
    for node_id, entry in state.get("nodes", {}).items():
        if node_id not in plan.by_id:
            continue
        node = plan.node(node_id)
        path = (*prefix, "nodes", node_id)
        yield plan, path, entry
        for key, item in entry.get("items", {}).items():
            yield plan, (*path, "items", key), item
            if node.workflow is not None and "sub" in item:
                yield from _units(node.workflow.plan, item["sub"], (*path, "items", key, "sub"))
        if node.workflow is not None and "sub" in entry:
            yield from _units(node.workflow.plan, entry["sub"], (*path, "sub"))


def reopen(plan: Plan, state: dict[str, Any], *, forget_answers: bool) -> list[StatePath]:
    """Make failed units runnable again (for resume and fork); return the changed paths.

    Failed and upstream-failed units go back to ``pending`` (keeping finished ``for_each``
    elements and sub-run progress). A failed unit keeps the answers it was given, so resuming
    it re-uses a claimed decision instead of asking again. With ``forget_answers`` (fork),
    interrupted and failed units forget their answers, so the branch asks again instead of
    skipping an approval.
    """
    changed: list[StatePath] = []
    for _, path, entry in list(_units(plan, state, ())):
        status = entry.get("status")
        if status in NOT_OK:
            entry["status"] = PENDING
            entry.pop("error", None)
            if forget_answers:
                entry.pop("answers", None)
            changed.append(path)
        elif forget_answers and status == INTERRUPTED:
            entry["status"] = PENDING
            entry.pop("answers", None)
            changed.append(path)
    return changed


def first_failure(plan: Plan, state: dict[str, Any]) -> dict[str, Any] | None:
    """The error of the first failed node in plan order, if any."""
    for node in plan.nodes:
        entry = state["nodes"].get(node.id)
        if entry and entry.get("status") == FAILED:
            error = entry.get("error")
            return error if isinstance(error, dict) else {"type": "Error", "message": str(error),
                                                          "node_id": node.id}
    return None
