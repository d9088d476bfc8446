"""Templates render within a budget of time and size; nothing unbounded runs at compile time.

Time limits are tested with a small deadline so the suite stays fast; a template that would
run for hours without the budget would hit pytest's timeout instead of passing.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tether.errors import TemplateLimit, TetherError
from tether.templating import TemplateBudget, compiled, evaluate

QUICK = TemplateBudget(seconds=0.2)
SIZE_ONLY = TemplateBudget(seconds=60)
"""The default size cap with a time budget no render here comes near, even on a loaded
machine: only the size can trip it (no test asserts on time)."""
NAMES = {"inputs": {"amount": 150, "numbers": [1, 2, 3], "name": "Ada"}}

HOSTILE_TIME = [
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% set x %}{% for i in range(100000) %}{% for j in range(100000) %}a{% endfor %}"
    "{% endfor %}{% endset %}{{ x|length }}",
    "{{ range(100000)|select('in', range(100000)|list)|list|length }}",
]
HOSTILE_SIZE = [
    "{{ 9**(9**9) }}",
    "{{ ('a'*(3*10**9))|length }}",
    "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
    "{% endfor %}{{ ns.s|length }}",
    "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
    "{% endfor %}{{ ns.s|length }}",
    "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s * 2 %}"
    "{% endfor %}{{ ns.s|length }}",
    "{{ [1] * 10**9 }}",
    "{{ 'x'|center(10**9) }}",
    "{{ 'x'.ljust(10**9) }}",
    "{{ 'x'.zfill(10**9) }}",
    "{{ '{:>999999999}'.format(1) }}",
    "{{ '{:>{w}}'.format(1, w=10**9) }}",
    "{{ ('{:>999999999}'|safe).format(1) }}",
    "{{ '%999999999d' % 1 }}",
    "{{ '%.999999999f' % 1.5 }}",
    "{{ '%0999999999d'|format(1) }}",
    "{{ range(100000)|join('x' * 100000) }}",
    "{{ ('x' * 100000).join(range(100000)|map('string')) }}",
    "{{ ('a' * 1000)|replace('a', 'b' * 10000) }}",
    "{{ ('a\\n' * 1000)|indent(10**6) }}",
    "{{ ('a ' * 1000)|wordwrap(1, wrapstring='x' * 10000) }}",
    "{{ [1]|batch(10**9, 0)|list }}",
    "{{ [1]|slice(10**9)|list }}",
    "{{ lipsum(10**6) }}",
    "{{ ([range(100000)|list] * 1000)|string|length }}",
    "{% for i in range(2000) %}{{ 'x' * 1000 }}{% endfor %}",
]


@pytest.mark.parametrize("text", HOSTILE_TIME)
def test_a_template_that_would_run_for_hours_stops_at_its_deadline(text: str) -> None:
    with pytest.raises(TemplateLimit) as caught:
        evaluate(text, NAMES, QUICK)
    assert caught.value.limit == "time"
    assert "rendering took longer than 0.2s" in str(caught.value)


@pytest.mark.parametrize("text", HOSTILE_SIZE)
def test_a_template_that_would_allocate_without_bound_is_refused(text: str) -> None:
    with pytest.raises(TemplateLimit) as caught:
        evaluate(text, NAMES, SIZE_ONLY)
    assert caught.value.limit == "size"
    assert isinstance(caught.value, TetherError) and caught.value.node_id is None


@pytest.mark.parametrize(("text", "expected"), [
    ("{{ inputs.amount }}", 150),
    ("{{ inputs.numbers }}", [1, 2, 3]),
    ("{{ inputs.amount > 100 }}", True),
    ("{{ inputs.numbers + [4] }}", [1, 2, 3, 4]),
    ("{{ 'ab' * 3 }}", "ababab"),
    ("{{ 2 ** 100 }}", 2 ** 100),
    ("{{ '%05d' % 42 }}", "00042"),
    ("{{ '{:>4}'.format(7) }}", "   7"),
    ("{{ inputs.numbers|join(', ') }}", "1, 2, 3"),
    ("{{ [[1], [2, 3]]|sum(start=[]) }}", [1, 2, 3]),
    ("{{ (([[1]] * 100000)|sum(start=[]))|length }}", 100000),
    ("Hello {{ inputs.name ~ '!' }}", "Hello Ada!"),
    ("{% for i in inputs.numbers %}{{ i }}{% endfor %}", "123"),
    ("no markup", "no markup"),
])
def test_ordinary_templates_render_as_before_native_values_included(text: str,
                                                                    expected: object) -> None:
    """Values, not time, are under test: the budget's deadline is one no render here comes
    near at any load (the default 1 s was passed at load 15 by the `sum` case)."""
    assert evaluate(text, NAMES, SIZE_ONLY) == expected


class _StepClock:
    """A monotonic clock that advances a fixed step each time it is read: the deadline is
    met after a known number of readings, however fast or slow the machine runs."""

    def __init__(self, step: float) -> None:
        self.now = 1000.0
        self.step = step
        self.readings = 0

    def monotonic(self) -> float:
        self.readings += 1
        self.now += self.step
        return self.now


def test_the_deadline_is_measured_on_the_clock_the_meter_reads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the meter's clock advancing 0.01 s per reading, a 0.2 s budget stops an endless
    loop at the 21st reading after the start (the start itself is one): the limit is the
    time budget, not a step count, and nothing depends on how fast this machine is."""
    from tether.templating import meter

    clock = _StepClock(0.01)
    monkeypatch.setattr(meter, "time", clock)
    with pytest.raises(TemplateLimit) as caught:
        evaluate(HOSTILE_TIME[0], NAMES, QUICK)
    assert caught.value.limit == "time"
    assert 21 <= clock.readings <= 22


