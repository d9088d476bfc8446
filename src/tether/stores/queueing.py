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
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tether.stores.records import RunRecord

__all__ = ["CancelOutcome", "ClaimReason", "ClaimedRun", "WorkerRecord"]


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
