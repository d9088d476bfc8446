"""The quick expression reader (``tether.dsl.expressions._Quick`` and the flat pattern) against
Jinja2, the specification: whatever the quick reader accepts, Jinja2 parses without error into
a tree with the same analysis (references, lines, unsafe attributes, nothing else), and the
truth the quick reader folds is the one ``constant_truth`` folds over Jinja2's tree.

Checked on every ``{{ }}`` expression of the golden files and the examples, on every
one-character mutation of them (deleted, doubled, replaced), and on random expressions of the
subset and its neighbours. A reader that declines (None) is always right: Jinja2 decides.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tether.compiler import conditions
from tether.dsl import expression_tree, expressions
from tether.templating import nesting_problem

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("tests/golden/cases/*.yaml"), *ROOT.glob("tests/golden/cases/*.flow"),
                  *ROOT.glob("examples/**/*.yaml"), *ROOT.glob("examples/**/*.flow")])
_EXPRESSION = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_ALPHABET = " \n.()'=_1e0"


def _expressions() -> list[str]:
    found = {m.group(1).strip() for path in SOURCES for m in _EXPRESSION.finditer(
        path.read_text(encoding="utf-8"))}
    return sorted(found)


def _mutations(text: str) -> set[str]:
    """Each character deleted, doubled, and replaced by each character of the alphabet."""
    out: set[str] = set()
    for i in range(len(text)):
        out.add(text[:i] + text[i + 1:])
        out.add(text[:i] + text[i] + text[i:])
        out.update(text[:i] + c + text[i + 1:] for c in _ALPHABET)
    return out


def assert_same_as_jinja(source: str) -> None:
    """The quick reader's analysis and truth of ``source``, where it gives them, are Jinja2's
    (for a template ``analyse`` reads at all: not one nested beyond the limits)."""
    if nesting_problem("{{ " + source + " }}") is not None:
        return
    quick = expressions._quick_analysis(source)
    if quick is not None:
        slow = expression_tree.analyse_tree("expression", source)
        assert quick == slow, source
        assert [vars(r) for r in quick.references] == [vars(r) for r in slow.references], source
    truth = expressions.quick_truth(source)
    if truth is not None:
        assert quick is not None, source
        assert truth[0] == conditions._tree_truth(source), source


def test_the_files_have_expressions_the_quick_reader_reads() -> None:
    found = _expressions()
    assert len(found) > 100
    assert sum(expressions.quick_truth(s) is not None for s in found) > 50


@pytest.mark.parametrize("chunk", range(4))
def test_every_expression_of_the_files_and_its_mutations_read_as_jinja2_reads_them(
        chunk: int) -> None:
    found = _expressions()
    for text in found[chunk::4]:
        # the hostile files' expressions of thousands of characters (limits, tested in
        # test_hostile_files.py) are checked as they are, not mutated
        mutated = _mutations(text) if len(text) <= 200 else set()
        for source in {text, *mutated}:
            assert_same_as_jinja(source)


_ATOMS = ("inputs.x", "nodes.a.output.v", "item", "x._y", "_p", "run.id", "0", "00", "01",
          "7", "10", "1.5", "0.0", "1e3", "1E-2", "1e-400", "2.5e+1", "''", "'a'", '""', '"b"',
          "'it''s'", "true", "false", "True", "False", "none", "None", "in", "is", "not",
          "x.1", "1.x", "a[0]", "f(1)", "x|upper", "'a\\'b'")
_JOINS = (" and ", " or ", " + ", " - ", " * ", " ** ", " // ", " % ", " == ", " != ",
          " < ", " >= ", " in ", " not in ", " if ", " else ", " ", "", ".", " is ")


def _random_expression(rng: random.Random, depth: int = 0) -> str:
    if depth > 3 or rng.random() < 0.3:
        return rng.choice(_ATOMS)
    shape = rng.randrange(5)
    if shape == 0:
        return f"not {_random_expression(rng, depth + 1)}"
    if shape == 1:
        return f"({_random_expression(rng, depth + 1)})"
    if shape == 2:
        return f"-{_random_expression(rng, depth + 1)}"
    return _random_expression(rng, depth + 1) + rng.choice(_JOINS) + \
        _random_expression(rng, depth + 1)


def test_random_expressions_read_as_jinja2_reads_them() -> None:
    rng = random.Random(25)
    read = 0
    for _ in range(6000):
        source = _random_expression(rng)
        assert_same_as_jinja(source)
        read += expressions.quick_truth(source) is not None
    assert read > 1000  # the subset is exercised, not only declined


@pytest.mark.parametrize(("source", "truth"), [
    ("x or true", True), ("x and false", False), ("not (x and 0)", True),
    ("nodes.a.status == 'ok' or nodes.b.output", None), ("'' or x", None),
    ("x or 1e-400", None), ("(none or 'a') and x", None), ("true or x.y", True),
    ("x if true else y", None), ("-1 or x", None)])
def test_the_quick_fold(source: str, truth: bool | None) -> None:
    assert expressions.quick_truth(source) == (truth,)
    assert conditions._tree_truth(source) is truth


def test_an_integer_with_a_leading_zero_is_left_to_jinja2() -> None:
    """Jinja2 reads ``01`` as two integers (a syntax error); the quick reader declines it."""
    assert expressions._quick_analysis("01") is None
    assert expressions._quick_analysis("x + 007") is None
    assert expressions.analyse("{{ 01 }}").error == "expected token 'end of print statement', " \
        "got 'integer'"


def test_reading_templates_imports_no_jinja2_and_rendering_still_finds_it() -> None:
    """The analysis of quick templates imports no Jinja2; ``tether.templating.ENV`` and
    ``compiled`` are the engine's, imported on first use."""
    script = (
        "import sys\n"
        "from tether.dsl.expressions import analyse\n"
        "from tether.compiler.conditions import constant_truth\n"
        "assert analyse('a {{ inputs.x }} b').references\n"
        "assert constant_truth('{{ x or true }}') is True\n"
        "before = 'jinja2' in sys.modules\n"
        "import tether.templating as t\n"
        "from tether.templating.engine import ENV\n"
        "assert t.ENV is ENV and t.compiled('{{ 1 + 1 }}')({}) == 2\n"
        "print(before, 'jinja2' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
