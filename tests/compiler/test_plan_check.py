"""A plan read from a file is checked like the compiler would have made it: a hand-edited
plan is refused with a message naming the node, even when its fingerprint was recomputed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tether.compiler.plan import Plan, with_fingerprint
from tether.errors import PlanError

FIXTURES = Path(__file__).parent / "plans_v1"
Edit = Callable[[dict[str, Any]], None]


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def node(data: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(n for n in data["nodes"] if n["id"] == node_id)


def refingerprinted(data: dict[str, Any]) -> str:
    """The edited plan as an attacker would write it: with a fingerprint that matches."""
    return with_fingerprint(Plan.model_validate(data)).to_json()


def set_in(node_id: str, key: str, value: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        node(data, node_id)[key] = value
    return edit


def cycle(data: dict[str, Any]) -> None:
    node(data, "lookup")["needs"] = ["refund"]
    node(data, "lookup")["waits_for"] = ["refund"]


def swap(data: dict[str, Any]) -> None:
    data["nodes"][0], data["nodes"][1] = data["nodes"][1], data["nodes"][0]


REFUND_EDITS: list[tuple[Edit, str]] = [
    (set_in("refund", "retry", {"max_attempts": 0, "backoff": 2.0}),
     "node 'refund': `retry.max_attempts` must be at least 1, not 0"),
    (cycle, "node 'lookup': `needs` names 'refund', which does not come before it"),
    (set_in("refund", "needs", ["nowhere"]),
     "node 'refund': `needs` names 'nowhere', which is not a node of the plan"),
    (set_in("refund", "waits_for", []), "node 'refund': `waits_for` lacks review of its `needs`"),
    (swap, "node 'review' has index 1 at position 0"),
    (set_in("refund", "timeout", -1.0), "node 'refund': `timeout` must be more than 0"),
    (set_in("refund", "timeout", 1e300), "node 'refund': `timeout` must be more than 0"),
    (set_in("refund", "retry", {"max_attempts": 3, "backoff": 0.0}),
     "node 'refund': `retry.backoff` must be more than 0"),
    (set_in("refund", "concurrency", 0), "node 'refund': `concurrency` must be at least 1"),
    (set_in("lookup", "id", "refund"), "two nodes have the id 'refund'"),
]


@pytest.mark.parametrize(("edit", "message"), REFUND_EDITS,
                         ids=[m.split(":")[-1][:40] for _, m in REFUND_EDITS])
def test_a_hand_edited_plan_with_a_fresh_fingerprint_is_refused(edit: Edit,
                                                                message: str) -> None:
    data = load("refund.plan.json")
    edit(data)
    with pytest.raises(PlanError, match="invalid plan") as caught:
        Plan.from_json(refingerprinted(data))
    assert message in str(caught.value)


def test_a_loop_that_points_nowhere_or_has_no_bound_is_refused() -> None:
    data = load("review_loop.plan.json")
    closer = next(n for n in data["nodes"] if n["loop"] is not None)
    closer["loop"]["max_iterations"] = 0
    with pytest.raises(PlanError, match=r"`loop\.max_iterations` must be at least 1, not 0"):
        Plan.from_json(refingerprinted(data))
    closer["loop"]["max_iterations"] = 3
    closer["loop"]["to"] = "ghost"
    with pytest.raises(PlanError, match=r"`loop\.to` names 'ghost'"):
        Plan.from_json(refingerprinted(data))


def test_an_embedded_sub_plan_is_checked_too_and_named() -> None:
    data = load("order.plan.json")
    sub = node(data, "ship")["workflow"]["plan"]
    node(sub, "book")["retry"] = {"max_attempts": 0, "backoff": 1.0}
    sub["fingerprint"] = with_fingerprint(Plan.model_validate(sub)).fingerprint
    with pytest.raises(PlanError) as caught:
        Plan.from_json(refingerprinted(data))
    assert str(caught.value) == (
        "invalid plan in the sub-workflow of node 'ship': node 'book': "
        "`retry.max_attempts` must be at least 1, not 0")


def test_an_embedded_sub_plan_whose_fingerprint_does_not_match_is_refused() -> None:
    data = load("order.plan.json")
    sub = node(data, "ship")["workflow"]["plan"]
    node(sub, "book")["idempotent"] = False
    with pytest.raises(PlanError, match="sub-workflow of node 'ship': its fingerprint"):
        Plan.from_json(refingerprinted(data))


def test_every_stored_plan_passes_and_a_tampered_one_still_fails_its_fingerprint() -> None:
    for path in sorted(FIXTURES.glob("*.plan.json")):
        Plan.from_json(path.read_text(encoding="utf-8"))
    data = load("refund.plan.json")
    node(data, "refund")["idempotent"] = False
    with pytest.raises(PlanError, match="fingerprint does not match"):
        Plan.from_json(json.dumps(data))
