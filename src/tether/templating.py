"""The expression engine: Jinja2 in ``{{ ... }}``, sandboxed, with strict undefined names.

This module is the one place that renders templates; the compiler (which also reads their
names, in :mod:`tether.dsl.expressions`) and the runtime both use it, and it imports nothing
from either. A string that is exactly one ``{{ expr }}`` (surrounding whitespace allowed)
evaluates to the expression's native value; any other string with template markup renders
to a string; a string without markup is a literal.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, Literal

from jinja2 import StrictUndefined, TemplateSyntaxError
from jinja2.lexer import TOKEN_DATA, TOKEN_VARIABLE_BEGIN, TOKEN_VARIABLE_END
from jinja2.sandbox import ImmutableSandboxedEnvironment

Kind = Literal["literal", "expression", "template"]

ENV = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
_MARKERS = ("{{", "{%", "{#")


def has_markup(text: str) -> bool:
    """Whether ``text`` contains template markup at all."""
    return any(marker in text for marker in _MARKERS)


_SIMPLE_EXPRESSION = re.compile(
    r"""\s*\{\{(?P<inner>(?:[^{}%#'"]|'[^'{}\\]*'|"[^"{}\\]*")*)\}\}\s*""", re.DOTALL
)
_SEGMENT = re.compile(r"""\{\{((?:[^{}'"]|'[^'{}\\]*'|"[^"{}\\]*")*)\}\}""", re.DOTALL)


@functools.lru_cache(maxsize=65536)
def classify(text: str) -> tuple[Kind, str]:
    """Whether ``text`` is a literal, one native expression, or a string template.

    For an expression, the second item is the expression's source (inside the braces).
    """
    if not has_markup(text):
        return "literal", text
    simple = _SIMPLE_EXPRESSION.fullmatch(text)
    if simple is not None:  # no braces or markup inside: no need to run the lexer
        return "expression", simple.group("inner").strip()
    if segments(text) is not None:  # text around or between simple {{ }}: a string template
        return "template", text
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


def segments(text: str) -> list[str] | None:
    """The expressions of a template made only of text and simple ``{{ }}``, else None."""
    if "{%" in text or "{#" in text:
        return None
    inner = [m.group(1) for m in _SEGMENT.finditer(text)]
    rest = _SEGMENT.sub("", text)
    if not inner or "{{" in rest or "}}" in rest:
        return None
    return inner


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
