"""The run's graph as inline SVG, drawn on the server from the plan: no network, no script.

Layers are the plan's parallel generations (top to bottom), or, for plans without them, the
longest path from a root. Each node is a box whose CSS class is its status in the run
(``st-completed``, ``st-failed``, ...; colours in ``console.css``), edges follow ``needs``, and
a loop's back-edge is a dashed curve. Every text is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping

from markupsafe import Markup, escape

from tether.compiler.plan import ApprovalNode, Plan, TaskNode, WorkflowNode
from tether.runtime.history import NodeView

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 150, 34, 24, 36, 12
MAX_LABEL = 20


def layers(plan: Plan) -> list[list[str]]:
    """Node ids by layer."""
    known = set(plan.by_id)
    if plan.generations and {n for g in plan.generations for n in g} == known:
        return [list(g) for g in plan.generations]
    depth: dict[str, int] = {}
    for node in plan.nodes:  # topological order: every dependency comes first
        depth[node.id] = 1 + max((depth[d] for d in node.waits_for if d in depth), default=-1)
    result: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node in plan.nodes:
        result[depth[node.id]].append(node.id)
    return result


def _kind(plan: Plan, node_id: str) -> str:
    node = plan.by_id[node_id]
    if isinstance(node, ApprovalNode):
        return "approval"
    if isinstance(node, WorkflowNode):
        return "workflow"
    if isinstance(node, TaskNode):
        return "task"
    return "node"


def _note(views: Mapping[str, NodeView] | None, node_id: str) -> str:
    view = views.get(node_id) if views is not None else None
    if view is None:
        return ""
    reason = f" ({view.reason})" if view.reason else ""
    attempts = f", {view.attempts} attempts" if view.attempts > 1 else ""
    return reason + attempts


def graph_svg(plan: Plan, statuses: Mapping[str, str],
              views: Mapping[str, NodeView] | None = None) -> Markup:
    """The SVG of ``plan`` with each node coloured by ``statuses[node id]`` (``pending``
    when absent); ``views`` (the run's history) add why a node was skipped and its attempts
    to its tooltip."""
    rows = layers(plan)
    width = max((len(r) for r in rows), default=1) * (BOX_W + GAP_X) - GAP_X + 2 * PAD
    height = len(rows) * (BOX_H + GAP_Y) - GAP_Y + 2 * PAD
    where: dict[str, tuple[int, int]] = {}
    for y, row in enumerate(rows):
        offset = (width - 2 * PAD - (len(row) * (BOX_W + GAP_X) - GAP_X)) // 2
        for x, node_id in enumerate(row):
            where[node_id] = (PAD + offset + x * (BOX_W + GAP_X), PAD + y * (BOX_H + GAP_Y))
    parts = [Markup(f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" '
                    f'viewBox="0 0 {width} {max(height, BOX_H + 2 * PAD)}" '
                    f'width="{width}" height="{max(height, BOX_H + 2 * PAD)}" role="img">'
                    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
                    'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
                    '<path d="M 0 0 L 10 5 L 0 10 z" class="arrow"/></marker></defs>')]
    for node in plan.nodes:
        x2, y2 = where[node.id]
        for dep in node.waits_for:
            if dep in where:
                x1, y1 = where[dep]
                parts.append(Markup(
                    f'<line class="edge" x1="{x1 + BOX_W // 2}" y1="{y1 + BOX_H}" '
                    f'x2="{x2 + BOX_W // 2}" y2="{y2}" marker-end="url(#arrow)"/>'))
        if node.loop is not None and node.loop.to in where:
            tx, ty = where[node.loop.to]
            bend = max(x2, tx) + BOX_W + GAP_X // 2
            parts.append(Markup(
                f'<path class="edge loop" d="M {x2 + BOX_W} {y2 + BOX_H // 2} C {bend} '
                f'{y2 + BOX_H // 2}, {bend} {ty + BOX_H // 2}, {tx + BOX_W} {ty + BOX_H // 2}" '
                'marker-end="url(#arrow)"/>'))
    for node_id, (x, y) in where.items():
        status = statuses.get(node_id, "pending")
        label = node_id if len(node_id) <= MAX_LABEL else node_id[:MAX_LABEL - 1] + "…"
        parts.append(
            Markup(f'<g class="node st-{escape(status)} k-{_kind(plan, node_id)}" '
                   f'data-node="') + escape(node_id) + Markup('"><title>')
            + escape(f"{node_id} ({_kind(plan, node_id)}): {status}{_note(views, node_id)}")
            + Markup(
                f'</title><rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
                f'<text x="{x + BOX_W // 2}" y="{y + BOX_H // 2 + 4}">')
            + escape(label) + Markup("</text></g>"))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)
