"""The answer a due timer fires with: a sleep's ``{"due_at", "fired_at"}``, or an approval's
``on_timeout`` (the ``$timeout`` marker for ``fail`` and ``skip``, else the configured answer).
"""

from __future__ import annotations

import time
from datetime import UTC
from typing import TYPE_CHECKING, Any

from tether.errors import ResumeError, TimerNotDue
from tether.kinds import NodeKind
from tether.runtime.executors.approval import TIMEOUT_KEY
from tether.runtime.executors.sleep import TIMER_RESOLVER, timer_answer
from tether.runtime.timer_rules import timer_kind, timer_node
from tether.stores.base import Checkpointer
from tether.stores.records import Decision, PendingInterrupt, utc

if TYPE_CHECKING:
    from tether.compiler.plan import Plan

TIMEOUT_RESOLVER = "timeout"
"""The resolver of the decision a timed-out approval records."""

__all__ = ["TIMEOUT_RESOLVER", "TIMER_RESOLVER", "due_approval", "fired_answer",
           "refuse_after_timeout", "timed_out"]


def refuse_after_timeout(decision: Decision) -> None:
    """Raise :class:`ResumeError` when ``decision`` is a timed-out approval's: its deadline
    passed and its ``on_timeout`` answered it, so no later answer replaces that one (on any
    channel: ``tether resume``, ``Runner.resume``, the console, the API, a signed link)."""
    reason = timed_out(decision)
    if reason is not None:
        raise ResumeError(decision.execution_id, reason, node_id=decision.node_id)


def timed_out(decision: Decision) -> str | None:
    """Why no answer may replace ``decision`` (a timed-out approval's), or None."""
    if decision.resolver != TIMEOUT_RESOLVER:
        return None
    moment = decision.created_at.astimezone(UTC).isoformat(timespec="seconds")
    return (f"approval '{decision.address}' timed out at {moment}; an answer after its "
            "deadline is refused (its on_timeout applied; fork the run to ask again)")


def fired_answer(plan: Plan, pending: PendingInterrupt, now: float
                 ) -> tuple[dict[str, Any], str]:
    """The answer and resolver ``pending`` fires with at ``now``; :class:`TimerNotDue`
    before its due time (or for a row that is not a timer)."""
    if pending.due_at is None or pending.due_at > now:
        due = pending.due_at if pending.due_at is not None else float("inf")
        when = utc(due).isoformat(timespec="seconds") if pending.due_at is not None else "never"
        raise TimerNotDue(pending.execution_id, f"the timer of '{pending.address}' is due at "
                          f"{when}; nothing was changed", due_at=due, node_id=pending.node_id)
    node = timer_node(plan, pending)
    if node is not None and node.kind is NodeKind.APPROVAL:
        on_timeout = node.approval.on_timeout
        answer = dict(on_timeout) if isinstance(on_timeout, dict) else {TIMEOUT_KEY: on_timeout}
        return answer, TIMEOUT_RESOLVER
    if node is None or node.kind not in (NodeKind.SLEEP, NodeKind.SLEEP_UNTIL):
        raise TimerNotDue(pending.execution_id, f"'{pending.address}' is not a timer of this "
                          "plan", due_at=float("inf"), node_id=pending.node_id)
    return timer_answer(pending.due_at, now), TIMER_RESOLVER


def due_approval(store: Checkpointer, plan: Plan, execution_id: str,
                 pending: list[PendingInterrupt] | None = None) -> PendingInterrupt | None:
    """The run's first approval whose deadline passed and that nobody answered yet
    (``pending``: the run's pending rows when the caller read them already)."""
    now = time.time()
    rows = pending if pending is not None else store.list_pending(execution_id)
    for row in rows:
        if row.due_at is not None and row.due_at <= now and \
                timer_kind(plan, row) is NodeKind.APPROVAL:
            return row
    return None
