"""Conditions that decide nothing: truth known at compile time, even with names in them.

``{{ true }}``, ``{{ 'false' }}`` (a non-empty string is true) and ``{{ x or true }}`` are
always true; ``{{ x and false }}`` always false. The expression is parsed (never evaluated
with names) and folded over ``and``/``or``/``not`` and constants; a constant sub-expression
without names is evaluated within a small budget.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from tether.dsl.expressions import analyse, quick_truth
from tether.templating import TemplateBudget, classify

if TYPE_CHECKING:
    from jinja2 import nodes

# Deciding whether a guard is constant must not make `check` slow: a small budget each.
CONSTANT_BUDGET = TemplateBudget(seconds=0.05, max_size=10_000)


@functools.lru_cache(maxsize=4096)
def constant_truth(text: str | None) -> bool | None:
    """The truth of a condition when it does not depend on anything it reads, else None."""
    if text is None:
        return None
    analysis = analyse(text)
    if analysis.error or analysis.kind != "expression":
        return None
    if not analysis.references:
        from tether.templating import compiled

        try:
            return bool(compiled(text)({}, CONSTANT_BUDGET))
        except Exception:  # one that fails (or goes over its budget) at run time: unknown
            return None
    if " or " not in text and " and " not in text and "not " not in text:
        return None
    source = classify(text)[1]
    quick = quick_truth(source)  # the common conditions, folded without Jinja2's parser
    if quick is not None:
        return quick[0]
    return _tree_truth(source)


def _tree_truth(source: str) -> bool | None:
    """:func:`constant_truth` of an expression folded over Jinja2's tree."""
    from jinja2 import TemplateSyntaxError, nodes

    from tether.templating import ENV

    try:
        tree = ENV.parse("{{ " + source + " }}")
    except (TemplateSyntaxError, RecursionError):
        return None
    output = tree.body[0] if tree.body else None
    if not isinstance(output, nodes.Output) or len(output.nodes) != 1:
        return None
    return _fold(output.nodes[0])


def _fold(node: nodes.Node) -> bool | None:
    from jinja2 import nodes

    if isinstance(node, nodes.Const):
        return bool(node.value)
    if isinstance(node, nodes.Not):
        inner = _fold(node.node)
        return None if inner is None else not inner
    if isinstance(node, nodes.Or | nodes.And):
        left, right = _fold(node.left), _fold(node.right)
        decisive = isinstance(node, nodes.Or)  # `or` is decided by a true side
        if decisive in (left, right):
            return decisive
        if left is not None and right is not None:
            return not decisive
    return None


def truthy_string(text: str) -> str | None:
    """The string literal a condition is made of (``{{ 'false' }}``), if it is only that."""
    kind, source = classify(text)
    if kind != "expression":
        return None
    source = source.strip()
    if len(source) >= 2 and source[0] == source[-1] and source[0] in "'\"" and \
            source[0] not in source[1:-1]:
        return source[1:-1]
    return None


__all__ = ["CONSTANT_BUDGET", "constant_truth", "truthy_string"]