def test_the_size_cap_is_the_callers_to_set() -> None:
    small = TemplateBudget(seconds=60, max_size=10)
    assert evaluate("{{ 'a' * 10 }}", {}, small) == "a" * 10
    with pytest.raises(TemplateLimit, match="the limit is 10"):
        evaluate("{{ 'a' * 11 }}", {}, small)
    with pytest.raises(TemplateLimit, match="output is longer than 10"):
        evaluate("{% for i in range(11) %}a{% endfor %}", {}, small)


def test_a_value_the_template_only_reads_passes_through_whatever_its_size() -> None:
    big = list(range(2_000_000))
    assert evaluate("{{ inputs.big }}", {"inputs": {"big": big}}, SIZE_ONLY) is big
    assert evaluate("{{ inputs.big|length }}", {"inputs": {"big": big}}, SIZE_ONLY) \
        == 2_000_000
    with pytest.raises(TemplateLimit) as caught:
        evaluate("{{ [inputs.big, inputs.big] }}", {"inputs": {"big": big}}, SIZE_ONLY)
    assert caught.value.limit == "size"


def test_a_budget_needs_a_positive_time_and_size() -> None:
    with pytest.raises(ValueError, match="positive"):
        TemplateBudget(seconds=0)
    with pytest.raises(ValueError, match="positive"):
        TemplateBudget(max_size=0)


def test_compiling_evaluates_nothing_so_constant_expressions_cannot_hang_it() -> None:
    """The compiled function exists before anything is computed; calling it is refused."""
    for text in ("{{ 9**(9**9) }}", "x {{ 'a'|center(1000000000) }}", "{{ 'x' * 10**10 }}"):
        evaluator = compiled(text)
        with pytest.raises(TemplateLimit):
            evaluator({})


HOSTILE_WORKFLOW = """\
tether: 1
name: hostile
nodes:
  power:
    task: t.power
    when: "{{ 9**(9**9) > 1 }}"
    with:
      a: "{{ 9**(9**9) }}"
      b: "{{ ('a'*(3*10**9))|length }}"
      c: "x {{ 'a'|center(1000000000) }}"
      d: "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
  repeat:
    task: t.repeat
    when: "{{ ('a' * 10**10)|length > 1 }}"
    loop: {to: repeat, while: "{{ 'x'.ljust(10**9)|length > 0 }}", max_iterations: 2}
"""


