"""No input, however malformed, makes `tether check` raise, print a traceback or exit 3.

The library is fuzzed with hypothesis (random bytes, random YAML, workflow-shaped documents
with random keys and values, mutations of the examples, in both syntaxes); the extreme inputs
(deep nesting, alias bombs, a 5 MB file, invalid UTF-8, NUL bytes) also go through the real
command in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tether
from tether.diagnostics import CODES

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEEDS = sorted(p for p in EXAMPLES.rglob("*") if p.suffix in (".yaml", ".flow"))
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def assert_clean_diagnostics(path: Path) -> None:
    """check() returns diagnostics (never raises) whose locations are all valid; a file
    without errors compiles (check builds no plan: compiling is what would build it)."""
    diagnostics = tether.check([path])
    for diag in diagnostics:
        assert diag.code in CODES
        assert diag.span.line >= 1 and diag.span.col >= 1
        assert diag.message and "Traceback" not in diag.message
        for note in diag.related:
            assert note.span.line >= 1
    if not any(diag.is_error for diag in diagnostics):
        tether.compile(path)


def check_text(tmp_path: Path, data: bytes, suffix: str) -> None:
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(data)
    assert_clean_diagnostics(path)


@FUZZ
@given(data=st.binary(max_size=2000), suffix=st.sampled_from([".yaml", ".flow"]))
def test_random_bytes_give_diagnostics_not_exceptions(tmp_path: Path, data: bytes,
                                                      suffix: str) -> None:
    """Arbitrary bytes, in either syntax."""
    check_text(tmp_path, data, suffix)


@FUZZ
@given(text=st.text(alphabet=st.sampled_from(list("{}[]()\"':,.-|>&*!#%@`=~ \n\tabnt01{}")),
                    max_size=400))
def test_random_punctuation_text_gives_diagnostics(tmp_path: Path, text: str) -> None:
    """Text dense in YAML and .flow punctuation (brackets, quotes, anchors, tags, templates)."""
    check_text(tmp_path, text.encode(), ".yaml")
    check_text(tmp_path, text.encode(), ".flow")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
names = st.sampled_from(["a", "b", "c", "fetch", "Bad-Id", "", "nodes", "1x"])
templates = st.sampled_from([
    "{{ inputs.x }}", "{{ nodes.a.output }}", "{{ nodes.zz.status }}", "{{ item }}",
    "{{ iteration }}", "{{ x.__class__ }}", "{{ 1 + }}", "{{ a | nope }}", "plain",
    "{% for i in inputs.l %}{{ i }}{% endfor %}", "{{ nodes.b.output.v if nodes.b else 0 }}",
])
node_values = st.fixed_dictionaries({}, optional={
    "task": st.sampled_from(["t.a", "t.b"]) | json_values,
    "approval": st.fixed_dictionaries({"reason": st.text(max_size=5)},
                                      optional={"form": json_values, "context": templates}),
    "workflow": st.sampled_from(["missing.yaml", "../x.yaml"]) | json_values,
    "with": st.dictionaries(names, templates | json_values, max_size=3),
    "needs": st.lists(names, max_size=3) | json_values,
    "when": templates | json_values,
    "trigger": st.sampled_from(["all_done", "any_success", "bogus"]),
    "for_each": templates | json_values,
    "concurrency": st.integers(-2, 5) | json_values,
    "retry": st.fixed_dictionaries({}, optional={"max_attempts": st.integers(-1, 3),
                                                 "backoff": st.sampled_from(["1s", "x"])}),
    "timeout": st.sampled_from(["1s", "10", "-1m"]) | json_values,
    "idempotent": st.booleans() | json_values,
    "loop": st.fixed_dictionaries({}, optional={
        "to": names, "while": templates, "max_iterations": st.integers(-1, 3),
        "on_exhausted": st.sampled_from(["fail", "continue", "x"])}),
    "bogus": json_values,
})
documents = st.fixed_dictionaries({}, optional={
    "tether": st.sampled_from([1, 2, "1"]),
    "name": st.text(max_size=8) | json_values,
    "inputs": st.dictionaries(names, st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "number", "object", "nope"])},
        optional={"default": json_values})) | json_values,
    "nodes": st.dictionaries(names, node_values, max_size=5) | json_values,
    "output": templates | json_values,
})


@FUZZ
@given(document=documents)
def test_workflow_shaped_documents_give_diagnostics(tmp_path: Path, document: Any) -> None:
    """Documents shaped like workflows, with random keys, values and templates."""
    text = yaml.safe_dump(document, allow_unicode=True)
    check_text(tmp_path, text.encode(), ".yaml")


@FUZZ
@given(seed=st.sampled_from(SEEDS), data=st.data())
def test_mutations_of_valid_examples_give_diagnostics(tmp_path: Path, seed: Path,
                                                      data: st.DataObject) -> None:
    """Valid example files with random cuts, insertions, duplicated and swapped lines."""
    text = seed.read_text()
    for _ in range(data.draw(st.integers(1, 4))):
        operation = data.draw(st.sampled_from(["cut", "insert", "duplicate", "swap"]))
        lines = text.splitlines(keepends=True)
        if operation == "cut" and text:
            start = data.draw(st.integers(0, len(text) - 1))
            text = text[:start] + text[start + data.draw(st.integers(1, 30)):]
        elif operation == "insert":
            at = data.draw(st.integers(0, len(text)))
            text = text[:at] + data.draw(st.text(max_size=10)) + text[at:]
        elif operation == "duplicate" and lines:
            i = data.draw(st.integers(0, len(lines) - 1))
            text = "".join([*lines[:i + 1], lines[i], *lines[i + 1:]])
        elif operation == "swap" and len(lines) > 1:
            i = data.draw(st.integers(0, len(lines) - 2))
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
            text = "".join(lines)
    target = tmp_path / seed.name
    target.write_text(text)
    for sibling in seed.parent.iterdir():  # sub-workflows next to the seed
        if sibling.suffix in (".yaml", ".flow") and sibling.name != seed.name:
            (tmp_path / sibling.name).write_bytes(sibling.read_bytes())
    assert_clean_diagnostics(target)


EXTREMES: dict[str, bytes] = {
    "deep_flow_yaml.yaml": b"a: " + b"[" * 100_000 + b"]" * 100_000,
    "deep_block_yaml.yaml": "".join(" " * i + f"k{i}:\n" for i in range(3000)).encode(),
    "deep_mapping_yaml.yaml": b"tether: 1\nname: x\nnodes:\n  a:\n    task: t\n    with: "
    + b"{a: " * 200 + b"1" + b"}" * 200 + b"\n",
    "deep_flow.flow": b"workflow x\ntask a = t.a(v: " + b"[" * 50_000 + b"]" * 50_000 + b")\n",
    "alias_bomb.yaml": b"a: &a [x, x, x, x, x, x, x, x, x]\n" + b"".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n".encode()
        for i in range(9)),
    "recursive_alias.yaml": b"tether: 1\nname: x\nnodes: &n\n  a: {task: t, with: *n}\n",
    "invalid_utf8.yaml": b"tether: 1\nname: \xff\xfe\nnodes: {}\n",
    "nul.flow": b"workflow x\x00\n",
    "five_megabytes.yaml": b"tether: 1\nname: big\nnodes:\n" + b"".join(
        f"  n{i}:\n    task: t.step\n    with: {{v: \"{'x' * 40}\"}}\n".encode()
        for i in range(60_000)),
    "five_megabytes_garbage.flow": bytes(range(256)) * 20_000,
    "empty.yaml": b"",
    "only_comment.flow": b"# nothing\n",
}


@pytest.mark.parametrize("name", sorted(EXTREMES))
def test_extreme_inputs_through_the_real_command(tmp_path: Path, name: str) -> None:
    """`tether check` exits 0 or 1 with no traceback, never 3, on pathological files."""
    path = tmp_path / name
    path.write_bytes(EXTREMES[name])
    result = subprocess.run([sys.executable, "-m", "tether", "check", str(path)],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout
    assert "internal error" not in result.stderr
    assert len(EXTREMES[name]) < 1_000 or name.startswith("five") or result.returncode == 1
