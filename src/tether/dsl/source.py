"""Source positions of a parsed document, shared by both front ends.

A front end turns text into plain data (dicts, lists, scalars) plus a :class:`SourceMap` that
gives the span of every key and value by its path in the data, for example
``("nodes", "refund", "with", "amount")``. Validation and the compiler look spans up by path,
so one set of checks serves YAML and ``.flow`` alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tether.diagnostics import Diagnostic, Span

Path = tuple[str | int, ...]

MAX_DEPTH = 64


@dataclass
class SourceMap:
    """Spans of the keys and values of one document, by path."""

    file: str
    text: str = ""
    keys: dict[Path, Span] = field(default_factory=dict)
    values: dict[Path, Span] = field(default_factory=dict)
    anchors: dict[Span, Span] = field(default_factory=dict)
    """YAML: the span of each alias use -> the span of the anchored value it repeats."""
    _lines: list[str] | None = field(default=None, repr=False, compare=False)
    _lines_of: str | None = field(default=None, repr=False, compare=False)

    def value(self, path: Path) -> Span:
        """The span of the value at ``path``, or of its nearest recorded ancestor."""
        for end in range(len(path), -1, -1):
            span = self.values.get(path[:end])
            if span is not None:
                return span
        return Span.whole_file(self.file)

    def key(self, path: Path) -> Span:
        """The span of the key that introduces ``path`` (the value's span when it has none)."""
        span = self.keys.get(path)
        return span if span is not None else self.value(path)

    def line(self, number: int) -> str:
        """Source line ``number`` (1-based), without its line break; empty when out of range."""
        if self._lines is None or self._lines_of is not self.text:
            self._lines = self.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            self._lines_of = self.text
        lines = self._lines
        return lines[number - 1] if 0 < number <= len(lines) else ""


@dataclass
class RawDocument:
    """What a front end produces: plain data, its positions, and the problems it found."""

    data: Any
    source: SourceMap
    syntax: str
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of character ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


def with_anchor_notes(diagnostics: list[Diagnostic], source: SourceMap) -> list[Diagnostic]:
    """Diagnostics located at a YAML alias get a note at the anchor it repeats."""
    if not source.anchors:
        return diagnostics
    from dataclasses import replace

    from tether.diagnostics import Related

    result = []
    for diag in diagnostics:
        anchor = source.anchors.get(diag.span)
        if anchor is not None and diag.span.file == source.file:
            note = Related(anchor, "the value comes from the anchor here (the alias repeats it)")
            diag = replace(diag, related=(*diag.related, note))
        result.append(diag)
    return result

SURROGATE = re.compile("[\ud800-\udfff]")
"""A surrogate code point: valid in a Python string, in no UTF-8 text (stores, JSON)."""
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def lone_surrogate(raw: str) -> int | None:
    """The offset in a string literal's text of its first ``\\uXXXX`` escape that is half of
    a surrogate pair without the other half, or None."""
    escapes = list(_ESCAPE.finditer(raw))
    for index, match in enumerate(escapes):
        code = int(match.group(1), 16) if match.group(1) else 0
        if 0xD800 <= code <= 0xDBFF:
            after = escapes[index + 1] if index + 1 < len(escapes) else None
            low = int(after.group(1), 16) if after is not None and after.group(1) else 0
            if after is not None and after.start() == match.end() and 0xDC00 <= low <= 0xDFFF:
                continue
            return match.start()
        if 0xDC00 <= code <= 0xDFFF:
            before = escapes[index - 1] if index else None
            high = int(before.group(1), 16) if before is not None and before.group(1) else 0
            if before is None or before.end() != match.start() or not 0xD800 <= high <= 0xDBFF:
                return match.start()
    return None
