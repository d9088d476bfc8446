"""Hover: a node's kind, needs and output; a task's signature and docstring (read from its
source, never imported); a template path's type; the explanation of a diagnostic's code, as
``tether explain`` prints it."""

from __future__ import annotations

import re

from lsprotocol import types

from tether.diagnostics.codes import lookup
from tether.lsp.analysis import Analysis
from tether.lsp.navigation import value_at
from tether.lsp.paths import describe, output_fields, path_around
from tether.lsp.positions import span_contains
from tether.lsp.tasks import TaskInfo, project_tasks

_CODE = re.compile(r"\b[EWC]\d{3}\b")


def hover(analysis: Analysis, line: int, column: int) -> types.Hover | None:
    """What the editor shows for the cursor's place, in Markdown (None: nothing)."""
    sections = [s for s in (_about_name(analysis, line, column),) if s]
    sections += _explanations(analysis, line, column)
    if not sections:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                                    value="\n\n---\n\n".join(sections)))


def _about_name(analysis: Analysis, line: int, column: int) -> str | None:
    workflow = analysis.workflow
    if workflow is None:
        return None
    tasks = project_tasks(analysis.path.parent)
    occurrence = analysis.occurrence_at(line, column)
    text = analysis.lines.line(line)
    parts = path_around(text, column)
    if parts is not None and len(parts) > 2 and parts[0] == "nodes":
        return describe(parts, workflow, node_at(analysis, line), tasks)
    if occurrence is not None:
        return node_summary(analysis, occurrence.node_id, tasks)
    found = value_at(analysis, line, column, "task")
    if found is not None:
        info = tasks.get(workflow.nodes[found[0]].task or "")
        return task_summary(info) if info is not None else None
    if parts is not None:
        return describe(parts, workflow, node_at(analysis, line), tasks)
    return None


def node_at(analysis: Analysis, line: int) -> str | None:
    """The node whose text holds 0-based ``line`` (in the last readable text)."""
    workflow = analysis.known
    if workflow is None:
        return None
    best: tuple[int, str] | None = None
    for node_id in workflow.nodes:
        key = workflow.source.keys.get(("nodes", node_id))
        value = workflow.source.values.get(("nodes", node_id))
        if key is None or value is None:
            continue
        start = min(key.line, value.line)
        # a YAML block ends at column 1 of the line after it: that line is not the node's
        end = value.end_line - 1 if value.end_col <= 1 < value.end_line else value.end_line
        if start <= line + 1 <= max(end, key.line) and (best is None or start > best[0]):
            best = (start, node_id)
    return best[1] if best is not None else None


def node_summary(analysis: Analysis, node_id: str, tasks: dict[str, TaskInfo]) -> str:
    """A node's kind, what it runs, what it needs and the keys of its output."""
    assert analysis.workflow is not None
    node = analysis.workflow.nodes[node_id]
    kind = str(node.kind) if node.kind is not None else "node"
    lines = [f"**{node_id}**: {kind} node"]
    if node.task:
        lines.append(f"task `{node.task}`")
    if node.workflow:
        lines.append(f"workflow `{node.workflow}`")
    if node.title:
        lines.append(f"title: {node.title}")
    lines.append("needs: " + (", ".join(f"`{n}`" for n in node.needs) if node.needs
                              else "nothing"))
    location = analysis.workflow.location
    fields = output_fields(node, tasks.get(node.task or ""),
                           location.parent if location is not None else None)
    if fields:
        lines.append("output: " + ", ".join(f"`{f.name}`: {f.type}" for f in fields))
    return "  \n".join(lines)


def task_summary(info: TaskInfo) -> str:
    """A task's signature (as a Python block), where it is, and its docstring."""
    text = f"```python\n{info.signature}\n```\ntask `{info.name}` ({info.path.name}:{info.line})"
    return f"{text}\n\n{info.doc}" if info.doc else text


def _explanations(analysis: Analysis, line: int, column: int) -> list[str]:
    codes = [d.code for d in analysis.diagnostics
             if d.span.file == analysis.file and span_contains(d.span, line, column)]
    text = analysis.lines.line(line)
    for match in _CODE.finditer(text):
        if match.start() <= column <= match.end():
            codes.append(match.group())
    found = []
    for code in dict.fromkeys(codes):
        known = lookup(code)
        if known is not None:
            found.append(f"**{known.code} ({known.slug})**: {known.title}\n\n"
                         f"{known.explanation}")
    return found
