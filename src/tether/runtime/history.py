"""A run's history: one typed, ordered list of what happened to it, built from the store.

The only source of ``tether show`` (text and ``--json``), the console's run page and graph,
and ``GET /api/runs/{id}/history``: all three render one :class:`History`, whose JSON
(:meth:`History.to_json`) is the same everywhere. Recording it costs the hot path nothing:
a history is read from what the store keeps anyway (see ``history_build.py`` for exactly
what is read and what is inferred):

- checkpoint rows: each node's completion or failure, pauses, agent turns and tool calls, the
  fork origin and the run's end;
- the node entries those rows carry: failed attempts of a unit with a retry policy (a node,
  a ``for_each`` element, a sub-workflow's node; with their masked errors and backoff), and
  why a node was skipped;
- ``run_events`` (``stores/events.py``): claims, releases and lost leases of owners, answers
  with their channel, cancel requests, forks with their patch;
- ``decisions``: answers recorded before ``run_events`` existed.

A history is paged like the checkpoints it is built from (``after``, ``limit``: a page holds
the events up to its last checkpoint), so a run of any length is shown in bounded memory.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["EventKind", "History", "HistoryEvent", "NodeState", "NodeView"]


class EventKind(StrEnum):
    """Every kind of event a history holds (docs/runtime.md describes each)."""

    RUN_CREATED = "run_created"  # the run was started (or submitted to a queue)
    FORKED = "forked"  # it was forked from another run's checkpoint (with its patch)
    CLAIMED = "claimed"  # an owner (an attempt: pid, host, worker) took the run
    RELEASED = "released"  # that owner let it go without ending it (paused, stopped)
    LEASE_LOST = "lease_lost"  # that owner found its lease taken over
    NODE_STARTED = "node_started"  # an attempt of a node began
    NODE_FAILED = "node_failed"  # ... raised (error type and message)
    NODE_TIMED_OUT = "node_timed_out"  # ... ran past its timeout
    NODE_RETRIED = "node_retried"  # ... is retried after a backoff
    NODE_ABANDONED = "node_abandoned"  # ... was in flight when its owner died or lost the run
    NODE_COMPLETED = "node_completed"  # ... completed (with its duration)
    NODE_SKIPPED = "node_skipped"  # a node did not run (with the reason)
    PAUSED = "paused"  # a unit asked for input
    ANSWERED = "answered"  # an answer was recorded (who, through which channel)
    TIMED_OUT = "timed_out"  # a pause's deadline passed and its timer answered it
    CANCEL_REQUESTED = "cancel_requested"  # someone asked to cancel the run
    UPGRADED = "upgraded"  # `tether upgrade` moved it to a new plan (detail: from, to, renamed)
    CONCURRENCY = "concurrency"  # its concurrency key made it wait or cancelled it (reason)
    AGENT_TURN = "agent_turn"  # an agent called its model
    TOOL_CALL_STARTED = "tool_call_started"  # an agent's tool call was dispatched (arguments)
    TOOL_CALL_COMPLETED = "tool_call_completed"  # ... returned (the turn after it went on)
    TOOL_CALL_ABANDONED = "tool_call_abandoned"  # ... was in flight when its owner died
    HANDOFF = "handoff"  # an agent handed the conversation over
    RUN_ENDED = "run_ended"  # completed, failed or cancelled


class NodeState(StrEnum):
    """A node's state as the graph draws it."""

    PENDING = "pending"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"
    ABANDONED = "abandoned"  # in flight under an owner that died or lost the run


class HistoryEvent(BaseModel):
    """One event of a run's history. Fields that do not apply to a kind are None.

    Attributes:
        kind: what happened.
        at: when (UTC). A node's start is inferred (see ``history_build.py``).
        node: the unit's address (``node``, ``node/item:3``, an agent's ``agent/turn:2``).
        agent_path: where in a nested run (sub-workflow, agent); empty at the top level.
        attempt: the node's attempt number (1 for its first), or an owner's attempt number.
        checkpoint_id: the checkpoint the event was read from, if any.
        status: a status the event reports (the run's at its end, a tool call's).
        duration_ms: a completed attempt's duration.
        error: ``{"type", "message"}`` of a failure.
        backoff_seconds: the wait before a retried attempt.
        reason: why: a skip reason (``when``, ``trigger_rule``, ``upstream_failed``,
            ``switch``, ``timed_out``, ``cancelled``), a pause's reason, why an owner
            claimed (``started``, ``resumed``, ``answered``, ``claimed``, ``forked``) or
            released the run.
        actor: who (an answer's resolver, who cancelled); ``comment``: an answer's comment.
        channel: an answer's channel: cli, console, link, api, timer, python.
        owner: the owner token of a claim, release or lost lease; ``host``, ``pid`` and
            ``worker`` name its process.
        detail: the kind's details: a tool call's arguments, a fork's source and patch, an
            answer's value, a run's output.
    """

    model_config = ConfigDict(frozen=True)

    kind: EventKind
    at: datetime
    node: str | None = None
    agent_path: str = ""
    attempt: int | None = None
    checkpoint_id: str | None = None
    status: str | None = None
    duration_ms: float | None = None
    error: dict[str, Any] | None = None
    backoff_seconds: float | None = None
    reason: str | None = None
    actor: str | None = None
    channel: str | None = None
    owner: str | None = None
    host: str | None = None
    pid: int | None = None
    worker: str | None = None
    comment: str | None = None
    detail: Any = None


class NodeView(BaseModel):
    """A top-level node as the run's graph shows it."""

    model_config = ConfigDict(frozen=True)

    state: NodeState
    reason: str | None = None
    attempts: int = 0
    title: str | None = None


class History(BaseModel):
    """One page of a run's history.

    Attributes:
        execution_id, workflow, status, created_at, inputs, error: the run.
        parent_execution_id, parent_checkpoint_id: the run and checkpoint it was forked from.
        trigger: what started the run (``Trigger.as_dict``; None for runs stored before
            triggers were).
        nodes: every top-level node of the plan with its state now (the graph's).
        usage: the tokens of every model call of the run so far (agents), if any.
        events: this page's events, in order.
        next_after: pass as ``after`` for the next page (None on the last page).
    """

    model_config = ConfigDict(frozen=True)

    execution_id: str
    workflow: str
    status: str
    created_at: datetime
    inputs: Any = None
    error: Any = None
    parent_execution_id: str | None = None
    parent_checkpoint_id: str | None = None
    trigger: dict[str, Any] | None = None
    nodes: dict[str, NodeView]
    usage: dict[str, Any] | None = None
    events: list[HistoryEvent]
    next_after: str | None = None

    def to_json(self) -> str:
        """The JSON that ``tether show --json`` prints and the API returns: non-ASCII text
        kept, except invisible characters (controls, bidi overrides, line separators), which
        are ``\\uXXXX`` escapes so no terminal or page is fooled by stored text."""
        raw = json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False)
        if raw.isascii():
            return raw
        return "".join(c if ord(c) < 0x7F or unicodedata.category(c) not in _HIDDEN
                       else _escape(c) for c in raw)


_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
