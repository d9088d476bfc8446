"""The graph's view of a run's nodes (:class:`~tether.runtime.history.NodeView`), part of
its history: each top-level node's state now, read from the newest folded state, with what
the history's events add (abandoned attempts, attempts counted, skips of a cancelled run)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.runtime.history import EventKind, HistoryEvent, NodeState, NodeView
from tether.status import FINISHED, RunStatus, SkipReason, UnitStatus

if TYPE_CHECKING:
    from tether.stores.contracts import RunStore
    from tether.stores.records import RunRecord


@dataclass(frozen=True)
class Inside:
    """What a node holds inside it, for finding what was in flight there: whether it runs
    per element (``for_each`` or ``matrix``; ``items``: how many when the list is written in
    the plan, ``concurrency`` when it is a number there), and the plan of a ``workflow``
    node (``sub``)."""

    each: bool
    items: int | None
    concurrency: int | None
    sub: PlanOutline | None


@dataclass(frozen=True)
class OutlineNode:
    """What a history needs of a plan node: its id, what it waits for, its title, and what
    it holds inside (None for a node that runs once and holds no plan)."""

    id: str
    waits_for: tuple[str, ...]
    title: str | None
    inside: Inside | None = None


@dataclass(frozen=True)
class PlanOutline:
    """The nodes of a stored plan, in plan order, read straight from its JSON (validating a
    10,000-node plan as a :class:`~tether.compiler.plan.Plan` costs more than the rest of a
    history page); a ``workflow`` node's plan is outlined too."""

    name: str
    nodes: tuple[OutlineNode, ...]
    by_id: dict[str, OutlineNode]

    @classmethod
    def read(cls, text: str | None) -> PlanOutline | None:
        """The outline of a stored plan's JSON, or None when there is none to read."""
        if text is None:
            return None
        try:
            return cls.of(json.loads(text))
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    @classmethod
    def of(cls, data: dict[str, Any]) -> PlanOutline:
        """The outline of a plan's JSON value (raises on a value that is not one)."""
        nodes = tuple(_outline_node(n) for n in data["nodes"])
        return cls(str(data.get("name") or ""), nodes, {n.id: n for n in nodes})


def _outline_node(data: dict[str, Any]) -> OutlineNode:
    waits = data.get("waits_for")
    found = OutlineNode(str(data["id"]), tuple(map(str, waits)) if waits else (),
                        data.get("title"))
    each, matrix, workflow = data.get("for_each"), data.get("matrix"), data.get("workflow")
    if each is None and matrix is None and workflow is None:
        return found  # (most nodes: kept cheap, a history page outlines every node)
    concurrency = data.get("concurrency")
    sub = workflow.get("plan") if isinstance(workflow, dict) else None
    return OutlineNode(found.id, found.waits_for, found.title, Inside(
        each=each is not None or matrix is not None,
        items=len(each) if isinstance(each, list) else None,
        concurrency=concurrency if isinstance(concurrency, int) else None,
        sub=PlanOutline.of(sub) if isinstance(sub, dict) else None))


_STATES = {status.value: NodeState(status.value) for status in UnitStatus}


def newest_state(store: RunStore, run: RunRecord) -> dict[str, Any]:
    """The run's state after its newest row (its ``run_end`` too: it carries the last
    skips)."""
    newest = store.get_last(run.execution_id)
    return newest.state_snapshot if newest is not None else {}


def _counts(events: list[HistoryEvent]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in events:
        if event.kind == EventKind.NODE_STARTED and event.node and not event.agent_path:
            counts[event.node] = counts.get(event.node, 0) + 1
    return counts


def node_views(newest: dict[str, Any], run: RunRecord, plan: PlanOutline | None,
               events: list[HistoryEvent], *, abandoned: bool) -> dict[str, NodeView]:
    """Every top-level node of ``plan`` with its state now (``newest``: the run's newest
    state). ``abandoned``: the run's owner is gone (dead, or its lease ran out), so a running
    run's runnable nodes are abandoned, not running."""
    if plan is None:
        return {}
    nodes = newest.get("nodes")
    entries: dict[str, Any] = nodes if isinstance(nodes, dict) else {}
    counts = _counts(events)
    statuses = {k: str(v.get("status", UnitStatus.PENDING)) for k, v in entries.items()
                if isinstance(v, dict)}
    views: dict[str, NodeView] = {}
    for node in plan.nodes:
        entry = entries.get(node.id)
        state = _STATES.get(statuses.get(node.id, UnitStatus.PENDING), NodeState.PENDING)
        reason = entry.get("reason") if isinstance(entry, dict) else None
        if state in (NodeState.PENDING, NodeState.RUNNING):
            if run.status == RunStatus.CANCELLED:
                state, reason = NodeState.SKIPPED, SkipReason.CANCELLED
            elif run.status == RunStatus.RUNNING and all(
                    statuses.get(d) in FINISHED for d in node.waits_for):
                state = NodeState.ABANDONED if abandoned else NodeState.RUNNING
        views[node.id] = NodeView(state=state, reason=reason, attempts=counts.get(node.id, 0),
                                  title=node.title)
    return views
