"""What templates read: the compiler's analysis of the expression language.

:func:`analyse` parses a template once and lists every name it reads (``inputs.amount``,
``nodes.lookup.output``), the private attributes it reaches for and the filters and tests it
uses, so the compiler can check them against the workflow. Rendering lives in
:mod:`tether.templating`, which the runtime uses without this module.

The common expressions are read here without Jinja2 (:class:`_Quick`, which accepts only what
Jinja2 accepts and finds what its tree gives: tests/dsl/test_quick_expressions.py); anything
else goes to Jinja2's parser and the walk of its tree (:mod:`tether.dsl.expression_tree`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, fields
from typing import Any

from tether.templating import Kind, classify, nesting_problem, segments


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
    problem = nesting_problem(text)
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
    from tether.dsl.expression_tree import analyse_tree

    return analyse_tree(kind, source)


# A number as Jinja2's lexer reads one: a float (a fraction, an exponent or both), or an
# integer without a leading zero (Jinja2 reads `01` as two integers: a syntax error).
_NUMBER = r"(?:\d+(?:\.\d+)?[eE][+-]?\d+|\d+\.\d+|[1-9]\d*|0+)(?![A-Za-z0-9_.])"
_TOKEN = re.compile(
    r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    rf"|(?P<number>{_NUMBER})"
    r"""|(?P<string>'[^'\\]*'|"[^"\\]*")"""
    r"|(?P<op>\*\*|//|==|!=|<=|>=|[-+*/%<>().]))"
)
_CONSTANTS = frozenset({"true", "false", "none", "True", "False", "None"})
_TRUE = frozenset({"true", "True"})
_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "if", "else"}) | _CONSTANTS
_COMPARE = frozenset({"==", "!=", "<", "<=", ">", ">="})

Truth = bool | None
"""What a sub-expression's truth is known to be without its names: True, False, or None
(it depends on what it reads, or is not a constant, an ``and``, ``or`` or ``not``)."""


def _folded(is_or: bool, left: Truth, right: Truth) -> Truth:
    """The truth of ``left or right`` (``is_or``) or ``left and right``: ``or`` is decided
    by a true side, ``and`` by a false one; two known sides decide it otherwise."""
    if is_or in (left, right):
        return is_or
    if left is not None and right is not None:
        return not is_or
    return None


def _constant_truth(kind: str, text: str) -> bool:
    """The truth of a literal token's value: a number (as Jinja2 reads it, a float or an
    int), a string without escapes, or ``true``/``false``/``none``."""
    if kind == "number":
        return float(text) != 0
    if kind == "string":
        return len(text) > 2
    return text in _TRUE


def _unsafe(attrs: list[str]) -> list[str]:
    """The private attributes of a chain, last first, as the walk of Jinja2's tree (from the
    outermost attribute in) lists them."""
    return [attr for attr in reversed(attrs) if attr.startswith("_")]


def _rotate(found: list[Any], start: int, middle: int) -> None:
    """Move ``found[middle:]`` before ``found[start:middle]``."""
    found[start:] = found[middle:] + found[start:middle]


