"""Nothing stuck silently: why a run of a queue is not making progress.

:func:`stuck_runs` reads the store (runs waiting or held, the queues' limits, the live
workers) and gives each run that is not progressing the reasons, for ``tether runs --stuck``
and ``tether workers``:

- queued longer than its queue's ``start_timeout``;
- no live worker serves its queue (none heard from within two leases);
- its lease expired longer than a lease ago and no worker recovered it;
- it waits for its concurrency key: ``limit`` runs of the key are running;
- a reason a worker recorded on it (``runs.blocked_reason``): no worker that claimed for it
  has its plan's tasks, or its recovery keeps failing (retried with backoff).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tether.stores.base import Checkpointer
from tether.stores.queueing import WorkerRecord
from tether.stores.records import RunRecord, RunStatus

__all__ = ["StuckRun", "live_workers", "stuck_runs", "worker_problems"]

SCAN_LIMIT = 100_000


@dataclass(frozen=True)
class StuckRun:
    """A run of a queue that is not making progress, and why."""

    run: RunRecord
    reasons: tuple[str, ...]


def live_workers(store: Checkpointer, now: float, lease: float) -> list[WorkerRecord]:
    """The workers heard from within two leases."""
    return store.list_workers(alive_since=now - 2 * lease)


def _seconds(value: float) -> str:
    if value >= 3600:
        return f"{value / 3600:.1f} h"
    return f"{value / 60:.1f} min" if value >= 120 else f"{value:.0f} s"


def stuck_runs(store: Checkpointer, now: float, lease: float,
               live: Sequence[WorkerRecord] | None = None) -> list[StuckRun]:
    """The runs of queues that are stuck, oldest first, each with its reasons."""
    workers = live_workers(store, now, lease) if live is None else live
    served = {q for w in workers for q in w.queues}
    timeouts = {q.name: q.start_timeout for q in store.list_queues()}
    found = []
    listed = {status: store.list_runs(status, SCAN_LIMIT)
              for status in (RunStatus.QUEUED.value, RunStatus.RUNNING.value)}
    holding: dict[str, list[str]] = {}
    for run in listed[RunStatus.RUNNING.value]:
        if run.concurrency_key is not None:
            holding.setdefault(run.concurrency_key, []).append(run.execution_id)
    for status, runs in listed.items():
        for run in runs:
            if run.queue is None:
                continue
            reasons = _reasons(run, now, lease, served, timeouts.get(run.queue))
            if status == RunStatus.QUEUED.value:
                reasons += _key_reason(run, holding)
            if reasons:
                found.append(StuckRun(run, tuple(reasons)))
    found.sort(key=lambda s: (s.run.created_at, s.run.execution_id))
    return found


def _reasons(run: RunRecord, now: float, lease: float, served: set[str],
             timeout: float | None) -> list[str]:
    held = run.owner is not None and run.lease_until is not None and run.lease_until >= now
    if held:
        return []
    reasons = []
    waiting_since = max(run.created_at.timestamp(), run.available_at or 0.0)
    if run.status == RunStatus.QUEUED and timeout is not None and \
            now - waiting_since > timeout:
        reasons.append(f"queued for {_seconds(now - waiting_since)}, longer than the start "
                       f"timeout ({_seconds(timeout)}) of queue {run.queue}")
    if run.queue not in served:
        reasons.append(f"no live worker serves queue {run.queue}")
    elif run.status == RunStatus.RUNNING and run.lease_until is not None and \
            now - run.lease_until > lease and run.blocked_reason is None:
        reasons.append(f"its lease expired {_seconds(now - run.lease_until)} ago and no "
                       "worker recovered it")
    if run.blocked_reason:
        reasons.append(run.blocked_reason)
    return reasons


def _key_reason(run: RunRecord, holding: dict[str, list[str]]) -> list[str]:
    """A queued run whose concurrency key has its limit of runs running waits for them."""
    if run.concurrency_key is None:
        return []
    holders = holding.get(run.concurrency_key, [])
    limit = run.concurrency_limit or 1
    if len(holders) < limit:
        return []
    shown = ", ".join(holders[:3]) + (", ..." if len(holders) > 3 else "")
    return [f"waits for concurrency key '{run.concurrency_key}': {len(holders)} run(s) "
            f"running (limit {limit}): {shown}"]


def worker_problems(worker: WorkerRecord, stuck: Sequence[StuckRun]) -> list[str]:
    """What ``tether workers`` says of one worker: the stuck runs of its queues, by kind."""
    mine = f"worker {worker.host}/{worker.pid} "
    lacks = sum(1 for s in stuck if s.run.blocked_reason and
                s.run.blocked_reason.startswith(mine))
    served = [s for s in stuck if s.run.queue in worker.queues]
    late = sum(1 for s in served if any("start timeout" in r for r in s.reasons))
    failing = sum(1 for s in served if s.run.recovery_failures and s.run.blocked_reason
                  and s.run.blocked_reason.startswith("recovery failed"))
    problems = []
    if lacks:
        problems.append(f"{lacks} run(s) it lacks the tasks of")
    if late:
        problems.append(f"{late} run(s) of its queues past their start timeout")
    if failing:
        problems.append(f"{failing} run(s) of its queues whose recovery keeps failing")
    return problems
