"""One document's analysis: what ``tether check`` reports, and an index of its node ids.

The server keeps the latest :class:`Analysis` of every open document. A document whose text
has not changed is not checked again (the analysis is looked up by its text), and the index of
ids is built only when a feature asks for it. Checking itself is the compiler's: the same
front end (:func:`~tether.dsl.loader.workflow_from_text`) and the same
:class:`~tether.compiler.compile.Compiler` checks as ``tether check``, so the server reports
exactly what the command does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path

from tether.compiler.compile import Compiler
from tether.diagnostics import Diagnostic, Span, sort_diagnostics
from tether.dsl.ast import Syntax, Workflow
from tether.dsl.loader import decode, syntax_of, workflow_from_text
from tether.gc_pause import paused_gc
from tether.lsp.positions import Lines

# `nodes.<id>` and `nodes['<id>']` in a template; the id is group 1 or 2.
NODE_READ = re.compile(r"\bnodes\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)\b|\[\s*['\"]"
                       r"([A-Za-z][A-Za-z0-9_-]*)['\"]\s*\])")


class Role(StrEnum):
    """How a place in a document names a node."""

    DECLARATION = "declaration"
    NEED = "need"  # needs / .flow `after`, switch cases, loop.to, handoffs, tools
    TEMPLATE = "template"  # nodes.<id> in a template


@dataclass(frozen=True)
class Occurrence:
    """One place a node id is written: the span covers the id's characters exactly."""

    node_id: str
    span: Span
    role: Role


@dataclass
class Analysis:
    """A document's text, its workflow (None when unreadable) and its diagnostics."""

    path: Path
    text: str
    syntax: Syntax
    workflow: Workflow | None
    diagnostics: list[Diagnostic]
    known: Workflow | None = None
    """The workflow of this text or, when it cannot be read (an edit half typed), of the
    last text that could: completion offers its names."""
    lines: Lines = field(init=False)

    def __post_init__(self) -> None:
        self.lines = Lines.of(self.text)
        if self.known is None:
            self.known = self.workflow

    @property
    def file(self) -> str:
        """The file name diagnostics carry (the absolute path, as ``tether check PATH``)."""
        return str(self.path)

    @cached_property
    def occurrences(self) -> list[Occurrence]:
        """Every place a node id is declared or named, in document order."""
        if self.workflow is None:
            return []
        found = _declarations(self.workflow, self.lines) + _named(self.workflow, self.lines)
        found += _template_reads(self.workflow, self.lines)
        unique = {(o.span.line, o.span.col): o for o in found}
        return sorted(unique.values(), key=lambda o: (o.span.line, o.span.col))

    def occurrence_at(self, line: int, column: int) -> Occurrence | None:
        """The occurrence under 0-based ``line``/``column`` (its end included, for a cursor
        just after the id)."""
        for occurrence in self.occurrences:
            span = occurrence.span
            if span.line == line + 1 and span.col - 1 <= column <= span.end_col:
                return occurrence
        return None

    def declaration(self, node_id: str) -> Span | None:
        """Where ``node_id`` is declared, if it is."""
        for occurrence in self.occurrences:
            if occurrence.node_id == node_id and occurrence.role is Role.DECLARATION:
                return occurrence.span
        return None


def analyse(text: str, path: Path, syntax: Syntax | None = None) -> Analysis:
    """Check ``text`` as the content of ``path``: every diagnostic ``tether check`` reports.

    A YAML text that is not a workflow (its first key is not ``tether:``) is not checked: an
    editor opens every YAML file of a project through the server.
    """
    syntax = syntax or syntax_of(path)
    file = str(path)
    if syntax is None or (syntax == "yaml" and not starts_with_tether(text)):
        # docker-compose.yml, a CI file, a plain-text buffer: not ours to judge
        return Analysis(path, text, syntax or "yaml", None, [])
    decoded, problems = decode(text.encode("utf-8", "surrogatepass"), file)
    if decoded is None:
        return Analysis(path, text, syntax, None, problems)
    with paused_gc():
        workflow, diagnostics = workflow_from_text(decoded, file, syntax, location=path)
        if workflow is not None:
            _, more = Compiler().compile_workflow(workflow, build=False)
            diagnostics = diagnostics + more
    return Analysis(path, text, syntax, workflow, sort_diagnostics(diagnostics))


def starts_with_tether(text: str) -> bool:
    """Whether YAML text is a workflow: its first key is ``tether:``, the rule by which
    ``tether check DIR`` (and ``--skip-non-workflows``) tells workflows from other YAML."""
    for line in text[:65536].splitlines():
        stripped = line.strip().removeprefix("\ufeff")
        if not stripped or stripped.startswith("#") or stripped == "---":
            continue
        return stripped.startswith("tether:")
    return False


