"""What an owner had in flight *inside* a node when it died: the elements of a ``for_each``
(or ``matrix``) node and the nodes of a sub-workflow (``workflow:``), to any depth.

Part of building a run's history (``history_build.py``), which finds the top-level nodes an
owner had in flight; this module looks inside them, in the run's folded state at the owner's
last checkpoint. Nothing records when a unit starts (a row per start would cost the hot path),
so what was in flight is inferred from how the runtime schedules:

- **Elements** start in index order while fewer than the node's concurrency run
  (``foreach.py``), so the elements in flight are the first ``concurrency`` that had not
  finished (completed, failed, skipped, or waiting for an answer). The concurrency is the
  node's when the plan states a number; otherwise the runner's default
  (:data:`DEFAULT_CONCURRENCY`).
- **A sub-workflow's nodes** in flight are those runnable in its nested state: not finished,
  every ``waits_for`` finished, as for the top level.

How many elements a node has is known only when the plan writes the list out; otherwise the
elements that exist are those the state or some row names. :func:`inside` therefore yields
candidates and ``history_build.py`` keeps those a later owner re-ran (a resumed run), or,
for a run nobody resumed yet, those that provably exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tether.runtime.history_nodes import Inside, OutlineNode, PlanOutline
from tether.runtime.state import RunState, StatePath, UnitState
from tether.status import FINISHED, UnitStatus

__all__ = ["DEFAULT_CONCURRENCY", "InFlight", "inside", "runnable"]

DEFAULT_CONCURRENCY = 16
"""``Runner``'s and ``Worker``'s default ``max_concurrency``: the element limit of a
``for_each`` node that states none (the history cannot know a runner's own setting)."""

_SETTLED = FINISHED | {UnitStatus.INTERRUPTED}  # an element waiting for an answer holds no slot
_OPEN = (UnitStatus.PENDING, UnitStatus.RUNNING)


@dataclass(frozen=True)
class InFlight:
    """A unit inside a node that was in flight: its address and ``agent_path`` as its rows
    name them; ``known``: it provably exists (an element of a list the plan writes out or
    that has an entry in the state, or a node of such a sub-workflow), so it is shown even
    when nobody re-ran it."""

    address: str
    agent_path: str
    known: bool


def runnable(plan: PlanOutline, state: RunState) -> list[OutlineNode]:
    """The nodes of ``plan`` not finished nor waiting whose ``waits_for`` all finished."""
    return [node for node in plan.nodes if state.status(node.id) in _OPEN
            and all(state.status(d) in FINISHED for d in node.waits_for)]


def inside(plan: PlanOutline, node: OutlineNode, state: RunState,
           agent_path: str = "") -> Iterator[InFlight]:
    """The units in flight inside ``node`` of ``plan`` (a node in flight itself), whose
    level's state is ``state`` and whose rows carry ``agent_path``."""
    held = node.inside
    if held is None:
        return
    segment = f"workflow:{plan.name}/node:{node.id}"
    nested = f"{agent_path}/{segment}" if agent_path else segment
    if held.each:
        entry = state.find(("nodes", node.id))
        for index in _elements(held, entry):
            known = held.items is not None or (entry is not None and
                                               entry.item(str(index)) is not None)
            yield InFlight(f"{node.id}/item:{index}", agent_path, known)
            if held.sub is not None:
                yield from _level(held.sub, state, ("nodes", node.id, "items", str(index),
                                                    "sub"), f"{nested}/item:{index}",
                                  known=known)
    elif held.sub is not None:
        yield from _level(held.sub, state, ("nodes", node.id, "sub"), nested, known=True)


def _level(plan: PlanOutline, parent: RunState, path: StatePath, agent_path: str, *,
           known: bool) -> Iterator[InFlight]:
    """The units in flight in the sub-run whose state is at ``path`` of ``parent`` (not
    there yet: the sub-run had just begun)."""
    found = parent.find(path)
    state = RunState(found.data) if found is not None else RunState.new({})
    for node in runnable(plan, state):
        yield InFlight(node.id, agent_path, known)
        yield from inside(plan, node, state, agent_path)


def _elements(held: Inside, entry: UnitState | None) -> list[int]:
    """The first ``concurrency`` elements of a node that had not settled (see the module
    docstring), within its element count when the plan states it."""
    limit = held.concurrency if held.concurrency is not None else DEFAULT_CONCURRENCY
    found: list[int] = []
    index = 0
    while len(found) < limit and (held.items is None or index < held.items):
        status = entry.item_status(str(index)) if entry is not None else None
        if status not in _SETTLED:
            found.append(index)
        index += 1
    return found
