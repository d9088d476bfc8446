"""The store contract, split by job: one typed protocol per thing a caller asks a store for.

:class:`~tether.stores.base.Checkpointer` implements all of them (and keeps the logic the
backends share); a caller that needs one job types its parameter with that job's protocol,
so what it may ask of the store is visible in its signature. Every public method of
``Checkpointer`` belongs to exactly one protocol (``tests/stores/test_contracts.py`` checks
it, so a new store method must be placed here too):

- :class:`RunStore` (SQL: sql.py, sql_rows.py; folding in base.py): setup, close,
  create_run, get_run, list_runs, find_runs, runs_changed, get_plan, set_plan_tasks,
  get_plan_tasks, set_run_plan,
  move_run_plan, put, finish_run, record_interrupt, pause_run, list_pending, pending_page,
  get_pending, claim, delete_pending_interrupt_atomic, decisions, replace_decision, prune,
  prune_before, resume_point, finished, get, get_last, list, latest_resumable,
  latest_forkable, rows, has_checkpoint, page, page_rows, last_row.
- :class:`QueueStore` (SQL: sql_queue.py, sql_leases.py): acquire, renew, release,
  enqueue_run, claim_runs, claimable_plans, block_runs, retry_later, put_queue, list_queues,
  get_queue, remove_queue, queue_counts, request_cancel, create_keyed_run,
  cancel_requested_at,
  take_cancel_seen, register_worker, heartbeat_worker, deregister_worker, list_workers,
  use_for_worker (a worker's switches, given as arguments; base.py), share_statements,
  arm_end_claim, take_end_claim.
- :class:`ScheduleStore` (SQL: schedule_sql.py; due_pending in sql_rows.py): put_schedule,
  get_schedule, list_schedules, remove_schedule, advance_schedule, due_pending (timers).
- :class:`IdempotencyStore` (SQL: sql_rows.py): get_idempotent, put_idempotent.
- :class:`EventStore` (SQL: sql_events.py): add_event, events.
- :class:`IdLookup` (SQL: sql_ids.py; resolving in idprefix.py): execution_ids_with_prefix,
  checkpoint_ids_matching, resolve_execution_id, resolve_checkpoint_id.

The in-memory store (memory.py) implements every method in one class. The protocols are
``runtime_checkable``, so ``isinstance(store, QueueStore)`` checks that the methods exist
(not their signatures: mypy does that, see ``tests/stores/contracts_typing.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from tether.stores.base import Checkpointer, SeenCancel
from tether.stores.events import RunEvent
from tether.stores.idprefix import IdMatches
from tether.stores.keys import KeyedStart
from tether.stores.queueing import (
    CancelOutcome,
    ClaimedRun,
    EndClaim,
    NextClaim,
    QueueCounts,
    QueueRecord,
    WorkerRecord,
)
from tether.stores.records import (
    Checkpoint,
    CheckpointRow,
    Claim,
    Decision,
    FencedWrite,
    PendingCursor,
    PendingEntry,
    PendingInterrupt,
    PruneResult,
    Readdress,
    RunCursor,
    RunRecord,
)
from tether.stores.schedule_records import ScheduleRecord
from tether.stores.write_group import WriteGroup

# ``list`` is a method name inside RunStore, so its list types are spelt through aliases.
_Runs = list[RunRecord]
_Pendings = list[PendingInterrupt]
_Entries = list[PendingEntry]
_Decisions = list[Decision]
_Checkpoints = list[Checkpoint]
_Rows = list[CheckpointRow]
_Events = list[RunEvent]

__all__ = [
    "EventStore",
    "IdLookup",
    "IdempotencyStore",
    "QueueStore",
    "RunStore",
    "ScheduleStore",
]


@runtime_checkable
class RunStore(Protocol):
    """Runs, their plans, checkpoints (writes, reads, paging), pending interrupts, decisions,
    ending and pruning: what the runtime needs to drive and inspect one run."""

    def setup(self) -> None:
        """Create or migrate the schema (idempotent)."""

    def close(self) -> None:
        """Release connections."""

    def create_run(self, run: RunRecord, plan_json: str) -> None:
        """Insert a run and its plan."""

    def get_run(self, execution_id: str) -> RunRecord | None:
        """The run, or None."""

    def list_runs(self, status: str | None = None, limit: int = 100) -> _Runs:
        """Runs, newest first."""

    def find_runs(self, *, status: str | None = None, workflow: str | None = None,
                  before: RunCursor | None = None, limit: int = 50) -> _Runs:
        """A keyset page of runs, newest first."""

    def runs_changed(self, after: RunCursor | None = None, limit: int = 500,
                     ) -> tuple[_Runs, RunCursor | None]:
        """Runs in the order of their last status change, and the next cursor."""

    def get_plan(self, fingerprint: str) -> str | None:
        """The plan JSON stored under ``fingerprint``."""

    def set_plan_tasks(self, fingerprint: str, tasks_json: str) -> bool:
        """Record the plan's task signatures beside it (the first recording wins)."""

    def get_plan_tasks(self, fingerprint: str) -> str | None:
        """The task signatures recorded with the plan."""

    def set_run_plan(self, execution_id: str, fingerprint: str, plan_json: str,
                     owner: str | None = None) -> None:
        """Switch a run to another (compatible) plan."""

    def move_run_plan(self, execution_id: str, expected: str, fingerprint: str,
                      plan_json: str, readdress: Sequence[Readdress] = ()) -> bool:
        """Move a live run from plan ``expected`` to ``fingerprint`` (``tether upgrade``),
        atomically, only while no attempt holds it; its pauses readdressed and its
        ``upgraded`` event written in the same transaction."""

    def put(self, row: CheckpointRow, owner: str | None = None) -> None:
        """Write one checkpoint (fenced on ``owner``)."""

    def finish_run(self, row: CheckpointRow, status: str, error: Any,
                   owner: str | None, *, last_node: CheckpointRow | None = None) -> None:
        """Write the run_end row (after ``last_node``, in one transaction) and the run's
        final status."""

    def record_interrupt(self, row: CheckpointRow, pending: PendingInterrupt,
                         owner: str | None) -> None:
        """Write an interrupted checkpoint and its pending row atomically."""

    def pause_run(self, execution_id: str, owner: str | None,
                  waiting: Sequence[str]) -> _Decisions:
        """Mark the run paused unless an answer was claimed meanwhile."""

    def list_pending(self, execution_id: str | None = None) -> _Pendings:
        """Pending interrupts, oldest first."""

    def pending_page(self, before: PendingCursor | None = None,
                     limit: int = 50) -> _Entries:
        """A keyset page of every run's pending interrupts, newest first."""

    def get_pending(self, execution_id: str) -> PendingInterrupt | None:
        """The run's oldest pending interrupt."""

    def claim(self, pending: PendingInterrupt, answer: dict[str, Any], *,
              owner: str | None = None, until: float = 0.0, now: float = 0.0,
              steal_from: str | None = None, resolver: str | None = None,
              comment: str | None = None, channel: str | None = None) -> Claim | None:
        """Claim one pending interrupt and record its answer (exactly one claimer wins)."""

    def delete_pending_interrupt_atomic(self, execution_id: str, node_id: str | None = None,
                                        *, agent_path: str | None = None,
                                        answer: dict[str, Any] | None = None,
                                        ) -> PendingInterrupt | None:
        """Claim a pending interrupt of the run by node."""

    def decisions(self, execution_id: str) -> _Decisions:
        """The answers claimed for the run's interrupts."""

    def replace_decision(self, decision: Decision, owner: str | None) -> None:
        """Store a new answer for the same interrupted checkpoint."""

    def prune(self, older_than: timedelta, *, include_failed: bool = False) -> PruneResult:
        """Delete whole runs that finished longer than ``older_than`` ago."""

    def prune_before(self, moment: datetime, *, include_failed: bool = False) -> PruneResult:
        """Delete whole runs that finished before ``moment``."""

    def resume_point(self, execution_id: str, inputs: Any = ...,
                     ) -> tuple[CheckpointRow | None, Checkpoint | None]:
        """The newest row and the checkpoint resume re-enters at."""

    def finished(self, execution_id: str) -> bool:
        """Whether the run's newest row is a completed run_end marker."""

    def get(self, execution_id: str, checkpoint_id: str) -> Checkpoint | None:
        """One checkpoint with its full state."""

    def get_last(self, execution_id: str) -> Checkpoint | None:
        """The newest checkpoint of a run."""

    def list(self, execution_id: str) -> _Checkpoints:
        """Every checkpoint of a run, oldest first."""

    def latest_resumable(self, execution_id: str) -> Checkpoint | None:
        """The checkpoint resume re-enters at."""

    def latest_forkable(self, execution_id: str) -> Checkpoint | None:
        """The checkpoint fork branches from by default."""

    def rows(self, execution_id: str) -> Sequence[CheckpointRow]:
        """The stored rows of a run."""

    def has_checkpoint(self, execution_id: str, checkpoint_id: str) -> bool:
        """Whether the run has a checkpoint with exactly this id."""

    def page(self, execution_id: str, after: str | None = None,
             limit: int = 200) -> _Checkpoints:
        """A keyset page of checkpoints with full snapshots."""

    def page_rows(self, execution_id: str, after: str | None = None,
                  limit: int = 200) -> _Rows:
        """A keyset page of stored rows, unfolded."""

    def last_row(self, execution_id: str, *, skip_run_end: bool = False,
                 ) -> CheckpointRow | None:
        """The newest stored row of a run."""


