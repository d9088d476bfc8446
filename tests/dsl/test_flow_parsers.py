"""Every way of reading a .flow file reads it as the grammar does.

The reader parses with lark-cython when it is installed (a core dependency on CPython) and
with Lark's pure-Python LALR otherwise; the two must give the same data, source map and
diagnostics, on the golden cases (syntax errors included) and on a large generated file.
The one fast reader (``tether.dsl.flow_direct``, task statements read straight into data)
must give the grammar's reading too, on every golden and example file, on generated files
and on every one-character mutation of the shapes it reads.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from lark import Token, Tree

from tether.dsl.flow_direct import read_statement, read_task
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
    compiled, pure = read_flow(text, file, fast=False), read_flow(text, file, fast=False, pure=True)
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
        compiled = parse_statement(statement)
        pure = parse_statement(statement, pure=True)
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


# -- the one fast reader: task statements read straight into data (tether.dsl.flow_direct) --

def _same_as_grammar(text: str, file: str) -> None:
    fast, grammar = read_flow(text, file), read_flow(text, file, fast=False, pure=True)
    assert fast == grammar
    assert list(fast.source.keys.items()) == list(grammar.source.keys.items())
    assert list(fast.source.values.items()) == list(grammar.source.values.items())
    assert fast.diagnostics == grammar.diagnostics


def _statements(text: str) -> list[str]:
    return [text[chunk.start:chunk.end] for chunk in split_statements(text, "f.flow")]


def test_the_fast_reader_is_the_only_one() -> None:
    """One hand-written reader beside the grammar: a syntax change is made in two places.
    The reader is two modules: its statements (``flow_direct``) and the tokens and values
    they are made of (``flow_values``, imported by ``flow_direct`` alone)."""
    dsl = ROOT / "src" / "tether" / "dsl"
    modules = {p.stem for p in dsl.glob("flow_*.py")}
    assert modules == {"flow_direct", "flow_values", "flow_reader", "flow_syntax", "flow_writer"}
    users = {p.stem for p in (ROOT / "src").rglob("*.py")
             if "flow_values" in p.read_text(encoding="utf-8") and p.stem != "flow_values"}
    assert users == {"flow_direct"}


@pytest.mark.parametrize("path", FLOW_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_fast_reader_reads_golden_and_example_files_as_the_grammar(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    _same_as_grammar(text, path.name)
    for statement in _statements(text):  # each task it reads alone is read as in the file
        record = read_task(statement, path.name, 0)
        if record is not None:
            _same_as_grammar(f"workflow w\n{statement}", path.name)


def test_some_golden_task_statements_are_read_fast() -> None:
    """The comparison above is not vacuous: the golden files hold tasks the fast reader reads."""
    read = sum(read_task(s, "f.flow", 0) is not None
               for path in FLOW_FILES for s in _statements(path.read_text(encoding="utf-8")))
    assert read > 20


_SHAPES = [
    'task a-b = shop.pay(amount: 3, note: "x", opts: {k: [1, -2.5e3, true, null], "q": {}},)\n'
    '    after b, "c"  # a comment\n    when {{ inputs.x > 0 }}\n    timeout 30s\n'
    '    retry 3 backoff 2s strategy fixed\n    trigger all_done\n    title "T"\n'
    '    for_each [1, 2]\n    concurrency 2\n    until {{ nodes.a.output.done }}\n'
    '    loop to "b" while {{ iteration < 2 }} max 3 on_exhausted fail\n',
    'task a = "shop.pay"\n  retry {{ inputs.n }} strategy "exponential"\n  timeout "1m"\n',
]


def _mutations(statement: str) -> list[str]:
    """The statement with one character deleted, doubled or replaced, at every place."""
    found = []
    for i in range(len(statement)):
        found.append(statement[:i] + statement[i + 1:])
        found.append(statement[:i] + statement[i] + statement[i:])
        for char in ' ,:=({["#x1-.\n':
            found.append(statement[:i] + char + statement[i + 1:])
    return found


def test_the_fast_reader_declines_what_the_lexer_reads_otherwise() -> None:
    for statement in ("task a = b\n  after null\n", "task a = b\n  afterr a\n",
                      "task a = b\n  trigger null\n", "task a = b\n  timeout30s\n",
                      "task a = b(true: 1)\n", "task a = b\n  idempotent null\n",
                      "task null = b\n", "task a = null\n"):
        assert read_task(statement, "f.flow", 0) is None, statement
        _same_as_grammar(f"workflow w\n{statement}", "declined.flow")


def test_the_direct_reader_reads_every_generated_task() -> None:
    text = _generated(300)
    tasks = [s for s in _statements(text) if s.startswith("task ")]
    assert tasks and all(read_task(s, "f.flow", 0) is not None for s in tasks)
    _same_as_grammar(text, "generated.flow")


@pytest.mark.parametrize("statement", [s for s in _SHAPES if s.startswith("task ")])
def test_the_direct_reader_reads_each_task_shape_or_declines_like_the_tree_walk(
        statement: str) -> None:
    """Every mutation of the task shapes reads, data, source map and diagnostics, as the
    grammar and the tree walk read it (a second statement gives ids to repeat and clash)."""
    assert read_task(statement, "f.flow", 0) is not None
    for mutated in [statement, *_mutations(statement)]:
        _same_as_grammar(f"workflow w\ntask b = x.y\n{mutated}", "shape.flow")


_QUICK_SHAPES = [
    'task n5 = bench.step(value: {{ nodes.n4.output.value + 1 }}, tag: "{{ inputs.label }}-5")'
    "\n    after n4, n-0\n    when {{ inputs.seed > 0 }}\n",
    'task a = b(x: -1.5e3, y: true, z: null, w: "q\\"r", v: 0)\n  after c\n',
    "task a = b(x: false)\n",
]


def _same_record(statement: str) -> None:
    quick, scanned = read_task(statement, "f.flow", 3), read_task(statement, "f.flow", 3,
                                                                     quick=False)
    assert quick == scanned, statement
    if quick is not None and scanned is not None:
        assert list(quick.keys.items()) == list(scanned.keys.items()), statement
        assert list(quick.values.items()) == list(scanned.values.items()), statement


@pytest.mark.parametrize("statement", _QUICK_SHAPES)
def test_the_quick_patterns_read_as_the_scan(statement: str) -> None:
    """The patterns for the common head and ``after`` clause give the token scan's record
    (data, spans and their order), or decline as it does, on every mutation."""
    assert read_task(statement, "f.flow", 0) is not None
    for mutated in [statement, *_mutations(statement)]:
        _same_record(mutated)
    for mutated in _mutations(statement)[::7]:
        _same_as_grammar(f"workflow w\ntask b = x.y\n{mutated}", "quick.flow")


def test_the_quick_patterns_read_the_shapes_as_the_scan() -> None:
    for statement in [*_SHAPES, *(s for s in _statements(_generated(300)))]:
        _same_record(statement)


def test_the_direct_reader_leaves_problems_to_the_tree_walk() -> None:
    for statement in ("task a = b(x: 1, x: 2)\n", "task a = b\n  when 1\n  when 2\n",
                      'task a = b(x: "\\q")\n', "task a = b(x: 1e999)\n",
                      "task a = b\n  retry null\n", "task a = b(x: {k: 1, k: 2})\n",
                      "task a = b\n  after a, null\n"):
        assert read_task(statement, "f.flow", 0) is None, statement
        _same_as_grammar(f"workflow w\n{statement}", "problem.flow")


# -- the other common statements, read straight into data too (no parser tables for them) --

_STATEMENT_SHAPES = [
    'workflow "other name"  # a comment\n',
    'description "A \\"quoted\\" text"\n',
    'input amount: number = 3 enum [1, 3] description "d\\n"\n',
    'input note: string\n',
    'output refund_id = {{ nodes.b.output.id }}\n',
    'output "k q" = [1, {a: null, "b": -2.5}]\n',
    'approval review after b, "c" when {{ inputs.x > 0 }}\n    reason manager_approval\n'
    '    context {amount: {{ inputs.amount }}, "k": [1]}\n'
    '    form (approved: boolean, note: string = "" description "n", level: integer enum '
    '[1, 2],)\n    trigger all_done\n    title "T"\n',
    'approval a\n  reason "why"\n  form ()\n  idempotent\n',
]


@pytest.mark.parametrize("statement", _STATEMENT_SHAPES)
def test_the_direct_reader_reads_each_statement_shape_or_declines_like_the_tree_walk(
        statement: str) -> None:
    """Headers, inputs, output lines and approvals: every mutation reads as the grammar and
    the tree walk read it, or is declined to them."""
    if "idempotent" not in statement:
        assert read_statement(statement, "f.flow", 0) is not None
    for mutated in [statement, *_mutations(statement)]:
        _same_as_grammar(f"workflow w\ntask b = x.y\n{mutated}", "statement.flow")


def test_a_small_flow_file_needs_no_parser_tables() -> None:
    """The refund example is read with no statement left to the grammar."""
    text = (ROOT / "examples" / "refund" / "refund.flow").read_text(encoding="utf-8")
    assert all(read_statement(statement, "refund.flow", 0) is not None
               for statement in _statements(text))
