"""What templates read: the compiler's analysis of the expression language.

:func:`analyse` parses a template once and lists every name it reads (``inputs.amount``,
``nodes.lookup.output``), the private attributes it reaches for and the filters and tests it
uses, so the compiler can check them against the workflow. Rendering lives in
:mod:`tether.templating`, which the runtime uses without this module.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, fields

from jinja2 import TemplateSyntaxError, nodes
from jinja2.meta import find_undeclared_variables

from tether.templating import ENV, Kind, classify, nesting_problem, segments


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
    calls: tuple[str, ...] = ()
    """Names called as functions (``range(3)``: ``range``)."""
    refused: tuple[tuple[str, str], ...] = ()
    """What the sandbox refuses at run time, as (code, the word to point at): ``include``,
    ``import``, ``from``, ``extends`` and the ``attr`` filter (E420-E424)."""
    error: str | None = None
    error_line: int = 1
    too_complex: bool = False


_ANALYSIS_DEFAULTS = {f.name: f.default for f in fields(Analysis)}


def _analysis(kind: Kind, references: tuple[Reference, ...], unsafe: tuple[str, ...]) -> Analysis:
    """``Analysis(kind, references=..., unsafe=...)`` without the frozen dataclass's
    ``__init__`` (a setattr per field): the quick paths make one per distinct template."""
    made = object.__new__(Analysis)
    made.__dict__.update(_ANALYSIS_DEFAULTS, kind=kind, references=references, unsafe=unsafe)
    return made


def _reference(root: str, attrs: tuple[str, ...]) -> Reference:
    """``Reference(root, attrs, 1)``, made as :func:`_analysis` makes an analysis."""
    made = object.__new__(Reference)
    made.__dict__.update(root=root, attrs=attrs, line=1, dynamic=False)
    return made


def _parse(kind: Kind, source: str) -> nodes.Template:
    text = "{{ " + source + " }}" if kind == "expression" else source
    return ENV.parse(text)


def _quick_template(text: str) -> Analysis | None:
    """:func:`_quick_analysis` for a template of text and simple expressions."""
    parts = segments(text)
    if parts is None:
        return None
    references: list[Reference] = []
    unsafe: list[str] = []
    for segment in parts:
        part = _quick_analysis(segment)
        if part is None:
            return None
        references.extend(part.references)
        unsafe.extend(part.unsafe)
    return _analysis("template", tuple(references), tuple(unsafe))


@functools.lru_cache(maxsize=65536)
def analyse(text: str) -> Analysis:
    """Parse ``text`` once and list what it reads; syntax errors are returned, not raised."""
    kind, source = classify(text)
    if kind == "literal":
        return Analysis(kind)
    problem = nesting_problem(ENV, text)
    if problem is not None:
        return Analysis(kind, error=problem, too_complex=True)
    try:
        return _analyse(kind, source, text)
    except RecursionError:  # within the limits, but called from deep in a tree of files
        return Analysis(kind, error="the template is nested too deeply to analyse",
                        too_complex=True)


def _analyse(kind: Kind, source: str, text: str) -> Analysis:
    quick = _quick_analysis(source) if kind == "expression" else _quick_template(text)
    if quick is not None:
        return quick
    try:
        tree = _parse(kind, source)
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


_TOKEN = re.compile(
    r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![A-Za-z0-9_.]))"
    r"""|(?P<string>'[^'\\]*'|"[^"\\]*")"""
    r"|(?P<op>\*\*|//|==|!=|<=|>=|[-+*/%<>().]))"
)
_CONSTANTS = frozenset({"true", "false", "none", "True", "False", "None"})
_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "if", "else"}) | _CONSTANTS
_COMPARE = frozenset({"==", "!=", "<", "<=", ">", ">="})


