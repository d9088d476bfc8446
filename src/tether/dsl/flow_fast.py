"""A hand-written reader of the common ``.flow`` statements, giving Lark's very parse tree.

Most statements of a large file have a few simple shapes: ``task ID = NAME(args)`` with
``after``, ``when``, ``timeout``, ``retry``, ``loop``... clauses, ``input`` lines, the
``workflow`` header, ``output VALUE``. :func:`fast_parse` reads those by recursive descent
and builds the tree the grammar (``flow.lark``) would: the same rules, the same tokens with
the same types and positions, the same rule positions (``propagate_positions``). Anything
else, and every statement with a mistake, gives ``None``, and the grammar parses it, so
syntax errors are always Lark's and read the same. tests/dsl/test_flow_parsers.py compares
the two on every golden and example file, on generated files and on mutated statements.

It is a subset of the grammar, not a second grammar: where Lark's contextual lexer could
read a word two ways (``null`` where an id goes, a keyword glued to a name), it declines.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any

from lark import Token, Tree
from lark.tree import Meta

__all__ = ["fast_parse", "terminal_pattern"]


@functools.cache
def _terminals() -> dict[str, str]:
    """The regular-expression terminals of ``flow.lark`` (name -> pattern), read from its
    text: the patterns stay written once, and reading them builds no parser."""
    grammar = resources.files("tether.dsl").joinpath("flow.lark").read_text(encoding="utf-8")
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^([A-Z_]+)(?:\.\d+)?: /(.*)/$", grammar, re.MULTILINE)}


def terminal_pattern(name: str) -> str:
    """The regular expression of the grammar's terminal ``name`` (``STRING``, ``ID``...)."""
    return _terminals()[name]


_Mark = tuple[int, int, int, int, int, int]
"""Where a keyword is: line, column, offset, end line, end column, end offset (as Lark's)."""


class _Decline(Exception):
    """The statement is not one of the shapes read here: the grammar reads it."""


_RULES = {name: Token("RULE", name) for name in (
    "task_stmt", "header", "input_stmt", "output_value", "args", "arg", "default", "enum",
    "description", "after", "when", "trigger", "for_each", "concurrency", "retry", "backoff",
    "strategy", "timeout", "loop", "loop_to", "loop_while", "loop_max", "on_exhausted",
    "title", "until", "list", "map", "pair")}
_CONSTANTS = {"true": "TRUE", "false": "FALSE", "null": "NULL"}
_VALUE_CLAUSES = ("when", "for_each", "concurrency", "until")
"""Clauses followed by any value (``clause: "word" value``)."""
_WORD_CLAUSES = {"trigger": "NAME", "timeout": "DURATION", "title": None}
"""Clauses followed by one word (of this terminal) or a string (None: a string only)."""


@functools.cache
def _patterns() -> dict[str, re.Pattern[str]]:
    names = ("ID", "NAME", "TASK_NAME", "DURATION", "NUMBER", "STRING", "TEMPLATE")
    patterns = {name: re.compile(terminal_pattern(name)) for name in names}
    patterns["skip"] = re.compile(r"(?:[ \t\r\n\f]+|#[^\n]*)*")
    patterns["word"] = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    return patterns


@functools.cache
def _matchers() -> dict[str, Any]:
    return {name: pattern.match for name, pattern in _patterns().items()}


