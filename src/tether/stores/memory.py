"""The in-memory checkpointer: the reference implementation of the contract (one process).

A single lock makes every method atomic; the conformance suite holds the SQL stores to what
this one does.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import threading
import time
from collections.abc import Collection, Sequence
from typing import Any

from tether.errors import ExecutionExists, LeaseLost, StoreError
from tether.stores.base import Checkpointer
from tether.stores.events import RunEvent, answered_event, claimed_event, upgraded_event
from tether.stores.idprefix import IdMatches, select_matches
from tether.stores.keys import KeyedStart, create_keyed, in_window
from tether.stores.owners import describe_owner, lease_free, new_owner
from tether.stores.queueing import (
    Budget,
    CancelOutcome,
    ClaimedRun,
    ClaimReason,
    QueueCounts,
    QueueRecord,
    QueueUsage,
    WorkerRecord,
)
from tether.stores.records import (
    LIVE_STATUSES,
    RUN_END,
    CheckpointRow,
    Claim,
    Decision,
    PendingCursor,
    PendingEntry,
    PendingInterrupt,
    PruneResult,
    Readdress,
    RunCursor,
    RunRecord,
    RunStatus,
    readdress_rows,
    readdressed,
    utc,
)
from tether.stores.schedule_records import ScheduleRecord
from tether.trigger import Trigger


class InMemoryCheckpointer(Checkpointer):
    """Keeps everything in dicts; nothing survives the process."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._runs: dict[str, RunRecord] = {}
        self._plans: dict[str, str] = {}
        self._chains: dict[str, list[CheckpointRow]] = {}
        self._ids: dict[str, list[str]] = {}
        self._pending: dict[str, dict[str, PendingInterrupt]] = {}  # by run, then unit
        self._decisions: dict[str, dict[str, Decision]] = {}  # by run, then checkpoint id
        self._plan_tasks: dict[str, str] = {}  # task signatures by plan fingerprint
        self._cache: dict[tuple[str, str], str] = {}
        self._schedules: dict[str, ScheduleRecord] = {}
        self._workers: dict[str, WorkerRecord] = {}
        self._queues: dict[str, QueueRecord] = {}
        self._events: dict[str, list[RunEvent]] = {}  # by run, in event id order

    def __repr__(self) -> str:
        return "InMemoryCheckpointer()"

    # -- runs --------------------------------------------------------------------------------
    def create_run(self, run: RunRecord, plan_json: str) -> None:
        with self._lock:
            if run.execution_id in self._runs:
                raise ExecutionExists(run.execution_id)
            self._plans.setdefault(run.plan_fingerprint, plan_json)
            self._runs[run.execution_id] = _copy(run)
            self._chains[run.execution_id] = []
            self._ids[run.execution_id] = []

    def get_run(self, execution_id: str) -> RunRecord | None:
        with self._lock:
            run = self._runs.get(execution_id)
            return _copy(run) if run is not None else None

    def find_runs(self, *, status: str | None = None, workflow: str | None = None,
                  before: RunCursor | None = None, limit: int = 50) -> list[RunRecord]:
        with self._lock:
            runs = [r for r in self._runs.values()
                    if (status is None or r.status == status)
                    and (workflow is None or r.workflow == workflow)
                    and (before is None or RunCursor.created(r) < before)]
        runs.sort(key=RunCursor.created, reverse=True)
        return [_copy(r) for r in runs[:max(0, limit)]]

    def runs_changed(self, after: RunCursor | None = None, limit: int = 500,
                     ) -> tuple[list[RunRecord], RunCursor | None]:
        with self._lock:
            runs = [r for r in self._runs.values()
                    if after is None or RunCursor.updated(r) > after]
        runs.sort(key=RunCursor.updated)
        found = [_copy(r) for r in runs[:max(0, limit)]]
        return found, RunCursor.updated(found[-1]) if found else None

    def get_plan(self, fingerprint: str) -> str | None:
        with self._lock:
            return self._plans.get(fingerprint)

    def set_plan_tasks(self, fingerprint: str, tasks_json: str) -> bool:
        with self._lock:
            if fingerprint not in self._plans or fingerprint in self._plan_tasks:
                return False
            self._plan_tasks[fingerprint] = tasks_json
            return True

    def get_plan_tasks(self, fingerprint: str) -> str | None:
        with self._lock:
            return self._plan_tasks.get(fingerprint)

    def set_run_plan(self, execution_id: str, fingerprint: str, plan_json: str,
                     owner: str | None = None) -> None:
        with self._lock:
            self._fence(execution_id, owner)
            self._plans.setdefault(fingerprint, plan_json)
            self._update(execution_id, plan_fingerprint=fingerprint)

    def move_run_plan(self, execution_id: str, expected: str, fingerprint: str,
                      plan_json: str, readdress: Sequence[Readdress] = ()) -> bool:
        with self._lock:
            run = self._runs.get(execution_id)
            if run is None or run.owner is not None or run.plan_fingerprint != expected or \
                    run.status not in LIVE_STATUSES:
                return False
            self._plans.setdefault(fingerprint, plan_json)
            self._update(execution_id, plan_fingerprint=fingerprint)
            readdress_rows(self._pending.get(execution_id, {}),
                           self._decisions.get(execution_id, {}), readdress)
            self.add_event(upgraded_event(execution_id, expected, fingerprint,
                                          readdressed(readdress)))
            return True

    def _update(self, execution_id: str, **changes: Any) -> None:
        run = self._runs[execution_id]
        self._runs[execution_id] = dataclasses.replace(run, updated_at=utc(time.time()),
                                                       **changes)

    def _fence(self, execution_id: str, owner: str | None) -> None:
        """Refuse a write by ``owner`` unless it holds the run (caller holds the lock)."""
        if owner is None:
            return
        run = self._runs.get(execution_id)
        if run is None or run.owner != owner:
            raise LeaseLost(execution_id, _lost_reason(run.owner if run else None))

    # -- queues and workers ------------------------------------------------------------------
    def enqueue_run(self, execution_id: str, queue: str, priority: int = 0,
                    available_at: float | None = None) -> bool:
        with self._lock:
            run = self._runs.get(execution_id)
            if run is None:
                return False
            status = RunStatus.QUEUED if run.status == RunStatus.FAILED else run.status
            self._runs[execution_id] = dataclasses.replace(
                run, queue=queue, priority=priority, available_at=available_at, status=status)
            return True

    def _claim_reason(self, run: RunRecord, queues: Sequence[str],
                      now: float) -> ClaimReason | None:
        if run.queue is None or run.queue not in queues:
            return None
        if run.status == RunStatus.QUEUED:
            ready = run.available_at is None or run.available_at <= now
            return ClaimReason.QUEUED if ready and run.cancel_requested_at is None and \
                in_window(run, self._runs.values()) else None
        if run.status == RunStatus.RUNNING:
            free = run.owner is None or (run.lease_until is not None and run.lease_until < now)
            ready = run.available_at is None or run.available_at <= now
            return ClaimReason.RECOVERED if free and ready else None
        if run.status == RunStatus.PAUSED and run.owner is None and any(
                d.created_at > run.updated_at
                for d in self._decisions.get(run.execution_id, {}).values()):
            return ClaimReason.ANSWERED
        return None

    def claim_runs(self, worker: str, queues: Sequence[str], limit: int, now: float,
                   lease_until: float, plans: Collection[str] | None = None,
                   ) -> list[ClaimedRun]:
        with self._lock:
            found = [(r, why) for r in self._runs.values()
                     if (plans is None or r.plan_fingerprint in plans)
                     and (why := self._claim_reason(r, queues, now)) is not None]
            found.sort(key=lambda f: (-f[0].priority, f[0].created_at, f[0].execution_id))
            limits = [self._queues[q] for q in queues if q in self._queues]
            budget = Budget(limits, {q.name: self._usage(q, now) for q in limits})
            claimed: list[ClaimedRun] = []
            for run, why in found:
                if len(claimed) >= limit:
                    break
                starting = why == ClaimReason.QUEUED
                if not in_window(self._runs[run.execution_id], self._runs.values()):
                    continue  # an earlier run of this claim took its key's room
                if not budget.admit(run.queue, run.workflow, starting):
                    continue
                owner = new_owner()
                self._runs[run.execution_id] = dataclasses.replace(
                    run, owner=owner, lease_until=lease_until, status=RunStatus.RUNNING.value,
                    attempt=run.attempt + 1, updated_at=utc(now), blocked_reason=None,
                    started_at=now if starting else run.started_at)
                taken = self._runs[run.execution_id]
                self.add_event(claimed_event(run.execution_id, owner, taken.attempt, worker,
                                             now))
                claimed.append(ClaimedRun(_copy(taken), owner, lease_until, why))
            return claimed

    def _usage(self, queue: QueueRecord, now: float) -> QueueUsage:
        usage = QueueUsage()
        for run in self._runs.values():
            if run.queue != queue.name:
                continue
            if run.status == RunStatus.RUNNING and run.owner is not None and \
                    run.lease_until is not None and run.lease_until >= now:
                usage.held[run.workflow] += 1
            if run.started_at is not None and run.started_at > now - queue.window:
                usage.started += 1
        return usage

    def claimable_plans(self, queues: Sequence[str], now: float,
                        known: Collection[str] = ()) -> list[str]:
        with self._lock:
            found = {r.plan_fingerprint for r in self._runs.values()
                     if self._claim_reason(r, queues, now) is not None}
        return sorted(found - set(known))

    def block_runs(self, fingerprint: str, queues: Sequence[str], reason: str,
                   now: float) -> int:
        with self._lock:
            found = [r for r in self._runs.values() if r.plan_fingerprint == fingerprint
                     and r.blocked_reason is None
                     and self._claim_reason(r, queues, now) is not None]
            for run in found:
                self._runs[run.execution_id] = dataclasses.replace(run, blocked_reason=reason)
            return len(found)

    def retry_later(self, execution_id: str, owner: str, available_at: float,
                    reason: str, event: RunEvent | None = None) -> bool:
        with self._lock:
            run = self._runs.get(execution_id)
            if run is None or run.owner != owner:
                return False
            self._runs[execution_id] = dataclasses.replace(
                run, owner=None, lease_until=None, available_at=available_at,
                blocked_reason=reason, recovery_failures=run.recovery_failures + 1)
            if event is not None:
                self.add_event(event)
            return True

    def put_queue(self, queue: QueueRecord) -> None:
        with self._lock:
            old = self._queues.get(queue.name)
            self._queues[queue.name] = queue if old is None else dataclasses.replace(
                queue, created_at=old.created_at)

    def list_queues(self) -> list[QueueRecord]:
        with self._lock:
            return [self._queues[name] for name in sorted(self._queues)]

    def remove_queue(self, name: str) -> bool:
        with self._lock:
            return self._queues.pop(name, None) is not None

    def queue_counts(self, now: float) -> list[QueueCounts]:
        counts: dict[str, list[int]] = {}
        with self._lock:
            for run in self._runs.values():
                if run.queue is None:
                    continue
                held = run.status == RunStatus.RUNNING and run.owner is not None and \
                    run.lease_until is not None and run.lease_until >= now
                if run.status == RunStatus.QUEUED or held:
                    counts.setdefault(run.queue, [0, 0])[1 if held else 0] += 1
        return [QueueCounts(name, q, r) for name, (q, r) in sorted(counts.items())]

    def request_cancel(self, execution_id: str, now: float) -> CancelOutcome | None:
        with self._lock:
            run = self._runs.get(execution_id)
            if run is None:
                return None
            if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
                return CancelOutcome.FINISHED
            if run.owner is not None and run.lease_until is not None and \
                    run.lease_until >= now:
                self._runs[execution_id] = dataclasses.replace(run, cancel_requested_at=now)
                return CancelOutcome.REQUESTED
            message = "cancelled before a worker executed it" if \
                run.status == RunStatus.QUEUED else "cancelled while nothing executed it"
            self._runs[execution_id] = dataclasses.replace(
                run, status=RunStatus.CANCELLED.value, cancel_requested_at=now,
                updated_at=utc(now), owner=None, lease_until=None,
                error={"type": "RunCancelled", "message": message, "node_id": None})
            self._pending.pop(execution_id, None)
            return CancelOutcome.CANCELLED

    def create_keyed_run(self, run: RunRecord, plan_json: str, on_conflict: str,
                         now: float) -> KeyedStart:
        with self._lock:
            return create_keyed(self, self._runs.values(), run, plan_json, on_conflict, now,
                                lambda eid, error: self._update(eid, error=error))

    def register_worker(self, worker: WorkerRecord) -> None:
        with self._lock:
            self._workers[worker.worker_id] = worker

    def heartbeat_worker(self, worker_id: str, now: float, held: Sequence[str]) -> bool:
        with self._lock:
            worker = self._workers.get(worker_id)
            if worker is None:
                return False
            self._workers[worker_id] = dataclasses.replace(worker, heartbeat_at=now,
                                                           held=tuple(held))
            return True

    def deregister_worker(self, worker_id: str) -> None:
        with self._lock:
            self._workers.pop(worker_id, None)

    def list_workers(self, alive_since: float | None = None) -> list[WorkerRecord]:
        with self._lock:
            found = [w for w in self._workers.values()
                     if alive_since is None or w.heartbeat_at >= alive_since]
        return sorted(found, key=lambda w: (w.started_at, w.worker_id))

    # -- leases ------------------------------------------------------------------------------
    def acquire(self, execution_id: str, owner: str, until: float, now: float,
                steal_from: str | None = None) -> bool:
        with self._lock:
            return self._acquire(execution_id, owner, until, now, steal_from)

    def _acquire(self, execution_id: str, owner: str, until: float, now: float,
                 steal_from: str | None) -> bool:
        run = self._runs.get(execution_id)
        if run is None or not lease_free(run.owner, run.lease_until, owner, now, steal_from):
            return False
        finished = run.status == RunStatus.COMPLETED  # as the SQL stores: stays so
        self._update(execution_id, owner=owner, lease_until=until,
                     status=run.status if finished else RunStatus.RUNNING.value,
                     attempt=run.attempt + (run.owner != owner))
        return True

    def renew(self, execution_id: str, owner: str, until: float) -> bool:
        with self._lock:
            run = self._runs.get(execution_id)
            if run is None or run.owner != owner:
                return False
            self._runs[execution_id] = dataclasses.replace(run, lease_until=until)
            return True

    def release(self, execution_id: str, owner: str, event: RunEvent | None = None) -> None:
        with self._lock:
            run = self._runs.get(execution_id)
            if run is not None and run.owner == owner:
                self._update(execution_id, owner=None, lease_until=None)
                if event is not None:
                    self.add_event(event)

    # -- checkpoints -------------------------------------------------------------------------
    def put(self, row: CheckpointRow, owner: str | None = None) -> None:
        with self._lock:
            self._fence(row.execution_id, owner)
            self._insert(row)

    def _insert(self, row: CheckpointRow) -> None:
        ids = self._ids.setdefault(row.execution_id, [])
        position = bisect.bisect_left(ids, row.checkpoint_id)
        if position < len(ids) and ids[position] == row.checkpoint_id:
            raise StoreError(
                f"checkpoint {row.checkpoint_id} of run {row.execution_id} already exists"
            )
        ids.insert(position, row.checkpoint_id)
        self._chains.setdefault(row.execution_id, []).insert(position, row)

    def _rows(self, execution_id: str, first: str | None = None,
              last: str | None = None) -> list[CheckpointRow]:
        with self._lock:
            rows = list(self._rows_of(execution_id))
        return [r for r in rows if (first is None or r.checkpoint_id >= first)
                and (last is None or r.checkpoint_id <= last)]

    def _rows_of(self, execution_id: str) -> list[CheckpointRow]:
        return self._chains.get(execution_id, [])

    def _page_rows(self, execution_id: str, after: str | None,
                   limit: int) -> list[CheckpointRow]:
        with self._lock:
            return _page(self._rows_of(execution_id), self._ids.get(execution_id, []), after,
                         limit)

    def execution_ids_with_prefix(self, prefix: str, limit: int) -> IdMatches:
        with self._lock:
            return select_matches(list(self._runs), prefix, limit)

    def checkpoint_ids_matching(self, execution_id: str, text: str,
                                limit: int) -> IdMatches:
        with self._lock:
            return select_matches(list(self._ids.get(execution_id, ())), text, limit,
                                  suffix=True)

    def _row(self, execution_id: str, checkpoint_id: str) -> CheckpointRow | None:
        with self._lock:
            return next((r for r in self._rows_of(execution_id)
                         if r.checkpoint_id == checkpoint_id), None)

    def _last_row(self, execution_id: str, *, skip_run_end: bool) -> CheckpointRow | None:
        with self._lock:
            for row in reversed(self._rows_of(execution_id)):
                if not (skip_run_end and row.node_id == RUN_END):
                    return row
        return None

    # -- interrupts --------------------------------------------------------------------------
    def record_interrupt(self, row: CheckpointRow, pending: PendingInterrupt,
                         owner: str | None) -> None:
        with self._lock:
            self._fence(row.execution_id, owner)
            waiting = self._pending.setdefault(row.execution_id, {})
            if pending.address in waiting:
                raise StoreError(f"run {row.execution_id} already has a pending interrupt at "
                                 f"{pending.address}")
            self._insert(row)
            waiting[pending.address] = _copy_pending(pending)

    def pause_run(self, execution_id: str, owner: str | None,
                  waiting: Sequence[str]) -> list[Decision]:
        with self._lock:
            self._fence(execution_id, owner)
            answered = [d for d in self._decisions.get(execution_id, {}).values()
                        if d.checkpoint_id in set(waiting)]
            if answered:
                return [_copy_decision(d) for d in answered]
            run = self._runs.get(execution_id)
            if run is not None:
                changes: dict[str, Any] = {"status": RunStatus.PAUSED.value}
                if owner is not None and run.owner == owner:
                    changes.update(owner=None, lease_until=None)
                self._update(execution_id, **changes)
            return []

    def list_pending(self, execution_id: str | None = None) -> list[PendingInterrupt]:
        with self._lock:
            groups = [self._pending.get(execution_id, {})] if execution_id is not None \
                else list(self._pending.values())
            pending = [_copy_pending(p) for group in groups for p in group.values()]
        return sorted(pending, key=lambda p: (p.created_at, p.execution_id, p.checkpoint_id))

    def due_pending(self, now: float, limit: int = 100) -> list[PendingInterrupt]:
        with self._lock:
            due = [_copy_pending(p) for group in self._pending.values() for p in group.values()
                   if p.due_at is not None and p.due_at <= now]
        due.sort(key=lambda p: (p.due_at or 0.0, p.execution_id, p.checkpoint_id))
        return due[:max(0, limit)]

    def pending_page(self, before: PendingCursor | None = None,
                     limit: int = 50) -> list[PendingEntry]:
        with self._lock:
            found = [PendingEntry(_copy_pending(p), self._runs[p.execution_id].workflow)
                     for group in self._pending.values() for p in group.values()
                     if p.execution_id in self._runs
                     and (before is None or PendingCursor.of(p) < before)]
        found.sort(key=lambda e: PendingCursor.of(e.pending), reverse=True)
        return found[:max(0, limit)]

    def claim(self, pending: PendingInterrupt, answer: dict[str, Any], *,
              owner: str | None = None, until: float = 0.0, now: float = 0.0,
              steal_from: str | None = None, resolver: str | None = None,
              comment: str | None = None, channel: str | None = None) -> Claim | None:
        with self._lock:
            waiting = self._pending.get(pending.execution_id, {})
            found = waiting.get(pending.address)
            if found is None or found.checkpoint_id != pending.checkpoint_id:
                return None
            del waiting[pending.address]
            decision = Decision(pending.execution_id, found.checkpoint_id, found.node_id,
                                found.agent_path, _copy_json(answer), utc(time.time()),
                                resolver, comment)
            self._decisions.setdefault(pending.execution_id, {})[found.checkpoint_id] = decision
            if channel is not None:
                self.add_event(answered_event(found, resolver, channel))
            owned = owner is not None and self._acquire(pending.execution_id, owner, until,
                                                        now, steal_from)
            return Claim(_copy_pending(found), owned)

    # -- run events --------------------------------------------------------------------------
    def add_event(self, event: RunEvent) -> None:
        with self._lock:
            found = self._events.setdefault(event.execution_id, [])
            found.append(dataclasses.replace(event, data=_copy_json(event.data)))
            found.sort(key=lambda e: e.event_id)

    def events(self, execution_id: str, after: str | None = None,
               limit: int = 10_000) -> list[RunEvent]:
        with self._lock:
            found = [dataclasses.replace(e, data=_copy_json(e.data))
                     for e in self._events.get(execution_id, ())
                     if after is None or e.event_id > after]
        return found[:max(0, limit)]

    def decisions(self, execution_id: str) -> list[Decision]:
        with self._lock:
            found = [_copy_decision(d) for d in self._decisions.get(execution_id, {}).values()]
        return sorted(found, key=lambda d: (d.created_at, d.checkpoint_id))

    def replace_decision(self, decision: Decision, owner: str | None) -> None:
        with self._lock:
            self._fence(decision.execution_id, owner)
            self._decisions.setdefault(decision.execution_id, {})[decision.checkpoint_id] = \
                _copy_decision(decision)

    # -- idempotency -------------------------------------------------------------------------
    def get_idempotent(self, execution_id: str, key: str) -> str | None:
        with self._lock:
            return self._cache.get((execution_id, key))

    def put_idempotent(self, execution_id: str, key: str, value_json: str,
                       owner: str | None = None) -> str:
        with self._lock:
            self._fence(execution_id, owner)
            return self._cache.setdefault((execution_id, key), value_json)

    # -- ending and pruning ------------------------------------------------------------------
    def finish_run(self, row: CheckpointRow, status: str, error: Any,
                   owner: str | None, *, last_node: CheckpointRow | None = None) -> None:
        with self._lock:
            self._fence(row.execution_id, owner)
            if last_node is not None:
                if row.checkpoint_id in self._ids.get(row.execution_id, ()):
                    raise StoreError(f"checkpoint {row.checkpoint_id} of run "
                                     f"{row.execution_id} already exists")
                self._insert(last_node)
            self._insert(row)
            run = self._runs.get(row.execution_id)
            if run is None:
                return
            changes: dict[str, Any] = {"status": status, "error": _copy_json(error)}
            if run.owner == owner:
                changes.update(owner=None, lease_until=None)
            self._update(row.execution_id, **changes)

    # -- schedules ---------------------------------------------------------------------------
    def put_schedule(self, schedule: ScheduleRecord, plan_json: str) -> None:
        with self._lock:
            self._plans.setdefault(schedule.plan_fingerprint, plan_json)
            old = self._schedules.get(schedule.name)
            if old is not None:
                schedule = dataclasses.replace(schedule, created_at=old.created_at,
                                               last_tick=old.last_tick)
            self._schedules[schedule.name] = _copy_schedule(schedule)

    def get_schedule(self, name: str) -> ScheduleRecord | None:
        with self._lock:
            found = self._schedules.get(name)
            return _copy_schedule(found) if found is not None else None

    def list_schedules(self) -> list[ScheduleRecord]:
        with self._lock:
            return [_copy_schedule(self._schedules[name]) for name in sorted(self._schedules)]

    def remove_schedule(self, name: str) -> bool:
        with self._lock:
            return self._schedules.pop(name, None) is not None

    def advance_schedule(self, name: str, expected_last_tick: float | None,
                         new_last_tick: float, next_tick: float | None = None) -> bool:
        with self._lock:
            found = self._schedules.get(name)
            if found is None or found.last_tick != expected_last_tick:
                return False
            self._schedules[name] = dataclasses.replace(
                found, last_tick=new_last_tick, next_tick=next_tick, updated_at=time.time())
            return True

    def _prune(self, cutoff: float, *, include_failed: bool) -> PruneResult:
        finished = {RunStatus.COMPLETED.value, RunStatus.CANCELLED.value} | (
            {RunStatus.FAILED.value} if include_failed else set())
        with self._lock:
            doomed = [
                r.execution_id for r in self._runs.values()
                if r.status in finished and r.updated_at.timestamp() < cutoff
                and not self._pending.get(r.execution_id)
            ]
            checkpoints = sum(len(self._rows_of(e)) for e in doomed)
            keys = [k for k in self._cache if k[0] in doomed]
            for key in keys:
                del self._cache[key]
            for execution_id in doomed:
                del self._runs[execution_id]
                self._chains.pop(execution_id, None)
                self._ids.pop(execution_id, None)
                self._pending.pop(execution_id, None)
                self._decisions.pop(execution_id, None)
                self._events.pop(execution_id, None)
            used = {r.plan_fingerprint for r in self._runs.values()}
            used |= {s.plan_fingerprint for s in self._schedules.values()}
            for fingerprint in [f for f in self._plans if f not in used]:
                del self._plans[fingerprint]
        return PruneResult(len(doomed), checkpoints, len(keys), tuple(sorted(doomed)))


