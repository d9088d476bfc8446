"""Pictures of a plan: Mermaid flowcharts and Graphviz DOT, from the plan's plain data.

Both drawings show the same things:

- a task as a rectangle labelled ``id`` / ``task.name``; an approval as a hexagon in a warm
  colour; a sub-workflow as a subroutine box (Mermaid ``[[ ]]``, DOT ``box3d``);
- extra label lines for what changes when a node runs: ``when <guard>``, ``for each <expr>``
  (``×N`` for a literal list), a trigger rule other than ``all_success``;
- a switch as a diamond labelled with its ``on``; each edge to a node of one of its cases is
  labelled with the case (``default`` for the default); a noop as a small circle, a fail node
  as a red stadium with its message;
- a node's ``title``, when it has one, as the label's first line (the id below it);
- ``needs`` as solid edges; each loop as a dashed back-edge from its closing node to
  ``loop.to``, labelled ``while <condition> (max N)``.

Output is deterministic: nodes in plan order, edges in plan order. Only the plan is read, so
drawing needs neither networkx nor the source file.
"""

from __future__ import annotations

import json
import re
from typing import Any, assert_never

from tether.compiler.plan import (
    AgentNode,
    ApprovalNode,
    FailNode,
    NoopNode,
    Plan,
    PlanLoop,
    PlanNode,
    SleepNode,
    SleepUntilNode,
    SwitchNode,
    TaskNode,
    WorkflowNode,
)
from tether.kinds import NodeKind

__all__ = ["to_dot", "to_mermaid"]

MAX_EXPRESSION = 60

_SINGLE_EXPRESSION = re.compile(r"^\{\{\s*(.*?)\s*\}\}$", re.DOTALL)

_APPROVAL_FILL = "#fff4d6"
_APPROVAL_STROKE = "#c98a00"
_WORKFLOW_FILL = "#eaf2ff"
_WORKFLOW_STROKE = "#3a6fd8"
_TASK_FILL = "#f5f7fa"
_SWITCH_FILL = "#efe6ff"
_SWITCH_STROKE = "#7a4fd8"
_FAIL_FILL = "#ffe3e3"
_FAIL_STROKE = "#c92a2a"


# --------------------------------------------------------------------------- shared


def _expression(text: str) -> str:
    """``{{ x > 1 }}`` shown as ``x > 1``; long expressions are cut with an ellipsis."""
    match = _SINGLE_EXPRESSION.match(text.strip())
    shown = match.group(1) if match and "{{" not in match.group(1) else text.strip()
    shown = " ".join(shown.split())
    return shown if len(shown) <= MAX_EXPRESSION else shown[: MAX_EXPRESSION - 1] + "…"


def _for_each(value: Any, concurrency: int | str | None) -> str:
    if isinstance(value, list):
        line = f"×{len(value)}"
    elif isinstance(value, str):
        line = f"for each {_expression(value)}"
    else:
        line = "for each"
    if isinstance(concurrency, str):
        concurrency = _expression(concurrency)
    return line + (f" ({concurrency} at a time)" if concurrency else "")


def node_lines(node: PlanNode) -> list[str]:
    """The lines of a node's label: id, what it runs, then guard, fan-out and trigger."""
    lines = [node.title, node.id] if node.title else [node.id]
    match node:
        case TaskNode():
            lines.append(node.task)
            if node.until is not None:
                lines.append(f"until {_expression(node.until)}")
        case ApprovalNode():
            lines.append(f"approval: {node.approval.reason}")
        case WorkflowNode():
            lines.append(f"workflow: {node.workflow.path}")
        case AgentNode():
            agent = node.agent
            lines.append(f"agent: {agent.model.provider}:{agent.model.name}")
            if agent.tools:
                lines.append("tools: " + ", ".join(t.name for t in agent.tools))
            if agent.handoffs:
                lines.append("handoffs: " + ", ".join(agent.handoffs))
        case SwitchNode():
            lines.append(f"switch {_expression(node.switch.on)}")
        case NoopNode():
            pass
        case FailNode():
            lines.append(f"fail: {_expression(node.fail)}")
        case SleepNode():
            lines.append(f"sleep {_expression(node.sleep)}")
        case SleepUntilNode():
            lines.append(f"sleep until {_expression(node.sleep_until)}")
        case _:
            assert_never(node)
    if node.when is not None:
        lines.append(f"when {_expression(node.when)}")
    if isinstance(node, TaskNode | WorkflowNode) and node.matrix is not None:
        lines.append("matrix" + (f" ({node.concurrency} at a time)" if node.concurrency
                                 else ""))
    elif isinstance(node, TaskNode | WorkflowNode) and node.for_each is not None:
        lines.append(_for_each(node.for_each, node.concurrency))
    if node.trigger != "all_success":
        lines.append(f"trigger: {node.trigger}")
    return lines


