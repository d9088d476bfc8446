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
from collections.abc import Sequence
from typing import Any

from tether.stores.records import (
    RUN_END,
    Checkpoint,
    CheckpointRow,
    PendingInterrupt,
    PruneResult,
    RunRecord,
    fold,
    fold_last,
)

_UNKNOWN: Any = object()
_Page = list[Checkpoint]  # (``list`` is a method name inside Checkpointer)
_PageRows = list[CheckpointRow]


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

    @abc.abstractmethod
    def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunRecord]:
        """Runs, newest first, optionally only those with ``status``."""

    @abc.abstractmethod
    def get_plan(self, fingerprint: str) -> str | None:
        """The plan JSON stored under ``fingerprint``."""

    @abc.abstractmethod
    def set_run_plan(self, execution_id: str, fingerprint: str, plan_json: str) -> None:
        """Switch a run to another (compatible) plan."""

    # -- leases ------------------------------------------------------------------------------
    @abc.abstractmethod
    def acquire(self, execution_id: str, owner: str, until: float, now: float,
                steal_from: str | None = None) -> bool:
        """Take the run's lease if it is free, expired (``lease_until < now``), already ours,
        or held by ``steal_from`` (an owner known to be dead). Compare-and-set in one statement.
        Also marks the run ``running``."""

    @abc.abstractmethod
    def renew(self, execution_id: str, owner: str, until: float) -> bool:
        """Extend our lease; False if we no longer hold it."""

    @abc.abstractmethod
    def release(self, execution_id: str, owner: str) -> None:
        """Give the lease up (if we hold it)."""

    # -- checkpoints -------------------------------------------------------------------------
    @abc.abstractmethod
    def put(self, row: CheckpointRow) -> None:
        """Write one checkpoint: a single INSERT and its commit, no read before it.

        Raises :class:`~tether.errors.StoreError` if the checkpoint id already exists.
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
        """Atomically write the interrupted checkpoint and the pending row, mark the run
        ``paused`` and release ``owner``'s lease. Raises
        :class:`~tether.errors.StoreError` (writing nothing) if the run already has a pending
        interrupt."""

    @abc.abstractmethod
    def get_pending(self, execution_id: str) -> PendingInterrupt | None:
        """The run's pending interrupt, if it is paused."""

    @abc.abstractmethod
    def list_pending(self) -> list[PendingInterrupt]:
        """Every pending interrupt, oldest first."""

    @abc.abstractmethod
    def delete_pending_interrupt_atomic(
        self, execution_id: str, *, owner: str | None = None, until: float = 0.0,
        decision: Any = None,
    ) -> PendingInterrupt | None:
        """Claim the pending interrupt: delete it and return it, or None if it is gone.

        Exactly one of any number of concurrent callers (threads or processes) gets the row.
        With ``owner``, the same transaction stores ``decision`` on the run (so a crash after
        the claim loses nothing), gives ``owner`` the lease and marks the run ``running``.
        """

    @abc.abstractmethod
    def set_decision(self, execution_id: str, decision: Any) -> None:
        """Replace the stored resume decision of a claimed run."""

    # -- idempotency -------------------------------------------------------------------------
    @abc.abstractmethod
    def get_idempotent(self, execution_id: str, key: str) -> str | None:
        """The cached result (JSON text) under ``(execution_id, key)``, or None on a miss."""

    @abc.abstractmethod
    def put_idempotent(self, execution_id: str, key: str, value_json: str) -> str:
        """Cache a result unless one is cached already; return the cached text (first wins)."""

    # -- ending and pruning ------------------------------------------------------------------
    @abc.abstractmethod
    def finish_run(self, row: CheckpointRow, status: str, error: Any,
                   owner: str | None) -> None:
        """Atomically write the run_end row, set the run's final status and error, and release
        ``owner``'s lease."""

    @abc.abstractmethod
    def prune(self, older_than: float, *, include_failed: bool = False) -> PruneResult:
        """Delete whole runs that finished before ``older_than`` (Unix time): their checkpoints,
        idempotency rows and run rows, in one transaction. Paused and running runs are never
        touched; failed runs (which may still be resumed) only with ``include_failed``."""

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

    def _page_rows(self, execution_id: str, after: str | None,
                   limit: int) -> _PageRows:
        """Up to ``limit`` rows with ``checkpoint_id > after``, in checkpoint id order (a
        store overrides this with a query that reads only those rows)."""
        return [r for r in self._rows(execution_id)
                if after is None or r.checkpoint_id > after][:limit]
