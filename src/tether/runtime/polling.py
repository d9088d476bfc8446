"""``until``: a task node called again and again until a condition over its latest output
holds, at most ``retry.max_attempts`` times, waiting ``retry.backoff`` between calls.

Every call that returns is checkpointed (address ``<node>/attempt:<n>``, its output in
``node_output``) and the unit's entry holds the number of attempts made and the latest
output while it polls (status ``running``). A run that crashes mid-way resumes with the next
attempt: the attempts already made are not repeated, and the bound counts them. A call that
raises counts as an attempt too (as a retry would). When the bound is reached with the
condition still false, the node fails (``UntilExhausted``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tether.observability.observer import next_attempt, retried
from tether.runtime.context import UnitScope
from tether.runtime.invoke import NodeFailure, call_once, retryable
from tether.runtime.render import NodesView, truthy
from tether.runtime.state import NodeError
from tether.runtime.units import Unit, UnitResult
from tether.runtime.values import dumps
from tether.status import CheckpointStatus, UnitStatus

if TYPE_CHECKING:
    from tether.compiler.plan import TaskNode


async def poll(unit: Unit, node: TaskNode, fn: Callable[..., Any], args: dict[str, Any],
               scope: UnitScope, semaphore: asyncio.Semaphore | None,
               timeout: float | None, stored: Any = None) -> UnitResult:
    """Call until ``node.until`` holds over the latest output (see the module docstring);
    ``stored``: the arguments as checkpoints keep them (secret placeholders)."""
    assert node.until is not None and node.retry is not None
    level = unit.level
    entry = level.state.at(unit.path)
    made = entry.attempts_made if entry.status == UnitStatus.RUNNING else 0
    last: BaseException | None = None
    bound = node.retry.max_attempts
    for attempt in range(made + 1, bound + 1):
        if attempt > 1:
            await asyncio.sleep(node.retry.delay(attempt - 1))
            next_attempt(node.id, attempt, resumed=attempt == made + 1)
        level.session.check()
        try:
            output, text = await call_once(fn, node, args, scope, semaphore,
                                           level.session.bodies, timeout, timeout=timeout,
                                           poll=attempt)
        except BaseException as exc:
            last = retryable(exc)
            if attempt < bound:  # (the last attempt's span ends with the node's failure)
                retried(node.id, attempt, last, node.retry.delay(attempt))
            continue
        if _holds(unit, node, output):
            return UnitResult(output, text, stored)
        if attempt < bound:  # polled: not an error, the next call follows the backoff
            retried(node.id, attempt, None, node.retry.delay(attempt))
        masker = level.session.run.masker
        if masker is not None and (shown := masker.value(output)) is not output:
            output, text = shown, dumps(shown)
        last = None
        entry.polled(output, attempt)
        level.mark(unit.path)
        level.checkpoint(f"{unit.address}/attempt:{attempt}", node,
                         CheckpointStatus.COMPLETED, text, stored)
    attempts = node.retry.max_attempts
    if last is not None:
        raise NodeFailure(NodeError.of(last, node.id, attempts=attempts))
    raise NodeFailure(NodeError(
        "UntilExhausted", f"`until` of node '{node.id}' was still false after {attempts} "
        "attempts", node.id, attempts))


def _holds(unit: Unit, node: TaskNode, output: Any) -> bool:
    """The truth of ``until`` with ``nodes.<node>.output`` the latest output."""
    names = unit.names()
    level = unit.level
    names["nodes"] = NodesView(level.plan, level.state.with_output(node.id, output))
    assert node.until is not None
    return truthy(node.until, names, "until", level.session.budget)
