"""Concurrency keys in the store: what a keyed submission does, decided atomically.

A run of a workflow with ``concurrency: {key, limit, on_conflict}`` carries its rendered key
and its limit in its row (``runs.concurrency_key``, ``runs.concurrency_limit``). Two rules
hold them, on every backend:

- **The claim** (``sql_queue.py``, ``memory.py``): a queued (or answered) run whose key
  already has ``limit`` runs ``running`` (held, or orphaned and waiting for recovery) is not
  claimable. On PostgreSQL each claimer takes a transaction-scoped advisory lock per key
  (``pg_advisory_xact_lock``, in key order) and counts again under it, so two claimers
  racing for one key see each other's claim; on SQLite the claim's ``BEGIN IMMEDIATE``
  transaction serialises every claimer.
- **The submission** (:meth:`~tether.stores.base.Checkpointer.create_keyed_run`): under the
  same per-key serialisation, the runs of the key *in progress* (queued, running or paused,
  not asked to cancel) are read, oldest first, and ``on_conflict`` decides with
  :func:`decide`: ``queue`` inserts the run queued (the claim makes it wait);
  ``cancel_running`` inserts it and cancels the oldest in-progress runs so that at most
  ``limit - 1`` of them are left (held ones at their next node boundary, the others at
  once); ``cancel_new`` inserts it ``cancelled`` with the reason when ``limit`` are in
  progress; ``reject`` raises :class:`~tether.errors.ConcurrencyLimitReached` and stores
  nothing. A run started in place (``tether run``) is inserted ``running`` only while fewer
  than ``limit`` runs of its key run; otherwise nothing is stored and the caller waits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tether.errors import ConcurrencyLimitReached
from tether.status import RunStatus
from tether.stores.records import RunRecord

__all__ = ["ON_CONFLICT", "KeyHolder", "KeyedStart", "decide", "key_error", "lock_id"]

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
    oldest first; ``running``: how many of all runs of the key were running;
    ``superseded``: the older runs this one cancelled (``cancel_running``)."""

    status: RunStatus | None
    holders: tuple[KeyHolder, ...] = ()
    running: int = 0
    superseded: tuple[str, ...] = ()

    @property
    def created(self) -> bool:
        return self.status is not None


@dataclass(frozen=True)
class _Decision:
    insert: RunStatus | None
    cancel: tuple[str, ...]


def decide(run: RunRecord, on_conflict: str, holders: Sequence[KeyHolder],
           running: int) -> _Decision:
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
    if in_place and running >= limit:
        return _Decision(None, cancel)
    return _Decision(RunStatus(run.status), cancel)


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
