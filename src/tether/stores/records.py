"""The records stores keep: runs, checkpoints (stored and folded), pending interrupts.

A :class:`CheckpointRow` is what is written: its state is either a full snapshot or the delta
since the previous row (a list of ``[path, value]`` assignments), plus ``base_id``, the full row
its chain starts from. A :class:`Checkpoint` is what is read: the same fields with the full
``state_snapshot`` folded from the chain. JSON payloads travel as text so the hot path
serialises each value once and both SQL backends store the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, NamedTuple

StepTypeName = Literal[
    "node", "hitl_pause", "llm_call", "tool_call", "handoff", "fork_origin", "run_end"
]
CheckpointStatusName = Literal["completed", "interrupted", "failed"]
RunStatusName = Literal["running", "paused", "completed", "failed"]

RUN_END = "run_end"


class StepType(StrEnum):
    """What kind of boundary a checkpoint records."""

    NODE = "node"
    HITL_PAUSE = "hitl_pause"
    LLM_CALL = "llm_call"
    TOOL_CALL = "tool_call"
    HANDOFF = "handoff"
    FORK_ORIGIN = "fork_origin"
    RUN_END = "run_end"


class CheckpointStatus(StrEnum):
    """The status resume decides on."""

    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class RunStatus(StrEnum):
    """The status of a run as a whole."""

    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"


def utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


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
    step_type: str = "node"
    status: str = "completed"
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


@dataclass(frozen=True)
class Checkpoint:
    """The state of a run at one boundary, as the API returns it (full snapshot folded)."""

    execution_id: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    node_id: str
    node_index: int
    step_type: str
    status: str
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


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def set_path(state: dict[str, Any], path: list[Any], value: Any) -> None:
    """Assign ``value`` at ``path`` inside ``state``, creating mappings on the way."""
    target = state
    for key in path[:-1]:
        nxt = target.get(key)
        if not isinstance(nxt, dict):
            nxt = {}
            target[key] = nxt
        target = nxt
    target[path[-1]] = value


def apply_row(state: dict[str, Any], row: CheckpointRow) -> dict[str, Any]:
    """The state after ``row``: its snapshot if it is full, else ``state`` with its delta."""
    if row.is_full:
        return dict(json.loads(row.state))
    for path, value in json.loads(row.state):
        if path:
            set_path(state, path, value)
        else:
            state = dict(value)
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
        node_input=_loads(row.node_input),
        node_output=_loads(row.node_output),
        iteration_counters=_loads(row.iteration_counters) or {},
        interrupt_reason=row.interrupt_reason,
        interrupt_context=_loads(row.interrupt_context),
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


@dataclass(frozen=True)
class RunRecord:
    """One run: what it executes, how it stands, who holds it."""

    execution_id: str
    workflow: str
    plan_fingerprint: str
    status: str
    inputs: Any
    created_at: datetime
    updated_at: datetime
    parent_execution_id: str | None = None
    parent_checkpoint_id: str | None = None
    error: Any = None
    owner: str | None = None
    lease_until: float | None = None
    decision: Any = None  # the claimed resume value: {"checkpoint_id", "value"} until it commits


@dataclass(frozen=True)
class PendingInterrupt:
    """A paused run waiting for input: what to approve, frozen when it paused."""

    execution_id: str
    checkpoint_id: str
    node_id: str
    agent_path: str
    reason: str
    context: Any
    created_at: datetime

    def as_dict(self) -> dict[str, Any]:
        """The ``pending_interrupt`` of a RunResult: reason, context, node_id, agent_path."""
        return {"reason": self.reason, "context": self.context, "node_id": self.node_id,
                "agent_path": self.agent_path}


@dataclass(frozen=True)
class PruneResult:
    """What a prune removed."""

    runs: int = 0
    checkpoints: int = 0
    idempotency_rows: int = 0
    execution_ids: tuple[str, ...] = field(default=())