def test_check_finishes_on_templates_that_would_never_finish(tmp_path: Path) -> None:
    """`tether check` in a fresh process: it only analyses templates, and evaluating a
    constant guard is budgeted. The timeout is generous: the check takes well under a second,
    an unbounded one would take hours."""
    (tmp_path / "hostile.yaml").write_text(HOSTILE_WORKFLOW)
    result = subprocess.run(
        [sys.executable, "-m", "tether", "check", "--color", "never", "hostile.yaml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_compiling_a_plan_with_hostile_templates_finishes(tmp_path: Path) -> None:
    (tmp_path / "hostile.yaml").write_text(HOSTILE_WORKFLOW)
    script = textwrap.dedent("""
        import sys, tether
        plan = tether.compile(sys.argv[1])
        print(len(plan.nodes))
    """)
    result = subprocess.run([sys.executable, "-c", script, "hostile.yaml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "2", result.stderr


_BACKTRACKING_SIMPLE = re.compile(
    r"""\s*\{\{(?P<inner>(?:[^{}%#'"]|'[^'{}\\]*'|"[^"{}\\]*")*)\}\}\s*""", re.DOTALL
)
_BACKTRACKING_SEGMENT = re.compile(r"""\{\{((?:[^{}'"]|'[^'{}\\]*'|"[^"{}\\]*")*)\}\}""",
                                   re.DOTALL)


def test_the_possessive_patterns_match_what_the_backtracking_ones_did() -> None:
    """classify's and segments' patterns read runs possessively; on random texts of the
    characters that matter they match exactly what the plain patterns matched."""
    from tether.templating import _SEGMENT, _SIMPLE_EXPRESSION

    rng = random.Random(13)
    for _ in range(20_000):
        core = "".join(rng.choice("{{}}%#'\"\\ a\n") for _ in range(rng.randint(0, 14)))
        for text in (core, "{{" + core + "}}", " {{ " + core + " }} x {{" + core + "}}"):
            old, new = _BACKTRACKING_SIMPLE.fullmatch(text), _SIMPLE_EXPRESSION.fullmatch(text)
            assert (old and old.group("inner")) == (new and new.group("inner")), text
            assert _BACKTRACKING_SEGMENT.findall(text) == _SEGMENT.findall(text), text
            assert _BACKTRACKING_SEGMENT.sub("", text) == _SEGMENT.sub("", text), text


QUICK_TEXTS = ["{{ inputs.x }}", "{{ nodes.a.output.value + 1 }}", "{{ inputs._private }}",
               "{{ inputs.label }}-3", "a {{ nodes.b.output }} b {{ run.id }}", "{{ -x.y * 2 }}",
               "{{ (nodes.a.status == 'ok') and inputs.flag }}", "{{ 3 }}"]


@pytest.mark.parametrize("text", QUICK_TEXTS)
def test_the_quick_analysis_is_the_one_jinja2s_tree_gives(text: str) -> None:
    """The quick paths (no parser) make their analyses and references without the frozen
    dataclasses' __init__: equal, same hash and repr, as the parser's walk gives them."""
    from tether.dsl import expression_tree, expressions
    from tether.templating import classify

    kind, source = classify(text)
    quick = expressions._analyse(kind, source, text)
    tree = expression_tree.parse(kind, source)
    walker = expression_tree._Walker(expression_tree._free_names(kind, tree))
    walker.visit(tree)
    slow = expressions.Analysis(kind, references=tuple(walker.references),
                                unsafe=tuple(walker.unsafe))
    assert quick == slow
    assert hash(quick) == hash(slow)
    assert repr(quick) == repr(slow)
    assert [vars(r) for r in quick.references] == [vars(r) for r in slow.references]