def _lost_reason(holder: str | None) -> str:
    return f"the run is now held by {describe_owner(holder)}" if holder else \
        "the run is no longer held by this attempt"


def _copy_json(value: Any) -> Any:
    return json.loads(json.dumps(value)) if value is not None else None


def _copy_pending(pending: PendingInterrupt) -> PendingInterrupt:
    """A copy whose context is not shared with the caller (the SQL stores return fresh ones)."""
    return dataclasses.replace(pending, context=_copy_json(pending.context))


def _copy(run: RunRecord) -> RunRecord:
    trigger = Trigger.from_dict(_copy_json(run.trigger.as_dict())) if run.trigger else None
    return dataclasses.replace(run, inputs=_copy_json(run.inputs), error=_copy_json(run.error),
                               trigger=trigger)


def _copy_schedule(schedule: ScheduleRecord) -> ScheduleRecord:
    return dataclasses.replace(schedule, inputs=_copy_json(schedule.inputs))


def _copy_decision(decision: Decision) -> Decision:
    return dataclasses.replace(decision, value=_copy_json(decision.value))


def _page(rows: list[CheckpointRow], ids: list[str], after: str | None,
          limit: int) -> list[CheckpointRow]:
    """``rows[i:i + limit]`` from the first id greater than ``after`` (``ids`` is sorted)."""
    start = 0 if after is None else bisect.bisect_right(ids, after)
    return rows[start:start + limit]
