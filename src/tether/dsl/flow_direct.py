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
The tokens and values a statement is made of are read by :mod:`tether.dsl.flow_values` (the
reader's other half); this module reads the statements.
"""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple

from tether.diagnostics import Span
from tether.dsl.flow_syntax import (
    AGENT_PARTS,
    APPROVAL_PARTS,
    CLAUSE_KEYS,
    CLAUSE_PARTS,
    SWITCH_PARTS,
    terminal_pattern,
)
from tether.dsl.flow_values import (
    BLANK_STARTS,
    CONSTANT_WORDS,
    UNSET,
    Decline,
    ValueReader,
    make_span,
)
from tether.dsl.source import Path
from tether.kinds import KINDS, NodeKind

__all__ = ["StatementRecord", "TaskRecord", "read_statement", "read_task"]


_VALUE_CLAUSES = ("when", "for_each", "concurrency", "until")
"""Clauses followed by any value (``clause: "word" value``)."""
_WORD_CLAUSES = {"trigger": "NAME", "timeout": "DURATION", "title": None}
"""Clauses followed by one word (of this terminal) or a string (None: a string only)."""


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


class _Reader(ValueReader):
    """Reads one statement, recording spans as :mod:`tether.dsl.flow_reader` would."""

    def __init__(self, text: str, file: str, offset: int) -> None:
        super().__init__(text, file, offset)
        self.quick = True
        """Whether :meth:`quick_head` may read the head (tests compare it with the scan)."""

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
            raise Decline
        head = self.mark("task")
        key, node_id = self.match("ID")
        if node_id in CONSTANT_WORDS:
            raise Decline
        path: Path = ("nodes", node_id)
        self.record(path, key, UNSET)
        self.mark("=")
        span, name = self.name_or_string("TASK_NAME")
        node: dict[str, Any] = {"task": self.scalar((*path, "task"), head, span, name)}
        end = span
        if self.peek() == "(":
            with_path = (*path, "with")
            self.keys[with_path] = self.values[with_path] = UNSET  # their places
            first = self.mark("(")
            arguments = self.pairs(with_path, ")")
            last = self.mark(")")
            end = make_span((self.file, first.line, first.col, last.end_line, last.end_col))
            self.keys[with_path] = self.values[with_path] = end
            node["with"] = arguments
        return self.clauses(node_id, key, head, node, end)

    def clauses(self, node_id: str, key: Span, head: Span, node: dict[str, Any],
                end: Span) -> TaskRecord:
        """The clauses after the head (``end`` is its last span), then the record."""
        path = ("nodes", node_id)
        while self.pos < len(self.text):
            end = self.setting(node, path)
        self.values[path] = make_span((self.file, head.line, head.col, end.end_line, end.end_col))
        return TaskRecord(node_id, key, head, self.values[path], node, self.keys, self.values)

    def quick_head(self) -> tuple[str, Span, Span, dict[str, Any], Span] | None:
        """``task ID = NAME(NAME: SCALAR, ...)`` on the first line, single-spaced, read with
        two patterns instead of token by token (the same records, in the same order); None
        for anything else (then :meth:`read` scans it from the start)."""
        file, line = self.file, 1 + self.offset
        match = _head().match(self.text)
        if match is None or match[1] in CONSTANT_WORDS or match[2] in CONSTANT_WORDS:
            return None
        node_id, name, (start, end) = match[1], match[2], match.span(1)
        key = make_span((file, line, start + 1, line, end))
        head = make_span((file, line, 1, line, 4))
        path: Path = ("nodes", node_id)
        keys, values = self.keys, self.values
        keys[path], values[path] = key, UNSET
        start, end = match.span(2)
        keys[(*path, "task")] = head
        values[(*path, "task")] = make_span((file, line, start + 1, line, end))
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
        keys[path] = values[path] = UNSET
        argument = _argument().match
        result: dict[str, Any] = {}
        first = pos - 1
        while True:
            match = argument(text, pos)
            if match is None:
                return None
            name, value = match[1], match[2]
            if name in CONSTANT_WORDS or name in result:
                return None
            start, end = match.span(1)
            keys[(*path, name)] = make_span((file, line, start + 1, line, end))
            start, end = match.span(2)
            values[(*path, name)] = make_span((file, line, start + 1, line, end))
            result[name] = self.scalar_text(value)
            pos = match.end()
            if match[3] == ")":
                break
        keys[path] = values[path] = make_span((file, line, first + 1, line, pos))
        self.pos = pos
        if pos < len(text) and text[pos] in BLANK_STARTS:
            self.skip()
        return result

    def setting(self, node: dict[str, Any], path: Path, taken: frozenset[str] = _TAKEN) -> Span:
        """One clause of those ``taken`` into ``node``; its end."""
        word = self.word()
        if word is None:
            raise Decline
        name = CLAUSE_KEYS.get(word, word)
        if name not in taken or name in node:
            raise Decline
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
                raise Decline
            if constant not in ("true", "false"):
                node[name] = self.scalar(here, key, key, True)
                return key
            span, _ = self.here(self.pos + len(constant))
            node[name] = self.scalar(here, key, span, constant == "true")
            return span
        self.record(here, key, UNSET)
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
            self.values[here] = make_span((self.file, first.line, first.col, last.end_line,
                                     last.end_col))
            return last
        parts: dict[str, Any] = {}
        if word == "retry":
            if self.word() == "null":  # `retry null` is a null retry: the tree walk reads it
                raise Decline
            parts["max_attempts"] = self.data((*here, "max_attempts"), key)
            last = self.values[(*here, "max_attempts")]
            for part, kind in (("backoff", "DURATION"), ("strategy", "NAME")):
                if self.word() == part:
                    last = self.part(parts, here, part, kind)
        else:  # loop
            for part in ("to", "while", "max"):
                if self.word() != part:
                    raise Decline
                last = self.part(parts, here, part, "ID" if part == "to" else None)
            if self.word() == "on_exhausted":
                last = self.part(parts, here, "on_exhausted", "NAME")
        node[name] = parts
        self.values[here] = make_span((self.file, key.line, key.col, last.end_line, last.end_col))
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
        if any(name in CONSTANT_WORDS for name in ids):
            return None
        file, line, values = self.file, self.line + self.offset, self.values
        col = pos - self.line_start + 1
        for index, name in enumerate(ids):
            values[(*path, index)] = make_span((file, line, col, line, col + len(name) - 1))
            col += len(name) + 2
        first = pos - self.line_start + 1
        values[path] = make_span((file, line, first, line, col - 3))
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
        raise Decline

    def end(self) -> None:
        """Nothing may follow: anything else is the grammar's to read."""
        if self.pos < len(self.text):
            raise Decline

    def whole(self, start: Span, end: Span) -> Span:
        return make_span((self.file, start.line, start.col, end.end_line, end.end_col))

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
        self.record(path, key, UNSET)
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
        self.record(path, key, UNSET)
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
            raise Decline
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
        self.record(path, key, UNSET)
        first = self.mark("(")
        fields: dict[str, Any] = {}
        while self.peek() != ")":
            start, name = self.name("NAME")
            if name in fields:
                raise Decline
            here = (*path, name)
            self.record(here, start, UNSET)
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
    except Decline:
        return None


def read_task(text: str, file: str, offset: int, *, quick: bool = True) -> TaskRecord | None:
    """The ``task`` statement ``text`` (starting on line ``offset + 1`` of ``file``) read into
    data and spans, or None when it is not a shape read here or has a problem. ``quick=False``
    scans every token (the patterns for the common head and ``after`` clause are not used)."""
    try:
        reader = _Reader(text, file, offset)
        reader.quick = quick
        return reader.read()
    except Decline:
        return None
