"""What the scheduler hands a node executor, and what it gets back.

An executor (one per node kind, in ``executors/``) runs one *unit*: a node, or one element of
a ``for_each`` node. It returns a :class:`UnitResult`, or raises ``NodeFailure`` (the unit
failed), :class:`~tether.errors.InterruptSignal` (the unit asks a human) or
:class:`Suspended` (a sub-run it started is waiting for answers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from tether.paths import StatePath

if TYPE_CHECKING:
    from tether.compiler.plan import PlanNode
    from tether.runtime.execution import Level

N_contra = TypeVar("N_contra", contravariant=True)


class UnitResult(NamedTuple):
    """A unit's output, its JSON text (serialised once, for the checkpoint), and the rendered
    input recorded with it. (A named tuple: one is built per unit, and a frozen dataclass's
    constructor costs several times more.)"""

    output: Any
    text: str
    node_input: Any = None
    tries: tuple[dict[str, Any], ...] = ()
    """The failed attempts before this result (a node with a retry policy), oldest first."""


class Suspended(Exception):
    """A (sub-)run stopped with units waiting for answers and nothing else to do."""


class UnitSkipped(Exception):
    """The unit decided, when it ran, that it is skipped (an approval that timed out with
    ``on_timeout: skip``); its dependants follow their trigger rules."""


@dataclass(slots=True)
class Unit:
    """One unit to execute, at ``path`` in its level's state (``address``: ``node`` or
    ``node/item:3``). ``inline``: it is the only unit running, so a sync task may be called in
    the event loop's thread."""

    level: Level
    node: PlanNode
    path: StatePath
    address: str
    item: Any = None
    has_item: bool = False
    inline: bool = False

    def names(self) -> dict[str, Any]:
        """The names this unit's templates read."""
        return self.level.names(self.node, item=self.item, has_item=self.has_item)


class Executor(Protocol[N_contra]):
    """Runs units of one node kind (``N``: that kind's plan node type)."""

    async def run(self, unit: Unit, node: N_contra) -> UnitResult:
        """Execute ``unit`` of ``node`` to its result (see the module docstring for the other
        ways out)."""
        ...
