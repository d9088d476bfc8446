"""The state one compilation shares between its checks: the workflow and its diagnostics."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tether.diagnostics import Diagnostic, Related, Span, make
from tether.dsl.ast import Workflow
from tether.dsl.source import Path

if TYPE_CHECKING:
    from tether.dsl.document import NodeSpec
    from tether.dsl.expressions import Reference

_LITERAL = re.compile(r"'[^'\\]*(?:\\.[^'\\]*)*'" + r'|"[^"\\]*(?:\\.[^"\\]*)*"')
_ESCAPE = re.compile(r"\\(?:x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)")


def literal_ranges(text: str) -> list[tuple[int, int]]:
    """Where the quoted strings inside the ``{{ }}`` of ``text`` are (start, end)."""
    ranges: list[tuple[int, int]] = []
    for block in re.finditer(r"\{\{.*?\}\}|\{%.*?%\}", text, re.DOTALL):
        for literal in _LITERAL.finditer(text, block.start(), block.end()):
            ranges.append((literal.start(), literal.end()))
    return ranges


def find_reference(text: str, ref: Reference) -> tuple[int, int] | None:
    """Offset and length of ``ref`` in ``text`` (outside string literals), as precisely as
    the text allows: the root and up to two attributes, dotted or subscripted."""
    literals = literal_ranges(text)
    for depth in range(min(len(ref.attrs), 2), -1, -1):
        pattern = r"(?<![\w.])" + re.escape(ref.root)
        for attr in ref.attrs[:depth]:
            pattern += r"\s*(?:\.\s*" + re.escape(attr) + r"(?![\w])|\[\s*(['\"])" + \
                re.escape(attr) + r"\1\s*\])"
        pattern += "" if depth else r"(?!\w)"
        for match in re.finditer(pattern, text):
            if not any(a <= match.start() < b for a, b in literals):
                return match.start(), match.end() - match.start()
    return None


class Located:
    """Where a template reads a name, worked out (line and column) only when a diagnostic
    needs it: most reads are fine, and locating each one cost more than checking it."""

    __slots__ = ("_ctx", "_path", "_ref", "_span", "_text")

    def __init__(self, ctx: Context, path: Path, text: str, ref: Reference) -> None:
        self._ctx, self._path, self._text, self._ref = ctx, path, text, ref
        self._span: Span | None = None

    @property
    def span(self) -> Span:
        if self._span is None:
            self._span = self._ctx.locate_name(self._path, self._text, self._ref)
        return self._span


Where = Span | Located
"""A place to report at: a span, or a name read whose span is computed when reported."""


@dataclass
class Context:
    """One workflow being compiled, and the diagnostics found so far."""

    workflow: Workflow
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def report(self, code: str, message: str, span: Where, *,
               related: list[Related] | None = None, help: str | None = None,
               node_id: str | None = None) -> None:
        if isinstance(span, Located):
            span = span.span
        self.diagnostics.append(
            make(code, message, span, related=related or (), help=help, node_id=node_id)
        )

    def span(self, *path: str | int) -> Span:
        return self.workflow.span(*path)

    def key_span(self, *path: str | int) -> Span:
        return self.workflow.key_span(*path)

    def locate(self, path: Path, text: str, needle: str) -> Span:
        """The span of ``needle`` inside the string value at ``path``, as precisely as possible.

        A single-line scalar maps string offsets to columns (through an opening quote and the
        escapes of the quoting style); a multi-line one points at the value's start.
        """
        offset = text.find(needle) if needle else -1
        return self.at_offset(path, text, offset, len(needle))

    def locate_name(self, path: Path, text: str, ref: Reference) -> Span:
        """The span of the name ``ref`` reads, never inside a quoted string of the template."""
        found = find_reference(text, ref)
        if found is None:
            return self.workflow.source.value(path)
        return self.at_offset(path, text, *found)

    def name_at(self, path: Path, text: str, ref: Reference) -> Located:
        """The place of the name ``ref`` reads, located only if a diagnostic is reported."""
        return Located(self, path, text, ref)

    def at_offset(self, path: Path, text: str, offset: int, length: int) -> Span:
        """The span of ``text[offset:offset + length]`` in the source of the value at ``path``."""
        span = self.workflow.source.value(path)
        if offset < 0 or span.end_line not in (span.line, 0):
            return span
        line = self.workflow.source.line(span.line)
        start = span.col - 1
        quote = line[start] if start < len(line) and line[start] in "\"'" else ""
        columns = _columns(line, start + len(quote), quote, offset + length)
        if columns is None:
            return span
        first, last = columns[offset] + 1, columns[offset + length - 1] + 1 if length else \
            columns[offset] + 1
        return Span(span.file, span.line, first, span.line, last)

    @functools.cached_property
    def called(self) -> dict[str, list[str]]:
        """Agents that run only when another agent calls them, with their callers."""
        from tether.compiler.agents import called_agents

        return called_agents(self.workflow)

    @functools.cached_property
    def graph_nodes(self) -> dict[str, NodeSpec]:
        """The nodes of the graph: every node but the agents that run only when called."""
        called = self.called
        nodes = self.workflow.nodes
        return {k: v for k, v in nodes.items() if k not in called} if called else nodes

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diagnostics)


def _columns(line: str, start: int, quote: str, count: int) -> list[int] | None:
    """The source column (0-based) of each of the first ``count`` characters of a scalar
    whose text starts at ``line[start]``, quoted with ``quote`` (``"``, ``'`` or none)."""
    columns: list[int] = []
    position = start
    while len(columns) < count + 1 and position < len(line):
        if quote == '"' and line[position] == "\\":
            escape = _ESCAPE.match(line, position)
            width = escape.end() - position if escape else 2
        elif quote == "'" and line.startswith("''", position):
            width = 2
        elif quote and line[position] == quote:
            break
        else:
            width = 1
        columns.append(position)
        position += width
    columns.append(position)
    return columns if len(columns) > count else None
