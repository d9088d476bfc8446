"""The expression engine: Jinja2 in ``{{ ... }}``, sandboxed, with strict undefined names,
rendered within a budget of time and size.

This package is the one place that renders templates; the compiler (which also reads their
names, in :mod:`tether.dsl.expressions`) and the runtime both use it, and it imports nothing
from either. A string that is exactly one ``{{ expr }}`` (surrounding whitespace allowed)
evaluates to the expression's native value; any other string with template markup renders
to a string; a string without markup is a literal.

Every evaluation has a :class:`TemplateBudget` (default: 1 s, 1,000,000 characters); going
over it raises :class:`~tether.errors.TemplateLimit` (``"time"`` or ``"size"``) without
finishing the work. The sandbox (``sandbox.py``) and the checks it makes (``checks.py``,
``meter.py``) explain how.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from tether.templating.complexity import nesting_problem
from tether.templating.meter import DEFAULT_BUDGET, TemplateBudget

if TYPE_CHECKING:
    from tether.templating.engine import ENV, compiled, evaluate

Kind = Literal["literal", "expression", "template"]

# Jinja2 is imported when a template is compiled or needs Jinja2's own lexer or parser, not
# with this package: `tether check` of a workflow whose templates the quick readers read
# (tether.dsl.expressions) never imports it (docs/decisions.md, "Fast start, fifth pass").
_ENGINE = frozenset({"ENV", "compiled", "evaluate"})


def __getattr__(name: str) -> Any:
    if name not in _ENGINE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("tether.templating.engine"), name)


def has_markup(text: str) -> bool:
    """Whether ``text`` contains template markup at all."""
    return "{{" in text or "{%" in text or "{#" in text


# The runs between braces are read possessively (``++``, ``*+``): no alternative can take a
# brace, so giving characters back could never let ``}}`` match; it only cost time.
_SIMPLE_EXPRESSION = re.compile(
    r"""\s*\{\{(?P<inner>(?:[^{}%#'"]++|'[^'{}\\]*+'|"[^"{}\\]*+")*+)\}\}\s*""", re.DOTALL
)
_SEGMENT = re.compile(r"""\{\{((?:[^{}'"]++|'[^'{}\\]*+'|"[^"{}\\]*+")*+)\}\}""", re.DOTALL)


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
    from jinja2 import TemplateSyntaxError
    from jinja2.lexer import TOKEN_DATA, TOKEN_VARIABLE_BEGIN, TOKEN_VARIABLE_END

    from tether.templating.engine import ENV

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


@functools.lru_cache(maxsize=65536)
def segments(text: str) -> tuple[str, ...] | None:
    """The expressions of a template made only of text and simple ``{{ }}``, else None
    (cached: :func:`classify` and the compiler's analysis both ask)."""
    if "{%" in text or "{#" in text:
        return None
    inner = tuple(_SEGMENT.findall(text))
    rest = _SEGMENT.sub("", text)
    if not inner or "{{" in rest or "}}" in rest:
        return None
    return inner


class Evaluator(Protocol):
    """A compiled template: call it with the names it reads, and optionally a budget."""

    def __call__(self, namespace: Mapping[str, Any],
                 budget: TemplateBudget | None = None) -> Any: ...


__all__ = ["DEFAULT_BUDGET", "ENV", "Evaluator", "Kind", "TemplateBudget", "classify",
           "compiled", "evaluate", "has_markup", "nesting_problem", "segments"]
