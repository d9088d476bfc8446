"""lark-cython and Lark's own parser read every .flow file the same way.

The reader parses with lark-cython when it is installed (a core dependency on CPython) and
with Lark's pure-Python LALR otherwise; the two must give the same data, source map and
diagnostics, on the golden cases (syntax errors included) and on a large generated file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from lark import Token, Tree

from tether.dsl.flow_reader import read_flow
from tether.dsl.flow_syntax import parse_statement, split_statements

pytest.importorskip("lark_cython")

ROOT = Path(__file__).resolve().parents[2]
FLOW_FILES = sorted((ROOT / "tests" / "golden").rglob("*.flow")) + \
    sorted((ROOT / "examples").rglob("*.flow"))


def _generated(nodes: int) -> str:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from generate import workflow_flow
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return str(workflow_flow(nodes))


def _positions(tree: Tree[Token]) -> list[tuple[object, ...]]:
    """Every rule's and token's kind and place (what equality of trees does not compare)."""
    found: list[tuple[object, ...]] = []
    for sub in tree.iter_subtrees():
        meta = sub.meta
        found.append((type(sub.data), sub.data, meta.line, meta.column, meta.end_line,
                      meta.end_column, meta.start_pos, meta.end_pos))
    for token in tree.scan_values(lambda _: True):
        found.append((type(token), token.type, str(token), token.line, token.column,
                      token.end_line, token.end_column, token.start_pos, token.end_pos))
    return found


def _same_reading(text: str, file: str) -> None:
    compiled, pure = read_flow(text, file), read_flow(text, file, pure=True)
    assert compiled == pure
    assert list(compiled.source.keys.items()) == list(pure.source.keys.items())
    assert list(compiled.source.values.items()) == list(pure.source.values.items())
    assert compiled.diagnostics == pure.diagnostics  # in the same order


def test_there_are_flow_files_to_compare() -> None:
    assert len(FLOW_FILES) > 20


@pytest.mark.parametrize("path", FLOW_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_golden_and_example_files_read_the_same(path: Path) -> None:
    _same_reading(path.read_text(encoding="utf-8"), path.name)


def test_a_generated_workflow_reads_the_same() -> None:
    text = _generated(300)
    _same_reading(text, "generated.flow")
    for chunk in split_statements(text, "generated.flow"):
        statement = text[chunk.start:chunk.end]
        compiled, pure = parse_statement(statement), parse_statement(statement, pure=True)
        assert compiled == pure
        assert _positions(compiled) == _positions(pure)


def test_the_compiled_parser_gives_lark_tokens() -> None:
    tree = parse_statement('task a = shop.pay(amount: 3, note: "x")\n  after b, c\n')
    tokens = list(tree.scan_values(lambda _: True))
    assert tokens and all(type(token) is Token for token in tokens)
    assert type(tree.data) is Token


def test_a_syntax_error_reads_the_same() -> None:
    text = "workflow w\ntask a = shop.pay(amount 3)\ntask b = shop.pay\n  afterr a\n" \
        'task c = shop.pay(x: "unclosed)\n'
    _same_reading(text, "broken.flow")
    assert read_flow(text, "broken.flow").diagnostics