class Documents:
    """The latest analysis of each open document, by URI; unchanged text is not re-checked."""

    def __init__(self) -> None:
        self._latest: dict[str, Analysis] = {}

    def update(self, uri: str, path: Path, text: str) -> tuple[Analysis, bool]:
        """The analysis of ``text``, and whether it was computed afresh."""
        current = self._latest.get(uri)
        if current is not None and current.text == text and current.path == path:
            return current, False
        analysis = analyse(text, path)
        if analysis.workflow is None and current is not None:
            analysis.known = current.known
        self._latest[uri] = analysis
        return analysis, True

    def get(self, uri: str) -> Analysis | None:
        """The latest analysis of ``uri``, if any."""
        return self._latest.get(uri)

    def close(self, uri: str) -> None:
        """Forget ``uri`` (its next update is checked afresh)."""
        self._latest.pop(uri, None)

    def all(self) -> list[tuple[str, Analysis]]:
        """Every (URI, analysis) known."""
        return list(self._latest.items())


# --------------------------------------------------------------------------- the index


def _declarations(workflow: Workflow, lines: Lines) -> list[Occurrence]:
    found = []
    for node_id in workflow.nodes:
        span = workflow.source.keys.get(("nodes", node_id))
        narrowed = narrow(lines, span, node_id) if span is not None else None
        if narrowed is not None:
            found.append(Occurrence(node_id, narrowed, Role.DECLARATION))
    return found


def _names_a_node(path: tuple[str | int, ...]) -> bool:
    """Whether the value at ``path`` (under ``nodes.<id>``) is a node id by the format."""
    rest = path[2:]
    return ((rest[:1] == ("needs",) and len(rest) <= 2)
            or (rest[:2] == ("switch", "cases") and len(rest) == 4)
            or (rest[:2] == ("switch", "default") and len(rest) <= 3)
            or rest == ("loop", "to")
            or (rest[:2] in (("agent", "handoffs"), ("agent", "tools")) and len(rest) == 3))


def narrow(lines: Lines, span: Span, word: str) -> Span | None:
    """The span of ``word`` (as a whole word) inside ``span``, if it is there."""
    pattern = re.compile(rf"(?<![A-Za-z0-9_-]){re.escape(word)}(?![A-Za-z0-9_-])")
    for line, start, text in lines.pieces(span):
        found = pattern.search(text)
        if found:
            col = start + found.start() + 1
            return Span(span.file, line + 1, col, line + 1, col + len(word) - 1)
    return None


def _named(workflow: Workflow, lines: Lines) -> list[Occurrence]:
    from tether.dsl.document import dump_document

    data = dump_document(workflow.doc)
    found = []
    for path, span in workflow.source.values.items():
        if len(path) < 3 or path[0] != "nodes" or not _names_a_node(path):
            continue
        word = _value_at(data, path)
        if isinstance(word, list) and len(word) == 1 and (*path, 0) not in workflow.source.values:
            word = word[0]  # the short form `needs: a` of `needs: [a]`
        if isinstance(word, str) and word in workflow.nodes:
            narrowed = narrow(lines, span, word)
            if narrowed is not None:
                found.append(Occurrence(word, narrowed, Role.NEED))
    return found


def _value_at(data: object, path: tuple[str | int, ...]) -> object:
    for part in path:
        inside_list = isinstance(data, list) and isinstance(part, int) and part < len(data)
        if (isinstance(data, dict) and part in data) or inside_list:
            data = data[part]  # type: ignore[index]
        else:
            return None
    return data


def _leaves(workflow: Workflow) -> list[tuple[tuple[str | int, ...], Span]]:
    """Spans of the values under ``nodes`` and ``output`` that hold no other value."""
    values = workflow.source.values
    parents = {path[:-1] for path in values}
    return [(path, span) for path, span in values.items()
            if path[:1] in (("nodes",), ("output",)) and path not in parents]


def _template_reads(workflow: Workflow, lines: Lines) -> list[Occurrence]:
    found = []
    for _, span in _leaves(workflow):
        for line, start, text in lines.pieces(span):
            for match in NODE_READ.finditer(text):
                group = 1 if match.group(1) is not None else 2
                node_id = match.group(group)
                if node_id not in workflow.nodes:
                    continue
                col = start + match.start(group) + 1
                found.append(Occurrence(node_id, Span(span.file, line + 1, col, line + 1,
                                                      col + len(node_id) - 1), Role.TEMPLATE))
    return found
