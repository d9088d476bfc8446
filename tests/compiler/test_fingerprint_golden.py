"""Fingerprints are contracts: a stored run's plan is matched by its fingerprint, so a change
to the plan models or the compiler that alters the fingerprint of an unchanged workflow file
strands every stored run of it. This test fails on such a change.

``fingerprints_golden.json`` records the fingerprint of every example and golden workflow.
Regenerate it only deliberately (a change meant to alter fingerprints, with a migration
story for stored plans)::

    TETHER_REGENERATE_FINGERPRINTS=1 python -m pytest tests/compiler/test_fingerprint_golden.py
"""

from __future__ import annotations

import json
import os
import typing
from pathlib import Path
from typing import Any

import pytest

import tether
from tether.compiler.plan import (
    Plan,
    PlanNode,
    PlanRetry,
    TaskNode,
    WorkflowNode,
    canonical_json,
    plain_kind,
    semantic,
)
from tether.errors import WorkflowError
from tether.kinds import KINDS

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "fingerprints_golden.json"
WORKFLOWS = sorted(
    [*(ROOT / "examples").rglob("*.yaml"), *(ROOT / "examples").rglob("*.flow"),
     *(ROOT / "tests" / "compiler" / "plans_v1").glob("*.yaml"),
     Path(__file__).parent / "fingerprint_kinds.yaml",
     *(ROOT / "tests" / "golden").rglob("*.yaml"), *(ROOT / "tests" / "golden").rglob("*.flow")])


def _key(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _compiled() -> dict[str, Plan]:
    plans: dict[str, Plan] = {}
    for path in WORKFLOWS:
        try:
            plans[_key(path)] = tether.compile(path)
        except WorkflowError:
            continue  # fixtures of errors, fragments: no plan, no fingerprint
    return plans


@pytest.fixture(scope="module")
def compiled() -> dict[str, Plan]:
    return _compiled()


def test_fingerprints_match_the_golden_file(compiled: dict[str, Plan]) -> None:
    found = {key: plan.fingerprint for key, plan in sorted(compiled.items())}
    if os.environ.get("TETHER_REGENERATE_FINGERPRINTS") == "1":
        GOLDEN.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))
    changed = {key: (recorded.get(key), value) for key, value in found.items()
               if recorded.get(key) != value}
    missing = sorted(set(recorded) - set(found))
    assert not missing, f"workflows that no longer compile: {missing}"
    assert not changed, (
        "fingerprints changed (stored runs of these workflows would be stranded); if meant, "
        f"regenerate {GOLDEN.name} deliberately: {changed}")


def test_every_node_kind_is_covered_and_dumped_by_the_models(
        compiled: dict[str, Plan]) -> None:
    """For every kind of the table in tether.kinds, some golden plan holds a node of it, and
    the canonical JSON of those plans is pydantic's own serialisation of them."""
    seen = {node.kind for plan in compiled.values() for node in plan.nodes}
    assert seen >= set(KINDS), f"kinds without a golden workflow: {set(KINDS) - seen}"
    for plan in compiled.values():
        assert canonical_json(semantic(plan)) == canonical_json(_by_the_models(plan))


def _by_the_models(plan: Plan) -> dict[str, Any]:
    """The semantic data as pydantic writes it: the whole plan by its serialisers."""
    exclude: Any = {"source_map": True, "fingerprint": True,
                    "nodes": {"__all__": {"workflow": {"plan": True}}}}
    data = plan.model_dump(mode="json", by_alias=True, exclude=exclude)
    for node, raw in zip(plan.nodes, data["nodes"], strict=True):
        if isinstance(node, WorkflowNode):
            raw["workflow"]["plan"] = _by_the_models(node.workflow.plan)
    return data


def test_every_variant_of_the_union_has_a_kind_in_the_table() -> None:
    variants = typing.get_args(typing.get_args(PlanNode)[0])
    kinds = {variant.model_fields["kind"].default for variant in variants}
    assert kinds == set(KINDS)


def test_the_fast_path_is_derived_from_the_fields() -> None:
    """A variant given a field the fast path cannot write goes to pydantic's serialiser, with
    no list of class names to update (the list that used to exist could silently go stale)."""
    assert plain_kind(TaskNode)

    class Odd(TaskNode):
        extra: PlanRetry | frozenset[str] | None = None

    assert not plain_kind(Odd)
