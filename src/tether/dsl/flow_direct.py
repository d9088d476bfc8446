"""The one fast reader of ``.flow``: the common statements read straight into document data.

Most statements of a large file are ``task ID = NAME(args)`` with clauses; a small file is
mostly ``workflow``, ``description``, ``input``, ``output KEY = VALUE`` and ``approval``
statements, read here too (:func:`read_statement`), so that checking it loads no parser
tables and imports no Lark. The grammar
(``flow.lark``, the specification) parses every statement into a Lark tree that the reader
(:mod:`tether.dsl.flow_reader`) walks into data and spans; :func:`read_task` does both at once
for the common task shapes, giving the node's data and the spans of its keys and values under
the same paths, in the same order, without a tree. It is a subset of the grammar, not a
second grammar: where Lark's contextual lexer could read a word two ways (``null`` where an
id goes, a keyword glued to a name) it declines, and it declines too every statement the tree
walk would report a problem in (a duplicate clause, argument or key, a clause a task does not
take, a bad string escape, a number too large, too deep a value, ``retry null``), so then the
grammar reads it and reports the problem its own way: syntax errors are always Lark's. The
one problem left to the reader is a duplicate node id (E300), which depends on the statements
before. tests/dsl/test_flow_parsers.py compares the readings, diagnostics included, on every
golden and example file, on generated files and on every one-character mutation of the shapes.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from tether.diagnostics import Span
from tether.dsl.flow_syntax import (
    AGENT_PARTS,
    APPROVAL_PARTS,
    CLAUSE_KEYS,
    CLAUSE_PARTS,
    CONSTANTS,
    SWITCH_PARTS,
    terminal_pattern,
)
from tether.dsl.source import MAX_DEPTH, SURROGATE, Path
from tether.kinds import KINDS, NodeKind

__all__ = ["StatementRecord", "TaskRecord", "read_statement", "read_task"]


_CONSTANTS = {"true": "TRUE", "false": "FALSE", "null": "NULL"}
"""The constant words and their terminals (the lexer reads them before an ID or a NAME)."""
_VALUE_CLAUSES = ("when", "for_each", "concurrency", "until")
"""Clauses followed by any value (``clause: "word" value``)."""
_WORD_CLAUSES = {"trigger": "NAME", "timeout": "DURATION", "title": None}
"""Clauses followed by one word (of this terminal) or a string (None: a string only)."""


class _Decline(Exception):
    """The statement is not one of the shapes read here, or has a problem: the grammar reads
    it."""


class TaskRecord(NamedTuple):
    """One ``task`` statement read: the node's data and where its parts are."""

    node_id: str
    key: Span
    """The node id."""
    head: Span
    """The ``task`` keyword."""
    span: Span
    """The whole statement."""
    node: dict[str, Any]
    keys: dict[Path, Span]
    values: dict[Path, Span]


class StatementRecord(NamedTuple):
    """One ``workflow NAME``, ``description``, ``input``, ``output KEY = VALUE`` or
    ``approval`` statement read: what the tree walk makes of its tree."""

    kind: str
    """The grammar's rule: ``header``, ``description_stmt``, ``input_stmt``, ``output_item``
    or ``approval_stmt``."""
    name: str
    """The input's name, the output's key, the approval's node id ("" for the others)."""
    key: Span
    """The span recorded as the statement's key (the name, the key, the node id; the keyword
    of a ``workflow``/``description`` header)."""
    head: Span
    """The statement's keyword."""
    span: Span
    """The whole statement."""
    value: Any
    """The header's value, the input's spec, the output's value, the approval's node."""
    keys: dict[Path, Span]
    values: dict[Path, Span]


_TAKEN = frozenset(
    CLAUSE_KEYS.get(word, word)
    for word in (*_VALUE_CLAUSES, *_WORD_CLAUSES, "after", "retry", "loop", "idempotent")
    if KINDS[NodeKind.TASK].takes(CLAUSE_KEYS.get(word, word))
    and CLAUSE_KEYS.get(word, word) not in (*APPROVAL_PARTS, *AGENT_PARTS, *SWITCH_PARTS)
)
"""The clause keys read here that a task takes (the others are left to the tree walk)."""
_APPROVAL_TAKEN = frozenset(
    CLAUSE_KEYS.get(word, word) for word in ("after", "when", "trigger", "title"))
