"""Go to definition, find references, rename, and the outline of a document.

Node ids are found through the document's index (:attr:`Analysis.occurrences`): declarations,
the ids of ``needs`` (``.flow``: ``after``), switch cases, ``loop.to``, handoffs and tools,
and ``nodes.<id>`` / ``nodes['<id>']`` in templates. A rename edits all of them, so the
renamed file compiles to the plan a hand-renamed file gives.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from tether.diagnostics import Span
from tether.dsl.document import NODE_ID_RE
from tether.errors import UsageError
from tether.lsp.analysis import Analysis, Occurrence, Role
from tether.lsp.positions import span_contains
from tether.lsp.tasks import project_tasks

_IDENTIFIER_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class RenameRefused(UsageError):
    """A rename the server will not make (an invalid or taken id, nothing under the cursor)."""


def value_at(analysis: Analysis, line: int, column: int, key: str) -> tuple[str, Span] | None:
    """The node whose ``key`` value (``task``, ``workflow``) is under the cursor."""
    workflow = analysis.workflow
    if workflow is None:
        return None
    for node_id in workflow.nodes:
        span = workflow.source.values.get(("nodes", node_id, key))
        if span is not None and span_contains(span, line, column):
            return node_id, span
    return None


def _location(analysis: Analysis, uri: str, span: Span) -> types.Location:
    return types.Location(uri=uri, range=analysis.lines.span_range(span))


def definition(uri: str, analysis: Analysis, line: int,
               column: int) -> list[types.Location]:
    """Where the id, task or sub-workflow under the cursor is defined."""
    occurrence = analysis.occurrence_at(line, column)
    if occurrence is not None:
        span = analysis.declaration(occurrence.node_id)
        return [_location(analysis, uri, span)] if span is not None else []
    workflow = analysis.workflow
    found = value_at(analysis, line, column, "task")
    if found is not None and workflow is not None:
        name = workflow.nodes[found[0]].task or ""
        info = project_tasks(analysis.path.parent).get(name)
        if info is None:
            return []
        place = types.Position(line=info.line - 1, character=info.col - 1)
        return [types.Location(uri=info.path.resolve().as_uri(),
                               range=types.Range(start=place, end=place))]
    found = value_at(analysis, line, column, "workflow")
    if found is not None and workflow is not None:
        target = analysis.path.parent / (workflow.nodes[found[0]].workflow or "")
        if target.is_file():
            start = types.Position(line=0, character=0)
            return [types.Location(uri=target.resolve().as_uri(),
                                   range=types.Range(start=start, end=start))]
    return []


def references(uri: str, analysis: Analysis, line: int, column: int,
               include_declaration: bool) -> list[types.Location]:
    """Every place the id under the cursor is written."""
    occurrence = analysis.occurrence_at(line, column)
    if occurrence is None:
        return []
    return [_location(analysis, uri, o.span) for o in analysis.occurrences
            if o.node_id == occurrence.node_id
            and (include_declaration or o.role is not Role.DECLARATION)]


def prepare_rename(analysis: Analysis, line: int, column: int) -> types.Range | None:
    """The range of the id a rename at the cursor would change."""
    occurrence = analysis.occurrence_at(line, column)
    return analysis.lines.span_range(occurrence.span) if occurrence is not None else None


def rename(uri: str, analysis: Analysis, line: int, column: int,
           new_name: str) -> types.WorkspaceEdit:
    """The edits renaming the node id under the cursor to ``new_name`` everywhere."""
    occurrence = analysis.occurrence_at(line, column)
    if occurrence is None:
        raise RenameRefused("there is no node id here to rename")
    if not NODE_ID_RE.match(new_name):
        raise RenameRefused(f"`{new_name}` is not a valid node id (a letter, then letters, "
                            "digits, `_` or `-`)")
    workflow = analysis.workflow
    if workflow is not None and new_name in workflow.nodes and new_name != occurrence.node_id:
        raise RenameRefused(f"a node `{new_name}` already exists")
    edits = [_edit(analysis, o, new_name) for o in analysis.occurrences
             if o.node_id == occurrence.node_id]
    return types.WorkspaceEdit(changes={uri: edits})


def _edit(analysis: Analysis, occurrence: Occurrence, new_name: str) -> types.TextEdit:
    span = occurrence.span
    dotted = occurrence.role is Role.TEMPLATE and _after_dot(analysis, span)
    if dotted and not set(new_name) <= _IDENTIFIER_CHARS:
        # `nodes.old` cannot spell `new-name`: write the subscript form instead
        line = analysis.lines.line(span.line - 1)
        dot = line.rindex(".", 0, span.col - 1)
        start = Span(span.file, span.line, dot + 1, span.end_line, span.end_col)
        return types.TextEdit(range=analysis.lines.span_range(start),
                              new_text=f"['{new_name}']")
    return types.TextEdit(range=analysis.lines.span_range(span), new_text=new_name)


def _after_dot(analysis: Analysis, span: Span) -> bool:
    before = analysis.lines.line(span.line - 1)[:span.col - 1].rstrip()
    return before.endswith(".")


def symbols(analysis: Analysis) -> list[types.DocumentSymbol]:
    """The outline: inputs, then each node with its kind and what it needs."""
    workflow = analysis.workflow
    if workflow is None:
        return []
    result = []
    for name, spec in workflow.inputs.items():
        result.append(_symbol(analysis, ("inputs", name), name, spec.type,
                              types.SymbolKind.Variable))
    for node_id, node in workflow.nodes.items():
        kind = str(node.kind) if node.kind is not None else "node"
        detail = f"{kind} {node.task}" if node.task else kind
        if node.needs:
            detail += f" (needs {', '.join(node.needs)})"
        result.append(_symbol(analysis, ("nodes", node_id), node_id, detail,
                              types.SymbolKind.Function))
    return result


def _symbol(analysis: Analysis, path: tuple[str, str], name: str, detail: str,
            kind: types.SymbolKind) -> types.DocumentSymbol:
    source = analysis.workflow.source if analysis.workflow is not None else None
    key = source.key(path) if source is not None else Span.whole_file(analysis.file)
    value = source.value(path) if source is not None else key
    start = min((key.line, key.col), (value.line, value.col))
    end = max((key.end_line, key.end_col), (value.end_line, value.end_col))
    whole = Span(key.file, *start, *end)
    return types.DocumentSymbol(name=name, detail=detail, kind=kind,
                                range=analysis.lines.span_range(whole),
                                selection_range=analysis.lines.span_range(key))


def file_uri(path: Path) -> str:
    """The URI of a file."""
    return path.resolve().as_uri()
