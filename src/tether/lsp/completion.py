"""Completion: node ids, template paths, task names, and (YAML) the keys of the schema.

The context is read from the text before the cursor, so completion works in a document that
does not parse yet (the index of ids comes from its latest readable state):

- a template path (``inputs.``, ``nodes.<id>.output.``, ``item.``, ``run.``, ``secrets.``);
- a node id where the format takes one: ``needs``, ``.flow`` ``after``, switch cases and
  ``default``, ``loop.to`` / ``loop to``;
- a task name after ``task:`` (``.flow``: ``task <id> =``), from the project's task modules;
- a key of the workflow schema (the models ``tether schema`` is generated from), by the
  mapping the cursor is in.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from lsprotocol import types
from pydantic import BaseModel

from tether.dsl.document import (
    AgentSpec,
    ApprovalSpec,
    InputSpec,
    LoopSpec,
    NodeSpec,
    RetryPolicy,
    ScheduleSpec,
    SwitchSpec,
    WorkflowDoc,
)
from tether.lsp.analysis import Analysis
from tether.lsp.hover import node_at, task_summary
from tether.lsp.paths import ROOTS, Field, fields_after, path_before
from tether.lsp.positions import Lines
from tether.lsp.tasks import project_tasks

_YAML_NEEDS = re.compile(r"(?:^\s*(?:-\s+)?|[{,]\s*)(?:needs|default|handoffs)\s*:\s*"
                         r"(?:\[[^\]]*)?[A-Za-z0-9_-]*$"
                         r"|(?:^\s*|\bloop\s*:\s*\{(?:[^{}]*,)?\s*)to\s*:\s*[A-Za-z0-9_-]*$"
                         r"|\bcases\s*:\s*\{(?:[^{}]*,)?\s*[^\s:{},]+\s*:\s*(?:\[[^\]]*)?"
                         r"[A-Za-z0-9_-]*$")
_YAML_CASE = re.compile(r"^\s*[^\s:#]+\s*:\s*\[[^\]]*$|^\s*[^\s:#]+\s*:\s*[A-Za-z0-9_-]*$")
_YAML_ITEM = re.compile(r"^(\s*)-\s+[A-Za-z0-9_-]*$")
_FLOW_NEEDS = re.compile(r"(?:\bafter\s+(?:[A-Za-z0-9_-]+\s*,\s*)*|^\s*case\s+[^:]+:\s*"
                         r"(?:[A-Za-z0-9_-]+\s*,\s*)*|\bloop\s+to\s+|^\s*default\s*:?\s*"
                         r"(?:[A-Za-z0-9_-]+\s*,\s*)*)[A-Za-z0-9_-]*$")
_YAML_TASK = re.compile(r"^\s*(?:-\s+)?task\s*:\s*[\"']?[A-Za-z0-9_.]*$")
_FLOW_TASK = re.compile(r"^task\s+[A-Za-z0-9_-]+\s*=\s*[A-Za-z0-9_.]*$")
_YAML_KEY = re.compile(r"^(\s*)(?:-\s+)?[A-Za-z_]*$")
_KEY_LINE = re.compile(r"^(\s*)(?:-\s+)?([A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')\s*:")

_NODE_KEYS: dict[str, type[BaseModel]] = {
    "retry": RetryPolicy, "approval": ApprovalSpec, "agent": AgentSpec, "loop": LoopSpec,
    "switch": SwitchSpec,
}


def complete(analysis: Analysis, line: int, column: int) -> types.CompletionList:
    """The completions at the cursor (an empty list when nothing fits)."""
    before = analysis.lines.line(line)[:column]
    items = (_template(analysis, line, before) or _node_ids(analysis, line, before)
             or _tasks(analysis, before) or _keys(analysis, line, before))
    return types.CompletionList(is_incomplete=False, items=items)


def _item(field: Field, kind: types.CompletionItemKind) -> types.CompletionItem:
    return types.CompletionItem(label=field.name, kind=kind, detail=field.type,
                                documentation=field.doc)


def _template(analysis: Analysis, line: int, before: str) -> list[types.CompletionItem]:
    workflow = analysis.known
    parts = path_before(before, len(before))
    if workflow is None or parts is None or parts[0] not in ROOTS:
        in_template = before.rfind("{{") > before.rfind("}}")
        if in_template and re.search(r"(?:^|[^.\w])[A-Za-z_]*$", before):
            return [_item(Field(root, "template root"), types.CompletionItemKind.Module)
                    for root in ROOTS]
        return []
    if len(parts) < 2:
        return []
    reader = node_at(analysis, line)
    tasks = project_tasks(analysis.path.parent) if parts[0] == "nodes" else {}
    return [_item(f, types.CompletionItemKind.Field)
            for f in fields_after(parts[:-1], workflow, reader, tasks)]


def _node_ids(analysis: Analysis, line: int, before: str) -> list[types.CompletionItem]:
    workflow = analysis.known
    if workflow is None or not _wants_node_id(analysis, line, before):
        return []
    reader = node_at(analysis, line)
    return [_item(Field(node_id, str(spec.kind or "node"), spec.title),
                  types.CompletionItemKind.Reference)
            for node_id, spec in workflow.nodes.items() if node_id != reader]


def _wants_node_id(analysis: Analysis, line: int, before: str) -> bool:
    if analysis.syntax == "flow":
        return bool(_FLOW_NEEDS.search(before))
    if _YAML_NEEDS.search(before):
        return True
    owners = _yaml_owners(analysis.lines, line, len(before) - len(before.lstrip()) + 1)
    if _YAML_ITEM.match(before):
        return bool(owners) and (owners[-1] in ("needs", "default", "handoffs")
                                 or owners[-2:-1] == ["cases"])
    return bool(_YAML_CASE.match(before)) and owners[-1:] == ["cases"]


def _tasks(analysis: Analysis, before: str) -> list[types.CompletionItem]:
    pattern = _FLOW_TASK if analysis.syntax == "flow" else _YAML_TASK
    if not pattern.match(before):
        return []
    return [types.CompletionItem(label=name, kind=types.CompletionItemKind.Function,
                                 detail=info.signature,
                                 documentation=types.MarkupContent(
                                     kind=types.MarkupKind.Markdown, value=task_summary(info)))
            for name, info in sorted(project_tasks(analysis.path.parent).items())]


def _keys(analysis: Analysis, line: int, before: str) -> list[types.CompletionItem]:
    found = _YAML_KEY.match(before)
    if analysis.syntax != "yaml" or found is None:
        return []
    model = _model_at(_yaml_owners(analysis.lines, line, len(found.group(1)) + 1))
    if model is None:
        return []
    schema = _schema()
    properties = (schema if model is WorkflowDoc else schema["$defs"][model.__name__]).get(
        "properties", {})
    return [types.CompletionItem(label=key, kind=types.CompletionItemKind.Property,
                                 insert_text=f"{key}: ", detail=f"{model.__name__}.{key}",
                                 documentation=spec.get("description"))
            for key, spec in properties.items()]


@functools.cache
def _schema() -> dict[str, Any]:
    """The JSON Schema ``tether schema`` prints (made once)."""
    from tether.cli.authoring import workflow_schema

    return workflow_schema()


def _yaml_owners(lines: Lines, line: int, indent: int) -> list[str]:
    """The keys of the mappings enclosing a YAML line whose content starts at ``indent``."""
    owners: list[str] = []
    for index in range(line - 1, -1, -1):
        found = _KEY_LINE.match(lines.line(index))
        text = lines.line(index)
        if not text.strip() or text.lstrip().startswith("#") or found is None:
            continue
        depth = len(found.group(1))
        if depth < indent - 1:
            owners.insert(0, found.group(2).strip("\"'"))
            indent = depth + 1
            if depth == 0:
                break
    return owners


def _model_at(owners: list[str]) -> type[BaseModel] | None:
    """The model whose keys the mapping at ``owners`` takes."""
    if not owners:
        return WorkflowDoc
    if owners == ["schedule"]:
        return ScheduleSpec
    if owners[0] == "inputs" and len(owners) == 2:
        return InputSpec
    if owners[0] != "nodes" or len(owners) < 2:
        return None
    rest = owners[2:]
    if not rest:
        return NodeSpec
    if len(rest) == 1:
        return _NODE_KEYS.get(rest[0])
    if rest[:2] == ["approval", "form"] and len(rest) == 3:
        return InputSpec
    return None
