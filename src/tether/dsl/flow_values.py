"""The tokens and values of a ``.flow`` statement, for the fast reader
(:mod:`tether.dsl.flow_direct`): its first half.

:class:`ValueReader` is a cursor over one statement's text that reads the grammar's terminals
(``flow.lark``'s, by their patterns: :func:`~tether.dsl.flow_syntax.terminal_pattern`) and the
values built of them (strings, templates, numbers, constants, lists, maps), recording the
span of each under its path exactly as the tree walk (:mod:`tether.dsl.flow_reader`) does.
Whatever it cannot read as the grammar would raises :class:`Decline`: the statement then goes
to the grammar. :mod:`tether.dsl.flow_direct` reads the statements with it; the two are one
reader (tests/dsl/test_flow_parsers.py compares it with the grammar).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any

from tether.diagnostics import Span
from tether.dsl.flow_syntax import CONSTANTS, terminal_pattern
from tether.dsl.source import MAX_DEPTH, SURROGATE, Path

__all__ = ["BLANK_STARTS", "CONSTANT_WORDS", "UNSET", "Decline", "ValueReader", "make_span",
           "number_value"]


CONSTANT_WORDS = {"true": "TRUE", "false": "FALSE", "null": "NULL"}
"""The constant words and their terminals (the lexer reads them before an ID or a NAME)."""


class Decline(Exception):
    """The statement is not one of the shapes read here, or has a problem: the grammar reads
    it."""


BLANK_STARTS = " \t\r\n\f#"
"""What blanks (and comments) start with (see :meth:`_Scanner.skip`)."""
make_span: Callable[[tuple[str, int, int, int, int]], Span] = functools.partial(tuple.__new__, Span)
"""``Span(*fields)`` without the named tuple's Python-level ``__new__`` (many are made)."""
UNSET: Any = None
"""The value span of a path whose value is still being read (it keeps the path's place)."""


@functools.cache
def _matchers() -> dict[str, Any]:
    """The grammar's terminals (and blanks, and words) as ``match`` functions, by name."""
    names = ("ID", "NAME", "TASK_NAME", "DURATION", "NUMBER", "STRING", "TEMPLATE")
    patterns = {name: re.compile(terminal_pattern(name)) for name in names}
    patterns["skip"] = re.compile(r"(?:[ \t\r\n\f]+|#[^\n]*)*")
    patterns["word"] = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    return {name: pattern.match for name, pattern in patterns.items()}


