"""Validation of a plan read from a file: the graph and the settings, not only the schema.

A plan file can be edited by hand, and its fingerprint recomputed by anyone, so the runtime
cannot trust it because it parses. :func:`check_plan` verifies what the compiler guarantees:
unique ids, indices in order, every ``needs``/``waits_for``/loop reference to an existing
node that comes earlier (so the graph has no cycle but its declared loops), bounds on
retries, timeouts, backoffs, concurrency and loops, and every embedded sub-plan likewise.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tether.compiler.limits import (
    MAX_EXPANDED_NODES,
    MAX_SUBWORKFLOW_DEPTH,
    expanded_size,
    nesting_depth,
)
from tether.dsl.patterns import SECRET_RE
from tether.durations import MAX_SECONDS
from tether.errors import PlanError
from tether.kinds import NodeKind

if TYPE_CHECKING:
    from tether.compiler.plan import (
        Plan,
        PlanLoop,
        PlanNode,
    )


def check_plan(plan: Plan) -> None:
    """Raise :class:`PlanError` naming the first node (and sub-plan) that is not valid."""
    if expanded_size(plan) > MAX_EXPANDED_NODES:
        raise PlanError(f"the plan has more than {MAX_EXPANDED_NODES:,} nodes with its "
                        "sub-workflows embedded")
    if nesting_depth(plan) > MAX_SUBWORKFLOW_DEPTH:
        raise PlanError(f"the plan nests sub-workflows more than {MAX_SUBWORKFLOW_DEPTH} "
                        "levels deep")
    _check(plan, "")


def _check(plan: Plan, where: str) -> None:
    for problem in _problems(plan):
        raise PlanError(f"invalid plan{where}: {problem}")
    for node in plan.nodes:
        if node.kind is NodeKind.WORKFLOW:
            sub = node.workflow.plan
            inner = f"{where} in the sub-workflow of node '{node.id}'"
            _check(sub, inner)
            if sub.fingerprint != sub.content_fingerprint():
                raise PlanError(f"invalid plan{inner}: its fingerprint does not match its "
                                "content")


def _problems(plan: Plan) -> Iterator[str]:
    index: dict[str, int] = {}
    for position, node in enumerate(plan.nodes):
        if node.id in index:
            yield f"two nodes have the id '{node.id}'"
        if node.index != position:
            yield f"node '{node.id}' has index {node.index} at position {position}"
        index[node.id] = position
    for node in plan.nodes:
        yield from (f"node '{node.id}': {p}" for p in _node_problems(node, index))
    yield from _switch_problems(plan, index)
    yield from _generation_problems(plan, index)
    yield from _secret_problems(plan.secrets)
    yield from _agent_problems(plan, index)


def _agent_problems(plan: Plan, index: dict[str, int]) -> Iterator[str]:
    """Agents: bounds, tools and handoffs naming agents that exist, and no call cycle (a
    cycle would recurse without end at run time)."""
    agents = plan.agents_by_id
    for agent in plan.agents:
        if agent.id in index:
            yield f"agent '{agent.id}' is both a node and an agent run only when called"
    for agent in agents.values():
        if agent.max_turns < 1:
            yield f"agent '{agent.id}': `max_turns` must be at least 1, not {agent.max_turns}"
        limits = agent.max_tool_calls
        if limits.per_turn < 1 or (limits.per_run is not None and limits.per_run < 1):
            yield f"agent '{agent.id}': `max_tool_calls` bounds must be at least 1"
        called = [t.name for t in agent.tools if t.kind == "worker"] + list(agent.handoffs)
        for name in called:
            if name not in agents:
                yield f"agent '{agent.id}' calls '{name}', which is not an agent of the plan"
    seen: dict[str, int] = {}  # 1: being visited, 2: done
    for start in agents:
        stack = [(start, iter(_callees(agents, start)))]
        seen.setdefault(start, 1)
        while stack:
            current, following = stack[-1]
            nxt = next(following, None)
            if nxt is None:
                seen[current] = 2
                stack.pop()
            elif seen.get(nxt) == 1:
                yield f"agents call each other in a cycle through '{nxt}'"
                return
            elif nxt not in seen and nxt in agents:
                seen[nxt] = 1
                stack.append((nxt, iter(_callees(agents, nxt))))


def _callees(agents: dict[str, Any], agent_id: str) -> list[str]:
    agent = agents[agent_id]
    return [t.name for t in agent.tools if t.kind == "worker"] + list(agent.handoffs)


def _secret_problems(names: tuple[str, ...]) -> Iterator[str]:
    """Secret names are environment variable names (the runtime reads them), each once."""
    for i, name in enumerate(names):
        if not SECRET_RE.match(name):
            yield f"secret name '{name}' is not valid"
        elif name in names[:i]:
            yield f"secret '{name}' is declared twice"


def _node_problems(node: PlanNode, index: dict[str, int]) -> Iterator[str]:
    for key, deps in (("needs", node.needs), ("waits_for", node.waits_for)):
        for dep in deps:
            if dep not in index:
                yield f"`{key}` names '{dep}', which is not a node of the plan"
            elif index[dep] >= node.index:
                yield (f"`{key}` names '{dep}', which does not come before it: the graph "
                       "has a cycle or is out of order")
    missing = set(node.needs) - set(node.waits_for)
    if missing:
        yield f"`waits_for` lacks {', '.join(sorted(missing))} of its `needs`"
    for closer in node.loops:
        if closer not in index:
            yield f"`loops` names '{closer}', which is not a node of the plan"
    if node.loop is not None:
        yield from _loop_problems(node, node.loop, index)
    yield from _setting_problems(node)


def _loop_problems(node: PlanNode, loop: PlanLoop, index: dict[str, int]) -> Iterator[str]:
    if loop.to not in index:
        yield f"`loop.to` names '{loop.to}', which is not a node of the plan"
    elif index[loop.to] > node.index:
        yield f"`loop.to` names '{loop.to}', which comes after the node closing the loop"
    if isinstance(loop.max_iterations, int) and loop.max_iterations < 1:
        yield f"`loop.max_iterations` must be at least 1, not {loop.max_iterations}"
    unknown = [member for member in loop.body if member not in index]
    if unknown:
        yield f"the loop's body names '{unknown[0]}', which is not a node of the plan"
    elif node.id not in loop.body or loop.to not in loop.body:
        yield "the loop's body must hold its node and `loop.to`"


def _setting_problems(node: PlanNode) -> Iterator[str]:
    if node.kind in (NodeKind.TASK, NodeKind.AGENT):
        if node.retry is not None:
            if node.retry.max_attempts < 1:
                yield f"`retry.max_attempts` must be at least 1, not {node.retry.max_attempts}"
            yield from _duration("retry.backoff", node.retry.backoff)
        if isinstance(node.timeout, int | float):
            yield from _duration("timeout", node.timeout)
    if node.kind is NodeKind.TASK and node.until is not None and node.retry is None:
        yield "`until` needs `retry.max_attempts` to bound it"
    if node.kind in (NodeKind.TASK, NodeKind.WORKFLOW) and isinstance(node.concurrency, int) \
            and node.concurrency < 1:
        yield f"`concurrency` must be at least 1, not {node.concurrency}"


def _duration(name: str, seconds: float) -> Iterator[str]:
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS):
        yield f"`{name}` must be more than 0 and at most 366 days of seconds, not {seconds}"


def _switch_problems(plan: Plan, index: dict[str, int]) -> Iterator[str]:
    """Every node of a case comes after its switch and waits for it, in one case only."""
    for member, gates in plan.gates.items():
        if len(gates) > 1:
            yield f"node '{member}' is listed in more than one case"
        for switch_id, _ in gates:
            node = plan.by_id.get(member)
            if node is None:
                yield f"switch '{switch_id}' lists '{member}', which is not a node of the plan"
            elif switch_id not in node.waits_for:
                yield f"node '{member}' of switch '{switch_id}' does not wait for it"


def _generation_problems(plan: Plan, index: dict[str, int]) -> Iterator[str]:
    if not plan.generations:
        return
    listed = [node_id for generation in plan.generations for node_id in generation]
    if sorted(listed) != sorted(index):
        yield "`generations` must list every node exactly once"
