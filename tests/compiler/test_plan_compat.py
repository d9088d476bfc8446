"""Plans stored by release 0.1 keep loading, and compiling gives the fingerprints it gave.

``plans_v1/`` holds workflow files and the plan JSON that release 0.1 (main at 11c3d97) wrote
for them with ``Plan.to_json()``; ``fingerprints.json`` their fingerprints. The node variants
must read that JSON (fingerprint check included), write it back byte for byte, and compile the
same files to the same fingerprints.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tether
from tether.compiler.plan import ApprovalNode, Plan, TaskNode, WorkflowNode
from tether.errors import PlanError

FIXTURES = Path(__file__).parent / "plans_v1"
FINGERPRINTS: dict[str, str] = json.loads((FIXTURES / "fingerprints.json").read_text())
PLANS = sorted(FINGERPRINTS)


@pytest.mark.parametrize("name", PLANS)
def test_a_plan_stored_by_release_0_1_loads_with_its_fingerprint_and_writes_back_the_same(
        name: str) -> None:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    plan = Plan.from_json(text)
    assert plan.fingerprint == FINGERPRINTS[name]
    assert plan.to_json() == text


@pytest.mark.parametrize("name", PLANS)
def test_compiling_the_same_file_gives_the_fingerprint_release_0_1_gave(name: str) -> None:
    source = FIXTURES / name.replace(".plan.json", ".yaml")
    plan = tether.compile(source)
    assert plan.fingerprint == FINGERPRINTS[name]
    assert plan.to_json() == (FIXTURES / name).read_text(encoding="utf-8")


def test_a_flow_twin_still_compiles_to_the_yaml_fingerprint() -> None:
    assert tether.compile(FIXTURES / "refund.flow").fingerprint == \
        FINGERPRINTS["refund.plan.json"]


def test_each_node_is_read_as_the_variant_of_its_kind() -> None:
    plan = Plan.from_json((FIXTURES / "everything.plan.json").read_text(encoding="utf-8"))
    kinds = {node.id: type(node) for node in plan.nodes}
    assert kinds["fetch"] is TaskNode and kinds["review"] is ApprovalNode
    assert kinds["sub"] is WorkflowNode and kinds["subs"] is WorkflowNode
    sub = plan.node("sub")
    assert isinstance(sub, WorkflowNode)
    assert sub.workflow.plan.name == "everything_sub"


def test_a_key_another_kind_owns_is_refused_unless_it_holds_the_neutral_value() -> None:
    """Format 1 writes `"retry": null` on an approval; a retry policy there is refused (before
    the fingerprint is even looked at, so recomputing it does not help)."""
    data = json.loads((FIXTURES / "refund.plan.json").read_text(encoding="utf-8"))
    review = next(node for node in data["nodes"] if node["kind"] == "approval")
    review["retry"] = {"max_attempts": 2, "backoff": 1.0}
    with pytest.raises(PlanError, match="an approval node cannot have `retry`"):
        Plan.from_json(json.dumps(data))
    review["retry"] = None
    review["task"] = "billing.refund"
    with pytest.raises(PlanError, match="an approval node cannot have `task`"):
        Plan.from_json(json.dumps(data))
