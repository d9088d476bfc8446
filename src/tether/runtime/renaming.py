"""A run moved to a plan that renamed nodes (``renamed_from:``, issue 24): its live state
follows the new ids.

What a run keeps under a node id: the node's entry in the run state (its checkpoint, with its
``for_each`` elements, its answers, its sub-run and its agent loop), its loop counter, and its
pending interrupts and decisions in the store. ``tether upgrade`` gives the pending rows and
decisions their new places in the move's transaction (:func:`readdress`);
:func:`rename_state` moves the state's entries when the run is next loaded (checkpoints
written before the move keep the old ids; the first checkpoint after it rewrites ``nodes``
and ``counters`` whole, so later loads find the new ids only). Only the ids of the plan's
top level are renamed: a rename inside a sub-workflow follows its sub-run through
:func:`rename_state` when the sub-plan is loaded there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tether.compiler.compat import renames
from tether.compiler.plan import Plan, WorkflowNode
from tether.stores.records import Decision, PendingInterrupt, Readdress, place

__all__ = ["address_after", "readdress", "rename_place", "rename_state"]


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
        if isinstance(node, WorkflowNode) and isinstance(entry, dict):
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
    if isinstance(data.get("path"), str):
        data["path"], _ = rename_place({old: new}, data["path"], "")
    calls = data.get("tool_calls")
    if isinstance(calls, dict) and old in calls:
        calls.setdefault(new, calls.pop(old))
    for call in (data.get("calls") or {}).values():
        if isinstance(call, dict) and isinstance(call.get("worker"), dict):
            _rename_agent(call["worker"], old, new)


def rename_place(renamed: Mapping[str, str], agent_path: str, node_id: str,
                 ) -> tuple[str, str]:
    """The (``agent_path``, ``node_id``) of a pause after the top-level renames ``renamed``.

    The top-level node of a pause is the first ``node:`` (a sub-run's) or ``agent:`` (an
    agent loop's) step of its agent path, else the first step of its node id (``review``,
    ``enrich/item:3``; an agent's ``<node>/turn:N/tool:t``)."""
    steps = agent_path.split("/") if agent_path else []
    top_is_node_id = True
    for i, step in enumerate(steps):
        kind, _, value = step.partition(":")
        if kind in ("node", "agent"):
            steps[i] = f"{kind}:{renamed.get(value, value)}"
            top_is_node_id = kind == "agent"
            break
    if top_is_node_id and node_id:
        first, slash, rest = node_id.partition("/")
        node_id = renamed.get(first, first) + slash + rest
    return "/".join(steps), node_id


def address_after(plan: Plan, address: str) -> str:
    """An address (``--node``) written before ``plan`` renamed its node, as ``plan`` spells
    it (``review`` -> ``gate`` for ``gate: {renamed_from: review}``); others unchanged.
    An old id is never a node of ``plan`` (C100), so the mapping is unambiguous."""
    renamed = renames(plan)
    if not renamed:
        return address
    kind, colon, _ = address.partition("/")[0].partition(":")
    if colon and kind in ("agent", "node", "workflow"):
        path, _ = rename_place(renamed, address, "")
        return path
    return rename_place(renamed, "", address)[1]


def readdress(plan: Plan, pending: Iterable[PendingInterrupt],
              decisions: Iterable[Decision]) -> list[Readdress]:
    """The new places of a run's pending rows and decisions once it is on ``plan``."""
    renamed = renames(plan)
    if not renamed:
        return []
    found: dict[str, Readdress] = {}
    rows: list[PendingInterrupt | Decision] = [*pending, *decisions]
    for row in rows:
        agent_path, node_id = rename_place(renamed, row.agent_path, row.node_id)
        if (agent_path, node_id) != (row.agent_path, row.node_id):
            found.setdefault(row.checkpoint_id, Readdress(
                row.checkpoint_id, node_id, agent_path, place(row.agent_path, row.node_id)))
    return list(found.values())
