"""The Checkpointer contract every store implements, and the logic all stores share.

A backend implements a handful of primitives (the abstract methods); reading full snapshots
(:meth:`Checkpointer.get`, :meth:`~Checkpointer.get_last`, :meth:`~Checkpointer.list`,
:meth:`~Checkpointer.latest_resumable`, :meth:`~Checkpointer.latest_forkable`) is done here,
once, by folding the chain of rows from the nearest full snapshot. The in-memory store is the
reference; the SQL stores must agree with it on every observable behaviour (the conformance
suite in ``tests/stores`` runs the same tests against each).
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from tether.stores import idprefix
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
    RUN_END,
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
    fold,
    fold_last,
)
from tether.stores.schedule_records import ScheduleRecord
from tether.stores.write_group import WriteGroup

_UNKNOWN: Any = object()
_EPOCH = datetime.fromtimestamp(0, tz=UTC)
_MAX_AGE = timedelta(days=365 * 200)  # older than any run: prune nothing by underflow
_Page = list[Checkpoint]  # (``list`` is a method name inside Checkpointer)
_PageRows = list[CheckpointRow]
_Events = list[RunEvent]


class SeenCancel(NamedTuple):
    """What a fenced checkpoint write read of its run's ``cancel_requested_at``."""

    requested_at: float | None


