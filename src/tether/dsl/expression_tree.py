"""The analysis of a template from Jinja2's own tree, for what the quick readers of
:mod:`tether.dsl.expressions` do not read (filters, tests, calls, subscripts, statements).

Imported on first use: it is what imports Jinja2 when a workflow is checked.
"""

from __future__ import annotations

from jinja2 import TemplateSyntaxError, nodes
from jinja2.meta import find_undeclared_variables

from tether.dsl.expressions import Analysis, Reference
from tether.templating import ENV, Kind


def analyse_tree(kind: Kind, source: str) -> Analysis:
    """The analysis of ``source`` (an expression's, or a whole template's text) by a walk
    of the tree Jinja2 parses it into; a syntax error is returned, not raised."""
    try:
        tree = parse(kind, source)
    except TemplateSyntaxError as exc:
        return Analysis(kind, error=_syntax_message(exc), error_line=exc.lineno or 1)
    walker = _Walker(_free_names(kind, tree))
    walker.visit(tree)
    return Analysis(
        kind,
        references=tuple(walker.references),
        unsafe=tuple(walker.unsafe),
        unknown_filters=tuple(sorted(walker.filters - set(ENV.filters))),
        unknown_tests=tuple(sorted(walker.tests - set(ENV.tests))),
        calls=tuple(sorted(walker.calls)),
        refused=tuple(walker.refused),
    )


def _free_names(kind: Kind, tree: nodes.Template) -> set[str] | None:
    """Names the template reads without binding them itself (None: every name is free)."""
    if kind == "expression" or not any(
            True for _ in tree.find_all((nodes.For, nodes.Assign, nodes.Macro))):
        return None
    try:
        return find_undeclared_variables(tree)
    except TemplateSyntaxError:  # an unknown filter; reported separately
        return None


def _syntax_message(exc: TemplateSyntaxError) -> str:
    message = exc.message or "invalid template"
    return message[0].lower() + message[1:] if message else message


def parse(kind: Kind, source: str) -> nodes.Template:
    """Jinja2's tree of an expression's source (wrapped in `{{ }}`) or of a template."""
    text = "{{ " + source + " }}" if kind == "expression" else source
    return ENV.parse(text)


class _Walker:
    def __init__(self, free: set[str] | None) -> None:
        self.free = free
        self.references: list[Reference] = []
        self.unsafe: list[str] = []
        self.filters: set[str] = set()
        self.tests: set[str] = set()
        self.calls: set[str] = set()
        self.refused: list[tuple[str, str]] = []

    def visit(self, node: nodes.Node) -> None:
        if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name):
            self.calls.add(node.node.name)
        refused = _REFUSED.get(type(node))
        if refused is not None:
            self.refused.append(refused)
        if isinstance(node, nodes.Filter) and node.name == "attr":
            self.refused.append(_attr_refusal(node))
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


# Statements that would read another template: the sandbox has no loader, so each fails at
# run time; `check` reports them first (code, the word the diagnostic points at).
_REFUSED: dict[type[nodes.Node], tuple[str, str]] = {
    nodes.Include: ("E420", "include"), nodes.Import: ("E421", "import"),
    nodes.FromImport: ("E421", "from"), nodes.Extends: ("E422", "extends"),
}


def _attr_refusal(node: nodes.Filter) -> tuple[str, str]:
    """E424 for ``attr('_private')`` (the sandbox's SecurityError), else E423: the sandbox
    refuses ``attr`` itself, whose name may be computed where no check can see it."""
    name = node.args[0] if node.args else None
    if isinstance(name, nodes.Const) and isinstance(name.value, str) and \
            name.value.startswith("_"):
        return "E424", name.value
    return "E423", "attr"


__all__ = ["analyse_tree", "parse"]
