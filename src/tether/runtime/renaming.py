"""A run moved to a plan that renamed nodes (``renamed_from:``, issue 24): its live state
follows the new ids.

What a run keeps under a node id: the node's entry in the run state (its checkpoint, with its
``for_each`` elements, its answers, its sub-run and its agent loop), its loop counter, and its
pending interrupts and decisions in the store. ``tether upgrade`` gives the pending rows and
decisions their new places in the move's transaction (:func:`readdress`);
:func:`rename_state` moves the state's entries when the run is next loaded (checkpoints
written before the move keep the old ids; the first checkpoint after it rewrites ``nodes``
and ``counters`` whole, so later loads find the new ids only). Only the ids of the plan's
top level and inside started sub-workflows (their sub-plans' ``renamed_from``) are renamed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tether.compiler.plan_rules import renames
from tether.kinds import NodeKind
from tether.stores.records import Decision, PendingInterrupt, Readdress, place

if TYPE_CHECKING:
    from tether.compiler.plan import Plan

__all__ = ["address_after", "readdress", "rename_place", "rename_state", "renames_anywhere"]


def renames_anywhere(plan: Plan) -> bool:
    """Whether ``plan`` or a sub-plan of it renamed a node (``renamed_from``)."""
    return bool(renames(plan)) or any(renames_anywhere(node.workflow.plan)
                                      for node in plan.nodes if node.kind is NodeKind.WORKFLOW)


def rename_state(plan: Plan, state: dict[str, Any]) -> bool:
    """Move the entries and loop counters of ids ``plan`` renamed to their new ids, in place,
    also inside started sub-runs and agent loops; True when something moved. Idempotent:
    called on every load of a run's state (a snapshot written before the move still holds the
    old ids; an entry already under the new id wins)."""
    renamed = renames(plan)
    nodes: dict[str, Any] = state.get("nodes") or {}
    moved = False
    for old, new in renamed.items():
        if old in nodes:
            entry = nodes.pop(old)
            if isinstance(entry, dict) and isinstance(entry.get("agent"), dict):
                _rename_agent(entry["agent"], old, new)
            nodes.setdefault(new, entry)
            moved = True
    counters: dict[str, Any] = state.get("counters") or {}
    for old, new in renamed.items():
        if old in counters:
            counters.setdefault(new, counters.pop(old))
            moved = True
    for node in plan.nodes:
        entry = nodes.get(node.id)
        if node.kind is NodeKind.WORKFLOW and isinstance(entry, dict):
            moved |= _rename_subs(node.workflow.plan, entry)
    return moved


def _rename_subs(plan: Plan, entry: dict[str, Any]) -> bool:
    """The sub-runs of a workflow node's entry (and of its ``for_each`` elements)."""
    moved = False
    if isinstance(entry.get("sub"), dict):
        moved |= rename_state(plan, entry["sub"])
    for item in (entry.get("items") or {}).values():
        if isinstance(item, dict) and isinstance(item.get("sub"), dict):
            moved |= rename_state(plan, item["sub"])
    return moved


def _rename_agent(data: dict[str, Any], old: str, new: str) -> None:
    """An agent loop's state (and its workers') naming agent node ``old``."""
    if data.get("agent") == old:
        data["agent"] = new
    path = data.get("path")
    if isinstance(path, str):  # its own step is the first agent: step
        steps = path.split("/")
        at = next((i for i, step in enumerate(steps) if step.startswith("agent:")), None)
        if at is not None and steps[at] == f"agent:{old}":
            steps[at] = f"agent:{new}"
            data["path"] = "/".join(steps)
    calls = data.get("tool_calls")
    if isinstance(calls, dict) and old in calls:
        calls.setdefault(new, calls.pop(old))
    for call in (data.get("calls") or {}).values():
        if isinstance(call, dict) and isinstance(call.get("worker"), dict):
            _rename_agent(call["worker"], old, new)


def _walk(plan: Plan, steps: list[str]) -> tuple[list[str], Plan | None]:
    """``steps`` of an agent path or address with each step naming a renamed node of its
    level (``node:``, ``agent:``, or a bare node id) given the new id; also the plan whose node
    a pause's node id names there (None: none known)."""
    level: Plan | None = plan
    owner: Plan | None = plan
    out: list[str] = []
    for step in steps:
        kind, colon, value = step.partition(":")
        if level is None or (colon and kind not in ("node", "agent")):
            out.append(step)  # workflow:, item:, tool:, worker:, turn:, or past the levels
            continue
        renamed = renames(level)
        if not colon:  # a node id: the rest is its element or its agent's turn
            out.append(renamed.get(step, step))
            level = owner = None
            continue
        value = renamed.get(value, value)
        out.append(f"{kind}:{value}")
        if kind == "agent":  # the pause's node id starts with this agent node's id
            owner, level = level, None
            continue
        node = level.by_id.get(value)
        level = owner = node.workflow.plan if node is not None and node.kind is NodeKind.WORKFLOW \
            else None
    return out, owner


def rename_place(plan: Plan, agent_path: str, node_id: str) -> tuple[str, str]:
    """The (``agent_path``, ``node_id``) of a pause once its run is on ``plan``: each node it
    names that ``plan`` (or the sub-plan of its level) renamed, by the new id."""
    steps, owner = _walk(plan, agent_path.split("/") if agent_path else [])
    if owner is not None and node_id:
        first, slash, rest = node_id.partition("/")
        node_id = renames(owner).get(first, first) + slash + rest
    return "/".join(steps), node_id


def address_after(plan: Plan, address: str) -> str:
    """An address (``--node``) written before ``plan`` renamed its node, as ``plan`` spells
    it (``review`` -> ``gate`` for ``gate: {renamed_from: review}``; ``agent:old/tool:t``,
    ``workflow:w/node:old/ask`` alike); others unchanged. An old id is never a node of its
    plan (C100), so the mapping is unambiguous."""
    steps, _ = _walk(plan, address.split("/"))
    return "/".join(steps)


def readdress(plan: Plan, pending: Iterable[PendingInterrupt],
              decisions: Iterable[Decision]) -> list[Readdress]:
    """The new places of a run's pending rows and decisions once it is on ``plan``."""
    found: dict[str, Readdress] = {}
    rows: list[PendingInterrupt | Decision] = [*pending, *decisions]
    for row in rows:
        agent_path, node_id = rename_place(plan, row.agent_path, row.node_id)
        if (agent_path, node_id) != (row.agent_path, row.node_id):
            found.setdefault(row.checkpoint_id, Readdress(
                row.checkpoint_id, node_id, agent_path, place(row.agent_path, row.node_id)))
    return list(found.values())
