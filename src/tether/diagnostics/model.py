"""Diagnostics: what every stage reports instead of raising.

A :class:`Diagnostic` has a stable code (see :mod:`tether.diagnostics.codes`), a severity, a
primary :class:`Span`, related spans (each edge of a cycle, the first of two duplicates), a
message and a help line. Stages collect diagnostics and report them all at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, NamedTuple

SeverityName = Literal["error", "warning"]


class Severity(StrEnum):
    """How bad a diagnostic is: errors fail a check, warnings fail it only with ``--strict``."""

    ERROR = "error"
    WARNING = "warning"


class Span(NamedTuple):
    """A place in a source file: 1-based line and column of its start and (inclusive) end.

    A named tuple: front ends create one per key and value, so it must be cheap.
    """

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    @classmethod
    def whole_file(cls, file: str) -> Span:
        """The span used when a problem concerns a whole file (line 1, column 1)."""
        return cls(file, 1, 1, 1, 1)


@dataclass(frozen=True)
class Related:
    """A secondary location that explains a diagnostic (rendered as a ``note``)."""

    span: Span
    message: str


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a workflow file."""

    code: str
    severity: Severity
    message: str
    span: Span
    related: tuple[Related, ...] = ()
    help: str | None = None
    node_id: str | None = field(default=None, compare=False)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.span.file, self.span.line, self.span.col, self.code, self.message)


def sort_diagnostics(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Order diagnostics by file, line, column, then code: the order every renderer uses."""
    unique: dict[tuple[object, ...], Diagnostic] = {}
    for diag in diagnostics:
        unique.setdefault((diag.sort_key(), diag.related, diag.help), diag)
    return sorted(unique.values(), key=Diagnostic.sort_key)