def loop_label(loop: PlanLoop) -> str:
    """``while <condition> (max N)``, with ``then continue`` when exhaustion is not an error."""
    bound = f"max {loop.max_iterations}"
    if loop.on_exhausted == "continue":
        bound += ", then continue"
    return f"while {_expression(loop.while_)} ({bound})"


def _edges(plan: Plan) -> list[tuple[str, str, str | None]]:
    """Every ``needs`` edge, labelled with the case when it leaves a switch."""
    edges: list[tuple[str, str, str | None]] = []
    for node in plan.nodes:
        cases = dict(plan.gates.get(node.id, ()))
        for need in node.needs:
            label = (cases[need] or "default") if need in cases else None
            edges.append((need, node.id, label))
    return edges


def _loops(plan: Plan) -> list[tuple[str, PlanLoop]]:
    return [(node.id, node.loop) for node in plan.nodes if node.loop is not None]


# --------------------------------------------------------------------------- Mermaid

# Mermaid reads ``#<name>;`` / ``#<number>;`` as a character reference. Every character that
# could end a label or start Mermaid syntax is written that way; ``#`` first so references stay
# intact.
_MERMAID_ESCAPES = {
    "#": "#35;",
    '"': "#quot;",
    "<": "#lt;",
    ">": "#gt;",
    "&": "#amp;",
    "|": "#124;",
    "{": "#123;",
    "}": "#125;",
    "`": "#96;",
}
_MERMAID_ESCAPE = re.compile("|".join(re.escape(c) for c in _MERMAID_ESCAPES))


def mermaid_text(text: str, *, escape_colon: bool = False) -> str:
    """Escape one line of label text for a quoted Mermaid label."""
    escaped = _MERMAID_ESCAPE.sub(lambda m: _MERMAID_ESCAPES[m.group(0)], text)
    return escaped.replace(":", "#58;") if escape_colon else escaped


def mermaid_label(lines: list[str], *, context: str = "") -> str:
    """A quoted Mermaid label; lines (and newlines inside them) become ``<br/>``.

    ``context`` is the rest of the line the label goes on (its node ids). Mermaid drops the
    last ``;`` of any line matching ``style.*:\\S*#.*;`` (its style-statement handling), which
    would break a character reference; so when ``style`` occurs on the line, ``:`` is escaped
    too, and the line cannot match.
    """
    raw = [part for line in lines for part in line.splitlines() or [""]]
    colon = "style" in context or any("style" in part for part in raw)
    return '"' + "<br/>".join(mermaid_text(p, escape_colon=colon) for p in raw) + '"'


def mermaid_id(node_id: str) -> str:
    """A Mermaid node id: prefixed (so ``end`` or ``graph`` cannot clash with keywords)."""
    safe = re.sub(r"[^A-Za-z0-9_]", lambda m: f"_{ord(m.group(0)):x}_", node_id)
    return f"n_{safe}"


def _mermaid_shape(kind: NodeKind) -> tuple[str, str]:
    match kind:
        case NodeKind.TASK:
            return "[", "]"
        case NodeKind.APPROVAL:
            return "{{", "}}"
        case NodeKind.WORKFLOW:
            return "[[", "]]"
        case NodeKind.AGENT:
            return "[/", "/]"
        case NodeKind.SWITCH:
            return "{", "}"
        case NodeKind.NOOP:
            return "((", "))"
        case NodeKind.FAIL:
            return "([", "])"
        case NodeKind.SLEEP | NodeKind.SLEEP_UNTIL:
            return "[(", ")]"
        case _:
            assert_never(kind)


def to_mermaid(plan: Plan) -> str:
    """The plan as a Mermaid flowchart (top to bottom), ending in a newline."""
    lines = ["---", f"title: {json.dumps(plan.name, ensure_ascii=False)}", "---",
             "flowchart TD"]
    for node in plan.nodes:
        opening, closing = _mermaid_shape(node.kind)
        node_id = mermaid_id(node.id)
        label = mermaid_label(node_lines(node), context=node_id)
        lines.append(f"    {node_id}{opening}{label}{closing}")
    for source, target, case in _edges(plan):
        if case is None:
            lines.append(f"    {mermaid_id(source)} --> {mermaid_id(target)}")
        else:
            label = mermaid_label([case], context=mermaid_id(source) + mermaid_id(target))
            lines.append(f"    {mermaid_id(source)} -->|{label}| {mermaid_id(target)}")
    for closer, loop in _loops(plan):
        source, target = mermaid_id(closer), mermaid_id(loop.to)
        label = mermaid_label([loop_label(loop)], context=source + target)
        lines.append(f"    {source} -.->|{label}| {target}")
    lines.extend(_mermaid_classes(plan))
    return "\n".join(lines) + "\n"