class Checkpointer(abc.ABC):
    """Where runs, checkpoints, pending interrupts and idempotency results are kept.

    Every public method owns its transaction. Methods that must be atomic across processes
    say which mechanism makes them so.
    """

    # -- lifecycle ---------------------------------------------------------------------------
    def setup(self) -> None:  # noqa: B027 - optional for stores that need no set-up
        """Create or migrate the schema (idempotent, safe to call from many processes)."""

    def close(self) -> None:  # noqa: B027
        """Release connections."""

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs --------------------------------------------------------------------------------
    @abc.abstractmethod
    def create_run(self, run: RunRecord, plan_json: str) -> None:
        """Insert a run (and its plan, stored once per fingerprint).

        Raises :class:`~tether.errors.ExecutionExists` if the execution id is taken.
        """

    @abc.abstractmethod
    def get_run(self, execution_id: str) -> RunRecord | None:
        """The run, or None."""

    def cancel_requested_at(self, execution_id: str) -> float | None:
        """When ``tether cancel`` asked to stop the run (None: not asked, or no such run):
        the workers' check before each node, narrower than :meth:`get_run`."""
        run = self.get_run(execution_id)
        return run.cancel_requested_at if run is not None else None

    concurrent_connections = False
    """Whether several stores opened on the same URL overlap their round trips (PostgreSQL:
    a worker then drives each of its runs on a connection of its own)."""

    reads_cancel_on_write = False
    """Turned on by :meth:`use_for_worker`: fenced :meth:`put` calls also read the run row's
    ``cancel_requested_at`` for :meth:`take_cancel_seen` where the store can do that in the
    same statement (PostgreSQL). Off for ``tether run``, whose writes nobody cancels."""

    write_group: WriteGroup[FencedWrite, tuple[bool, float | None]] | None = None
    """Given to :meth:`use_for_worker` by a worker started with ``group_commit`` for the
    stores of its slots (one group for all of them), where
    :attr:`concurrent_connections`: fenced :meth:`put` calls of those stores that overlap
    are written in one statement and one commit (``write_group.py``). Stores that cannot
    ignore it."""

    def take_cancel_seen(self, execution_id: str, max_age: float) -> SeenCancel | None:
        """The run row's ``cancel_requested_at`` as this store's last fenced :meth:`put` of
        the run read it, in the same statement, at most ``max_age`` seconds ago; each
        reading is handed out once. None: no such reading (read :meth:`cancel_requested_at`).
        Stores whose writes do not read it (SQLite, memory, or
        :attr:`reads_cancel_on_write` off) always return None."""
        return None

    def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunRecord]:
        """Runs, newest first, optionally only those with ``status``."""
        return self.find_runs(status=status, limit=limit)

    @abc.abstractmethod
    def find_runs(self, *, status: str | None = None, workflow: str | None = None,
                  before: RunCursor | None = None, limit: int = 50) -> list[RunRecord]:
        """Up to ``limit`` runs, newest first (``created_at``, then execution id, both
        descending), only those with ``status`` and of ``workflow`` when given, and only those
        that sort after ``before`` (keyset paging: pass :meth:`RunCursor.created` of a page's
        last run for the next page)."""

    @abc.abstractmethod
    def runs_changed(self, after: RunCursor | None = None, limit: int = 500,
                     ) -> tuple[list[RunRecord], RunCursor | None]:
        """Up to ``limit`` runs in the order of their last status change (``updated_at``,
        then execution id, ascending) after ``after``, and the cursor after the last of them
        (None when there are none): pass it back for the next page. The cursor holds the
        stored time exactly (a :class:`RunRecord`'s datetime keeps only microseconds).

        How a process watches what other processes do to runs in a shared store;
        ``updated_at`` is the writer's clock, so a watcher re-reads a window behind its cursor
        to catch writers whose clock or commit lagged."""

    @abc.abstractmethod
    def get_plan(self, fingerprint: str) -> str | None:
        """The plan JSON stored under ``fingerprint``."""

    @abc.abstractmethod
    def set_plan_tasks(self, fingerprint: str, tasks_json: str) -> bool:
        """Record the signatures of the tasks the plan ``fingerprint`` calls, as a submitter
        that could import them found them (JSON, see :mod:`tether.runtime.signatures`):
        beside the plan, not part of its fingerprint. The first recording wins; True when
        this call recorded them."""

    @abc.abstractmethod
    def get_plan_tasks(self, fingerprint: str) -> str | None:
        """The task signatures recorded with the plan ``fingerprint`` (None: none were)."""

    @abc.abstractmethod
    def set_run_plan(self, execution_id: str, fingerprint: str, plan_json: str,
                     owner: str | None = None) -> None:
        """Switch a run to another (compatible) plan; fenced on ``owner`` when given."""

    @abc.abstractmethod
    def move_run_plan(self, execution_id: str, expected: str, fingerprint: str,
                      plan_json: str, readdress: Sequence[Readdress] = ()) -> bool:
        """Move a live run from plan ``expected`` to plan ``fingerprint`` (``tether
        upgrade``), atomically, only while no attempt holds it: True when moved, False when
        the run is held, finished, or no longer on ``expected``. In the same transaction its
        pending interrupts and decisions named in ``readdress`` take their new places (a
        node the new plan renamed) and its ``upgraded`` event is written: a move always has
        one, a refused move none."""

    # -- leases ------------------------------------------------------------------------------
    @abc.abstractmethod
    def acquire(self, execution_id: str, owner: str, until: float, now: float,
                steal_from: str | None = None) -> bool:
        """Take the run's lease for the attempt ``owner`` if it is free, expired
        (``lease_until < now``), already ``owner``'s, or held by ``steal_from`` (a holder known
        to be dead). A compare-and-set in one statement; marks the run ``running`` (a completed
        run keeps its status) and counts one more ``attempt`` when the holder changes."""

    @abc.abstractmethod
    def renew(self, execution_id: str, owner: str, until: float) -> bool:
        """Extend ``owner``'s lease; False if another attempt holds the run now (fencing)."""

    @abc.abstractmethod
    def release(self, execution_id: str, owner: str, event: RunEvent | None = None) -> None:
        """Give the lease up (if ``owner`` holds it). ``event`` (a ``released`` event of
        the attempt, say) is recorded atomically with the release, and only if the release
        took effect: an attempt that no longer holds the run writes nothing."""

    # -- queues and workers ------------------------------------------------------------------
    @abc.abstractmethod
    def enqueue_run(self, execution_id: str, queue: str, priority: int = 0,
                    available_at: float | None = None) -> bool:
        """Hand an existing run to the workers of ``queue``: set its queue and priority (and
        ``available_at``). A run executed in place (``tether run``) that paused is continued
        by a worker once answered; a failed run is queued again (status ``queued``), so a
        worker resumes it (its failed nodes run again). False when there is no such run.
        Wakes idle workers (PostgreSQL ``NOTIFY tether_runs``)."""

    @abc.abstractmethod
    def claim_runs(self, worker: str, queues: Sequence[str], limit: int, now: float,
                   lease_until: float, plans: Collection[str] | None = None,
                   ) -> list[ClaimedRun]:
        """Atomically claim up to ``limit`` runnable runs of ``queues`` (see
        :mod:`tether.stores.queueing` for which), highest priority then oldest first, each
        with a fresh owner token and the lease ``lease_until``; the run becomes ``running``
        and its ``attempt`` is counted, as :meth:`acquire` does. Two claimers never get the
        same run: PostgreSQL ``SELECT ... FOR UPDATE SKIP LOCKED``, SQLite one ``BEGIN
        IMMEDIATE`` transaction (the database's single writer). ``worker`` names the claimer
        in messages, logs and the claimed events; fencing is on the per-run tokens.

        ``plans``: only runs pinned to these plan fingerprints (the ones the worker can
        serve); None for any. The limits of the queues (:class:`QueueRecord`) bound the claim,
        counted atomically with it. A claimed run's ``blocked_reason`` is cleared; a queued
        run's ``started_at`` is set. Each claimed run's ``claimed`` event
        (:func:`~tether.stores.events.claimed_event`) is written with the claim."""

    @abc.abstractmethod
    def claimable_plans(self, queues: Sequence[str], now: float,
                        known: Collection[str] = ()) -> list[str]:
        """The plan fingerprints of the runs a claim of ``queues`` could take now, except
        ``known`` (a worker checks each new one against its tasks before claiming)."""

    @abc.abstractmethod
    def block_runs(self, fingerprint: str, queues: Sequence[str], reason: str,
                   now: float) -> int:
        """Record ``reason`` on the claimable runs of ``queues`` pinned to ``fingerprint``
        that have no reason yet (a worker lacking their tasks); returns how many."""

    @abc.abstractmethod
    def retry_later(self, execution_id: str, owner: str, available_at: float,
                    reason: str, event: RunEvent | None = None) -> bool:
        """Give a claimed run back after a drive that failed for a reason other than
        fencing: release ``owner``'s lease, count ``recovery_failures``, record ``reason``
        and let no claim take it before ``available_at`` (the backoff). False when ``owner``
        no longer holds it. ``event`` (the claim's ``released`` event) is recorded
        atomically with it, and only if it took effect, as :meth:`release` does."""

    @abc.abstractmethod
    def put_queue(self, queue: QueueRecord) -> None:
        """Insert or replace a queue's limits (``created_at`` of an existing one is kept)."""

    @abc.abstractmethod
    def list_queues(self) -> list[QueueRecord]:
        """The configured queues, by name."""

    def get_queue(self, name: str) -> QueueRecord | None:
        """A configured queue, or None."""
        return next((q for q in self.list_queues() if q.name == name), None)

    @abc.abstractmethod
    def remove_queue(self, name: str) -> bool:
        """Remove a queue's limits (its runs stay; it becomes unlimited); False if none."""

    @abc.abstractmethod
    def queue_counts(self, now: float) -> list[QueueCounts]:
        """Per queue holding runs: how many are queued and how many held (running with a
        live lease), by queue name."""

    @abc.abstractmethod
    def request_cancel(self, execution_id: str, now: float) -> CancelOutcome | None:
        """Ask to cancel a run: one that nothing executes (queued, paused, failed, or
        running with a lost lease) is recorded ``cancelled`` at once (its pending interrupts
        dropped); one an attempt holds gets ``cancel_requested_at`` and its holder stops it
        at its next node boundary. None when there is no such run."""

    @abc.abstractmethod
    def create_keyed_run(self, run: RunRecord, plan_json: str, on_conflict: str,
                         now: float) -> KeyedStart:
        """Insert ``run``, which has a ``concurrency_key`` and ``concurrency_limit``, as its
        workflow's ``on_conflict`` (queue, cancel_running, cancel_new, reject) decides,
        atomically with the other submissions and the claims of its key (see
        :mod:`tether.stores.keys`): queued (``run.status`` queued) or running in place
        (``run.status`` running: only while the key has room, else nothing is stored);
        cancelled with the reason (``cancel_new``); older runs of the key cancelled
        (``cancel_running``). Raises :class:`~tether.errors.ConcurrencyLimitReached`
        (``reject``) or :class:`~tether.errors.ExecutionExists` (the id is taken; nothing
        is cancelled then)."""

    @abc.abstractmethod
    def register_worker(self, worker: WorkerRecord) -> None:
        """Insert (or replace) a worker's row."""

    @abc.abstractmethod
    def heartbeat_worker(self, worker_id: str, now: float, held: Sequence[str]) -> bool:
        """Record a worker's heartbeat and the runs it holds; False if its row is gone."""

    @abc.abstractmethod
    def deregister_worker(self, worker_id: str) -> None:
        """Remove a worker's row (a clean stop)."""

    @abc.abstractmethod
    def list_workers(self, alive_since: float | None = None) -> list[WorkerRecord]:
        """Workers (whose last heartbeat is at or after ``alive_since`` when given), oldest
        registration first."""

    # -- checkpoints -------------------------------------------------------------------------
    @abc.abstractmethod
    def put(self, row: CheckpointRow, owner: str | None = None) -> None:
        """Write one checkpoint: a single INSERT and its commit, no read before it.

        With ``owner`` (every write the runtime makes), the row is written only while the run
        row names that owner, checked in the same statement: otherwise nothing is written and
        :class:`~tether.errors.LeaseLost` is raised. Raises
        :class:`~tether.errors.StoreError` if the checkpoint id already exists.
        """

    @abc.abstractmethod
    def _rows(self, execution_id: str, first: str | None = None,
              last: str | None = None) -> list[CheckpointRow]:
        """Rows of a run with ``first <= checkpoint_id <= last``, in checkpoint id order."""

    @abc.abstractmethod
    def _row(self, execution_id: str, checkpoint_id: str) -> CheckpointRow | None:
        """One row."""

    @abc.abstractmethod
    def _last_row(self, execution_id: str, *, skip_run_end: bool) -> CheckpointRow | None:
        """The newest row of a run (optionally the newest that is not a run_end marker)."""

    # -- interrupts --------------------------------------------------------------------------
    @abc.abstractmethod
    def record_interrupt(self, row: CheckpointRow, pending: PendingInterrupt,
                         owner: str | None) -> None:
        """Atomically write a unit's interrupted checkpoint and its pending row (fenced on
        ``owner``). The run stays with its owner: other branches may go on; :meth:`pause_run`
        marks it paused once nothing else can proceed. Raises
        :class:`~tether.errors.StoreError` (writing nothing) if that unit (same ``agent_path``
        and ``node_id``) already has a pending interrupt."""

    @abc.abstractmethod
    def pause_run(self, execution_id: str, owner: str | None,
                  waiting: Sequence[str]) -> list[Decision]:
        """Mark the run ``paused`` and release ``owner``'s lease, unless an answer was claimed
        meanwhile for one of the interrupted checkpoints in ``waiting``: then change nothing
        and return those decisions (the owner applies them and goes on). Fenced on ``owner``;
        serialised with :meth:`claim` on the run row, so an answer is never lost between the
        owner's last look and the pause."""

    @abc.abstractmethod
    def list_pending(self, execution_id: str | None = None) -> list[PendingInterrupt]:
        """Pending interrupts (of one run, or of every run), oldest first."""

    @abc.abstractmethod
    def due_pending(self, now: float, limit: int = 100) -> list[PendingInterrupt]:
        """Up to ``limit`` pending rows of every run whose ``due_at`` is at most ``now``
        (timers due to fire), soonest due first."""

    @abc.abstractmethod
    def pending_page(self, before: PendingCursor | None = None,
                     limit: int = 50) -> list[PendingEntry]:
        """Up to ``limit`` pending interrupts of every run, newest first (``created_at``, then
        execution id and checkpoint id, descending), after ``before``, each with its run's
        workflow name (the approvals inbox)."""

    def get_pending(self, execution_id: str) -> PendingInterrupt | None:
        """The run's oldest pending interrupt, if any."""
        pending = self.list_pending(execution_id)
        return pending[0] if pending else None

    @abc.abstractmethod
    def claim(self, pending: PendingInterrupt, answer: dict[str, Any], *,
              owner: str | None = None, until: float = 0.0, now: float = 0.0,
              steal_from: str | None = None, resolver: str | None = None,
              comment: str | None = None, channel: str | None = None) -> Claim | None:
        """Claim one pending interrupt: in one transaction, delete its row and record the
        answer as a :class:`Decision` for its interrupted checkpoint; with ``owner``, also take
        the run's lease when it is free (as :meth:`acquire` would). None when the row is gone.
        With ``channel`` (an :class:`~tether.stores.events.AnswerChannel`), the same
        transaction records an ``answered`` run event naming it and ``resolver``.

        Exactly one of any number of concurrent claimers (threads or processes) of one pending
        row gets it: SQLite ``BEGIN IMMEDIATE`` then ``DELETE ... RETURNING`` (the database's
        write lock), PostgreSQL ``DELETE ... RETURNING`` (the row lock) after locking the run
        row (which also serialises the claim with :meth:`pause_run`).
        """

    def delete_pending_interrupt_atomic(self, execution_id: str, node_id: str | None = None,
                                        *, agent_path: str | None = None,
                                        answer: dict[str, Any] | None = None,
                                        ) -> PendingInterrupt | None:
        """Claim a pending interrupt of the run (its oldest one, or the one of ``node_id``):
        the protocol's atomic claim; see :meth:`claim`. Returns the row, or None."""
        for pending in self.list_pending(execution_id):
            if node_id is None or (pending.node_id == node_id and (
                    agent_path is None or pending.agent_path == agent_path)):
                claimed = self.claim(pending, answer or {})
                return claimed.pending if claimed is not None else None
        return None

    @abc.abstractmethod
    def decisions(self, execution_id: str) -> list[Decision]:
        """The answers claimed for the run's interrupts, oldest first."""

    @abc.abstractmethod
    def replace_decision(self, decision: Decision, owner: str | None) -> None:
        """Store ``decision`` in place of the one for the same interrupted checkpoint (a new
        answer for a unit that failed after its first one), fenced on ``owner``."""

    # -- idempotency -------------------------------------------------------------------------
    @abc.abstractmethod
    def get_idempotent(self, execution_id: str, key: str) -> str | None:
        """The cached result (JSON text) under ``(execution_id, key)``, or None on a miss."""

    @abc.abstractmethod
    def put_idempotent(self, execution_id: str, key: str, value_json: str,
                       owner: str | None = None) -> str:
        """Cache a result unless one is cached already; return the cached text (first wins).
        Fenced on ``owner`` when given (:class:`~tether.errors.LeaseLost`, nothing cached)."""

    # -- ending and pruning ------------------------------------------------------------------
    @abc.abstractmethod
    def finish_run(self, row: CheckpointRow, status: str, error: Any,
                   owner: str | None, *, last_node: CheckpointRow | None = None) -> None:
        """Atomically write the run_end row, set the run's final status and error, and release
        ``owner``'s lease; fenced on ``owner`` when given. ``last_node``: the checkpoint of
        the node that ended the run, written before ``row`` in the same transaction (one
        commit for both: a crash leaves both rows or neither, never the run end alone)."""

    # -- schedules ---------------------------------------------------------------------------
    @abc.abstractmethod
    def put_schedule(self, schedule: ScheduleRecord, plan_json: str) -> None:
        """Register a schedule (with its plan), or update the one of that name: an update
        keeps the stored ``created_at`` and ``last_tick`` (ticks already handled stay so)."""

    @abc.abstractmethod
    def get_schedule(self, name: str) -> ScheduleRecord | None:
        """The schedule of the workflow ``name``, or None."""

    @abc.abstractmethod
    def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule, by name."""

    @abc.abstractmethod
    def remove_schedule(self, name: str) -> bool:
        """Remove a schedule; False when there was none of that name."""

    @abc.abstractmethod
    def advance_schedule(self, name: str, expected_last_tick: float | None,
                         new_last_tick: float, next_tick: float | None = None) -> bool:
        """Compare-and-set: move ``last_tick`` from ``expected_last_tick`` to
        ``new_last_tick`` (and store ``next_tick``) only if it still is the expected value;
        False (nothing written) when another process moved it first or the schedule is gone.
        """

    def prune(self, older_than: timedelta, *, include_failed: bool = False) -> PruneResult:
        """Delete whole runs that finished longer than ``older_than`` ago: their checkpoints,
        pending rows, decisions, idempotency rows and run rows, in one transaction. Paused and
        running runs are never touched; failed runs (which may still be resumed) only with
        ``include_failed``. See :meth:`prune_before` for an absolute cutoff."""
        if not isinstance(older_than, timedelta):
            raise TypeError(
                f"prune(older_than) takes a datetime.timedelta such as timedelta(days=7), not "
                f"{type(older_than).__name__}; use prune_before(moment) for an absolute time")
        if older_than < timedelta(0):
            raise ValueError("prune(older_than) takes a duration that is not negative")
        cutoff = datetime.now(UTC) - older_than if older_than < _MAX_AGE else _EPOCH
        return self.prune_before(cutoff, include_failed=include_failed)

    def prune_before(self, moment: datetime, *, include_failed: bool = False) -> PruneResult:
        """Delete whole runs that finished before ``moment`` (an aware datetime); see
        :meth:`prune`."""
        if not isinstance(moment, datetime) or moment.tzinfo is None:
            raise TypeError("prune_before(moment) takes a timezone-aware datetime, such as "
                            "datetime(2026, 1, 1, tzinfo=UTC)")
        return self._prune(moment.timestamp(), include_failed=include_failed)

    @abc.abstractmethod
    def _prune(self, cutoff: float, *, include_failed: bool) -> PruneResult:
        """Delete finished runs last updated before ``cutoff`` (Unix time)."""

    # -- shared reading ----------------------------------------------------------------------
    def _inputs(self, execution_id: str) -> Any:
        run = self.get_run(execution_id)
        return run.inputs if run is not None else None

    def _folded(self, row: CheckpointRow | None, inputs: Any = _UNKNOWN) -> Checkpoint | None:
        if row is None:
            return None
        chain = self._rows(row.execution_id, row.base_id, row.checkpoint_id)
        if inputs is _UNKNOWN:
            inputs = self._inputs(row.execution_id)
        return fold_last(chain, inputs)

    def resume_point(self, execution_id: str, inputs: Any = _UNKNOWN,
                     ) -> tuple[CheckpointRow | None, Checkpoint | None]:
        """The newest row of a run and the checkpoint resume re-enters at, read with as few
        queries as possible: (None, None) for a run without checkpoints, (row, None) for a
        finished run, whose newest row is its completed run_end."""
        last = self._last_row(execution_id, skip_run_end=False)
        if last is None:
            return None, None
        if last.node_id == RUN_END:
            if last.status == "completed":
                return last, None
            return last, self._folded(self._last_row(execution_id, skip_run_end=True), inputs)
        return last, self._folded(last, inputs)

    def finished(self, execution_id: str) -> bool:
        """Whether the run's newest row is a completed run_end marker."""
        last = self._last_row(execution_id, skip_run_end=False)
        return last is not None and last.node_id == RUN_END and last.status == "completed"

    def get(self, execution_id: str, checkpoint_id: str) -> Checkpoint | None:
        """One checkpoint with its full state snapshot."""
        return self._folded(self._row(execution_id, checkpoint_id))

    def get_last(self, execution_id: str) -> Checkpoint | None:
        """The newest checkpoint of a run (possibly its run_end marker)."""
        return self._folded(self._last_row(execution_id, skip_run_end=False))

    def list(self, execution_id: str) -> list[Checkpoint]:
        """Every checkpoint of a run, oldest first (ordered by checkpoint id)."""
        return fold(self._rows(execution_id), self._inputs(execution_id))

    def latest_resumable(self, execution_id: str) -> Checkpoint | None:
        """The checkpoint resume re-enters at: the newest that is not a run_end marker.

        None when the run has no checkpoint, or when it finished (its newest row is a
        completed run_end); a failed run_end is stepped over, so a failed run stays resumable.
        """
        last = self._last_row(execution_id, skip_run_end=False)
        if last is None or (last.node_id == RUN_END and last.status == "completed"):
            return None
        return self._folded(self._last_row(execution_id, skip_run_end=True))

    def latest_forkable(self, execution_id: str) -> Checkpoint | None:
        """The checkpoint fork branches from by default: the newest that is not a marker."""
        return self._folded(self._last_row(execution_id, skip_run_end=True))

    def rows(self, execution_id: str) -> Sequence[CheckpointRow]:
        """The stored rows of a run (for inspection and tests)."""
        return self._rows(execution_id)

    # -- ids given by a prefix (see idprefix.py) ----------------------------------------------
    @abc.abstractmethod
    def execution_ids_with_prefix(self, prefix: str, limit: int) -> IdMatches:
        """The execution ids starting with ``prefix`` (the first ``limit`` in id order, and
        their number), by a range on the primary key."""

    @abc.abstractmethod
    def checkpoint_ids_matching(self, execution_id: str, text: str,
                                limit: int) -> IdMatches:
        """The checkpoint ids of a run that start or end with ``text`` (the first ``limit``
        in id order, and their number)."""

    def has_checkpoint(self, execution_id: str, checkpoint_id: str) -> bool:
        """Whether the run has a checkpoint with exactly this id (no snapshot is read)."""
        return self._row(execution_id, checkpoint_id) is not None

    def resolve_execution_id(self, text: str) -> str:
        """The execution id ``text`` gives in full or by a unique prefix of 8 or more
        characters (:func:`tether.stores.idprefix.resolve_execution_id`)."""
        return idprefix.resolve_execution_id(self, text)

    def resolve_checkpoint_id(self, execution_id: str, text: str) -> str:
        """The checkpoint id of the run that ``text`` gives in full or by a unique prefix or
        suffix (:func:`tether.stores.idprefix.resolve_checkpoint_id`)."""
        return idprefix.resolve_checkpoint_id(self, execution_id, text)

    # -- paging (tether show) ----------------------------------------------------------------
    def page(self, execution_id: str, after: str | None = None,
             limit: int = 200) -> _Page:
        """Up to ``limit`` checkpoints of a run whose id is greater than ``after``, oldest
        first, with full snapshots. Reads the page and the chain its first row starts from
        (at most one snapshot interval), never the whole run: memory is bounded by ``limit``."""
        rows = self._page_rows(execution_id, after, limit)
        if not rows:
            return []
        chain = self._rows(execution_id, rows[0].base_id, rows[0].checkpoint_id)[:-1]
        return fold([*chain, *rows], self._inputs(execution_id))[len(chain):]

    def page_rows(self, execution_id: str, after: str | None = None,
                  limit: int = 200) -> _PageRows:
        """The stored rows of :meth:`page`, without folding snapshots (a row's ``state`` may
        be a delta): for timelines that show each step, not the state after it. One keyset
        query on the SQL stores."""
        return self._page_rows(execution_id, after, limit)

    def last_row(self, execution_id: str, *, skip_run_end: bool = False,
                 ) -> CheckpointRow | None:
        """The newest stored row of a run (optionally the newest that is not a run_end
        marker), without folding its snapshot; served by the primary key."""
        return self._last_row(execution_id, skip_run_end=skip_run_end)

    def _page_rows(self, execution_id: str, after: str | None,
                   limit: int) -> _PageRows:
        """Up to ``limit`` rows with ``checkpoint_id > after``, in checkpoint id order (a
        store overrides this with a query that reads only those rows)."""
        return [r for r in self._rows(execution_id)
                if after is None or r.checkpoint_id > after][:limit]

    # -- run events (the history's rare facts; see stores/events.py) ---------------------------
    @abc.abstractmethod
    def add_event(self, event: RunEvent) -> None:
        """Append one event to its run's history (its own transaction, not fenced)."""

    @abc.abstractmethod
    def events(self, execution_id: str, after: str | None = None,
               limit: int = 10_000) -> _Events:
        """The run's events with ``event_id > after``, oldest first, at most ``limit``."""

    # -- a worker's use of the store -----------------------------------------------------------
    def use_for_worker(self, *, write_group: WriteGroup[FencedWrite, tuple[bool, float | None]]
                       | None = None) -> None:
        """Tune this store for a worker before it drives runs with it: its fenced
        :meth:`put` calls also read the run's cancel request where the store can do that in
        the same statement (:attr:`reads_cancel_on_write`), and, with ``write_group`` (one
        group shared by the stores of a worker's slots, where
        :attr:`concurrent_connections`), overlapping fenced writes of those stores share one
        statement and one commit (:attr:`write_group`). ``tether run`` never calls it."""
        self.reads_cancel_on_write = True
        self.write_group = write_group

    def share_statements(self, other: Checkpointer) -> None:
        """Use ``other``'s compiled statements from now on, so each statement is compiled
        once for both (a worker's slots share its own store's). Only between stores of one
        class, whose statements compile alike whatever their database or schema (the
        schema is the connection's search path, not part of the text); a store of another
        class, or one that compiles nothing, ignores it."""
        del other

    def arm_end_claim(self, claim: NextClaim | None) -> None:
        """Claim a worker slot's next run in the transaction that ends ``claim``'s run
        (its :meth:`finish_run`, fenced, on this store: one commit for both), or stop
        (None). Only a store that can send both in one round trip does it (PostgreSQL
        without a write group: ``pg_end_claim.py``); the others ignore it."""
        del claim

    def take_end_claim(self) -> EndClaim | None:
        """What the claim sent with the armed run's end took, once (None: no claim went
        with an end: the caller claims alone); disarms this store."""
        return None
