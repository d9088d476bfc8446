"""The engine: the sandboxed Jinja2 environment, and templates compiled and evaluated in it.

Imported on first use through :mod:`tether.templating` (``ENV``, ``compiled``, ``evaluate``):
reading what a template says (:func:`~tether.templating.classify`, the compiler's analysis)
mostly needs no Jinja2 at all.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from jinja2 import Template, TemplateSyntaxError, nodes

from tether.errors import TemplateLimit
from tether.templating import Evaluator, classify
from tether.templating.complexity import nesting_problem
from tether.templating.meter import DEFAULT_BUDGET, TemplateBudget, metering, text_size
from tether.templating.sandbox import Sandbox

ENV = Sandbox()
"""The one environment: its filters, tests and globals are what templates may use."""


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
    problem = nesting_problem(text)
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


__all__ = ["ENV", "compiled", "evaluate"]
