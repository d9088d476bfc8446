"""``renamed_from:`` in both front ends, in the plan, and its checks (C100, C101)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tether
from tether.compiler.plan import Plan
from tether.errors import WorkflowError

YAML = """\
tether: 1
name: r
nodes:
  fetch: {task: t.a, renamed_from: load}
  store: {task: t.b, needs: [fetch], renamed_from: [save, persist]}
"""
FLOW = """\
workflow r
task fetch = t.a()
    renamed_from load
task store = t.b()
    after fetch
    renamed_from [save, persist]
"""


def _compile(tmp_path: Path, name: str, text: str) -> Plan:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return tether.compile(path)


def test_both_front_ends_give_the_same_plan(tmp_path: Path) -> None:
    from_yaml = _compile(tmp_path, "r.yaml", YAML)
    from_flow = _compile(tmp_path, "r.flow", FLOW)
    assert from_yaml.fingerprint == from_flow.fingerprint
    assert [n.renamed_from for n in from_yaml.nodes] == [("load",), ("save", "persist")]


def test_a_rename_changes_the_fingerprint_and_survives_the_json(tmp_path: Path) -> None:
    plan = _compile(tmp_path, "r.yaml", YAML)
    plain = _compile(tmp_path, "p.yaml", YAML.replace(", renamed_from: load", "")
                     .replace(", renamed_from: [save, persist]", ""))
    assert plan.fingerprint != plain.fingerprint
    assert Plan.from_json(plan.to_json()).nodes[0].renamed_from == ("load",)
    assert "renamed_from" not in plain.to_json()  # older plans keep their JSON


def test_converting_keeps_renamed_from(tmp_path: Path) -> None:
    from tether.dsl.convert import format_source

    flow = format_source(YAML, "r.yaml", "yaml", "flow")
    assert "renamed_from load" in flow
    assert _compile(tmp_path, "c.flow", flow).fingerprint == \
        _compile(tmp_path, "r.yaml", YAML).fingerprint


@pytest.mark.parametrize(("text", "code", "where"), [
    ("  a: {task: t.a, renamed_from: b}\n  b: {task: t.b, needs: [a]}\n", "C100", (4, 32)),
    ("  a: {task: t.a, renamed_from: a}\n", "C100", (4, 32)),
    ("  a: {task: t.a, renamed_from: old}\n  b: {task: t.b, needs: [a], renamed_from: [x, old]}\n",
     "C101", (5, 48)),
    ("  a: {task: t.a, renamed_from: [old, old]}\n", "C101", (4, 38)),
])
def test_a_wrong_rename_is_refused_at_its_place(tmp_path: Path, text: str, code: str,
                                                where: tuple[int, int]) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("tether: 1\nname: w\nnodes:\n" + text, encoding="utf-8")
    with pytest.raises(WorkflowError) as caught:
        tether.compile(path)
    found = [(d.code, d.span.line, d.span.col) for d in caught.value.diagnostics]
    assert (code, *where) in found, found
