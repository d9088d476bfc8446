"""``sleep`` and ``sleep_until`` nodes: durable timers.

On first entry the node computes its due time and records its pause like an approval's (an
interrupted checkpoint and a pending row, now with ``due_at``, in one fenced transaction), so
the timer survives any process dying. Then, in place (``park_timers`` off: ``tether run``,
``tether resume``), its branch waits until the due time while other branches run, and fires the
timer itself through the claim; parked (``park_timers`` on: workers), the unit stays waiting
and the run pauses once nothing else can run, for :func:`tether.runtime.timers.fire_due`.

Firing is claiming the pending row with the timer's answer: exactly one claimer wins, whoever
it is (this branch, a worker, a ``tether resume`` after a crash). A branch that loses the claim
takes the answer the winner recorded. Re-entered with that answer, the node completes with it
as its output (``{"due_at", "fired_at"}``, ISO 8601 UTC).
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING, Any

from tether.durations import DurationError, parse_duration
from tether.errors import InterruptSignal
from tether.kinds import NodeKind
from tether.runtime.invoke import NodeFailure
from tether.runtime.render import render
from tether.runtime.state import NodeError
from tether.runtime.units import Suspended, Unit, UnitResult
from tether.runtime.values import to_json
from tether.stores.records import PendingInterrupt, utc
from tether.timestamps import TimestampError, parse_timestamp

if TYPE_CHECKING:
    from tether.compiler.plan import SleepNode, SleepUntilNode

TIMER_RESOLVER = "timer"
"""The resolver of a decision recorded by a timer firing."""
_POLL = 1.0  # a waiting branch checks its lease (and the clock) at least this often


def timer_answer(due_at: float, now: float) -> dict[str, Any]:
    """The answer a sleep timer fires with: when it was due and when it fired."""
    return {"due_at": _iso(due_at), "fired_at": _iso(max(now, due_at))}


def _iso(moment: float) -> str:
    return utc(moment).isoformat(timespec="milliseconds")


class SleepExecutor:
    """Waits durably (see the module docstring)."""

    async def run(self, unit: Unit, node: SleepNode | SleepUntilNode) -> UnitResult:
        level = unit.level
        session = level.session
        answers = level.answers(unit.path)
        if answers:  # fired: the claim gave this unit its answer
            return _done(answers[-1], node)
        journal = session.journal
        row = _own_row(unit) if journal is not None else None
        if row is None:
            due = self._due(unit, node)
            now = time.time()
            if due <= now:
                return _done(timer_answer(due, now), node)
            if journal is None:  # in memory: nothing survives the process anyway
                await _wait_until(due, unit)
                return _done(timer_answer(due, time.time()), node)
            context = {"due_at": _iso(due)}
            signal = InterruptSignal(f"sleep until {_iso(due)}", context, node_id=unit.address,
                                     agent_path=level.agent_path)
            level.suspend(node, unit.path, unit.address, signal, due_at=due)
            row = session.pending[-1]
        due_at = row.due_at if row.due_at is not None else time.time()
        if session.park_timers and due_at > time.time():
            entry = level.state.at(unit.path)
            if entry.waiting != row.checkpoint_id:  # re-entered: wait at the same pause
                entry.suspend(row.checkpoint_id)
                level.mark(unit.path)
            raise Suspended()
        await _wait_until(due_at, unit)
        return _done(self._fire(unit, row), node)

    @staticmethod
    def _due(unit: Unit, node: SleepNode | SleepUntilNode) -> float:
        names = unit.names()
        budget = unit.level.session.budget
        if node.kind is NodeKind.SLEEP:
            value = render(node.sleep, names, "sleep", budget)
            return time.time() + _seconds(value, node)
        value = render(node.sleep_until, names, "sleep_until", budget)
        try:
            return parse_timestamp(value)
        except TimestampError as exc:
            raise NodeFailure(NodeError("TimerError", f"`sleep_until` of node '{node.id}': "
                                        f"{exc}", node.id)) from None

    @staticmethod
    def _fire(unit: Unit, row: PendingInterrupt) -> dict[str, Any]:
        """Claim the row with the timer's answer; the answer recorded by whoever won."""
        session = unit.level.session
        session.check()
        journal = session.journal
        assert journal is not None
        due_at = row.due_at if row.due_at is not None else time.time()
        answer = timer_answer(due_at, time.time())
        if journal.store.claim(row, answer, resolver=TIMER_RESOLVER,
                               channel="timer") is not None:
            return answer
        for decision in journal.store.decisions(journal.execution_id):
            if decision.checkpoint_id == row.checkpoint_id:
                return decision.value  # a worker (or a resume) fired it first
        return answer


def _seconds(value: Any, node: SleepNode | SleepUntilNode) -> float:
    """Seconds of a rendered ``sleep``: a duration text or a number of seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    elif isinstance(value, str):
        try:
            return float(value) if _number(value) else parse_duration(value)
        except DurationError as exc:
            raise NodeFailure(NodeError("TimerError", f"`sleep` of node '{node.id}': {exc}",
                                        node.id)) from None
    raise NodeFailure(NodeError("TimerError", f"`sleep` of node '{node.id}' gave {value!r}, "
                                "not a duration or a number of seconds", node.id))


def _number(text: str) -> bool:
    try:
        return float(text) >= 0
    except ValueError:
        return False


def _own_row(unit: Unit) -> PendingInterrupt | None:
    """The pending timer this unit recorded before (the run was resumed while it waits)."""
    journal = unit.level.session.journal
    assert journal is not None
    for row in journal.store.list_pending(journal.execution_id):
        if row.node_id == unit.address and row.agent_path == unit.level.agent_path:
            return row
    return None


async def _wait_until(due_at: float, unit: Unit) -> None:
    """Sleep until ``due_at``, checking the attempt's lease as it goes."""
    while True:
        unit.level.session.check()
        remaining = due_at - time.time()
        if remaining <= 0:
            return
        await asyncio.sleep(min(remaining, _POLL))


def _done(answer: Any, node: SleepNode | SleepUntilNode) -> UnitResult:
    output, text = to_json(dict(answer) if isinstance(answer, dict) else answer,
                           f"the output of sleep node '{node.id}'", node_id=node.id)
    return UnitResult(output, text, None)