class _Quick:
    """A recogniser for the common subset of expressions: dotted names, numbers, arithmetic,
    comparisons, ``and``/``or``/``not``/``in``, ``x if c else y``, parentheses.

    It accepts only what Jinja2 accepts and finds the same references, without Jinja2's
    general lexer and parser (about ten times faster, which matters for 10,000-node
    workflows; and `tether check` of such templates imports no Jinja2). Anything outside the
    subset (filters, tests, calls, subscripts, literals of lists or dicts, strings with
    escapes) returns None and goes to Jinja2. Each level returns its :data:`Truth`, folded
    as :func:`tether.compiler.conditions.constant_truth` folds Jinja2's tree.
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

    def expression(self) -> Truth:
        starts = len(self.references), len(self.unsafe)
        truth = self.or_test()
        if self.accept("if"):
            middles = len(self.references), len(self.unsafe)
            self.or_test()
            self.test_first(starts, middles)
            if self.accept("else"):
                self.expression()
            return None
        return truth

    def test_first(self, starts: tuple[int, int], middles: tuple[int, int]) -> None:
        """``a if b``: what ``b`` reads comes first, as in Jinja2's tree (``CondExpr``'s
        fields are the test, then the two values)."""
        _rotate(self.references, starts[0], middles[0])
        _rotate(self.unsafe, starts[1], middles[1])

    def or_test(self) -> Truth:
        truth = self.and_test()
        while self.accept("or"):
            truth = _folded(True, truth, self.and_test())
        return truth

    def and_test(self) -> Truth:
        truth = self.not_test()
        while self.accept("and"):
            truth = _folded(False, truth, self.not_test())
        return truth

    def not_test(self) -> Truth:
        if self.accept("not"):
            inner = self.not_test()
            return None if inner is None else not inner
        return self.compare()

    def compare(self) -> Truth:
        truth = self.arith()
        while True:
            kind, text = self.peek()
            if (kind == "op" and text in _COMPARE) or (kind == "name" and text == "in"):
                self.position += 1
            elif kind == "name" and text == "not" and self.tokens[self.position + 1:] and \
                    self.tokens[self.position + 1][1] == "in":
                self.position += 2
            else:
                return truth
            self.arith()
            truth = None

    def arith(self) -> Truth:
        truth = self.term()
        while self.accept("+", "-"):
            self.term()
            truth = None
        return truth

    def term(self) -> Truth:
        truth = self.power()
        while self.accept("*", "/", "//", "%"):
            self.power()
            truth = None
        return truth

    def power(self) -> Truth:
        truth = self.unary()
        while self.accept("**"):
            self.unary()
            truth = None
        return truth

    def unary(self) -> Truth:
        if self.accept("-", "+"):
            self.unary()
            return None
        kind, text = self.peek()
        if kind in ("number", "string") or (kind == "name" and text in _CONSTANTS):
            self.position += 1
            return _constant_truth(kind, text)
        if kind == "op" and text == "(":
            self.position += 1
            truth = self.expression()
            self.take(")")
            return truth
        if kind == "name" and text not in _KEYWORDS:
            self.name(text)
            return None
        raise ValueError(text)

    def name(self, text: str) -> None:
        """A name and its dotted attributes: one reference."""
        self.position += 1
        attrs: list[str] = []
        while self.accept("."):
            kind, attr = self.peek()
            if kind != "name":
                raise ValueError(attr)
            self.position += 1
            attrs.append(attr)
        if self.peek()[1] in ("(", "["):
            raise ValueError("call or subscript")
        self.unsafe.extend(_unsafe(attrs))
        self.references.append(_reference(text, tuple(attrs)))


_OPERAND = r"(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*|\d+\.\d+|[1-9]\d*|0+)"
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
        unsafe.extend(_unsafe(attrs))
        references.append(_reference(root, tuple(attrs)))
    return _analysis("expression", tuple(references), tuple(unsafe))


def _multiline(source: str) -> bool:
    """Whether ``source`` spans lines: Jinja2 numbers each reference's line, the quick
    readers only ever say line 1, so they leave such an expression to Jinja2."""
    return "\n" in source or "\r" in source


@functools.lru_cache(maxsize=65536)
def _quick_analysis(source: str) -> Analysis | None:
    """The analysis of a simple expression (``inputs.x``, ``nodes.a.output.v + 1``) without
    Jinja2's parser, or None; cached, as the same ``{{ inputs.x }}`` recurs in many
    templates."""
    if _multiline(source):
        return None
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


def quick_truth(source: str) -> tuple[Truth] | None:
    """``(truth,)`` of an expression's source as the quick reader folds it (see
    :data:`Truth`), or None when the quick reader does not read it (Jinja2's tree decides)."""
    if _multiline(source):
        return None
    try:
        quick = _Quick(source)
        truth = quick.expression()
        if quick.position != len(quick.tokens) or not quick.tokens:
            return None
    except (ValueError, IndexError, RecursionError):
        return None
    return (truth,)
