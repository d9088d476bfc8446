"""Positions: tether spans (1-based, code points, inclusive end) <-> LSP (0-based, UTF-16).

A :class:`~tether.diagnostics.Span` counts lines and columns from 1, columns in characters
(code points), and includes its last character. The Language Server Protocol counts from 0,
columns in UTF-16 code units (a character outside the Basic Multilingual Plane, such as an
emoji, is two), and its ranges exclude their end. Every conversion goes through this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types

from tether.diagnostics import Span


def utf16_length(text: str) -> int:
    """How many UTF-16 code units ``text`` takes."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


@dataclass(frozen=True)
class Lines:
    """The lines of a document, for converting positions (``\\r\\n`` counts as one break)."""

    lines: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> Lines:
        return cls(tuple(line.removesuffix("\r") for line in text.split("\n")))

    def line(self, index: int) -> str:
        """Line ``index`` (0-based), empty when out of range."""
        return self.lines[index] if 0 <= index < len(self.lines) else ""

    def to_utf16(self, line: int, column: int) -> int:
        """The UTF-16 offset in 0-based ``line`` of 0-based character ``column``."""
        return utf16_length(self.line(line)[:max(column, 0)])

    def from_utf16(self, line: int, units: int) -> int:
        """The 0-based character column of UTF-16 offset ``units`` in 0-based ``line``."""
        text = self.line(line)
        seen = 0
        for index, ch in enumerate(text):
            if seen >= units:
                return index
            seen += 2 if ord(ch) > 0xFFFF else 1
        return len(text)

    def position(self, line: int, column: int) -> types.Position:
        """The LSP position of 0-based ``line`` and character ``column``."""
        return types.Position(line=max(line, 0), character=self.to_utf16(line, column))

    def span_range(self, span: Span) -> types.Range:
        """The LSP range of a tether span (its end made exclusive)."""
        start_line, start_col = span.line - 1, span.col - 1
        if span.end_line <= 0 or (span.end_line, span.end_col) < (span.line, span.col):
            end_line, end_col = start_line, start_col + 1  # a point: one character
        else:
            end_line, end_col = span.end_line - 1, max(span.end_col, 1)
        return types.Range(start=self.position(start_line, start_col),
                           end=self.position(end_line, end_col))

    def pieces(self, span: Span) -> list[tuple[int, int, str]]:
        """The text ``span`` covers, line by line: (0-based line, 0-based column, text)."""
        first, last = span.line - 1, max(span.end_line, span.line) - 1
        result = []
        for index in range(first, last + 1):
            text = self.line(index)
            start = span.col - 1 if index == first else 0
            end = span.end_col if index == last and span.end_line else len(text)
            result.append((index, start, text[start:end]))
        return result

    def cursor(self, position: types.Position) -> tuple[int, int]:
        """0-based line and character column of an LSP position."""
        return position.line, self.from_utf16(position.line, position.character)


def span_contains(span: Span, line: int, column: int) -> bool:
    """Whether 0-based ``line``/``column`` lies in ``span`` (its end included)."""
    here = (line + 1, column + 1)
    end = (span.end_line, span.end_col) if span.end_line else (span.line, span.col)
    return (span.line, span.col) <= here <= end
