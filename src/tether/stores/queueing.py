"""The records of the workers' side of a store: claimed runs, workers, cancel requests.

A worker claims runnable runs with :meth:`~tether.stores.base.Checkpointer.claim_runs`; each
claim writes a fresh owner token and lease into the run row (the same ``owner`` and
``lease_until`` columns every attempt is fenced on), so the worker drives the run with the
ordinary resume path under that token. Which runs a claim takes, in this order of preference
(priority, highest first, then age):

- ``queued`` runs of the worker's queues whose ``available_at`` has come and that are not
  asked to be cancelled;
- ``running`` runs of those queues whose lease expired or was released (a crashed or
  stopped holder): recovery by the resume rules;
- ``paused`` runs of those queues, free, with a decision newer than the run's last status
  change (an approval answered by a process that left the continuation to the workers).

A claim may be narrowed to runs of the plans the worker can serve (``plans``: fingerprints
whose task names the worker checked against its registry), and it is bounded by the limits
of the queues configured in the ``queues`` table (:class:`QueueRecord`), counted inside the
claiming transaction with claimers of a limited queue serialised (PostgreSQL: ``SELECT ...
FOR UPDATE`` of the queue's row; SQLite: ``BEGIN IMMEDIATE``): ``concurrency`` runs of the
queue held at once (a live lease), ``per_workflow`` of them of one workflow, and at most
``rate_limit * rate_window`` queued runs started (first claimed: ``runs.started_at``) in
any window of ``rate_window`` seconds, fleet-wide. :class:`Budget` applies them to the
candidates, in claim order, on every backend.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from tether.stores.records import RunRecord

__all__ = ["Budget", "CancelOutcome", "ClaimReason", "ClaimedRun", "EndClaim", "NextClaim",
           "QueueCounts", "QueueRecord", "QueueUsage", "WorkerRecord"]


class ClaimReason(StrEnum):
    """Why a worker claimed a run."""

    QUEUED = "queued"
    RECOVERED = "recovered"
    ANSWERED = "answered"


@dataclass(frozen=True)
class ClaimedRun:
    """A run a worker now holds: the run row as claimed and the attempt's owner token."""

    run: RunRecord
    owner: str
    lease_until: float
    reason: ClaimReason


@dataclass(frozen=True)
class NextClaim:
    """What a worker slot's store needs to claim the slot's next run in the transaction
    that ends the run ``execution_id`` (:meth:`~tether.stores.base.Checkpointer.\
arm_end_claim`): the arguments of the worker's own ``claim_runs`` call, ``limit`` 1."""

    execution_id: str
    worker: str
    queues: tuple[str, ...]
    plans: frozenset[str]
    lease_seconds: float


@dataclass(frozen=True)
class EndClaim:
    """What the claim sent with a run's end took (:meth:`~tether.stores.base.Checkpointer.\
take_end_claim`): the run (None: nothing claimable by that statement), and the monotonic
    time from before the transaction was sent (the run's lease runs from it)."""

    claimed: ClaimedRun | None
    sent: float


class CancelOutcome(StrEnum):
    """What :meth:`~tether.stores.base.Checkpointer.request_cancel` did."""

    CANCELLED = "cancelled"  # nothing executed it: recorded cancelled at once
    REQUESTED = "requested"  # an attempt holds it: it stops at its next node boundary
    FINISHED = "finished"  # it had ended (completed, failed or cancelled): nothing changed


@dataclass(frozen=True)
class WorkerRecord:
    """One live (or recently live) worker process, as it registered and last reported."""

    worker_id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    concurrency: int
    started_at: float
    heartbeat_at: float
    held: tuple[str, ...] = ()  # execution ids of the runs it holds

    @property
    def runs_held(self) -> int:
        return len(self.held)


@dataclass(frozen=True)
class QueueRecord:
    """A queue's configuration (``tether queues set``); None means no such limit."""

    name: str
    concurrency: int | None = None  # runs of the queue held at once, fleet-wide
    per_workflow: int | None = None  # of those, at most this many of one workflow
    rate_limit: float | None = None  # runs started per second, fleet-wide
    rate_window: float | None = None  # the window the rate is counted over (seconds)
    start_timeout: float | None = None  # a run queued longer is reported stuck (seconds)
    created_at: float = 0.0

    @property
    def limited(self) -> bool:
        """Whether a claim must count this queue's runs."""
        return (self.concurrency, self.per_workflow, self.rate_limit) != (None, None, None)

    @property
    def window(self) -> float:
        return self.rate_window or 1.0

    @property
    def starts_per_window(self) -> int | None:
        """How many runs may start in any window of :attr:`window` seconds (at least 1)."""
        if self.rate_limit is None:
            return None
        return max(1, math.floor(self.rate_limit * self.window + 1e-9))


@dataclass(frozen=True)
class QueueCounts:
    """How many runs of a queue wait (``queued``) and execute (``running``, held)."""

    queue: str
    queued: int = 0
    running: int = 0


@dataclass
class QueueUsage:
    """What a limited queue has in use, counted in the claiming transaction: the held runs
    by workflow, and the runs started within the rate window."""

    held: Counter[str] = field(default_factory=Counter)
    started: int = 0


class Budget:
    """The room the limits of ``queues`` leave, spent by :meth:`admit` in claim order."""

    def __init__(self, limits: Iterable[QueueRecord], usage: Mapping[str, QueueUsage]) -> None:
        self._limits = {q.name: q for q in limits if q.limited}
        self._usage = {name: usage.get(name, QueueUsage()) for name in self._limits}

    def room(self, queue: str) -> int | None:
        """How many more runs of ``queue`` may be held now (None: unlimited)."""
        limit = self._limits.get(queue)
        if limit is None or limit.concurrency is None:
            return None
        return max(0, limit.concurrency - sum(self._usage[queue].held.values()))

    def starts_left(self, queue: str) -> int | None:
        """How many more queued runs of ``queue`` may start in this window (None: no rate)."""
        limit = self._limits.get(queue)
        if limit is None or limit.starts_per_window is None:
            return None
        return max(0, limit.starts_per_window - self._usage[queue].started)

    def full_workflows(self, queue: str) -> list[str]:
        """The workflows of ``queue`` at their per-workflow limit."""
        limit = self._limits.get(queue)
        if limit is None or limit.per_workflow is None:
            return []
        cap = limit.per_workflow
        return sorted(w for w, n in self._usage[queue].held.items() if n >= cap)

    def admit(self, queue: str | None, workflow: str, starting: bool) -> bool:
        """Whether a run may be claimed now; if so, count it."""
        limit = self._limits.get(queue or "")
        if limit is None:
            return True
        usage = self._usage[limit.name]
        if limit.concurrency is not None and sum(usage.held.values()) >= limit.concurrency:
            return False
        if limit.per_workflow is not None and usage.held[workflow] >= limit.per_workflow:
            return False
        allowed = limit.starts_per_window
        if starting and allowed is not None and usage.started >= allowed:
            return False
        usage.held[workflow] += 1
        usage.started += 1 if starting else 0
        return True
