"""The AST handed from the front ends to the compiler.

A :class:`Workflow` is the validated document (frozen pydantic models, equal for a ``.yaml``
file and its ``.flow`` twin) together with where it came from and the span of every key and
value. Spans are looked up by path (``workflow.span("nodes", "refund", "with")``) so that the
document models stay the exact schema of the format.

A workflow read for a check alone (``read_workflow(..., light=True)``) holds the same
document made of the light classes of :mod:`tether.dsl.document_light` (validated without
pydantic): the same attributes, typed here as the models they stand in for. The compiler
imports the models only for type checking, so its checks read either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Literal

from tether.diagnostics import Diagnostic, Span
from tether.dsl.source import SourceMap

if TYPE_CHECKING:
    from tether.dsl.document import InputSpec, NodeSpec, WorkflowDoc

Syntax = Literal["yaml", "flow"]


@dataclass(frozen=True)
class Workflow:
    """A parsed, schema-valid workflow file with its source positions."""

    doc: WorkflowDoc
    source: SourceMap
    syntax: Syntax
    location: FsPath | None = None
    broken_nodes: frozenset[str] = frozenset()
    broken_inputs: frozenset[str] = frozenset()
    broken_reads: frozenset[str] = frozenset()
    """Inputs mentioned by the templates of nodes set aside for schema errors."""
    warnings: tuple[Diagnostic, ...] = field(default=(), compare=False)
    valid: bool = field(default=True, compare=False)
    """False when reading the file found errors: the document may be partial, and no plan is
    built from it (the compiler still checks it, to report everything in one pass)."""

    @property
    def name(self) -> str:
        return self.doc.name

    @property
    def file(self) -> str:
        """The file name shown in diagnostics."""
        return self.source.file

    @property
    def nodes(self) -> dict[str, NodeSpec]:
        return self.doc.nodes

    @property
    def inputs(self) -> dict[str, InputSpec]:
        return self.doc.inputs or {}

    def span(self, *path: str | int) -> Span:
        """The span of the value at ``path`` (or its nearest recorded ancestor)."""
        return self.source.value(tuple(path))

    def key_span(self, *path: str | int) -> Span:
        """The span of the key that introduces ``path``."""
        return self.source.key(tuple(path))
