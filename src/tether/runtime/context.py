"""What code running inside a node can see: the run, the node, and the answers it was given.

Two ContextVars carry it. ``asyncio`` tasks and ``asyncio.to_thread`` copy them, so sync tasks in
worker threads, async tasks, and ``@idempotent`` functions they call all see the same run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tether.errors import InterruptSignal
from tether.runtime.values import to_json

if TYPE_CHECKING:
    from tether.runtime.secrets import Masker
    from tether.stores.base import Checkpointer


class Resume(Mapping[str, Any]):
    """The values a human (or a program) answers an interrupt with: ``Resume(approved=True)``.

    Read them as attributes (``answer.approved``) or as a mapping (``answer["approved"]``,
    ``dict(answer)``); a field named like a mapping method (``values``, ``items``, ``get``,
    ``keys``) is read as a mapping item.
    """

    __slots__ = ("_values",)

    def __init__(self, /, **values: Any) -> None:  # "self" may be a field
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Resume is immutable")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resume):
            return bool(self._values == other._values)
        if isinstance(other, dict):
            return bool(self._values == other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values)))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"Resume({inner})"


@dataclass
class RunContext:
    """The run a piece of code executes in, and the attempt executing it (``owner``: the
    token every write, idempotency entries included, is fenced on)."""

    execution_id: str
    store: Checkpointer | None
    owner: str | None = None
    masker: Masker | None = None
    memo: dict[str, str] = field(default_factory=dict)  # idempotency cache without a store
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(slots=True)
class UnitScope:
    """The node (or for_each element) executing, and the answers its interrupts receive."""

    address: str
    agent_path: str
    answers: list[Any]
    asked: int = 0


RUN: ContextVar[RunContext | None] = ContextVar("tether_run", default=None)
UNIT: ContextVar[UnitScope | None] = ContextVar("tether_unit", default=None)


def interrupt(reason: str, context: Any = None) -> Resume:
    """Pause the run for human input, or return the answer when the node is being resumed.

    The first time a node reaches this call, it raises :class:`~tether.errors.InterruptSignal`
    (a ``BaseException``): the runner records the interrupt with ``context`` frozen as JSON and
    the run pauses. When the run is resumed with ``Resume(...)``, the node runs again from its
    top and this call returns that answer. Several calls in one node are answered in order.
    """
    scope = UNIT.get()
    if scope is not None and scope.asked < len(scope.answers):
        answer = scope.answers[scope.asked]
        scope.asked += 1
        return answer if isinstance(answer, Resume) else Resume(**answer)
    node_id = scope.address if scope else None
    reason = _storable_reason(str(reason), node_id)
    frozen, _ = to_json(context, f"the context of interrupt '{reason}'", node_id=node_id)
    raise InterruptSignal(
        reason,
        frozen,
        node_id=node_id,
        agent_path=scope.agent_path if scope else "",
    )


def _storable_reason(reason: str, node_id: str | None) -> str:
    """The reason, if every store can keep it (PostgreSQL refuses NUL characters); otherwise
    the same NotJSONError on every backend."""
    what = f"the reason of interrupt {reason[:40]!r}{'...' if len(reason) > 40 else ''}"
    to_json(reason, what, node_id=node_id)
    return reason


def current_execution_id() -> str | None:
    """The execution id of the run the caller executes in, or None outside a run."""
    run = RUN.get()
    return run.execution_id if run is not None else None