class _Scanner:
    """A cursor over one statement's text that keeps its line (blanks and comments are
    skipped after every token, as the grammar's ``%ignore`` does)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line, self.line_start = text, 0, 1, 0
        self.re = _matchers()
        self.skip_re, self.word_re = self.re["skip"], self.re["word"]

    def skip(self) -> None:
        """Past the blanks and comments at the cursor."""
        text, pos = self.text, self.pos
        if pos < len(text) and text[pos] in BLANK_STARTS:
            if text[pos] == " " and pos + 1 < len(text) and text[pos + 1] not in BLANK_STARTS:
                self.pos = pos + 1  # one space between two tokens: the commonest blank
                return
            end = self.skip_re(text, pos).end()
            newlines = text.count("\n", pos, end)
            if newlines:
                self.line += newlines
                self.line_start = text.rfind("\n", pos, end) + 1
            self.pos = end

    def word(self) -> str | None:
        """The word at the cursor (not consumed), if any."""
        match = self.word_re(self.text, self.pos)
        return None if match is None else match.group()

    def peek(self) -> str:
        """The character at the cursor ("" at the end)."""
        return self.text[self.pos] if self.pos < len(self.text) else ""


class ValueReader(_Scanner):
    """Reads the tokens and values of one statement, recording the span of each value (and
    key) under its path as :mod:`tether.dsl.flow_reader` would."""

    def __init__(self, text: str, file: str, offset: int) -> None:
        super().__init__(text)
        self.file, self.offset = file, offset
        self.keys: dict[Path, Span] = {}
        self.values: dict[Path, Span] = {}

    def match(self, kind: str) -> tuple[Span, str]:
        """The span and text of a terminal at the cursor (on one line), then the blanks."""
        match = self.re[kind](self.text, self.pos)
        if match is None:
            raise Decline
        return self.here(match.end())

    def here(self, end: int) -> tuple[Span, str]:
        text, pos, line = self.text, self.pos, self.line + self.offset
        column = pos - self.line_start + 1
        span = make_span((self.file, line, column, line, column + end - pos - 1))
        self.pos = end
        if end < len(text) and text[end] in BLANK_STARTS:
            self.skip()
        return span, text[pos:end]

    def mark(self, word: str) -> Span:
        """A keyword's span (the reader's ``keyword``), then the blanks after it."""
        text, pos = self.text, self.pos
        if not text.startswith(word, pos):
            raise Decline
        line, column = self.line + self.offset, pos - self.line_start + 1
        self.pos = end = pos + len(word)
        if end < len(text) and text[end] in BLANK_STARTS:
            self.skip()
        return make_span((self.file, line, column, line, column + len(word) - 1))

    def string(self) -> tuple[Span, str]:
        span, text = self.match("STRING")
        return span, _unquoted(text)

    def name_or_string(self, kind: str) -> tuple[Span, str]:
        """A STRING, or a word of terminal ``kind`` that is no constant."""
        if self.peek() == '"':
            return self.string()
        return self.name(kind)

    def name(self, kind: str) -> tuple[Span, str]:
        """A word of terminal ``kind`` that is no constant."""
        span, word = self.match(kind)
        if word in CONSTANT_WORDS:
            raise Decline
        return span, word

    # -- values: each records its span under its path, as the reader's ``value`` ------------

    def record(self, path: Path, key: Span | None, span: Span) -> None:
        if len(path) > MAX_DEPTH:
            raise Decline
        if key is not None:
            self.keys[path] = key
        self.values[path] = span

    def scalar(self, path: Path, key: Span | None, span: Span, value: Any) -> Any:
        self.record(path, key, span)
        return value

    def data(self, path: Path, key: Span | None) -> Any:
        char = self.peek()
        if char == '"':
            return self.scalar(path, key, *self.string())
        if char == "{":
            if self.text.startswith("{{", self.pos):
                return self.scalar(path, key, *self.match("TEMPLATE"))
            return self.container(path, key, "}", self.pairs)
        if char == "[":
            return self.container(path, key, "]", self.items)
        if char == "-" or char.isdigit():
            match = self.re["NUMBER"](self.text, self.pos)
            if match is None or self.word_re(self.text, match.end()) is not None:  # `3x`
                raise Decline
            span, text = self.here(match.end())
            return self.scalar(path, key, span, number_value(text))
        word = self.word()
        if word not in CONSTANT_WORDS:
            raise Decline
        span, _ = self.here(self.pos + len(word))
        return self.scalar(path, key, span, CONSTANTS[CONSTANT_WORDS[word]])

    def container(self, path: Path, key: Span | None, close: str, read: Any) -> Any:
        """A list or a map: its span covers the brackets; its items come after it."""
        self.record(path, key, UNSET)
        first = self.mark(self.text[self.pos])
        result = read(path, close)
        last = self.mark(close)
        self.values[path] = make_span((self.file, first.line, first.col, last.end_line,
                                       last.end_col))
        return result

    def items(self, path: Path, close: str) -> list[Any]:
        result: list[Any] = []
        while self.peek() != close:
            result.append(self.data((*path, len(result)), None))
            if self.peek() != ",":
                break
            self.mark(",")
        return result

    def pairs(self, path: Path, close: str) -> dict[str, Any]:
        """``key: value`` entries (of a map or of arguments); a duplicate key declines."""
        result: dict[str, Any] = {}
        while self.peek() != close:
            key, name = self.name_or_string("NAME")
            if name in result:
                raise Decline
            self.mark(":")
            result[name] = self.data((*path, name), key)
            if self.peek() != ",":
                break
            self.mark(",")
        return result

    @staticmethod
    def scalar_text(text: str) -> Any:
        """The value of a scalar's text (a string, a template, a number or a constant)."""
        char = text[0]
        if char == '"':
            return _unquoted(text)
        if char == "{":
            return text
        if text in CONSTANT_WORDS:
            return CONSTANTS[CONSTANT_WORDS[text]]
        return number_value(text)


def number_value(text: str) -> int | float:
    try:
        value: int | float = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:  # more digits than int() converts: E105, the tree walk reports it
        raise Decline from None
    if isinstance(value, float) and not math.isfinite(value):
        raise Decline
    return value



def _unquoted(text: str) -> str:
    """The value of a STRING token."""
    if "\\" not in text:  # no escapes: the characters between the quotes
        return text[1:-1]
    try:
        value = str(json.loads(text, strict=False))
    except json.JSONDecodeError:
        raise Decline from None
    if SURROGATE.search(value):  # the reader reports it
        raise Decline
    return value