@runtime_checkable
class QueueStore(Protocol):
    """Leases, queues and their limits, claims, retries, cancellation and workers: what a
    worker and ``tether enqueue``/``cancel``/``queues``/``workers`` need."""

    def acquire(self, execution_id: str, owner: str, until: float, now: float,
                steal_from: str | None = None) -> bool:
        """Take the run's lease (compare-and-set)."""

    def renew(self, execution_id: str, owner: str, until: float) -> bool:
        """Extend ``owner``'s lease; False when fenced out."""

    def release(self, execution_id: str, owner: str, event: RunEvent | None = None) -> None:
        """Give the lease up (with ``event`` recorded with it)."""

    def enqueue_run(self, execution_id: str, queue: str, priority: int = 0,
                    available_at: float | None = None) -> bool:
        """Hand an existing run to the workers of ``queue``."""

    def claim_runs(self, worker: str, queues: Sequence[str], limit: int, now: float,
                   lease_until: float, plans: Collection[str] | None = None,
                   ) -> list[ClaimedRun]:
        """Atomically claim up to ``limit`` runnable runs."""

    def claimable_plans(self, queues: Sequence[str], now: float,
                        known: Collection[str] = ()) -> list[str]:
        """The plan fingerprints a claim could take now."""

    def block_runs(self, fingerprint: str, queues: Sequence[str], reason: str,
                   now: float) -> int:
        """Record why claimable runs of a plan wait."""

    def retry_later(self, execution_id: str, owner: str, available_at: float,
                    reason: str, event: RunEvent | None = None) -> bool:
        """Give a claimed run back with a backoff."""

    def put_queue(self, queue: QueueRecord) -> None:
        """Insert or replace a queue's limits."""

    def list_queues(self) -> list[QueueRecord]:
        """The configured queues."""

    def get_queue(self, name: str) -> QueueRecord | None:
        """A configured queue, or None."""

    def remove_queue(self, name: str) -> bool:
        """Remove a queue's limits."""

    def queue_counts(self, now: float) -> list[QueueCounts]:
        """Queued and held runs per queue."""

    def request_cancel(self, execution_id: str, now: float) -> CancelOutcome | None:
        """Ask to cancel a run."""

    def create_keyed_run(self, run: RunRecord, plan_json: str, on_conflict: str,
                         now: float) -> KeyedStart:
        """Insert a run with a concurrency key, as its conflict policy decides."""

    def cancel_requested_at(self, execution_id: str) -> float | None:
        """When a cancel of the run was asked for."""

    def take_cancel_seen(self, execution_id: str, max_age: float) -> SeenCancel | None:
        """The cancel request a fenced write of the run read, or None."""

    def register_worker(self, worker: WorkerRecord) -> None:
        """Insert or replace a worker's row."""

    def heartbeat_worker(self, worker_id: str, now: float, held: Sequence[str]) -> bool:
        """Record a worker's heartbeat."""

    def deregister_worker(self, worker_id: str) -> None:
        """Remove a worker's row."""

    def list_workers(self, alive_since: float | None = None) -> list[WorkerRecord]:
        """Workers, oldest registration first."""

    def use_for_worker(self, *, write_group: WriteGroup[FencedWrite,
                                                       tuple[bool, float | None]] | None = None,
                       ) -> None:
        """Tune this store for a worker (cancel reads on writes, group commit)."""

    def share_statements(self, other: Checkpointer) -> None:
        """Use ``other``'s compiled statements (a worker's slots share its store's)."""

    def arm_end_claim(self, claim: NextClaim | None) -> None:
        """Claim a slot's next run with the end of ``claim``'s run (where one commit can)."""

    def take_end_claim(self) -> EndClaim | None:
        """What the claim sent with that end took (None: none went)."""


