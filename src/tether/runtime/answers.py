"""Giving waiting units the answers claimed for them.

A claimed answer is a :class:`~tether.stores.records.Decision` bound to one interrupted
checkpoint. The attempt that owns the run applies every decision whose checkpoint a unit is
still waiting at (the unit runs again from its top and its ``interrupt()`` returns the
answer); a decision for a pause that was already answered and moved on matches no waiting
unit and changes nothing, so a decision can never release another pause.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tether.paths import StatePath
from tether.runtime.state import RunState
from tether.status import UnitStatus
from tether.stores.records import Decision, PendingInterrupt

if TYPE_CHECKING:
    from tether.compiler.plan import Plan


def apply_decisions(plan: Plan, state: RunState,
                    decisions: Iterable[Decision]) -> list[StatePath]:
    """Answer the units waiting at the decisions' checkpoints; return the changed paths."""
    waiting = state.waiting(plan)
    changed: list[StatePath] = []
    for decision in decisions:
        found = waiting.pop(decision.checkpoint_id, None)
        if found is None:
            continue
        path, unit = found
        unit.answer(decision.value)
        changed.append(path)
        changed.extend(state.wake(path))
    return changed


def adopt_waits(plan: Plan, state: RunState, pending: Iterable[PendingInterrupt],
                decisions: Iterable[Decision]) -> None:
    """Runs paused by tether 0.1 recorded no ``waiting`` checkpoint on their interrupted unit:
    take it from the unit's pending row, or from the newest decision for that unit."""
    asked = {(p.agent_path, p.node_id): p.checkpoint_id for p in pending}
    for decision in decisions:
        asked.setdefault((decision.agent_path, decision.node_id), decision.checkpoint_id)
    for (agent_path, address), checkpoint_id in asked.items():
        try:
            _, path = state.locate(plan, agent_path, address)
        except KeyError:
            continue
        unit = state.find(path)
        if unit is not None and unit.status == UnitStatus.INTERRUPTED and unit.waiting is None:
            unit.suspend(checkpoint_id)
