"""How large a workflow may grow through its sub-workflows, and how to measure a plan.

A sub-workflow's plan is embedded in its parent's once per ``workflow:`` node, so ten nodes
running a file that itself runs ten others make a hundred copies: a few small files can
describe millions of nodes. The compiler and plan validation refuse more than
:data:`MAX_EXPANDED_NODES` nodes in all, or sub-workflows nested deeper than
:data:`MAX_SUBWORKFLOW_DEPTH`, measuring before building anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.kinds import NodeKind

if TYPE_CHECKING:
    from tether.compiler.plan import Plan

MAX_SUBWORKFLOW_DEPTH = 32
MAX_EXPANDED_NODES = 100_000


def expanded_size(plan: Plan, memo: dict[int, int] | None = None) -> int:
    """The nodes of ``plan`` with every embedded sub-plan counted once per node embedding
    it; each distinct plan object is measured once (``memo`` maps its id to its size)."""

    memo = {} if memo is None else memo
    found = memo.get(id(plan))
    if found is None:
        found = len(plan.nodes) + sum(
            expanded_size(node.workflow.plan, memo) for node in plan.nodes
            if node.kind is NodeKind.WORKFLOW)
        memo[id(plan)] = found
    return found


def nesting_depth(plan: Plan, limit: int = MAX_SUBWORKFLOW_DEPTH) -> int:
    """How many levels of sub-plans ``plan`` holds (0: none); stops counting past ``limit``."""

    level, current = 0, [plan]
    while current and level <= limit:
        seen: dict[int, Plan] = {}
        for each in current:
            for node in each.nodes:
                if node.kind is NodeKind.WORKFLOW:
                    seen.setdefault(id(node.workflow.plan), node.workflow.plan)
        current = list(seen.values())
        level += 1 if current else 0
    return level