@runtime_checkable
class ScheduleStore(Protocol):
    """Schedules (cron registrations and their ticks) and timers (pending rows due)."""

    def put_schedule(self, schedule: ScheduleRecord, plan_json: str) -> None:
        """Register or update a schedule."""

    def get_schedule(self, name: str) -> ScheduleRecord | None:
        """The schedule of a workflow, or None."""

    def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule, by name."""

    def remove_schedule(self, name: str) -> bool:
        """Remove a schedule."""

    def advance_schedule(self, name: str, expected_last_tick: float | None,
                         new_last_tick: float, next_tick: float | None = None) -> bool:
        """Compare-and-set a schedule's ``last_tick``."""

    def due_pending(self, now: float, limit: int = 100) -> list[PendingInterrupt]:
        """Pending rows whose timer is due, soonest first."""


@runtime_checkable
class IdempotencyStore(Protocol):
    """Results cached under an idempotency key, first write wins."""

    def get_idempotent(self, execution_id: str, key: str) -> str | None:
        """The cached result, or None."""

    def put_idempotent(self, execution_id: str, key: str, value_json: str,
                       owner: str | None = None) -> str:
        """Cache a result unless one is cached; return the cached text."""


@runtime_checkable
class EventStore(Protocol):
    """A run's rare facts (``run_events``), the history's second source."""

    def add_event(self, event: RunEvent) -> None:
        """Append one event to its run's history."""

    def events(self, execution_id: str, after: str | None = None,
               limit: int = 10_000) -> _Events:
        """The run's events after ``after``, oldest first."""


@runtime_checkable
class IdLookup(Protocol):
    """Execution and checkpoint ids given in full or by a prefix (``idprefix.py``)."""

    def execution_ids_with_prefix(self, prefix: str, limit: int) -> IdMatches:
        """The execution ids starting with ``prefix``."""

    def checkpoint_ids_matching(self, execution_id: str, text: str,
                                limit: int) -> IdMatches:
        """The checkpoint ids of a run that start or end with ``text``."""

    def resolve_execution_id(self, text: str) -> str:
        """The execution id ``text`` gives in full or by a unique prefix."""

    def resolve_checkpoint_id(self, execution_id: str, text: str) -> str:
        """The checkpoint id ``text`` gives in full or by a unique prefix or suffix."""


PROTOCOLS: tuple[type, ...] = (RunStore, QueueStore, ScheduleStore, IdempotencyStore,
                               EventStore, IdLookup)
"""Every store protocol, in the order of the table above."""
