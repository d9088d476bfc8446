"""The expression language: Jinja2 in ``{{ ... }}``, sandboxed, with strict undefined names.

This module is the one place that knows Jinja2. The compiler uses :func:`analyse` to find
every name a template reads; the runtime uses :func:`compiled` to evaluate one. A string that is
exactly one ``{{ expr }}`` (surrounding whitespace allowed) evaluates to the expression's
native value; any other string with template markup renders to a string; a string without
markup is a literal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from jinja2 import StrictUndefined, TemplateSyntaxError, nodes
from jinja2.lexer import TOKEN_DATA, TOKEN_VARIABLE_BEGIN, TOKEN_VARIABLE_END
from jinja2.meta import find_undeclared_variables
from jinja2.sandbox import ImmutableSandboxedEnvironment

Kind = Literal["literal", "expression", "template"]

ENV = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
_MARKERS = ("{{", "{%", "{#")


def has_markup(text: str) -> bool:
    """Whether ``text`` contains template markup at all."""
    return any(marker in text for marker in _MARKERS)


@functools.lru_cache(maxsize=65536)
def classify(text: str) -> tuple[Kind, str]:
    """Whether ``text`` is a literal, one native expression, or a string template.

    For an expression, the second item is the expression's source (inside the braces).
    """
    if not has_markup(text):
        return "literal", text
    try:
        tokens = list(ENV.lex(text))
    except TemplateSyntaxError:
        return "template", text
    inner = [t for t in tokens if not (t[1] == TOKEN_DATA and not t[2].strip())]
    begins = sum(1 for t in inner if t[1] == TOKEN_VARIABLE_BEGIN)
    if (begins == 1 and inner and inner[0][1] == TOKEN_VARIABLE_BEGIN
            and inner[-1][1] == TOKEN_VARIABLE_END):
        start = text.index("{{") + 2
        end = text.rindex("}}")
        return "expression", text[start:end].strip()
    return "template", text


@dataclass(frozen=True)
class Reference:
    """A name a template reads: ``nodes.lookup.output`` is ``("nodes", ("lookup", "output"))``.

    ``dynamic`` is true when the chain continues with a computed subscript (``nodes[x]``).
    """

    root: str
    attrs: tuple[str, ...]
    line: int
    dynamic: bool = False


@dataclass(frozen=True)
class Analysis:
    """What a template reads and uses, or why it cannot be parsed."""

    kind: Kind
    references: tuple[Reference, ...] = ()
    unsafe: tuple[str, ...] = ()
    unknown_filters: tuple[str, ...] = ()
    unknown_tests: tuple[str, ...] = ()
    error: str | None = None
    error_line: int = 1


def _parse(kind: Kind, source: str) -> nodes.Template:
    text = "{{ " + source + " }}" if kind == "expression" else source
    return ENV.parse(text)


@functools.lru_cache(maxsize=65536)
def analyse(text: str) -> Analysis:
    """Parse ``text`` once and list what it reads; syntax errors are returned, not raised."""
    kind, source = classify(text)
    if kind == "literal":
        return Analysis(kind)
    try:
        tree = _parse(kind, source)
    except TemplateSyntaxError as exc:
        return Analysis(kind, error=_syntax_message(exc), error_line=exc.lineno or 1)
    walker = _Walker(_free_names(tree))
    walker.visit(tree)
    return Analysis(
        kind,
        references=tuple(walker.references),
        unsafe=tuple(walker.unsafe),
        unknown_filters=tuple(sorted(walker.filters - set(ENV.filters))),
        unknown_tests=tuple(sorted(walker.tests - set(ENV.tests))),
    )


def _free_names(tree: nodes.Template) -> set[str] | None:
    """Names the template reads without binding them itself (None: every name is free)."""
    if not any(True for _ in tree.find_all(nodes.For | nodes.Assign | nodes.Macro)):
        return None
    try:
        return find_undeclared_variables(tree)
    except TemplateSyntaxError:  # an unknown filter; reported separately
        return None


def _syntax_message(exc: TemplateSyntaxError) -> str:
    message = exc.message or "invalid template"
    return message[0].lower() + message[1:] if message else message


class _Walker:
    def __init__(self, free: set[str] | None) -> None:
        self.free = free
        self.references: list[Reference] = []
        self.unsafe: list[str] = []
        self.filters: set[str] = set()
        self.tests: set[str] = set()

    def visit(self, node: nodes.Node) -> None:
        if isinstance(node, nodes.Getattr | nodes.Getitem | nodes.Name):
            self.chain(node)
            return
        if isinstance(node, nodes.Filter) and node.name:
            self.filters.add(node.name)
        if isinstance(node, nodes.Test):
            self.tests.add(node.name)
        for child in node.iter_child_nodes():
            self.visit(child)

    def chain(self, node: nodes.Node) -> None:
        """Record the reference an attribute chain starts from; visit computed subscripts."""
        attrs: list[str] = []
        dynamic = False
        line = node.lineno
        while True:
            if isinstance(node, nodes.Getattr):
                self.check_safe(node.attr)
                attrs.append(node.attr)
                node = node.node
            elif isinstance(node, nodes.Getitem):
                arg = node.arg
                if isinstance(arg, nodes.Const) and isinstance(arg.value, str | int):
                    self.check_safe(str(arg.value))
                    attrs.append(str(arg.value))
                else:
                    self.visit(arg)
                    attrs.clear()
                    dynamic = True
                node = node.node
            else:
                break
        if isinstance(node, nodes.Name):
            if node.ctx == "load" and (self.free is None or node.name in self.free):
                self.references.append(Reference(node.name, tuple(reversed(attrs)), line, dynamic))
        else:
            self.visit(node)

    def check_safe(self, attr: str) -> None:
        if attr.startswith("_"):
            self.unsafe.append(attr)


@functools.lru_cache(maxsize=65536)
def compiled(text: str) -> Callable[[dict[str, Any]], Any]:
    """A function evaluating ``text`` against a namespace (cached per text)."""
    kind, source = classify(text)
    if kind == "literal":
        return lambda _namespace: text
    if kind == "expression":
        expression = ENV.compile_expression(source, undefined_to_none=False)
        return lambda namespace: expression(**namespace)
    template = ENV.from_string(text)
    return lambda namespace: template.render(**namespace)