"""The settings of an ``approval`` statement read here (its parts are read apart)."""
_PARTS = {word: key for key, word in CLAUSE_PARTS.values()}
"""A loop's (and a retry's) part keyword -> its document key."""
_BLANK_STARTS = " \t\r\n\f#"
"""What blanks (and comments) start with (see :meth:`_Scanner.skip`)."""
_span: Callable[[tuple[str, int, int, int, int]], Span] = functools.partial(tuple.__new__, Span)
"""``Span(*fields)`` without the named tuple's Python-level ``__new__`` (many are made)."""
_UNSET: Any = None
"""The value span of a path whose value is still being read (it keeps the path's place)."""


@functools.cache
def _head() -> re.Pattern[str]:
    """``task ID = TASK_NAME(`` at the start of a statement, on one line, single-spaced."""
    return re.compile(rf"task ({terminal_pattern('ID')}) = "
                      rf"({terminal_pattern('TASK_NAME')})(\(?)")


@functools.cache
def _argument() -> re.Pattern[str]:
    """``NAME: VALUE`` then ``, `` or ``)``, the value a scalar: a string, a template, a
    number or a constant (the shapes of most arguments), on one line, single-spaced."""
    scalar = "|".join(terminal_pattern(name) for name in ("STRING", "TEMPLATE", "NUMBER"))
    return re.compile(rf"({terminal_pattern('NAME')}): ({scalar}|true|false|null)(, |\))")


@functools.cache
def _ids() -> re.Pattern[str]:
    """``ID, ID...`` (an ``after`` clause's ids), single-spaced."""
    return re.compile(rf"{terminal_pattern('ID')}(?:, {terminal_pattern('ID')})*")


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
        if pos < len(text) and text[pos] in _BLANK_STARTS:
            if text[pos] == " " and pos + 1 < len(text) and text[pos + 1] not in _BLANK_STARTS:
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


