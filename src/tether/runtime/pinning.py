"""Plan pinning: a run keeps the plan it started with; another plan must be asked for and fit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.errors import PlanMismatch
from tether.runtime.invoke import check_values

if TYPE_CHECKING:
    from tether.compiler.plan import Plan, PlanNode


def _definition(node: PlanNode) -> dict[str, Any]:
    return node.model_dump(mode="json", by_alias=True,
                           exclude={"index", "generation", "waits_for"})


def first_difference(old: Plan, new: Plan) -> str | None:
    """The first node (in the old plan's order) that differs, is missing, or was added."""
    for node in old.nodes:
        other = new.by_id.get(node.id)
        if other is None or _definition(other) != _definition(node):
            return node.id
    return next((node.id for node in new.nodes if node.id not in old.by_id), None)


def check_same_plan(execution_id: str, stored: Plan, given: Plan) -> None:
    """Refuse a runner whose plan is not the run's plan."""
    if stored.fingerprint != given.fingerprint:
        node = first_difference(stored, given)
        detail = "" if node else "the inputs or output differ"
        raise PlanMismatch(execution_id, stored.fingerprint, given.fingerprint, node, detail)


def check_compatible(execution_id: str, stored: Plan, given: Plan, state: dict[str, Any]) -> None:
    """Refuse a new plan unless every node the run already started is defined identically
    and the run's inputs satisfy the new plan's inputs."""
    for node_id in state.get("nodes", {}):
        old = stored.by_id.get(node_id)
        new = given.by_id.get(node_id)
        if old is not None and (new is None or _definition(new) != _definition(old)):
            raise PlanMismatch(execution_id, stored.fingerprint, given.fingerprint, node_id,
                               f"node '{node_id}' already ran and is defined differently")
    _, problems = check_values(given.inputs, state.get("inputs") or {}, "input")
    if problems:
        raise PlanMismatch(execution_id, stored.fingerprint, given.fingerprint, None,
                           "; ".join(problems))
