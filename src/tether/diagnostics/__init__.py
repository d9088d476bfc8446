"""Diagnostics shared by every stage: the model, the code registry and the renderers."""

from __future__ import annotations

from tether.diagnostics.codes import CODES, Code, lookup
from tether.diagnostics.model import Diagnostic, Related, Severity, Span, sort_diagnostics

__all__ = [
    "CODES",
    "Code",
    "Diagnostic",
    "Related",
    "Severity",
    "Span",
    "lookup",
    "make",
    "sort_diagnostics",
]


def make(
    code: str,
    message: str,
    span: Span,
    *,
    related: tuple[Related, ...] | list[Related] = (),
    help: str | None = None,
    node_id: str | None = None,
) -> Diagnostic:
    """Build a diagnostic whose severity comes from the code registry."""
    return Diagnostic(
        code=code,
        severity=CODES[code].severity,
        message=message,
        span=span,
        related=tuple(related),
        help=help,
        node_id=node_id,
    )
