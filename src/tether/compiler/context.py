"""The state one compilation shares between its checks: the workflow and its diagnostics."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from tether.diagnostics import Diagnostic, Related, Span, make
from tether.dsl.ast import Workflow
from tether.dsl.document import NodeSpec
from tether.dsl.source import Path


@dataclass
class Context:
    """One workflow being compiled, and the diagnostics found so far."""

    workflow: Workflow
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def report(self, code: str, message: str, span: Span, *, related: list[Related] | None = None,
               help: str | None = None, node_id: str | None = None) -> None:
        self.diagnostics.append(
            make(code, message, span, related=related or (), help=help, node_id=node_id)
        )

    def span(self, *path: str | int) -> Span:
        return self.workflow.span(*path)

    def key_span(self, *path: str | int) -> Span:
        return self.workflow.key_span(*path)

    def locate(self, path: Path, text: str, needle: str) -> Span:
        """The span of ``needle`` inside the string value at ``path``, as precisely as possible.

        A single-line scalar maps string offsets to columns (skipping an opening quote); a
        multi-line one points at the value's start.
        """
        span = self.workflow.source.value(path)
        offset = text.find(needle) if needle else -1
        if offset < 0 or span.end_line not in (span.line, 0):
            return span
        line = self.workflow.source.line(span.line)
        start = span.col - 1
        quoted = start < len(line) and line[start] in "\"'"
        prefix = text[:offset]
        if quoted and ("\\" in prefix or "'" in prefix):
            return span
        col = span.col + (1 if quoted else 0) + offset
        return Span(span.file, span.line, col, span.line, col + len(needle) - 1)

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
