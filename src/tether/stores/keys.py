"""Concurrency keys in the store: what a keyed submission does, decided atomically.

A run of a workflow with ``concurrency: {key, limit, on_conflict}`` carries its rendered key
and its limit in its row (``runs.concurrency_key``, ``runs.concurrency_limit``). Two rules
hold them, on every backend:

- **The claim** (``sql_queue.py``, ``memory.py``): the runs of a key wait in one line, in
  the order they were created. A queued run with a key is claimable only inside its key's
  *window*: the runs of the key ``running`` (held, or orphaned and waiting for recovery)
  or ``paused`` (a run waiting for an approval keeps its place), plus the key's queued runs
  ahead of it, are fewer than its ``limit``. The window is read in the claim's statement
  (PostgreSQL: ``FOR UPDATE SKIP LOCKED`` in one statement, no lock of its own). Two
  claimers with different snapshots cannot both start a run past the limit: a run is in
  a window only if every run ahead of it that could run is counted, and a run taken
  meanwhile by another claimer is either still counted as queued ahead (an older
  snapshot), counted as running (a newer one), or itself locked and skipped. That needs the
  line to only grow at its end: the submissions of a key are serialised (PostgreSQL: a
  transaction-scoped advisory lock per key, ``pg_advisory_xact_lock``; SQLite: its single
  writer), and a new run's creation time is made later than every run of its key in
  progress. An answered paused run continues without a check (it held its place). SQLite
  claims in one ``BEGIN IMMEDIATE`` transaction: every claimer is alone anyway.
- **The submission** (:meth:`~tether.stores.base.Checkpointer.create_keyed_run`): under the
  per-key lock, the runs of the key *in progress* (queued, running or paused, not asked to
  cancel) are read, oldest first, and ``on_conflict`` decides with
  :func:`decide`: ``queue`` inserts the run queued (the claim makes it wait);
  ``cancel_running`` inserts it and cancels the oldest in-progress runs so that at most
  ``limit - 1`` of them are left (held ones at their next node boundary, the others at
  once); ``cancel_new`` inserts it ``cancelled`` with the reason when ``limit`` are in
  progress; ``reject`` raises :class:`~tether.errors.ConcurrencyLimitReached` and stores
  nothing. A run started in place (``tether run``) joins the end of the line and starts at
  once: it is inserted ``running`` only while its window has room (fewer than ``limit``
  runs of the key running, paused or queued); otherwise nothing is stored and the caller
  waits and tries again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tether.errors import ConcurrencyLimitReached, ExecutionExists
from tether.status import RunStatus
from tether.stores.queueing import CancelOutcome
from tether.stores.records import RunRecord

if TYPE_CHECKING:
    from tether.stores.base import Checkpointer

__all__ = [
    "ON_CONFLICT",
    "KeyHolder",
    "KeyedStart",
    "decide",
    "in_window",
    "key_error",
    "last_in_line",
    "line_of",
    "lock_id",
    "superseded_error",
]

ON_CONFLICT = ("queue", "cancel_running", "cancel_new", "reject")
IN_PROGRESS = (RunStatus.QUEUED.value, RunStatus.RUNNING.value, RunStatus.PAUSED.value)
"""The statuses of a run that holds (or will hold) its key, unless asked to cancel."""


@dataclass(frozen=True)
class KeyHolder:
    """A run of the key in progress when a keyed run was submitted."""

    execution_id: str
    status: str


@dataclass(frozen=True)
class KeyedStart:
    """What :meth:`~tether.stores.base.Checkpointer.create_keyed_run` did.

    ``status``: the new run's status as stored (``queued``, ``running`` in place,
    ``cancelled`` by ``cancel_new``), or None when nothing was stored (in place, the key at
    its limit: wait and try again). ``holders``: the runs of the key in progress then,
    oldest first; ``occupied``: how many runs of the key were running or paused, or queued
    (the window of a run at the end of the line); ``superseded``: the older runs this one
    cancelled (``cancel_running``)."""

    status: RunStatus | None
    holders: tuple[KeyHolder, ...] = ()
    occupied: int = 0
    superseded: tuple[str, ...] = ()

    @property
    def created(self) -> bool:
        return self.status is not None


@dataclass(frozen=True)
class _Decision:
    insert: RunStatus | None
    cancel: tuple[str, ...]


def decide(run: RunRecord, on_conflict: str, holders: Sequence[KeyHolder],
           occupied: int) -> _Decision:
    """What a keyed submission does (see the module docstring); raises
    :class:`ConcurrencyLimitReached` for ``reject`` at the limit. ``run.status`` says how
    it starts: ``queued`` (submitted) or ``running`` (in place)."""
    limit = run.concurrency_limit or 1
    full = len(holders) >= limit
    if on_conflict == "reject" and full:
        raise ConcurrencyLimitReached(run.workflow, run.concurrency_key or "", limit,
                                      tuple(h.execution_id for h in holders))
    if on_conflict == "cancel_new" and full:
        return _Decision(RunStatus.CANCELLED, ())
    cancel: tuple[str, ...] = ()
    if on_conflict == "cancel_running" and full:
        cancel = tuple(h.execution_id for h in holders[:len(holders) - (limit - 1)])
    in_place = run.status == RunStatus.RUNNING
    if in_place and occupied >= limit:
        return _Decision(None, cancel)
    return _Decision(RunStatus(run.status), cancel)


def line_of(runs: Iterable[RunRecord], key: str,
            ) -> tuple[list[KeyHolder], int, float | None]:
    """Of ``runs`` (all of a store's): the runs of ``key`` in progress and not asked to
    cancel, oldest first; how many occupy the key (running or paused, or queued and not asked
    to cancel); the latest creation time among those in progress (the in-memory store's
    reading of ``sql_keys.holders``)."""
    mine = sorted((r for r in runs if r.concurrency_key == key and r.status in IN_PROGRESS),
                  key=lambda r: (r.created_at, r.execution_id))
    holders = [KeyHolder(r.execution_id, str(r.status)) for r in mine
               if r.cancel_requested_at is None]
    occupied = sum(1 for r in mine
                   if r.status != RunStatus.QUEUED or r.cancel_requested_at is None)
    return holders, occupied, max((r.created_at.timestamp() for r in mine), default=None)


def in_window(run: RunRecord, runs: Iterable[RunRecord]) -> bool:
    """Whether the queued ``run`` may start as its key goes (``sql_keys.has_room``): the runs
    of its key running or paused, plus its queued runs ahead of it, are fewer than its
    limit. A run without a key, or not queued (an answered pause held its place), always
    may."""
    key = run.concurrency_key
    if key is None or run.status != RunStatus.QUEUED:
        return True
    place = (run.created_at, run.execution_id)
    ahead = sum(1 for r in runs if r.concurrency_key == key and r.execution_id !=
                run.execution_id and (r.status in (RunStatus.RUNNING, RunStatus.PAUSED) or (
                    r.status == RunStatus.QUEUED and r.cancel_requested_at is None
                    and (r.created_at, r.execution_id) < place)))
    return ahead < (run.concurrency_limit or 1)


def last_in_line(run: RunRecord, latest: float | None) -> RunRecord:
    """``run`` created after every run of its key in progress (``latest``: the latest of
    their creation times), so its key's line only grows at its end."""
    if latest is None or run.created_at.timestamp() > latest:
        return run
    moment = datetime.fromtimestamp(latest + 1e-6, tz=UTC)
    return replace(run, created_at=moment, updated_at=moment)


def key_error(run: RunRecord, holders: Sequence[KeyHolder]) -> dict[str, Any]:
    """The recorded error of a run ``cancel_new`` dropped."""
    ids = ", ".join(h.execution_id for h in holders[:5]) + (", ..." if len(holders) > 5 else "")
    return {"type": "RunCancelled", "node_id": None,
            "message": f"cancelled when submitted: concurrency key '{run.concurrency_key}' "
            f"already had {len(holders)} run{'s' if len(holders) != 1 else ''} in progress "
            f"(limit {run.concurrency_limit or 1}: {ids}); on_conflict: cancel_new"}


def superseded_error(newer: str, key: str) -> dict[str, Any]:
    """The recorded error of an older run ``cancel_running`` cancelled before it ran."""
    return {"type": "RunCancelled", "node_id": None,
            "message": f"cancelled by the newer run {newer} of concurrency key '{key}' "
            "(on_conflict: cancel_running)"}


def lock_id(key: str) -> int:
    """A signed 64-bit number for ``key`` (PostgreSQL's advisory locks take one): the first
    8 bytes of its SHA-256; keys that collide merely share a lock."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


def create_keyed(store: Checkpointer, runs: Collection[RunRecord], run: RunRecord,
                 plan_json: str, on_conflict: str, now: float,
                 set_error: Callable[[str, dict[str, Any]], None]) -> KeyedStart:
    """The in-memory store's ``create_keyed_run`` (under its lock; ``runs``: all of its
    runs; ``set_error``: records the error of a superseded run cancelled at once)."""
    if any(r.execution_id == run.execution_id for r in runs):
        raise ExecutionExists(run.execution_id)
    holders, occupied, latest = line_of(runs, run.concurrency_key or "")
    decision = decide(run, on_conflict, holders, occupied)
    run = last_in_line(run, latest)
    if decision.insert == RunStatus.CANCELLED:
        store.create_run(replace(run, status=RunStatus.CANCELLED.value,
                                 error=key_error(run, holders)), plan_json)
    elif decision.insert is not None:
        store.create_run(run, plan_json)
    for older in decision.cancel:
        if store.request_cancel(older, now) == CancelOutcome.CANCELLED:
            set_error(older, superseded_error(run.execution_id, run.concurrency_key or ""))
    return KeyedStart(decision.insert, tuple(holders), occupied, decision.cancel)
