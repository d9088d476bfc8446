"""The YAML event reader (no composed node graph) reads a plain document exactly as the
composer and the walker do: data, source map with its order, diagnostics. Everything it does
not read (anchors, aliases, tags, merge keys, duplicate keys, several documents, syntax
errors) it leaves to them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tether.dsl.source import RawDocument
from tether.dsl.yaml_reader import _read_composed, _read_events, read_yaml

ROOT = Path(__file__).resolve().parents[2]
YAML_FILES = sorted(
    path for pattern in ("*.yaml", "*.yml") for folder in ("examples", "tests", "bench")
    for path in (ROOT / folder).rglob(pattern)
)

EDGE_CASES = [
    "a: 1\nb: 2.5\nc: true\nd: null\ne: ~\nf:\ng: ''\nh: \"x\\ty\"\n",
    "big: 1" + "0" * 5000 + "\nhuge: 0x" + "f" * 4000 + "\ninf: .inf\nnan: .nan\n",
    "when: 2024-01-02\nyes: yes\nno: off\noct: 0o17\nhex: 0x1f\nexp: 1e3\n",
    "list:\n  - a\n  - {b: 1, c: [1, 2, [3, {d: e}]]}\n  -\n  - - nested\n",
    "text: |\n  line one\n  line two\nfolded: >-\n  a\n  b\nplain: multi\n  line\n",
    "1: int key\ntrue: bool key\nnull: null key\n'q': quoted\n",
    "# comment\n---\nkey: value  # trailing\n...\n",
    "unicode: \"\\u00e9t\\u00e9\"\nemoji: 🚀\n",
    "a: {x: 1,\n    y: 2}\nb: [1,\n    2]\n",
    "[1, 2, 3]\n",
    "just a string\n",
    "deep: " + "[" * 70 + "]" * 70 + "\n",
    # left to the composer and the walker
    "a: &x 1\nb: *x\n",
    "base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n",
    "m:\n  <<: {x: 1}\n  y: 2\n",
    "a: !!str 1\nb: !custom x\n",
    "a: 1\na: 2\n",
    "nodes:\n  n: {task: t}\n  n: {task: u}\n",
    "? [complex]\n: key\n",
    "a: 1\n---\nb: 2\n",
    "",
    "a: [1, 2\n",
    "a:\n\tb: 1\n",
]


def _same(fast: RawDocument, slow: RawDocument) -> None:
    assert json.dumps(fast.data) == json.dumps(slow.data)
    assert list(fast.source.keys.items()) == list(slow.source.keys.items())
    assert list(fast.source.values.items()) == list(slow.source.values.items())
    assert fast.source.anchors == slow.source.anchors
    assert fast.diagnostics == slow.diagnostics


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_yaml_file_reads_the_same(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    fast = _read_events(text, path.name)
    if fast is not None:
        _same(fast, _read_composed(text, path.name))


def test_most_files_take_the_event_reader() -> None:
    read = [p for p in YAML_FILES if _read_events(p.read_text(encoding="utf-8"), p.name)]
    assert len(read) >= len(YAML_FILES) * 3 // 4


@pytest.mark.parametrize("text", EDGE_CASES)
def test_edge_cases_read_the_same(text: str) -> None:
    fast = _read_events(text, "edge.yaml")
    slow = _read_composed(text, "edge.yaml")
    if fast is not None:
        _same(fast, slow)
    _same(read_yaml(text, "edge.yaml"), slow)


def test_declines_what_it_does_not_read() -> None:
    for text in EDGE_CASES[EDGE_CASES.index("a: &x 1\nb: *x\n"):]:
        assert _read_events(text, "edge.yaml") is None, text


def test_a_generated_workflow_reads_the_same() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from generate import workflow_yaml
    finally:
        sys.path.remove(str(ROOT / "bench"))
    text = workflow_yaml(300)
    fast = _read_events(text, "w.yaml")
    assert fast is not None
    _same(fast, _read_composed(text, "w.yaml"))


SAMPLE = """tether: 1
name: sample
inputs:
  seed: {type: integer, default: 1}
nodes:
  a:
    task: t.step
    with: {value: "{{ inputs.seed }}", n: 3, f: 1.5, b: true, z: null}
  b:
    task: t.step
    needs: [a]
    when: "{{ nodes.a.output > 0 }}"
    retry: {max_attempts: 3, backoff: 1s}
output: "{{ nodes.b.output }}"
"""


def test_every_one_character_mutation_reads_the_same() -> None:
    """Deleting or doubling each character of a workflow: whatever the event reader reads
    is read as the composer and the walker read it."""
    for i in range(len(SAMPLE)):
        for text in (SAMPLE[:i] + SAMPLE[i + 1:], SAMPLE[:i] + SAMPLE[i] + SAMPLE[i:]):
            fast = _read_events(text, "m.yaml")
            if fast is not None:
                _same(fast, _read_composed(text, "m.yaml"))
