"""Rendering diagnostics: text for people, JSON and SARIF for tools, annotations for GitHub.

Every renderer orders the diagnostics the same way (:func:`sort_diagnostics`: by file, line,
column, code) and produces the same bytes for the same input. The text format follows
rustc/actionlint::

    refund.yaml:10:19: error[E402]: unknown input `amout`
       |
    10 |     with: {x: "{{ inputs.amout }}"}
       |                   ^^^^^^^^^^^^
       = note: refund.yaml:13:13: `b` needs `a`
       = help: did you mean `amount`?

Columns count characters; a tab in the shown line is printed as one space so carets stay under
the characters they point at. Spans are inclusive at both ends (SARIF's ``endColumn`` is
exclusive, so it gets ``end_col + 1``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from tether.diagnostics.codes import CODES
from tether.diagnostics.model import Diagnostic, Severity, Span, sort_diagnostics
from tether.files import NotRegularFile, read_regular_file

__all__ = [
    "JSON_FORMAT_VERSION",
    "LineReader",
    "artifact_uri",
    "count",
    "relative_posix",
    "render_github",
    "render_json",
    "render_sarif",
    "render_text",
    "summary",
]

JSON_FORMAT_VERSION = 1
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
# The project has no published home page yet; SARIF requires a URI here.
INFORMATION_URI = "https://pypi.org/project/tether/"

ReadLine = Callable[[str, int], str | None]

_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"
_RED = "\x1b[1;31m"
_YELLOW = "\x1b[1;33m"
_BLUE = "\x1b[1;34m"
_CYAN = "\x1b[1;36m"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class LineReader:
    """Reads source lines from disk, caching each file's lines.

    A file that cannot be read or is not UTF-8 yields no lines (the renderer then shows no
    source excerpt). Lines are split on ``\\n``, ``\\r\\n`` and ``\\r``, as both front ends count
    them.
    """

    def __init__(self) -> None:
        self._files: dict[str, list[str] | None] = {}

    def __call__(self, file: str, line: int) -> str | None:
        if file not in self._files:
            self._files[file] = self._read(file)
        lines = self._files[file]
        if lines is None or not 0 < line <= len(lines):
            return None
        return lines[line - 1]

    @staticmethod
    def _read(file: str) -> list[str] | None:
        try:
            text = read_regular_file(file).decode("utf-8-sig")
        except (OSError, NotRegularFile, UnicodeDecodeError, ValueError):
            return None
        return _LINE_BREAK.split(text)


# --------------------------------------------------------------------------- text


class _Style:
    """ANSI styling that collapses to nothing when colour is off."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, code: str) -> str:
        return f"{code}{text}{_RESET}" if self.color and text else text

    def severity(self, severity: Severity) -> str:
        return _RED if severity is Severity.ERROR else _YELLOW


def render_text(
    diags: Iterable[Diagnostic], *, color: bool = False, read_line: ReadLine | None = None
) -> str:
    """Render diagnostics for a terminal, rustc style, one blank line between them.

    Args:
        diags: the diagnostics (they are sorted and de-duplicated here).
        color: whether to use ANSI colours.
        read_line: ``read_line(file, line)`` returns a source line or None; the default reads
            files from disk (each file once).

    Returns:
        The text, ending in a newline, or ``""`` when there are no diagnostics.
    """
    reader = read_line if read_line is not None else LineReader()
    style = _Style(color)
    blocks = [_text_block(d, reader, style) for d in sort_diagnostics(list(diags))]
    return "\n".join("\n".join(block) + "\n" for block in blocks)


def _text_block(diag: Diagnostic, read_line: ReadLine, style: _Style) -> list[str]:
    span = diag.span
    tone = style.severity(diag.severity)
    head = (
        f"{style(str(span) + ':', _BOLD)} {style(f'{diag.severity.value}[{diag.code}]', tone)}"
        f": {style(diag.message, _BOLD)}"
    )
    lines = [head]
    width = len(str(span.line))
    pad = " " * width
    source = read_line(span.file, span.line) if span.line > 0 else None
    if source is not None:
        shown = source.replace("\t", " ").rstrip()
        excerpt, offset, carets = _excerpt(shown, span.col - 1, len(_carets(span, shown)))
        lines.append(style(f"{pad} |", _BLUE))
        lines.append(f"{style(f'{span.line} |', _BLUE)} {excerpt}".rstrip())
        lines.append(f"{style(f'{pad} |', _BLUE)} {' ' * offset}{style('^' * carets, tone)}")
    for related in diag.related:
        lines.extend(_labelled(pad, "note", f"{related.span}: {related.message}", style))
    if diag.help:
        lines.extend(_labelled(pad, "help", diag.help, style))
    return lines


