"""Template paths: what the name under or before the cursor reads, and what it holds.

A template path is ``inputs.<name>``, ``nodes.<id>.output.<key>`` (or ``nodes['<id>']``),
``item.<key>``, ``run.<field>`` or ``secrets.<NAME>``. The kinds of values come from the
workflow (input types, approval forms, agent output schemas, literal ``for_each`` lists) and
from the task source (a return type's fields, read with :mod:`ast`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tether.compiler.references import RUN_FIELDS
from tether.dsl.ast import Workflow
from tether.dsl.document import NodeSpec
from tether.lsp.tasks import TaskInfo
from tether.trigger import TRIGGER_FIELDS

# A dotted path ending at the cursor: `nodes.fetch.output.bo`, `nodes['build-x'].`
PATH_BEFORE = re.compile(r"((?:[A-Za-z_][A-Za-z0-9_]*|\[\s*['\"][A-Za-z0-9_-]*['\"]\s*\])"
                         r"(?:\s*(?:\.[A-Za-z0-9_]*|\[\s*['\"][A-Za-z0-9_-]*['\"]?\s*\]?))*)$")
_PART = re.compile(r"\.([A-Za-z0-9_]*)|\[\s*['\"]([A-Za-z0-9_-]*)['\"]?\s*\]?|"
                   r"^([A-Za-z_][A-Za-z0-9_]*)")
WORD = re.compile(r"[A-Za-z0-9_.\[\]'\"-]")


def split_path(text: str) -> list[str]:
    """The parts of a dotted path: ``nodes['a-b'].output.x`` -> ``[nodes, a-b, output, x]``."""
    parts = []
    for match in _PART.finditer(text.replace(" ", "")):
        parts.append(next(g for g in match.groups() if g is not None))
    return parts


def path_before(line: str, column: int) -> list[str] | None:
    """The template path that ends at ``column`` of ``line``, if one does."""
    found = PATH_BEFORE.search(line[:column])
    return split_path(found.group(1)) if found else None


def path_around(line: str, column: int) -> list[str] | None:
    """The template path the cursor is on (up to the end of the part under it)."""
    end = column
    while end < len(line) and (line[end].isalnum() or line[end] in "_-"):
        end += 1
    parts = path_before(line, end)
    return parts if parts and parts[0] in ROOTS else None


ROOTS = ("inputs", "nodes", "item", "run", "secrets", "trigger")
ROOT_DOCS = {
    "inputs": "the run's inputs",
    "nodes": "the nodes upstream, each with `output` and `status`",
    "item": "the current element of the node's `for_each` list (or matrix combination)",
    "run": "the run's own fields",
    "secrets": "the declared secrets, read from the environment when the node runs",
    "trigger": "what started the run: kind, actor, a webhook's payload and headers, a "
               "schedule's tick",
}


@dataclass(frozen=True)
class Field:
    """One name a path can continue with, and what it holds."""

    name: str
    type: str
    doc: str | None = None


def output_fields(node: NodeSpec, task: TaskInfo | None,
                  base: Path | None = None) -> list[Field]:
    """The keys of a node's output where something declares them (a sub-workflow's are
    the keys of its file's ``output`` mapping, read relative to ``base``)."""
    if node.workflow is not None and base is not None:
        return [Field(key, "sub-workflow output") for key in _sub_outputs(base / node.workflow)]
    if node.approval is not None and node.approval.form:
        return [Field(k, spec.type, spec.description) for k, spec in node.approval.form.items()]
    if node.agent is not None and isinstance(node.agent.output, dict):
        props = node.agent.output.get("properties")
        if isinstance(props, dict):
            return [Field(str(k), str(v.get("type", "any")) if isinstance(v, dict) else "any")
                    for k, v in props.items()]
    if task is not None:
        return [Field(name, kind) for name, kind in task.fields]
    return []


_outputs: dict[Path, tuple[float, tuple[str, ...]]] = {}


def _sub_outputs(path: Path) -> tuple[str, ...]:
    """The keys of the ``output`` mapping of a workflow file (cached by modification time;
    none when it cannot be read)."""
    from tether.dsl.loader import read_workflow

    try:
        mtime = path.stat().st_mtime
    except OSError:
        return ()
    cached = _outputs.get(path)
    if cached is None or cached[0] != mtime:
        child, _ = read_workflow(path)
        output = child.doc.output if child is not None else None
        cached = _outputs[path] = (mtime, tuple(map(str, output)) if isinstance(output, dict)
                                   else ())
    return cached[1]


def item_fields(node: NodeSpec) -> list[Field]:
    """The keys of ``item`` in a node with a literal ``for_each`` list or a ``matrix``."""
    if isinstance(node.for_each, list):
        keys: dict[str, str] = {}
        for element in node.for_each:
            if isinstance(element, dict):
                for key, value in element.items():
                    keys.setdefault(str(key), type(value).__name__)
        return [Field(k, v) for k, v in keys.items()]
    if node.matrix:
        return [Field(str(k), "matrix axis") for k in node.matrix if k not in
                ("include", "exclude")]
    return []


def fields_after(parts: list[str], workflow: Workflow, reader: str | None,
                 tasks: dict[str, TaskInfo]) -> list[Field]:
    """What may follow the complete ``parts`` of a path (``[nodes, fetch, output]`` -> keys)."""
    root, rest = parts[0], parts[1:]
    if root == "inputs" and not rest:
        return [Field(n, s.type, s.description) for n, s in workflow.inputs.items()]
    if root == "secrets" and not rest:
        return [Field(n, "secret") for n in workflow.doc.secrets or []]
    if root == "run" and not rest:
        return [Field(n, "run field") for n in RUN_FIELDS]
    if root == "trigger" and not rest:
        return [Field(n, "trigger field") for n in TRIGGER_FIELDS]
    if root == "item" and not rest and reader in workflow.nodes:
        return item_fields(workflow.nodes[reader])
    if root == "nodes" and not rest:
        return [Field(n, str(s.kind or "node")) for n, s in workflow.nodes.items()
                if n != reader]
    if root == "nodes" and len(rest) == 1 and rest[0] in workflow.nodes:
        return [Field("output", "the node's output"), Field("status", "the node's status")]
    if root == "nodes" and rest[1:] == ["output"] and rest[0] in workflow.nodes:
        node = workflow.nodes[rest[0]]
        base = workflow.location.parent if workflow.location is not None else None
        return output_fields(node, tasks.get(node.task or ""), base)
    return []


def describe(parts: list[str], workflow: Workflow, reader: str | None,
             tasks: dict[str, TaskInfo]) -> str | None:
    """The type of the value a complete path reads, when the workflow tells it."""
    if len(parts) == 1:
        names = fields_after(parts, workflow, reader, tasks)
        listed = ", ".join(f"`{f.name}`: {f.type}" for f in names) or "none declared"
        return f"`{parts[0]}`: {ROOT_DOCS[parts[0]]} ({listed})"
    if len(parts) < 2:
        return None
    for field in fields_after(parts[:-1], workflow, reader, tasks):
        if field.name == parts[-1]:
            text = f"`{'.'.join(parts)}`: {field.type}"
            return f"{text}\n\n{field.doc}" if field.doc else text
    return None
