"""The plan: deterministic bytes, a fingerprint that ignores positions, a checked round trip."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tether
from tether.compiler.plan import Plan, fingerprint_of
from tether.errors import PlanError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_compiling_twice_gives_byte_identical_plans() -> None:
    """Two compilations of one file produce the same JSON bytes."""
    path = EXAMPLES / "refund" / "refund.yaml"
    assert tether.compile(path).to_json() == tether.compile(path).to_json()


def test_the_plan_does_not_depend_on_where_the_file_is_or_how_it_is_named(
        tmp_path: Path) -> None:
    """The same file copied elsewhere and compiled from another directory, in a fresh process,
    gives byte-identical plan JSON (the source map holds file names, not paths)."""
    here = tether.compile(EXAMPLES / "order" / "order.yaml").to_json()
    copy = tmp_path / "deep" / "copy"
    shutil.copytree(EXAMPLES / "order", copy)
    result = subprocess.run([sys.executable, "-m", "tether", "compile", "order.yaml"],
                            cwd=copy, capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONHASHSEED": "123"})
    assert result.stdout == here


def test_fingerprint_ignores_the_source_map_but_not_behaviour() -> None:
    """Moving a node in the file changes the source map, not the fingerprint; changing an
    argument changes the fingerprint."""
    plan = tether.compile(EXAMPLES / "refund" / "refund.yaml")
    moved = plan.model_copy(update={"source_map": {}})
    assert fingerprint_of(moved) == plan.fingerprint
    data = json.loads(plan.to_json())
    data["nodes"][0]["with"]["account"] = "{{ inputs.reason }}"
    changed = Plan.model_validate(data)
    assert fingerprint_of(changed) != plan.fingerprint


def test_a_plan_file_round_trips_and_a_tampered_one_is_refused(tmp_path: Path) -> None:
    """Plan.from_json(to_json()) is the same plan; an edited plan fails its fingerprint check."""
    plan = tether.compile(EXAMPLES / "enrichment" / "enrichment.yaml")
    assert Plan.from_json(plan.to_json()) == plan
    data = json.loads(plan.to_json())
    data["nodes"][1]["concurrency"] = 64
    with pytest.raises(PlanError, match="fingerprint"):
        Plan.from_json(json.dumps(data))
    with pytest.raises(PlanError, match="not a tether plan"):
        Plan.from_json('{"nodes": "nope"}')


def test_the_plan_lists_nodes_in_topological_order_with_generations() -> None:
    """node_index follows a topological order; generations group nodes that can run at once."""
    plan = tether.compile(EXAMPLES / "fulfilment" / "fulfilment.yaml")
    position = {node.id: node.index for node in plan.nodes}
    assert [node.index for node in plan.nodes] == list(range(len(plan.nodes)))
    for node in plan.nodes:
        assert all(position[need] < node.index for need in node.waits_for)
    assert plan.generations == (("order",), ("fraud", "credit", "stock"), ("decide",))
    assert plan.source_map["decide"].file == "fulfilment.yaml"