def _colours(kind: NodeKind) -> tuple[str, str] | None:
    """The fill and stroke of a kind drawn in colour (tasks keep the default)."""
    match kind:
        case NodeKind.TASK | NodeKind.AGENT:
            return None
        case NodeKind.APPROVAL:
            return _APPROVAL_FILL, _APPROVAL_STROKE
        case NodeKind.WORKFLOW:
            return _WORKFLOW_FILL, _WORKFLOW_STROKE
        case NodeKind.SWITCH:
            return _SWITCH_FILL, _SWITCH_STROKE
        case NodeKind.FAIL:
            return _FAIL_FILL, _FAIL_STROKE
        case NodeKind.NOOP | NodeKind.SLEEP | NodeKind.SLEEP_UNTIL:
            return None
        case _:
            assert_never(kind)


def _mermaid_classes(plan: Plan) -> list[str]:
    lines = []
    for kind in NodeKind:
        colours = _colours(kind)
        members = [mermaid_id(n.id) for n in plan.nodes if n.kind == kind]
        if colours is not None and members:
            fill, stroke = colours
            lines.append(f"    classDef {kind} fill:{fill},stroke:{stroke}")
            lines.append(f"    class {','.join(members)} {kind}")
    return lines


# --------------------------------------------------------------------------- DOT


def dot_string(text: str) -> str:
    """A DOT quoted string; newlines become ``\\n`` (centred line breaks in a label).

    Inside a quoted string ``"`` and ``\\`` are special (and backslash escapes such as ``\\l``,
    which doubling the backslash disables), and Graphviz decodes HTML entities such as
    ``&lt;``, so ``&`` is written ``&amp;``. ``{ } | < >`` matter only in record shapes and
    HTML labels, which are never used here.
    """
    escaped = text.replace("&", "&amp;").replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return f'"{escaped}"'


def _dot_attributes(attributes: dict[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in attributes.items())


def _dot_shape(kind: NodeKind) -> dict[str, str]:
    """The attributes that set a kind apart from the default (a task's rounded box)."""
    match kind:
        case NodeKind.TASK:
            return {}
        case NodeKind.AGENT:
            return {"shape": "ellipse"}
        case NodeKind.APPROVAL:
            return {"shape": "hexagon", "style": "filled",
                    "fillcolor": dot_string(_APPROVAL_FILL),
                    "color": dot_string(_APPROVAL_STROKE)}
        case NodeKind.WORKFLOW:
            return {"shape": "box3d", "style": "filled",
                    "fillcolor": dot_string(_WORKFLOW_FILL),
                    "color": dot_string(_WORKFLOW_STROKE)}
        case NodeKind.SWITCH:
            return {"shape": "diamond", "style": "filled",
                    "fillcolor": dot_string(_SWITCH_FILL), "color": dot_string(_SWITCH_STROKE)}
        case NodeKind.NOOP:
            return {"shape": "circle"}
        case NodeKind.SLEEP | NodeKind.SLEEP_UNTIL:
            return {"shape": "cylinder"}
        case NodeKind.FAIL:
            return {"shape": "octagon", "style": "filled",
                    "fillcolor": dot_string(_FAIL_FILL), "color": dot_string(_FAIL_STROKE)}
        case _:
            assert_never(kind)


def _dot_node(node: PlanNode) -> str:
    attributes = {"label": dot_string("\n".join(node_lines(node)))} | _dot_shape(node.kind)
    return f"  {dot_string(node.id)} [{_dot_attributes(attributes)}];"


def to_dot(plan: Plan) -> str:
    """The plan as a Graphviz ``digraph``, ending in a newline."""
    lines = [
        f"digraph {dot_string(plan.name)} {{",
        f"  graph [rankdir=TB, fontname=Helvetica, label={dot_string(plan.name)}, "
        "labelloc=t];",
        '  node [shape=box, style="rounded,filled", fillcolor='
        f'{dot_string(_TASK_FILL)}, fontname=Helvetica];',
        "  edge [fontname=Helvetica, fontsize=10];",
    ]
    lines.extend(_dot_node(node) for node in plan.nodes)
    for source, target, case in _edges(plan):
        label = "" if case is None else f" [label={dot_string(case)}]"
        lines.append(f"  {dot_string(source)} -> {dot_string(target)}{label};")
    for closer, loop in _loops(plan):
        attributes = {"style": "dashed", "constraint": "false",
                      "label": dot_string(loop_label(loop))}
        lines.append(f"  {dot_string(closer)} -> {dot_string(loop.to)} "
                     f"[{_dot_attributes(attributes)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
