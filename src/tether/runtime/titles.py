"""A node's ``title`` as displays show it: a template, rendered when the node (or, for a title
reading ``item``, each element) starts.

A title is for people reading progress lines and the console, never an input of the run: a
title that fails to render (a value missing at run time) is shown as written instead of
failing the node. The compiler checks it like any template, so that is rare.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tether.errors import TemplateLimit
from tether.runtime.render import RenderError, render
from tether.templating import has_markup

if TYPE_CHECKING:
    from tether.compiler.plan import PlanNode
    from tether.runtime.execution import Level

_READS_ITEM = re.compile(r"\bitem\b")


def per_element(node: PlanNode) -> bool:
    """Whether the node's title reads ``item``: then each element has its own."""
    title = node.title
    return title is not None and has_markup(title) and _READS_ITEM.search(title) is not None


def shown_title(level: Level, node: PlanNode, *, item: Any = None,
                has_item: bool = False) -> str | None:
    """The title to show for ``node`` (or one of its elements): rendered when it is a
    template, None for a node whose title belongs to its elements."""
    title = node.title
    if title is None or not has_markup(title):
        return title
    if not has_item and per_element(node):
        return None
    try:
        shown = render(title, level.names(node, item=item, has_item=has_item), "title",
                       level.session.budget)
    except (RenderError, TemplateLimit):
        return title
    return shown if isinstance(shown, str) else str(shown)
