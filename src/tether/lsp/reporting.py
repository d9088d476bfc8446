"""Diagnostics for the editor: tether's diagnostics as LSP ones, and their quick fixes.

A diagnostic keeps its code, message and range; its related notes become
``relatedInformation``; its help line is appended to the message on a line of its own
(``help: ...``), as ``tether check`` prints it below the message. A did-you-mean help whose
fix is a replacement of the misspelt name becomes a quick-fix code action.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from lsprotocol import types

from tether.diagnostics import Diagnostic, Severity, Span
from tether.lsp.analysis import Analysis, narrow
from tether.lsp.positions import Lines

SOURCE = "tether"
HELP_PREFIX = "\nhelp: "
_SUGGESTION = re.compile(r"^did you mean `([^`]+)`\?")
_QUOTED = re.compile(r"`([^`]+)`")


def uri_of(file: str, base: Path) -> str:
    """The URI of a file named in a diagnostic (relative names are relative to ``base``)."""
    path = Path(file)
    return (path if path.is_absolute() else base / path).resolve().as_uri()


def fix_for(diag: Diagnostic, lines: Lines) -> tuple[Span, str] | None:
    """The replacement a did-you-mean help proposes: the misspelt name's span and the name.

    The misspelt name is the quoted word of the message that is written in the span and is
    closest to the suggestion; without one, there is no fix (the help is only advice).
    """
    found = _SUGGESTION.match(diag.help or "")
    if found is None:
        return None
    wanted = found.group(1)
    candidates = []
    for word in _QUOTED.findall(diag.message):
        place = narrow(lines, diag.span, word) if word != wanted else None
        if place is not None:
            ratio = difflib.SequenceMatcher(None, word, wanted).ratio()
            candidates.append((ratio, place))
    if not candidates:
        return None
    return max(candidates, key=lambda c: c[0])[1], wanted


def to_lsp(diag: Diagnostic, analysis: Analysis) -> types.Diagnostic:
    """One tether diagnostic as the editor shows it."""
    base = analysis.path.parent
    related = [
        types.DiagnosticRelatedInformation(
            location=types.Location(uri=uri_of(note.span.file, base),
                                    range=_range_in(note.span, analysis)),
            message=note.message)
        for note in diag.related
    ]
    data: dict[str, Any] = {}
    fix = fix_for(diag, analysis.lines)
    if fix is not None:
        data = {"fix": {"line": fix[0].line, "col": fix[0].col, "end_col": fix[0].end_col,
                        "text": fix[1]}}
    message = diag.message if diag.help is None else f"{diag.message}{HELP_PREFIX}{diag.help}"
    severity = (types.DiagnosticSeverity.Error if diag.severity is Severity.ERROR
                else types.DiagnosticSeverity.Warning)
    return types.Diagnostic(range=analysis.lines.span_range(diag.span), message=message,
                            severity=severity, code=diag.code, source=SOURCE,
                            related_information=related or None, data=data or None)


def _range_in(span: Span, analysis: Analysis) -> types.Range:
    """A span's range: in this document with its lines; in another file, read from disk."""
    if span.file == analysis.file:
        return analysis.lines.span_range(span)
    try:
        path = Path(span.file)
        path = path if path.is_absolute() else analysis.path.parent / path
        lines = Lines.of(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        lines = Lines(())
    return lines.span_range(span)


def diagnostics_of(analysis: Analysis) -> list[types.Diagnostic]:
    """Every diagnostic of a document, in ``tether check``'s order."""
    return [to_lsp(diag, analysis) for diag in analysis.diagnostics]


def quick_fixes(uri: str, analysis: Analysis,
                wanted: list[types.Diagnostic]) -> list[types.CodeAction]:
    """The quick fixes of the diagnostics the editor asks about (those with a ``fix``)."""
    actions = []
    for diagnostic in wanted:
        fix = diagnostic.data.get("fix") if isinstance(diagnostic.data, dict) else None
        if not isinstance(fix, dict):
            continue
        span = Span(analysis.file, fix["line"], fix["col"], fix["line"], fix["end_col"])
        edit = types.TextEdit(range=analysis.lines.span_range(span), new_text=fix["text"])
        actions.append(types.CodeAction(
            title=f"Replace with `{fix['text']}`", kind=types.CodeActionKind.QuickFix,
            diagnostics=[diagnostic], is_preferred=True,
            edit=types.WorkspaceEdit(changes={uri: [edit]})))
    return actions
