"""The closed sets of names a run is described by: one ``StrEnum`` per concept.

Records, run state, results, the stores and the CLI all use these; a value compares equal to
its text (``RunStatus.PAUSED == "paused"``), which is also what the stores hold, so databases
written before these types existed read the same. Where pydantic or a signature needs a
``Literal``, the matching alias is defined beside its enum.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


class RunStatus(StrEnum):
    """A run as a whole (the ``runs.status`` column, and ``RunResult.status``).

    ``queued``: submitted (``Runner.submit``, ``tether submit``), waiting for a worker;
    ``running``: an attempt executes it, or it stopped (crash, Ctrl-C) and may be resumed;
    ``paused``: nothing can proceed until a pending interrupt is answered; ``completed`` and
    ``failed``: it ended (a failed run may be resumed); ``cancelled``: ``tether cancel``
    stopped it at a node boundary (or before it started); it never runs another node. A
    ``RunResult`` is ``running`` only when an answer was recorded for a run that another
    attempt is executing.
    """

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


RunStatusName = Literal["queued", "running", "paused", "completed", "failed", "cancelled"]


class UnitStatus(StrEnum):
    """One unit of a run (a node, or one ``for_each`` element) in the run state."""

    PENDING = "pending"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    COMPLETED = "completed"
    SKIPPED = "skipped"
    FAILED = "failed"
    UPSTREAM_FAILED = "upstream_failed"

    @property
    def finished(self) -> bool:
        """Whether the unit is done for this pass (resume never re-runs it)."""
        return self in _FINISHED

    @property
    def not_ok(self) -> bool:
        """Whether the unit failed, itself or through its dependencies."""
        return self in _NOT_OK


_FINISHED = frozenset({UnitStatus.COMPLETED, UnitStatus.SKIPPED, UnitStatus.FAILED,
                       UnitStatus.UPSTREAM_FAILED})
_NOT_OK = frozenset({UnitStatus.FAILED, UnitStatus.UPSTREAM_FAILED})
FINISHED: frozenset[str] = frozenset(_FINISHED)
NOT_OK: frozenset[str] = frozenset(_NOT_OK)


class CheckpointStatus(StrEnum):
    """The status resume decides on (``checkpoints.status``)."""

    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


CheckpointStatusName = Literal["completed", "interrupted", "failed"]


class StepType(StrEnum):
    """What kind of boundary a checkpoint records (``checkpoints.step_type``)."""

    NODE = "node"
    HITL_PAUSE = "hitl_pause"
    LLM_CALL = "llm_call"
    TOOL_CALL = "tool_call"
    HANDOFF = "handoff"
    FORK_ORIGIN = "fork_origin"
    RUN_END = "run_end"


StepTypeName = Literal[
    "node", "hitl_pause", "llm_call", "tool_call", "handoff", "fork_origin", "run_end"
]

RUN_END = "run_end"
"""The ``node_id`` of the terminal row: a tombstone, not an address."""


class SkipReason(StrEnum):
    """Why a unit did not run (its entry's ``reason``, shown by the run's history)."""

    WHEN = "when"  # its ``when:`` guard was false
    TRIGGER_RULE = "trigger_rule"  # its trigger rule over its needs' statuses said no
    UPSTREAM_FAILED = "upstream_failed"  # a need failed (status ``upstream_failed``)
    SWITCH = "switch"  # a switch took another case
    TIMED_OUT = "timed_out"  # an approval timed out with ``on_timeout: skip``
    CANCELLED = "cancelled"  # the run was cancelled before it started (derived, not stored)
