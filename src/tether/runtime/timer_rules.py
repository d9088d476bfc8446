"""How resume treats timers: the pending rows that have a due time.

A ``sleep`` node's pending row is woken (its unit runs again and waits, or fires, by the row
it recorded); an approval's row with a timeout is answered by a person until its deadline and
by :func:`tether.runtime.timers.fire_due` after it. Only one of the two ever answers it: both
go through the claim of the pending row.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tether.errors import ResumeError, TimerNotDue
from tether.kinds import NodeKind
from tether.paths import StatePath
from tether.runtime.state import RunState, split_address
from tether.stores.records import PendingInterrupt, utc

if TYPE_CHECKING:
    from tether.compiler.plan import ApprovalNode, Plan, PlanNode

__all__ = ["not_due", "refuse_human_answer", "timer_node", "wake_sleeps"]


def timer_node(plan: Plan, pending: PendingInterrupt) -> PlanNode | None:
    """The node (in its sub-plan) that recorded ``pending``, or None."""
    try:
        level, _ = RunState({}).locate(plan, pending.agent_path, pending.node_id)
    except KeyError:
        return None
    return level.by_id.get(split_address(pending.node_id)[0])


def timer_kind(plan: Plan, pending: PendingInterrupt) -> NodeKind | None:
    """The kind of :func:`timer_node` (None without one)."""
    node = timer_node(plan, pending)
    return None if node is None else node.kind


_SLEEPS = (NodeKind.SLEEP, NodeKind.SLEEP_UNTIL)


def _moment(due_at: float) -> str:
    return utc(due_at).isoformat(timespec="seconds")


def wake_sleeps(plan: Plan, state: RunState, pending: list[PendingInterrupt], *,
                park: bool) -> list[StatePath]:
    """Make the sleep units waiting at their pending rows runnable again (with ``park``,
    only those already due): their executor waits out the rest, or fires. Changed paths."""
    now = time.time()
    waiting = state.waiting(plan)
    changed: list[StatePath] = []
    for row in pending:
        if row.due_at is None or (park and row.due_at > now):
            continue
        sleeps = timer_kind(plan, row) in _SLEEPS
        if not sleeps or row.checkpoint_id not in waiting:
            continue
        path, unit = waiting[row.checkpoint_id]
        unit.wake()
        changed.append(path)
        changed.extend(state.wake(path))
    return changed


def not_due(execution_id: str, plan: Plan, pending: list[PendingInterrupt]) -> None:
    """Raise :class:`TimerNotDue` when every pending row is a sleep not due yet."""
    now = time.time()
    if not pending or not all(row.due_at is not None and row.due_at > now
                              and timer_kind(plan, row) in _SLEEPS
                              for row in pending):
        return
    first = min(pending, key=lambda row: row.due_at or 0.0)
    assert first.due_at is not None
    raise TimerNotDue(execution_id, f"it waits for the timer of node '{first.address}', due at "
                      f"{_moment(first.due_at)}; nothing was changed", due_at=first.due_at,
                      node_id=first.node_id)


def refuse_human_answer(execution_id: str, plan: Plan, target: PendingInterrupt) -> None:
    """A person's value for a timer: refused for a sleep (it takes none) and for an approval
    past its deadline (its ``on_timeout`` applies; the timeout wins)."""
    if target.due_at is None:
        return
    node = timer_node(plan, target)
    if node is None:
        return
    if node.kind in (NodeKind.SLEEP, NodeKind.SLEEP_UNTIL):
        raise ResumeError(execution_id, f"node '{target.address}' is a timer due at "
                          f"{_moment(target.due_at)}; it takes no value (resume without one "
                          "once it is due)", node_id=target.node_id)
    if node.kind is NodeKind.APPROVAL and time.time() >= target.due_at:
        raise ResumeError(execution_id, f"approval '{target.address}' timed out at "
                          f"{_moment(target.due_at)}; its on_timeout "
                          f"({_on_timeout(node)}) applies instead of an answer",
                          node_id=target.node_id)


def _on_timeout(node: ApprovalNode) -> str:
    on_timeout = node.approval.on_timeout
    return on_timeout if isinstance(on_timeout, str) else "the configured answer"
