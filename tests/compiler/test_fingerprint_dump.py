"""The fingerprint's semantic data, written without the node models' serialisers for the
common kinds, is what those serialisers give (the canonical JSON is byte for byte the same)."""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

import pytest

import tether
from tether.compiler.plan import Plan, WorkflowNode, _plain_node, canonical_json, semantic
from tether.errors import WorkflowError

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / "examples").rglob("*.yaml")) + \
    sorted((ROOT / "examples").rglob("*.flow")) + \
    sorted((ROOT / "tests" / "compiler" / "plans_v1").glob("*.yaml"))


def _by_the_models(plan: Plan) -> dict[str, Any]:
    """The semantic data as pydantic writes it: the whole plan by its serialisers."""
    exclude: Any = {"source_map": True, "fingerprint": True,
                    "nodes": {"__all__": {"workflow": {"plan": True}}}}
    data = plan.model_dump(mode="json", by_alias=True, exclude=exclude)
    for node, raw in zip(plan.nodes, data["nodes"], strict=True):
        if isinstance(node, WorkflowNode):
            raw["workflow"]["plan"] = _by_the_models(node.workflow.plan)
    return data


def _compiles(path: Path) -> Plan | None:
    try:
        return tether.compile(path)
    except WorkflowError:
        return None


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_semantic_data_is_the_models_dump(path: Path) -> None:
    plan = _compiles(path)
    if plan is None:
        pytest.skip("not a complete workflow")
    assert canonical_json(semantic(plan)) == canonical_json(_by_the_models(plan))


def test_values_pydantic_converts_are_left_to_it(tmp_path: Path) -> None:
    """A date, a set, an infinite float in a node (a plan built by hand): the node falls
    back to its serialiser; plain values, a retry policy and a loop do not."""
    path = tmp_path / "values.yaml"
    path.write_text(
        "tether: 1\nname: values\nnodes:\n"
        "  a: {task: t.a, with: {n: 1.5, deep: [{x: [1, true, null]}]}}\n"
        "  b: {task: t.b, needs: [a], retry: {max_attempts: 3, backoff: 2s, strategy: fixed},"
        " timeout: 30s}\n"
        "  c: {noop: true, needs: [b], loop: {to: a, while: '{{ iteration < 2 }}',"
        " max_iterations: 3}}\n", encoding="utf-8")
    plan = tether.compile(path)
    assert all(_plain_node(node) is not None for node in plan.nodes)
    assert canonical_json(semantic(plan)) == canonical_json(_by_the_models(plan))
    for value in (datetime.date(2024, 1, 31), {1, 2}, math.inf, ("x", datetime.time(1))):
        first = plan.nodes[0].model_copy(update={"args": {"v": value}})
        odd = plan.model_copy(update={"nodes": (first, *plan.nodes[1:])})
        assert _plain_node(first) is None
        assert canonical_json(semantic(odd)) == canonical_json(_by_the_models(odd))
