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
import re
from collections.abc import Mapping
from typing import Any, Literal, Protocol

from jinja2 import Template, TemplateSyntaxError, nodes
from jinja2.lexer import TOKEN_DATA, TOKEN_VARIABLE_BEGIN, TOKEN_VARIABLE_END

from tether.errors import TemplateLimit
from tether.templating.complexity import nesting_problem
from tether.templating.meter import DEFAULT_BUDGET, TemplateBudget, metering, text_size
from tether.templating.sandbox import Sandbox

Kind = Literal["literal", "expression", "template"]

ENV = Sandbox()
"""The one environment: its filters, tests and globals are what templates may use."""


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


class _Literal:
    def __init__(self, text: str) -> None:
        self.text = text

    def __call__(self, namespace: Mapping[str, Any], budget: TemplateBudget | None = None) -> Any:
        return self.text


class _Expression:
    """``{{ expr }}`` alone: the expression's native value."""

    def __init__(self, source: str) -> None:
        self.expression = ENV.compile_expression(source, undefined_to_none=False)
        tree = _expression_tree(source)
        self.reads_only = tree is not None and _reads_only(tree)
        # only calls, filters, tests and intercepted operators spend budget: an expression
        # without any (a comparison, a lookup) runs without a meter, which is most of them
        self.metered = tree is None or any(True for _ in tree.find_all(_SPENDING))

    def __call__(self, namespace: Mapping[str, Any], budget: TemplateBudget | None = None) -> Any:
        budget = budget or DEFAULT_BUDGET
        if self.metered:
            with metering(budget):
                value = self.expression(**namespace)
        else:
            value = self.expression(**namespace)
        if not self.reads_only:  # a value it built: within the cap as text
            size = text_size(value, budget.max_size)
            if size > budget.max_size:
                raise TemplateLimit("size", f"the value would hold {size:,} characters or "
                                    f"items; the limit is {budget.max_size:,}")
        return value


class _Template:
    """Text with markup: rendered chunk by chunk, each counted against the budget."""

    def __init__(self, text: str) -> None:
        self.template: Template = ENV.from_string(text)

    def __call__(self, namespace: Mapping[str, Any], budget: TemplateBudget | None = None) -> Any:
        with metering(budget or DEFAULT_BUDGET) as meter:
            context = self.template.new_context(dict(namespace))
            chunks = []
            for chunk in self.template.root_render_func(context):
                meter.emit(chunk)
                chunks.append(chunk)
        return "".join(chunks)


_SPENDING = (nodes.Call, nodes.Filter, nodes.Test, nodes.Concat, nodes.Pow, nodes.Mul,
             nodes.Add, nodes.Mod)


def _expression_tree(source: str) -> nodes.Node | None:
    """The parsed expression (None if it cannot be told, which only means more checking)."""
    try:
        output = ENV.parse("{{ " + source + " }}").body[0]
    except (TemplateSyntaxError, IndexError, RecursionError):
        return None
    return output.nodes[0] if isinstance(output, nodes.Output) and output.nodes else None


def _reads_only(node: nodes.Node) -> bool:
    """Whether an expression only reads a value (``nodes.a.output``, ``item['k']``), so
    whatever it returns was not built by the template."""
    while isinstance(node, nodes.Getattr | nodes.Getitem):
        if isinstance(node, nodes.Getitem) and not isinstance(node.arg, nodes.Const):
            return False
        node = node.node
    return isinstance(node, nodes.Name)


@functools.lru_cache(maxsize=65536)
def compiled(text: str) -> Evaluator:
    """``text`` compiled once (cached per text); call the result to evaluate it.

    Compiling never evaluates anything: constant expressions are computed when called, within
    the budget.

    Raises:
        TemplateSyntaxError: The template cannot be parsed, or nests too deeply to parse
            safely (see :mod:`~tether.templating.complexity`).
    """
    kind, source = classify(text)
    if kind == "literal":
        return _Literal(text)
    problem = nesting_problem(ENV, text)
    if problem is not None:
        raise TemplateSyntaxError(problem, 1)
    if kind == "expression":
        return _Expression(source)
    return _Template(text)


def evaluate(text: str, namespace: Mapping[str, Any],
             budget: TemplateBudget = DEFAULT_BUDGET) -> Any:
    """The value of ``text`` (native for ``{{ expr }}``) against ``namespace``.

    Raises:
        TemplateLimit: The render went over ``budget``.
        jinja2.TemplateError: The template failed (undefined name, sandbox refusal, ...).
    """
    return compiled(text)(namespace, budget)


__all__ = ["DEFAULT_BUDGET", "ENV", "Evaluator", "Kind", "TemplateBudget", "classify",
           "compiled", "evaluate", "has_markup", "nesting_problem", "segments"]