class _Reader(_Scanner):
    """Reads one statement, recording spans as :mod:`tether.dsl.flow_reader` would."""

    def __init__(self, text: str, file: str, offset: int) -> None:
        super().__init__(text)
        self.file, self.offset = file, offset
        self.keys: dict[Path, Span] = {}
        self.values: dict[Path, Span] = {}
        self.quick = True
        """Whether :meth:`quick_head` may read the head (tests compare it with the scan)."""

    def match(self, kind: str) -> tuple[Span, str]:
        """The span and text of a terminal at the cursor (on one line), then the blanks."""
        match = self.re[kind](self.text, self.pos)
        if match is None:
            raise _Decline
        return self.here(match.end())

    def here(self, end: int) -> tuple[Span, str]:
        text, pos, line = self.text, self.pos, self.line + self.offset
        column = pos - self.line_start + 1
        span = _span((self.file, line, column, line, column + end - pos - 1))
        self.pos = end
        if end < len(text) and text[end] in _BLANK_STARTS:
            self.skip()
        return span, text[pos:end]

    def mark(self, word: str) -> Span:
        """A keyword's span (the reader's ``keyword``), then the blanks after it."""
        text, pos = self.text, self.pos
        if not text.startswith(word, pos):
            raise _Decline
        line, column = self.line + self.offset, pos - self.line_start + 1
        self.pos = end = pos + len(word)
        if end < len(text) and text[end] in _BLANK_STARTS:
            self.skip()
        return _span((self.file, line, column, line, column + len(word) - 1))

    def string(self) -> tuple[Span, str]:
        span, text = self.match("STRING")
        if "\\" not in text:  # no escapes: the characters between the quotes
            return span, text[1:-1]
        try:
            value = str(json.loads(text, strict=False))
        except json.JSONDecodeError:
            raise _Decline from None
        if SURROGATE.search(value):  # the reader reports it
            raise _Decline
        return span, value

    def name_or_string(self, kind: str) -> tuple[Span, str]:
        """A STRING, or a word of terminal ``kind`` that is no constant."""
        if self.peek() == '"':
            return self.string()
        return self.name(kind)

    def name(self, kind: str) -> tuple[Span, str]:
        """A word of terminal ``kind`` that is no constant."""
        span, word = self.match(kind)
        if word in _CONSTANTS:
            raise _Decline
        return span, word

    # -- values: each records its span under its path, as the reader's ``value`` ------------

    def record(self, path: Path, key: Span | None, span: Span) -> None:
        if len(path) > MAX_DEPTH:
            raise _Decline
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
                raise _Decline
            span, text = self.here(match.end())
            return self.scalar(path, key, span, _number(text))
        word = self.word()
        if word not in _CONSTANTS:
            raise _Decline
        span, _ = self.here(self.pos + len(word))
        return self.scalar(path, key, span, CONSTANTS[_CONSTANTS[word]])

    def container(self, path: Path, key: Span | None, close: str, read: Any) -> Any:
        """A list or a map: its span covers the brackets; its items come after it."""
        self.record(path, key, _UNSET)
        first = self.mark(self.text[self.pos])
        result = read(path, close)
        last = self.mark(close)
        self.values[path] = _span((self.file, first.line, first.col, last.end_line, last.end_col))
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
                raise _Decline
            self.mark(":")
            result[name] = self.data((*path, name), key)
            if self.peek() != ",":
                break
            self.mark(",")
        return result

    # -- the statement ---------------------------------------------------------------------

    def read(self) -> TaskRecord:
        if self.quick and self.text.startswith("task "):
            read = self.quick_head()
            if read is not None:
                return self.clauses(*read)
            self.keys.clear()
            self.values.clear()
            self.pos = 0
        self.skip()
        if self.word() != "task":
            raise _Decline
        head = self.mark("task")
        key, node_id = self.match("ID")
        if node_id in _CONSTANTS:
            raise _Decline
        path: Path = ("nodes", node_id)
        self.record(path, key, _UNSET)
        self.mark("=")
        span, name = self.name_or_string("TASK_NAME")
        node: dict[str, Any] = {"task": self.scalar((*path, "task"), head, span, name)}
        end = span
        if self.peek() == "(":
            with_path = (*path, "with")
            self.keys[with_path] = self.values[with_path] = _UNSET  # their places
            first = self.mark("(")
            arguments = self.pairs(with_path, ")")
            last = self.mark(")")
            end = _span((self.file, first.line, first.col, last.end_line, last.end_col))
            self.keys[with_path] = self.values[with_path] = end
            node["with"] = arguments
        return self.clauses(node_id, key, head, node, end)

    def clauses(self, node_id: str, key: Span, head: Span, node: dict[str, Any],
                end: Span) -> TaskRecord:
        """The clauses after the head (``end`` is its last span), then the record."""
        path = ("nodes", node_id)
        while self.pos < len(self.text):
            end = self.setting(node, path)
        self.values[path] = _span((self.file, head.line, head.col, end.end_line, end.end_col))
        return TaskRecord(node_id, key, head, self.values[path], node, self.keys, self.values)

    def quick_head(self) -> tuple[str, Span, Span, dict[str, Any], Span] | None:
        """``task ID = NAME(NAME: SCALAR, ...)`` on the first line, single-spaced, read with
        two patterns instead of token by token (the same records, in the same order); None
        for anything else (then :meth:`read` scans it from the start)."""
        file, line = self.file, 1 + self.offset
        match = _head().match(self.text)
        if match is None or match[1] in _CONSTANTS or match[2] in _CONSTANTS:
            return None
        node_id, name, (start, end) = match[1], match[2], match.span(1)
        key = _span((file, line, start + 1, line, end))
        head = _span((file, line, 1, line, 4))
        path: Path = ("nodes", node_id)
        keys, values = self.keys, self.values
        keys[path], values[path] = key, _UNSET
        start, end = match.span(2)
        keys[(*path, "task")] = head
        values[(*path, "task")] = _span((file, line, start + 1, line, end))
        if not match[3]:  # no arguments, or not right after the name: few; scanned
            return None
        arguments = self.quick_arguments(match.end(), (*path, "with"))
        if arguments is None:
            return None
        return node_id, key, head, {"task": name, "with": arguments}, values[(*path, "with")]

    def quick_arguments(self, pos: int, path: Path) -> dict[str, Any] | None:
        """The arguments from ``pos`` (after the ``(``) to the ``)``, or None."""
        text, file, line = self.text, self.file, 1 + self.offset
        keys, values = self.keys, self.values
        keys[path] = values[path] = _UNSET
        argument = _argument().match
        result: dict[str, Any] = {}
        first = pos - 1
        while True:
            match = argument(text, pos)
            if match is None:
                return None
            name, value = match[1], match[2]
            if name in _CONSTANTS or name in result:
                return None
            start, end = match.span(1)
            keys[(*path, name)] = _span((file, line, start + 1, line, end))
            start, end = match.span(2)
            values[(*path, name)] = _span((file, line, start + 1, line, end))
            result[name] = self.scalar_text(value)
            pos = match.end()
            if match[3] == ")":
                break
        keys[path] = values[path] = _span((file, line, first + 1, line, pos))
        self.pos = pos
        if pos < len(text) and text[pos] in _BLANK_STARTS:
            self.skip()
        return result

    @staticmethod
    def scalar_text(text: str) -> Any:
        """The value of a scalar's text (a string, a template, a number or a constant)."""
        char = text[0]
        if char == '"':
            if "\\" not in text:
                return text[1:-1]
            try:
                value = str(json.loads(text, strict=False))
            except json.JSONDecodeError:
                raise _Decline from None
            if SURROGATE.search(value):  # the reader reports it
                raise _Decline
            return value
        if char == "{":
            return text
        if text in _CONSTANTS:
            return CONSTANTS[_CONSTANTS[text]]
        return _number(text)

    def setting(self, node: dict[str, Any], path: Path, taken: frozenset[str] = _TAKEN) -> Span:
        """One clause of those ``taken`` into ``node``; its end."""
        word = self.word()
        if word is None:
            raise _Decline
        name = CLAUSE_KEYS.get(word, word)
        if name not in taken or name in node:
            raise _Decline
        key = self.mark(word)
        here: Path = (*path, name)
        if word in _VALUE_CLAUSES:
            node[name] = self.data(here, key)
            return self.values[here]
        if word in _WORD_CLAUSES:
            kind = _WORD_CLAUSES[word]
            span, value = self.string() if kind is None else self.name_or_string(kind)
            node[name] = self.scalar(here, key, span, value)
            return span
        if word == "idempotent":  # bare (true), or `true`/`false` (`null` is the walk's)
            constant = self.word()
            if constant == "null":
                raise _Decline
            if constant not in ("true", "false"):
                node[name] = self.scalar(here, key, key, True)
                return key
            span, _ = self.here(self.pos + len(constant))
            node[name] = self.scalar(here, key, span, constant == "true")
            return span
        self.record(here, key, _UNSET)
        if word == "after" and self.quick and (quick := self.quick_after(here)) is not None:
            node[name] = quick
            return self.values[(*here, len(quick) - 1)]
        if word == "after":
            ids = [self.id_item(here, 0)]
            while self.peek() == ",":
                self.mark(",")
                ids.append(self.id_item(here, len(ids)))
            node[name] = ids
            first, last = self.values[(*here, 0)], self.values[(*here, len(ids) - 1)]
            self.values[here] = _span((self.file, first.line, first.col, last.end_line,
                                     last.end_col))
            return last
        parts: dict[str, Any] = {}
        if word == "retry":
            if self.word() == "null":  # `retry null` is a null retry: the tree walk reads it
                raise _Decline
            parts["max_attempts"] = self.data((*here, "max_attempts"), key)
            last = self.values[(*here, "max_attempts")]
            for part, kind in (("backoff", "DURATION"), ("strategy", "NAME")):
                if self.word() == part:
                    last = self.part(parts, here, part, kind)
        else:  # loop
            for part in ("to", "while", "max"):
                if self.word() != part:
                    raise _Decline
                last = self.part(parts, here, part, "ID" if part == "to" else None)
            if self.word() == "on_exhausted":
                last = self.part(parts, here, "on_exhausted", "NAME")
        node[name] = parts
        self.values[here] = _span((self.file, key.line, key.col, last.end_line, last.end_col))
        return last

    def quick_after(self, path: Path) -> list[str] | None:
        """``ID, ID...`` to the end of the line, single-spaced, read with one pattern and
        recorded as :meth:`setting` does; None for anything else (then it is scanned)."""
        text, pos = self.text, self.pos
        match = _ids().match(text, pos)
        if match is None or (match.end() < len(text) and text[match.end()] != "\n") \
                or text.startswith(",", self.skip_re(text, match.end()).end()):
            return None
        ids = match[0].split(", ")
        if any(name in _CONSTANTS for name in ids):
            return None
        file, line, values = self.file, self.line + self.offset, self.values
        col = pos - self.line_start + 1
        for index, name in enumerate(ids):
            values[(*path, index)] = _span((file, line, col, line, col + len(name) - 1))
            col += len(name) + 2
        first = pos - self.line_start + 1
        values[path] = _span((file, line, first, line, col - 3))
        self.pos = match.end()
        if self.pos < len(text):
            self.skip()
        return ids

    def part(self, parts: dict[str, Any], path: Path, word: str, kind: str | None) -> Span:
        """``WORD value`` of a loop or a retry (a value, or a word of terminal ``kind`` or a
        string), recorded under its key; its end."""
        name = _PARTS[word]
        key = self.mark(word)
        here = (*path, name)
        if kind is None:
            parts[name] = self.data(here, key)
        else:
            parts[name] = self.scalar(here, key, *self.name_or_string(kind))
        return self.values[here]

    def id_item(self, path: Path, index: int) -> str:
        span, value = self.name_or_string("ID")
        return str(self.scalar((*path, index), None, span, value))


    # -- the other common statements (what the tree walk records, in its order) -----------

    def statement(self) -> StatementRecord:
        word = self.word()
        if word in ("workflow", "description"):
            return self.header(word)
        if word == "input":
            return self.input()
        if word == "output":
            return self.output()
        if word == "approval":
            return self.approval()
        raise _Decline

    def end(self) -> None:
        """Nothing may follow: anything else is the grammar's to read."""
        if self.pos < len(self.text):
            raise _Decline

    def whole(self, start: Span, end: Span) -> Span:
        return _span((self.file, start.line, start.col, end.end_line, end.end_col))

    def header(self, word: str) -> StatementRecord:
        """``workflow NAME`` (not a ``workflow`` node) or ``description STRING``."""
        head = self.mark(word)
        if word == "workflow":
            path: Path = ("name",)
            span, value = self.name_or_string("ID")
        else:
            path = ("description",)
            span, value = self.string()
        self.end()
        self.record(path, head, span)
        kind = "header" if word == "workflow" else "description_stmt"
        return StatementRecord(kind, "", head, head, self.whole(head, span), value, self.keys,
                               self.values)

    def spec(self, path: Path, start: Span) -> dict[str, Any]:
        """``TYPE [= VALUE] [enum VALUE] [description STRING]`` of an input or a form field
        (after its ``NAME:``; ``start`` is where its span starts)."""
        span, kind = self.name("NAME")
        spec: dict[str, Any] = {"type": self.scalar((*path, "type"), span, span, kind)}
        end = span
        for part, word in (("default", "="), ("enum", "enum"), ("description", "description")):
            if not (self.peek() == "=" if word == "=" else self.word() == word):
                continue
            key = self.mark(word)
            here = (*path, part)
            if part == "description":
                span, text = self.string()
                spec[part] = self.scalar(here, key, span, text)
            else:
                spec[part] = self.data(here, key)
            end = self.values[here]
        self.values[path] = self.whole(start, end)
        return spec

    def input(self) -> StatementRecord:
        head = self.mark("input")
        key, name = self.name("NAME")
        path: Path = ("inputs", name)
        self.record(path, key, _UNSET)
        self.mark(":")
        spec = self.spec(path, head)
        self.end()
        return StatementRecord("input_stmt", name, key, head, self.values[path], spec,
                               self.keys, self.values)

    def output(self) -> StatementRecord:
        """``output KEY = VALUE`` (a whole ``output VALUE`` is the grammar's)."""
        head = self.mark("output")
        key, name = self.name_or_string("NAME")
        self.mark("=")
        value = self.data(("output", name), key)
        self.end()
        span = self.whole(head, self.values[("output", name)])
        return StatementRecord("output_item", name, key, head, span, value, self.keys,
                               self.values)

    def approval(self) -> StatementRecord:
        """``approval ID`` with settings and its parts (``reason``, ``context``, ``form``)."""
        head = self.mark("approval")
        key, node_id = self.name("ID")
        path: Path = ("nodes", node_id)
        self.record(path, key, _UNSET)
        self.record((*path, "approval"), head, self.whole(head, key))
        parts: dict[str, Any] = {}
        node: dict[str, Any] = {"approval": parts}
        end = key
        while self.pos < len(self.text):
            word = self.word()
            if word in ("reason", "context", "form"):
                end = self.approval_part(word, parts, (*path, "approval", word))
            else:
                end = self.setting(node, path, _APPROVAL_TAKEN)
        self.values[path] = self.whole(head, end)
        return StatementRecord("approval_stmt", node_id, key, head, self.values[path], node,
                               self.keys, self.values)

    def approval_part(self, word: str, parts: dict[str, Any], path: Path) -> Span:
        if word in parts:
            raise _Decline
        key = self.mark(word)
        if word == "reason":
            parts[word] = self.scalar(path, key, *self.name_or_string("NAME"))
        elif word == "context":
            parts[word] = self.data(path, key)
        else:
            parts[word] = self.form(path, key)
        return self.values[path]

    def form(self, path: Path, key: Span) -> dict[str, Any]:
        """``(NAME: TYPE ..., ...)``: the fields, each an input's spec."""
        self.record(path, key, _UNSET)
        first = self.mark("(")
        fields: dict[str, Any] = {}
        while self.peek() != ")":
            start, name = self.name("NAME")
            if name in fields:
                raise _Decline
            here = (*path, name)
            self.record(here, start, _UNSET)
            self.mark(":")
            fields[name] = self.spec(here, start)
            if self.peek() != ",":
                break
            self.mark(",")
        self.values[path] = self.whole(first, self.mark(")"))
        return fields


def read_statement(text: str, file: str, offset: int) -> TaskRecord | StatementRecord | None:
    """The statement ``text`` (starting on line ``offset + 1`` of ``file``) read into data and
    spans when it is a ``task`` (:func:`read_task`) or one of the other common shapes
    (``workflow NAME``, ``description``, ``input``, ``output KEY = VALUE``, ``approval``),
    else None: the grammar reads it."""
    if text.startswith("task"):
        return read_task(text, file, offset)
    try:
        return _Reader(text, file, offset).statement()
    except _Decline:
        return None


def _number(text: str) -> int | float:
    try:
        value: int | float = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:  # more digits than int() converts: E105, the tree walk reports it
        raise _Decline from None
    if isinstance(value, float) and not math.isfinite(value):
        raise _Decline
    return value


def read_task(text: str, file: str, offset: int, *, quick: bool = True) -> TaskRecord | None:
    """The ``task`` statement ``text`` (starting on line ``offset + 1`` of ``file``) read into
    data and spans, or None when it is not a shape read here or has a problem. ``quick=False``
    scans every token (the patterns for the common head and ``after`` clause are not used)."""
    try:
        reader = _Reader(text, file, offset)
        reader.quick = quick
        return reader.read()
    except _Decline:
        return None
