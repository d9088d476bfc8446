"""Run events: what happened to a run outside its checkpoints (table ``run_events``).

Checkpoints record what a run's nodes did, written on the hot path. Everything else a run's
history needs is rare and is written here, one row per event, never per node: the claims and
releases of owners, lost leases, answers (who, through which channel), cancel requests and
forks. ``tether.runtime.history`` merges these rows with the checkpoints into one history.

Events are append-only, ordered by ``event_id`` (time-ordered: nanoseconds, then random), and
pruned with their run. They are not fenced on the run's owner: an attempt that just lost its
lease still says so.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.stores.records import PendingInterrupt

__all__ = ["CLAIMED_REASON", "AnswerChannel", "RunEvent", "RunEventKind", "answered_event",
           "claimed_event", "event_id_time", "new_event_id", "released_event",
           "upgraded_event"]

CLAIMED_REASON = "claimed"
"""The ``reason`` of a worker's claim in its ``claimed`` event (``Attempt.reason``)."""


class RunEventKind(StrEnum):
    """The kinds of stored run events."""

    CLAIMED = "claimed"  # an attempt took the run (owner, attempt number, why)
    RELEASED = "released"  # an attempt let the run go without ending it (paused, handed back)
    LEASE_LOST = "lease_lost"  # an attempt found its lease gone (another took the run over)
    ANSWERED = "answered"  # a pause's answer was claimed (actor, channel)
    CANCEL_REQUESTED = "cancel_requested"  # tether cancel, or the console's cancel
    FORKED = "forked"  # this run was forked from another run's checkpoint (with its patch)
    UPGRADED = "upgraded"  # `tether upgrade` moved the run to a new plan (from, to fingerprints)
    CONCURRENCY = "concurrency"  # its concurrency key made it wait, cancelled it, or another run


class AnswerChannel(StrEnum):
    """Through which door an answer came in."""

    CLI = "cli"
    CONSOLE = "console"
    LINK = "link"
    API = "api"
    TIMER = "timer"
    PYTHON = "python"  # Runner.resume / Runner.answer called by a program


def new_event_id(now: float | None = None) -> str:
    """A time-ordered, unique event id: 19 digits of nanoseconds, then 8 random hex digits."""
    return f"{event_id_time(now)}{secrets.token_hex(4)}"


def event_id_time(now: float | None = None) -> str:
    """An event id's first 19 digits, its nanoseconds (a claim statement draws the random
    rest itself: no random draw here, which would hand the interpreter lock around)."""
    return f"{time.time_ns() if now is None else int(now * 1e9):019d}"


@dataclass(frozen=True)
class RunEvent:
    """One stored run event.

    Attributes:
        execution_id: the run.
        kind: what happened.
        created_at: when (Unix seconds).
        owner: the owner token of the attempt concerned (claims, releases, lost leases).
        actor: who did it (the resolver of an answer, the user who cancelled), if known.
        channel: an answer's channel (:class:`AnswerChannel`), else None.
        data: the kind's details (JSON object): ``attempt``, ``reason``, ``worker``,
            ``address``, ``checkpoint_id``, ``source``, ``patch``...
        event_id: time-ordered id (made by :func:`new_event_id` when not given).
    """

    execution_id: str
    kind: RunEventKind
    created_at: float = field(default_factory=time.time)
    owner: str | None = None
    actor: str | None = None
    channel: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    event_id: str = ""

    def __post_init__(self) -> None:
        if not self.event_id:
            object.__setattr__(self, "event_id", new_event_id(self.created_at))


def claimed_event(execution_id: str, owner: str, attempt: int, worker: str,
                  now: float) -> RunEvent:
    """The ``claimed`` event a worker's claim of a run writes with the claim (the attempt
    it starts does not write another)."""
    return RunEvent(execution_id, RunEventKind.CLAIMED, now, owner, data={
        "attempt": attempt, "reason": CLAIMED_REASON, "worker": worker})


def released_event(execution_id: str, owner: str, attempt: int, worker: str,
                   why: str) -> RunEvent:
    """The ``released`` event of a worker's claim it gives back unused (the run finished
    already, or cannot be resumed as claimed): it closes the claim's ``claimed`` event,
    as the driver's ``released`` event closes an attempt that paused or stopped."""
    return RunEvent(execution_id, RunEventKind.RELEASED, owner=owner, data={
        "attempt": attempt, "reason": CLAIMED_REASON, "worker": worker, "why": why})


def answered_event(pending: PendingInterrupt, actor: str | None, channel: str) -> RunEvent:
    """The ``answered`` event of a claim of ``pending`` (written in the claim's transaction)."""
    return RunEvent(pending.execution_id, RunEventKind.ANSWERED, actor=actor, channel=channel,
                    data={"address": pending.address, "checkpoint_id": pending.checkpoint_id,
                          "reason": pending.reason})


def upgraded_event(execution_id: str, old: str, new: str,
                   renamed: dict[str, str] | None = None) -> RunEvent:
    """The ``upgraded`` event of a move from plan ``old`` to ``new`` (fingerprints; written in
    the move's transaction), with the pauses it gave a new address (old -> new)."""
    data: dict[str, Any] = {"from": old, "to": new}
    if renamed:
        data["renamed"] = dict(renamed)
    return RunEvent(execution_id, RunEventKind.UPGRADED, channel="cli", data=data)
