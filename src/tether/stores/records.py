"""The records stores keep: runs, checkpoints (stored and folded), pending interrupts.

A :class:`CheckpointRow` is what is written: its state is either a full snapshot or the delta
since the previous row (a list of ``[path, value]`` assignments), plus ``base_id``, the full row
its chain starts from. A :class:`Checkpoint` is what is read: the same fields with the full
``state_snapshot`` folded from the chain. JSON payloads travel as text so the hot path
serialises each value once and both SQL backends store the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from tether.errors import StoreError
from tether.paths import set_path
from tether.status import (
    RUN_END,
    CheckpointStatus,
    CheckpointStatusName,
    RunStatus,
    StepType,
    StepTypeName,
)
from tether.stores.run_record import RunRecord as RunRecord
from tether.stores.run_record import utc as utc

__all__ = [
    "RUN_END", "Checkpoint", "CheckpointRow", "CheckpointStatus", "Claim", "Decision",
    "FencedWrite", "PendingCursor", "PendingEntry", "PendingInterrupt", "PruneResult",
    "Readdress", "RunCursor", "RunEnd", "RunRecord", "RunStatus", "StepType", "fold",
    "fold_last", "readdress_rows", "readdressed", "utc",
]


class CheckpointRow(NamedTuple):
    """A checkpoint as stored. JSON fields are text; ``state`` is a snapshot or a delta.

    A named tuple whose fields are the ``checkpoints`` table's columns in order, so the hot
    path hands it to the driver as the INSERT's parameters as it is.
    """

    execution_id: str
    checkpoint_id: str
    parent_checkpoint_id: str | None = None
    node_id: str = ""
    node_index: int = 0
    step_type: StepType | StepTypeName = "node"
    status: CheckpointStatus | CheckpointStatusName = "completed"
    base_id: str = ""
    is_full: bool = False
    state: str = "[]"
    node_input: str | None = None
    node_output: str | None = None
    iteration_counters: str = "{}"
    interrupt_reason: str | None = None
    interrupt_context: str | None = None
    agent_path: str = ""
    created_at: float = 0.0


class RunEnd(NamedTuple):
    """How a run ends (``finish_run``): its final status, error (JSON text) and time."""

    status: str
    error: str | None
    at: float


class FencedWrite(NamedTuple):
    """One write of a worker's write group (``write_group.py``): ``row`` fenced on
    ``owner``; with ``end``, ``row`` is the run's end and the run row takes ``end``
    (``finish_run``), and ``before`` (if any) is the checkpoint of the run's last node,
    written first in the same statement."""

    row: CheckpointRow
    owner: str
    end: RunEnd | None = None
    before: CheckpointRow | None = None


@dataclass(frozen=True)
class Checkpoint:
    """The state of a run at one boundary, as the API returns it (full snapshot folded)."""

    execution_id: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    node_id: str
    node_index: int
    step_type: StepType | StepTypeName
    status: CheckpointStatus | CheckpointStatusName
    state_snapshot: dict[str, Any]
    node_input: Any
    node_output: Any
    iteration_counters: dict[str, Any]
    interrupt_reason: str | None
    interrupt_context: Any
    agent_path: str
    created_at: datetime

    @property
    def is_run_end(self) -> bool:
        return self.step_type == RUN_END


def _loads(text: str | None, row: CheckpointRow | None = None, what: str = "") -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        if row is None:
            raise
        raise StoreError(f"checkpoint {row.checkpoint_id} of run {row.execution_id} holds "
                         f"invalid JSON in its {what} (the database was edited or damaged)") \
            from None


def apply_row(state: dict[str, Any], row: CheckpointRow) -> dict[str, Any]:
    """The state after ``row``: its snapshot if it is full, else ``state`` with its delta."""
    body = _loads(row.state, row, "state")
    try:
        if row.is_full:
            return dict(body)
        for path, value in body:
            if path:
                set_path(state, path, value)
            else:
                state = dict(value)
    except (TypeError, ValueError, KeyError, IndexError):
        raise StoreError(f"checkpoint {row.checkpoint_id} of run {row.execution_id} holds a "
                         "state that is not a snapshot or delta tether wrote") from None
    return state


def to_checkpoint(row: CheckpointRow, state: dict[str, Any], inputs: Any) -> Checkpoint:
    """The API record of ``row`` given the folded state (without inputs) and the run's inputs."""
    snapshot = {"inputs": inputs, **json.loads(json.dumps(state))}
    return Checkpoint(
        execution_id=row.execution_id,
        checkpoint_id=row.checkpoint_id,
        parent_checkpoint_id=row.parent_checkpoint_id,
        node_id=row.node_id,
        node_index=row.node_index,
        step_type=row.step_type,
        status=row.status,
        state_snapshot=snapshot,
        node_input=_loads(row.node_input, row, "input"),
        node_output=_loads(row.node_output, row, "output"),
        iteration_counters=_loads(row.iteration_counters, row, "counters") or {},
        interrupt_reason=row.interrupt_reason,
        interrupt_context=_loads(row.interrupt_context, row, "interrupt context"),
        agent_path=row.agent_path,
        created_at=utc(row.created_at),
    )