class _Parser:
    """Recursive descent over one statement; each method returns the tree or the token."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line, self.line_start = text, 0, 1, 0
        self.re = _matchers()
        self.skip_re, self.word_re = self.re["skip"], self.re["word"]

    # -- tokens ----------------------------------------------------------------------------

    def skip(self) -> None:
        text, pos = self.text, self.pos
        if pos < len(text) and text[pos] in " \t\r\n\f#":
            if text[pos] == " " and pos + 1 < len(text) and text[pos + 1] not in " \t\r\n\f#":
                self.pos = pos + 1  # one space between two tokens: the commonest blank
                return
            end = self.skip_re(text, pos).end()
            newlines = text.count("\n", pos, end)
            if newlines:
                self.line += newlines
                self.line_start = text.rfind("\n", pos, end) + 1
            self.pos = end

    def token(self, kind: str, end: int) -> Token:
        """The token ``text[pos:end]`` (never spanning lines), then the blanks after it."""
        pos, line = self.pos, self.line
        column = pos - self.line_start + 1
        token = Token(kind, self.text[pos:end], pos, line, column, line,
                      column + end - pos, end)
        self.pos = end
        self.skip()
        return token

    def terminal(self, kind: str) -> Token:
        match = self.re[kind](self.text, self.pos)
        if match is None:
            raise _Decline
        return self.token(kind, match.end())

    def name(self, kind: str) -> Token:
        """An ID, NAME or TASK_NAME that is no constant (the lexer would read ``null``)."""
        match = self.re[kind](self.text, self.pos)
        if match is None or match.group() in _CONSTANTS:
            raise _Decline
        return self.token(kind, match.end())

    def word(self) -> str | None:
        """The word at the cursor (not consumed), if any."""
        match = self.word_re(self.text, self.pos)
        return None if match is None else match.group()

    def keyword(self, word: str) -> _Mark:
        """An anonymous keyword or punctuation: dropped from the tree, so only its place is
        kept, for the rules it starts or ends (no token is built)."""
        pos, line = self.pos, self.line
        if not self.text.startswith(word, pos):
            raise _Decline
        column = pos - self.line_start + 1
        self.pos = end = pos + len(word)
        self.skip()
        return line, column, pos, line, column + end - pos, end

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    # -- trees -----------------------------------------------------------------------------

    @staticmethod
    def tree(rule: str, children: list[Any], first: Any, last: Any) -> Tree[Token]:
        """A rule's tree, spanning from ``first`` to ``last`` (marks, tokens or trees)."""
        meta = Meta()  # type: ignore[no-untyped-call]
        if type(first) is tuple:
            line, column, start_pos = first[:3]
        else:
            start = first if isinstance(first, Token) else first.meta
            line, column, start_pos = start.line, start.column, start.start_pos
        if type(last) is tuple:
            end_line, end_column, end_pos = last[3:]
        else:
            end = last if isinstance(last, Token) else last.meta
            end_line, end_column, end_pos = end.end_line, end.end_column, end.end_pos
        meta.__dict__.update(  # the attributes Lark's PropagatePositions sets, in its order
            empty=False, line=line, column=column, start_pos=start_pos, container_line=line,
            container_column=column, container_start_pos=start_pos, end_line=end_line,
            end_column=end_column, end_pos=end_pos, container_end_line=end_line,
            container_end_column=end_column, container_end_pos=end_pos)
        return Tree(_RULES[rule], children, meta)

    def value(self) -> Any:
        char = self.peek()
        if char == '"':
            return self.terminal("STRING")
        if char == "{":
            if self.text.startswith("{{", self.pos):
                return self.terminal("TEMPLATE")
            return self.sequence("map", "{", "}", self.pair)
        if char == "[":
            return self.sequence("list", "[", "]", self.value)
        if char == "-" or char.isdigit():
            token = self.terminal("NUMBER")
            if self.word_re(self.text, token.end_pos) is not None:  # `3x`, `1e`
                raise _Decline
            return token
        word = self.word()
        if word not in _CONSTANTS:
            raise _Decline
        return self.token(_CONSTANTS[word], self.pos + len(word))

    def pair(self, rule: str = "pair") -> Tree[Token]:
        """``key: value`` in a map (``pair``) or in arguments (``arg``)."""
        key = self.terminal("STRING") if self.peek() == '"' else self.name("NAME")
        self.keyword(":")
        value = self.value()
        return self.tree(rule, [key, value], key, value)

    def arg(self) -> Tree[Token]:
        return self.pair("arg")

    def sequence(self, rule: str, open_: str, close: str, item: Any) -> Tree[Token]:
        """``open [item ("," item)* ","?] close`` (a list, a map, arguments)."""
        first = self.keyword(open_)
        children: list[Any] = []
        while self.peek() != close:
            children.append(item())
            if self.peek() != ",":
                break
            self.keyword(",")
        last = self.keyword(close)
        return self.tree(rule, children, first, last)

    # -- statements ------------------------------------------------------------------------

    def statement(self) -> Tree[Token]:
        self.skip()
        word = self.word()
        if word == "task":
            tree = self.task()
        elif word == "input":
            tree = self.input()
        elif word == "workflow":
            first = self.keyword("workflow")
            name = self.terminal("STRING") if self.peek() == '"' else self.name("ID")
            tree = self.tree("header", [name], first, name)
        elif word == "output":
            first = self.keyword("output")
            if self.peek() not in ("{", "["):  # `output KEY = VALUE` starts with a word
                raise _Decline
            value = self.value()
            tree = self.tree("output_value", [value], first, value)
        else:
            raise _Decline
        if self.pos != len(self.text):
            raise _Decline
        return tree

    def input(self) -> Tree[Token]:
        first = self.keyword("input")
        children: list[Any] = [self.name("NAME")]
        self.keyword(":")
        last: Any = self.name("NAME")
        children.append(last)
        if self.peek() == "=":
            part = self.keyword("=")
            value = self.value()
            last = self.tree("default", [value], part, value)
            children.append(last)
        for word in ("enum", "description"):
            if self.word() == word:
                part = self.keyword(word)
                value = self.value() if word == "enum" else self.terminal("STRING")
                last = self.tree(word, [value], part, value)
                children.append(last)
        return self.tree("input_stmt", children, first, last)

    def task(self) -> Tree[Token]:
        first = self.keyword("task")
        children: list[Any] = [self.name("ID")]
        self.keyword("=")
        last: Any = self.terminal("STRING") if self.peek() == '"' else self.name("TASK_NAME")
        children.append(last)
        if self.peek() == "(":
            last = self.sequence("args", "(", ")", self.arg)
            children.append(last)
        while self.pos < len(self.text):
            last = self.clause()
            children.append(last)
        return self.tree("task_stmt", children, first, last)

    def clause(self) -> Tree[Token]:
        word = self.word()
        if word is None:
            raise _Decline
        first = self.keyword(word)
        children: list[Any]
        if word in _VALUE_CLAUSES:
            children = [self.value()]
        elif word in _WORD_CLAUSES:
            kind = _WORD_CLAUSES[word]
            children = [self.terminal("STRING") if kind is None or self.peek() == '"'
                        else self.name(kind)]
        elif word == "after":
            children = [self.id()]
            while self.peek() == ",":
                self.keyword(",")
                children.append(self.id())
        elif word == "retry":
            children = [self.value()]
            for part, kind in (("backoff", "DURATION"), ("strategy", "NAME")):
                if self.word() == part:
                    start = self.keyword(part)
                    token = self.terminal("STRING") if self.peek() == '"' else self.name(kind)
                    children.append(self.tree(part, [token], start, token))
        elif word == "loop":
            children = [self.loop_part("to", "loop_to", self.id),
                        self.loop_part("while", "loop_while", self.value),
                        self.loop_part("max", "loop_max", self.value)]
            if self.word() == "on_exhausted":
                children.append(self.loop_part("on_exhausted", "on_exhausted", self.choice))
        else:
            raise _Decline
        return self.tree(word, children, first, children[-1])

    def loop_part(self, word: str, rule: str, read: Any) -> Tree[Token]:
        if self.word() != word:
            raise _Decline
        first = self.keyword(word)
        value = read()
        return self.tree(rule, [value], first, value)

    def id(self) -> Token:
        return self.terminal("STRING") if self.peek() == '"' else self.name("ID")

    def choice(self) -> Token:
        return self.terminal("STRING") if self.peek() == '"' else self.name("NAME")


def fast_parse(text: str) -> Tree[Token] | None:
    """The grammar's parse tree of one statement, or None when it is not a shape read here
    (then the grammar parses it: every syntax error is Lark's)."""
    try:
        return _Parser(text).statement()
    except _Decline:
        return None