class _Quick:
    """A recogniser for the common subset of expressions: dotted names, numbers, arithmetic,
    comparisons, ``and``/``or``/``not``/``in``, ``x if c else y``, parentheses.

    It accepts only what Jinja2 accepts and finds the same references, without Jinja2's
    general lexer and parser (about ten times faster, which matters for 10,000-node
    workflows). Anything outside the subset (strings, filters, tests, calls, subscripts,
    literals of lists or dicts) returns None and goes to Jinja2.
    """

    def __init__(self, source: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        position = 0
        source = source.rstrip()
        while position < len(source):
            match = _TOKEN.match(source, position)
            if match is None or match.end() == position:
                raise ValueError(source)
            kind = match.lastgroup or ""
            self.tokens.append((kind, match.group(kind)))
            position = match.end()
        self.position = 0
        self.references: list[Reference] = []
        self.unsafe: list[str] = []

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.position] if self.position < len(self.tokens) else ("", "")

    def take(self, value: str | None = None) -> str:
        kind, text = self.peek()
        if not kind or (value is not None and text != value):
            raise ValueError(value)
        self.position += 1
        return text

    def accept(self, *values: str) -> bool:
        if self.peek()[1] in values and self.peek()[0] in ("name", "op"):
            self.position += 1
            return True
        return False

    def expression(self) -> None:
        self.or_test()
        if self.accept("if"):
            self.or_test()
            if self.accept("else"):
                self.expression()

    def or_test(self) -> None:
        self.and_test()
        while self.accept("or"):
            self.and_test()

    def and_test(self) -> None:
        self.not_test()
        while self.accept("and"):
            self.not_test()

    def not_test(self) -> None:
        if self.accept("not"):
            self.not_test()
        else:
            self.compare()

    def compare(self) -> None:
        self.arith()
        while True:
            kind, text = self.peek()
            if (kind == "op" and text in _COMPARE) or (kind == "name" and text == "in"):
                self.position += 1
            elif kind == "name" and text == "not" and self.tokens[self.position + 1:] and \
                    self.tokens[self.position + 1][1] == "in":
                self.position += 2
            else:
                return
            self.arith()

    def arith(self) -> None:
        self.term()
        while self.accept("+", "-"):
            self.term()

    def term(self) -> None:
        self.power()
        while self.accept("*", "/", "//", "%"):
            self.power()

    def power(self) -> None:
        self.unary()
        while self.accept("**"):
            self.unary()

    def unary(self) -> None:
        if self.accept("-", "+"):
            self.unary()
            return
        kind, text = self.peek()
        if kind in ("number", "string") or (kind == "name" and text in _CONSTANTS):
            self.position += 1
        elif kind == "op" and text == "(":
            self.position += 1
            self.expression()
            self.take(")")
        elif kind == "name" and text not in _KEYWORDS:
            self.position += 1
            attrs: list[str] = []
            while self.accept("."):
                kind, attr = self.peek()
                if kind != "name":
                    raise ValueError(attr)
                self.position += 1
                attrs.append(attr)
                if attr.startswith("_"):
                    self.unsafe.append(attr)
            if self.peek()[1] in ("(", "["):
                raise ValueError("call or subscript")
            self.references.append(_reference(text, tuple(attrs)))
        else:
            raise ValueError(text)


_OPERAND = r"(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*|\d+(?:\.\d+)?)"
_OPERATOR = r"(?:\*\*|//|==|!=|<=|>=|[-+*/%<>])"
_FLAT = re.compile(rf"\s*{_OPERAND}(?:\s*{_OPERATOR}\s*{_OPERAND})*\s*")
_CHAIN = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _flat_analysis(source: str) -> Analysis | None:
    """The commonest expressions, ``nodes.a.output.value + 1``, without the recogniser."""
    if _FLAT.fullmatch(source) is None:
        return None
    references = []
    unsafe: list[str] = []
    for chain in _CHAIN.findall(source):
        root, *attrs = chain.split(".")
        if root in _KEYWORDS:
            return None
        if root[0].isdigit():
            continue
        unsafe.extend(a for a in attrs if a.startswith("_"))
        references.append(_reference(root, tuple(attrs)))
    return _analysis("expression", tuple(references), tuple(unsafe))


@functools.lru_cache(maxsize=65536)
def _quick_analysis(source: str) -> Analysis | None:
    """The analysis of a simple expression (``inputs.x``, ``nodes.a.output.v + 1``) without
    Jinja2's parser, or None; cached, as the same ``{{ inputs.x }}`` recurs in many
    templates."""
    flat = _flat_analysis(source)
    if flat is not None:
        return flat
    try:
        quick = _Quick(source)
        quick.expression()
        if quick.position != len(quick.tokens) or not quick.tokens:
            return None
    except (ValueError, IndexError):
        return None
    return _analysis("expression", tuple(quick.references), tuple(quick.unsafe))


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