def fold_last(rows: list[CheckpointRow], inputs: Any) -> Checkpoint:
    """The checkpoint of the last row of a chain (starting at a full row), folded once."""
    state: dict[str, Any] = {}
    for row in rows:
        state = apply_row(state, row)
    return to_checkpoint(rows[-1], state, inputs)


def fold(rows: list[CheckpointRow], inputs: Any) -> list[Checkpoint]:
    """Fold a chain of rows (starting at a full row) into checkpoints with full snapshots."""
    state: dict[str, Any] = {}
    result = []
    for row in rows:
        state = apply_row(state, row)
        result.append(to_checkpoint(row, state, inputs))
    return result


LIVE_STATUSES: tuple[str, ...] = ("queued", "running", "paused", "failed")
"""The statuses of runs a new plan may still concern (``tether compat``, ``upgrade``)."""


@dataclass(frozen=True)
class PendingInterrupt(Mapping[str, Any]):
    """A unit waiting for input: what to approve, frozen when it paused.

    Also readable as the mapping ``{reason, context, node_id, agent_path}`` (the
    ``pending_interrupt`` of results of earlier releases).
    """

    execution_id: str
    checkpoint_id: str
    node_id: str
    agent_path: str
    reason: str
    context: Any
    created_at: datetime
    due_at: float | None = None
    """A timer's due time (Unix seconds): when it fires (a ``sleep`` node) or times out (an
    approval with ``timeout``); None for a pause only an answer ends."""

    @property
    def due(self) -> datetime | None:
        """:attr:`due_at` as an aware UTC datetime."""
        return utc(self.due_at) if self.due_at is not None else None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: reason, context, node_id, agent_path."""
        return {"reason": self.reason, "context": self.context, "node_id": self.node_id,
                "agent_path": self.agent_path}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PendingInterrupt):
            return self.__dict__ == other.__dict__
        if isinstance(other, Mapping):
            return self.as_dict() == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.execution_id, self.checkpoint_id))

    def __getitem__(self, key: str) -> Any:
        if key not in _PENDING_KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_PENDING_KEYS)

    def __len__(self) -> int:
        return len(_PENDING_KEYS)

    @property
    def address(self) -> str:
        """Where the run waits, as shown and as ``--node`` names it; unique among a run's
        pending rows (see :func:`place`)."""
        return place(self.agent_path, self.node_id)

    def names(self, node: str) -> bool:
        """Whether ``node`` (an address, a node id, or ``agent_path/node_id``) names this."""
        return names_place(self.agent_path, self.node_id, node)


_PENDING_KEYS = ("reason", "context", "node_id", "agent_path")


def place(agent_path: str, node_id: str) -> str:
    """The address of a pause: ``agent_path/node_id``, except for an agent's tool call, whose
    ``agent_path`` names it whole (``agent:<node>/tool:<name>``, the reference model's
    address), while its ``node_id`` (``<node>/turn:N/tool:<name>``) says the turn as well."""
    if not agent_path:
        return node_id
    if agent_path.rpartition("/")[2].startswith("tool:"):
        return agent_path
    return f"{agent_path}/{node_id}"


def names_place(agent_path: str, node_id: str, node: str) -> bool:
    """Whether ``node`` names the pause at (``agent_path``, ``node_id``): its address, its
    node id, or the two joined (the address earlier releases printed for agent tools)."""
    return node in (place(agent_path, node_id), node_id, f"{agent_path}/{node_id}")


@dataclass(frozen=True)
class Readdress:
    """A new place for a run's pause or decision (``tether upgrade`` of a run paused in a
    node the new plan renamed): the row of ``checkpoint_id`` now names ``node_id`` at
    ``agent_path``."""

    checkpoint_id: str
    node_id: str
    agent_path: str
    was: str
    """The address it had (what the ``upgraded`` event shows beside the new one)."""

    @property
    def address(self) -> str:
        """The new address (see :func:`place`)."""
        return place(self.agent_path, self.node_id)


def readdressed(readdress: Sequence[Readdress]) -> dict[str, str]:
    """The addresses ``readdress`` changes, old -> new."""
    return {r.was: r.address for r in readdress}


@dataclass(frozen=True)
class Decision:
    """An answer claimed for a pending interrupt, kept until the run is pruned.

    ``checkpoint_id`` is the interrupted checkpoint it answers: the unit that asked applies it
    while it still waits at that checkpoint, so a decision can never release another pause.
    ``resolver`` and ``comment`` say who answered and why (shown on the run's timeline).
    """

    execution_id: str
    checkpoint_id: str
    node_id: str
    agent_path: str
    value: dict[str, Any]
    created_at: datetime
    resolver: str | None = None
    comment: str | None = None

    @property
    def address(self) -> str:
        """Where the unit that asked waited (see :func:`place`)."""
        return place(self.agent_path, self.node_id)

    def names(self, node: str) -> bool:
        """Whether ``node`` (an address, a node id, or ``agent_path/node_id``) names this."""
        return names_place(self.agent_path, self.node_id, node)


def readdress_rows(waiting: dict[str, PendingInterrupt], answers: dict[str, Decision],
                   readdress: Sequence[Readdress]) -> None:
    """Give a run's pending rows (by address) and decisions (by checkpoint id) the places
    ``readdress`` names, in place (the in-memory store's half of ``move_run_plan``)."""
    places = {r.checkpoint_id: r for r in readdress}
    for address, pending in list(waiting.items()):
        to = places.get(pending.checkpoint_id)
        if to is not None:
            del waiting[address]
            waiting[to.address] = replace(pending, node_id=to.node_id, agent_path=to.agent_path)
    for checkpoint_id, decision in list(answers.items()):
        to = places.get(checkpoint_id)
        if to is not None:
            answers[checkpoint_id] = replace(decision, node_id=to.node_id,
                                             agent_path=to.agent_path)


@dataclass(frozen=True)
class Claim:
    """The outcome of a successful claim: the pending row taken, and whether the claimer now
    holds the run's lease (False when another live attempt executes the run: it applies the
    decision before it pauses)."""

    pending: PendingInterrupt
    owned: bool


@dataclass(frozen=True)
class PruneResult:
    """What a prune removed."""

    runs: int = 0
    checkpoints: int = 0
    idempotency_rows: int = 0
    execution_ids: tuple[str, ...] = field(default=())


class RunCursor(NamedTuple):
    """Where a page of runs ended: the last run's time (Unix seconds: ``created_at`` for
    :meth:`~tether.stores.base.Checkpointer.find_runs`, ``updated_at`` for
    :meth:`~tether.stores.base.Checkpointer.runs_changed`, which returns its cursor with the
    stored value) and its execution id. The next page holds the runs that sort after it, so
    paging never skips or repeats a run."""

    at: float
    execution_id: str

    @classmethod
    def created(cls, run: RunRecord) -> RunCursor:
        return cls(run.created_at.timestamp(), run.execution_id)

    @classmethod
    def updated(cls, run: RunRecord) -> RunCursor:
        return cls(run.updated_at.timestamp(), run.execution_id)


class PendingCursor(NamedTuple):
    """Where a page of pending interrupts (newest first) ended: the last one's ``created_at``
    (Unix seconds, as stored), execution id and checkpoint id."""

    at: float
    execution_id: str
    checkpoint_id: str

    @classmethod
    def of(cls, pending: PendingInterrupt) -> PendingCursor:
        return cls(pending.created_at.timestamp(), pending.execution_id, pending.checkpoint_id)


@dataclass(frozen=True)
class PendingEntry:
    """A pending interrupt with the name of its run's workflow (one row of the inbox)."""

    pending: PendingInterrupt
    workflow: str