MAX_EXCERPT = 120


def _excerpt(line: str, start: int, carets: int) -> tuple[str, int, int]:
    """A long source line cut to :data:`MAX_EXCERPT` characters around the span: the text,
    where the carets start in it, and how many (a 5 MB line is not printed whole)."""
    if len(line) <= MAX_EXCERPT:
        return line, start, carets
    begin = max(0, min(start - 20, len(line) - MAX_EXCERPT))
    end = begin + MAX_EXCERPT
    text = ("…" if begin else "") + line[begin:end] + ("…" if end < len(line) else "")
    offset = start - begin + (1 if begin else 0)
    return text, offset, max(1, min(carets, end - start))


def _carets(span: Span, shown: str) -> str:
    """``^`` under the span on its first line: the whole run on one line, else one caret."""
    if span.end_line != span.line or span.end_col < span.col:
        return "^"
    end = min(span.end_col, max(len(shown), span.col))
    return "^" * (end - span.col + 1)


def _labelled(pad: str, label: str, text: str, style: _Style) -> list[str]:
    first, *rest = text.splitlines() or [""]
    prefix = f"{pad} = {label}: "
    lines = [f"{style(pad + ' =', _BLUE)} {style(label, _CYAN)}: {first}".rstrip()]
    lines.extend((" " * len(prefix) + more).rstrip() for more in rest)
    return lines


def count(diags: Iterable[Diagnostic]) -> tuple[int, int]:
    """The number of errors and of warnings."""
    errors = warnings = 0
    for diag in diags:
        if diag.is_error:
            errors += 1
        else:
            warnings += 1
    return errors, warnings


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary(diags: Iterable[Diagnostic], files_checked: int | None = None) -> str:
    """One line for the end of a check.

    ``found 2 errors and 1 warning in 1 file (3 files checked)``; the part in parentheses
    appears when more files were checked than have problems. ``no problems`` when clean.
    """
    diags = list(diags)
    if not diags:
        checked = f"checked {_plural(files_checked, 'file')}: " if files_checked else ""
        return f"{checked}no problems"
    errors, warnings = count(diags)
    parts = [_plural(n, w) for n, w in ((errors, "error"), (warnings, "warning")) if n]
    files = len({d.span.file for d in diags})
    line = f"found {' and '.join(parts)} in {_plural(files, 'file')}"
    if files_checked is not None and files_checked > files:
        line += f" ({_plural(files_checked, 'file')} checked)"
    return line


# --------------------------------------------------------------------------- JSON


def render_json(diags: Iterable[Diagnostic], files_checked: int) -> str:
    """Render diagnostics as a JSON document (``version`` 1), sorted keys, indented."""
    ordered = sort_diagnostics(list(diags))
    errors, warnings = count(ordered)
    document = {
        "version": JSON_FORMAT_VERSION,
        "diagnostics": [_json_diagnostic(d) for d in ordered],
        "summary": {"errors": errors, "warnings": warnings, "files": files_checked},
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _json_diagnostic(diag: Diagnostic) -> dict[str, Any]:
    span = diag.span
    end_line, end_col = _end(span)
    return {
        "code": diag.code,
        "severity": diag.severity.value,
        "message": diag.message,
        "file": span.file,
        "line": span.line,
        "col": span.col,
        "end_line": end_line,
        "end_col": end_col,
        "help": diag.help,
        "node_id": diag.node_id,
        "related": [
            {"file": r.span.file, "line": r.span.line, "col": r.span.col, "message": r.message}
            for r in diag.related
        ],
    }


def _end(span: Span) -> tuple[int, int]:
    """The inclusive end of a span; a span without one ends where it starts."""
    if span.end_line < span.line or (span.end_line == span.line and span.end_col < span.col):
        return span.line, span.col
    return span.end_line, max(span.end_col, 1)


# --------------------------------------------------------------------------- SARIF


def _tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tether")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def render_sarif(diags: Iterable[Diagnostic]) -> str:
    """Render diagnostics as a SARIF 2.1.0 log with one run (for code-scanning services)."""
    ordered = sort_diagnostics(list(diags))
    codes = sorted({d.code for d in ordered})
    index = {code: i for i, code in enumerate(codes)}
    run = {
        "tool": {
            "driver": {
                "name": "tether",
                "informationUri": INFORMATION_URI,
                "version": _tool_version(),
                "rules": [_sarif_rule(code) for code in codes],
            }
        },
        "columnKind": "unicodeCodePoints",
        "results": [_sarif_result(d, index[d.code]) for d in ordered],
    }
    log = {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _sarif_rule(code: str) -> dict[str, Any]:
    known = CODES.get(code)
    if known is None:  # a code missing from the registry still gets a usable rule
        level = "warning" if code.startswith("W") else "error"
        return {"id": code, "name": code, "shortDescription": {"text": code},
                "fullDescription": {"text": code}, "defaultConfiguration": {"level": level}}
    return {
        "id": code,
        "name": known.slug,
        "shortDescription": {"text": known.title},
        "fullDescription": {"text": known.explanation},
        "defaultConfiguration": {"level": known.severity.value},
    }


def _sarif_result(diag: Diagnostic, rule_index: int) -> dict[str, Any]:
    text = diag.message if not diag.help else f"{diag.message}\nhelp: {diag.help}"
    result: dict[str, Any] = {
        "ruleId": diag.code,
        "ruleIndex": rule_index,
        "level": diag.severity.value,
        "message": {"text": text},
        "locations": [{"physicalLocation": _sarif_location(diag.span)}],
    }
    if diag.related:
        result["relatedLocations"] = [
            {"id": i, "physicalLocation": _sarif_location(r.span), "message": {"text": r.message}}
            for i, r in enumerate(diag.related)
        ]
    return result


def _sarif_location(span: Span) -> dict[str, Any]:
    end_line, end_col = _end(span)
    return {
        "artifactLocation": {"uri": artifact_uri(span.file)},
        "region": {
            "startLine": max(span.line, 1),
            "startColumn": max(span.col, 1),
            "endLine": max(end_line, 1),
            "endColumn": max(end_col, 1) + 1,  # SARIF's end column is exclusive
        },
    }


def relative_posix(file: str) -> str:
    """``file`` as a POSIX path, relative to the working directory when it lies inside it."""
    path = Path(file)
    if path.is_absolute():
        try:
            path = path.relative_to(Path.cwd())
        except ValueError:
            return path.as_posix()
    return PurePath(os.path.normpath(path)).as_posix()


def artifact_uri(file: str) -> str:
    """A SARIF artifact URI: a relative POSIX path, or a ``file:`` URI outside the cwd."""
    posix = relative_posix(file)
    if Path(posix).is_absolute():
        return Path(posix).as_uri()
    return quote(posix, safe="/")


# --------------------------------------------------------------------------- GitHub


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(diags: Iterable[Diagnostic]) -> str:
    """Render diagnostics as GitHub Actions workflow commands, one line each."""
    return "".join(_github_line(d) + "\n" for d in sort_diagnostics(list(diags)))


def _github_line(diag: Diagnostic) -> str:
    span = diag.span
    end_line, end_col = _end(span)
    properties = {
        "file": relative_posix(span.file),
        "line": str(span.line),
        "col": str(span.col),
        "endLine": str(end_line),
        "endColumn": str(end_col),
        "title": diag.code,
    }
    head = ",".join(f"{key}={_escape_property(value)}" for key, value in properties.items())
    text = diag.message
    for related in diag.related:
        text += f"\nnote: {related.span}: {related.message}"
    if diag.help:
        text += f"\nhelp: {diag.help}"
    return f"::{diag.severity.value} {head}::{_escape_data(text)}"
