"""Firing schedules: each tick of each registered schedule starts exactly one run.

:func:`fire_schedules` is called by every worker (at each poll, with the current time); any
number of processes may call it at once. Exactly once per tick across the fleet rests on two
things the store serialises:

- the run of a tick has a deterministic execution id, ``<name>@<tick in UTC ISO 8601>``
  (``nightly@2024-03-31T01:00:00Z``), so a second submit of the same tick finds the id taken
  (``ExecutionExists``), which counts as already fired: a process killed between submitting
  and advancing leaves a tick that the next process re-submits harmlessly;
- the schedule's ``last_tick`` moves by compare-and-set (``advance_schedule``) only after the
  ticks' runs exist, so no tick is lost and none is handled twice.

Catch-up (ticks that fell due while no worker ran, more than ``grace`` seconds ago): ``none``
skips them (only a tick due within ``grace`` fires), ``latest`` fires the newest due tick,
``all`` fires every due tick oldest first, at most :data:`MAX_TICKS_PER_CALL` per call (the
rest on the next calls).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from tether.compiler.plan import Plan
from tether.cron import next_tick, ticks
from tether.errors import ConcurrencyLimitReached, ExecutionExists, TetherError
from tether.stores.contracts import RunStore, ScheduleStore
from tether.stores.schedule_records import ScheduleRecord
from tether.trigger import Trigger, TriggerKind

if TYPE_CHECKING:
    from tether.stores.base import Checkpointer

log = logging.getLogger("tether.schedules")


class ScheduleSource(ScheduleStore, RunStore, Protocol):
    """What firing schedules reads and writes: the schedules, and the plans they pin."""


MAX_TICKS_PER_CALL = 1000
"""The most ticks of one schedule ``catchup: all`` fires in one call."""
GRACE_SECONDS = 60.0
"""A tick due at most this long ago is on time, not missed (``catchup: none`` fires it)."""

Submit = Callable[[Plan, dict[str, Any], str, str | None, Trigger], None]
"""``submit(plan, inputs, execution_id, queue, trigger)``: start (or enqueue) one run, started
by ``trigger`` (kind ``schedule``, the tick); it must raise
:class:`~tether.errors.ExecutionExists` when ``execution_id`` already names a run."""


def enqueue_into(store: Checkpointer) -> Submit:
    """A worker's schedule submit: queue the tick's run on ``store`` (``ExecutionExists``
    when it already is)."""
    def submit(plan: Plan, inputs: dict[str, Any], execution_id: str, queue: str | None,
               trigger: Trigger) -> None:
        from tether.runtime.runner import Runner  # the worker's own import: none added here

        Runner(plan, store).submit(inputs, execution_id=execution_id,
                                   queue=queue or "default", trigger=trigger)
    return submit


def tick_execution_id(name: str, tick: datetime) -> str:
    """The execution id of the run of ``name``'s tick: ``<name>@<UTC ISO 8601>``.

    A name character outside ``A-Za-z0-9_-`` is written ``=XX`` per UTF-8 byte (``daily
    report`` -> ``daily=20report``), so the id is in the character set every new id keeps
    (``check_execution_id``) and two names never share an id."""
    safe = "".join(c if _TICK_NAME.fullmatch(c) else "".join(
        f"={b:02X}" for b in c.encode("utf-8", "surrogatepass")) for c in name)
    return f"{safe}@{tick.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"


_TICK_NAME = re.compile(r"[A-Za-z0-9_-]")


def due_ticks(schedule: ScheduleRecord, now: datetime, *,
              limit: int = MAX_TICKS_PER_CALL + 1) -> list[datetime]:
    """The ticks after ``last_tick`` and at or before ``now`` (at most ``limit``, oldest first)."""
    if schedule.last_tick is None:
        return []
    found: list[datetime] = []
    for tick in ticks(schedule.cron, schedule.timezone,
                      datetime.fromtimestamp(schedule.last_tick, UTC)):
        if tick > now or len(found) >= limit:
            break
        found.append(tick)
    return found


def _to_fire(schedule: ScheduleRecord, due: list[datetime], now: datetime,
             grace: float) -> tuple[list[datetime], datetime]:
    """The ticks to fire, and the tick ``last_tick`` moves to once they are fired."""
    if schedule.catchup == "all":
        chosen = due[:MAX_TICKS_PER_CALL]
        return chosen, chosen[-1]
    newest = due[-1]
    if schedule.catchup == "none" and (now - newest).total_seconds() > grace:
        return [], newest
    return [newest], newest


def fire_schedules(store: ScheduleSource, now: datetime, submit: Submit, *,
                   grace: float = GRACE_SECONDS) -> list[str]:
    """Start the runs of every schedule's due ticks; return the execution ids this call
    submitted (ticks another process submitted first are not listed).

    ``now`` is an aware datetime (the caller's clock: pass it explicitly). A schedule without
    ``last_tick`` starts counting from ``now``. A submit that raises anything but
    ``ExecutionExists`` stops that schedule for this call, unadvanced (its ticks fire on a later
    call); the error propagates after the other schedules were handled.
    """
    if now.tzinfo is None:
        raise ValueError("fire_schedules needs an aware datetime (e.g. datetime.now(UTC))")
    fired: list[str] = []
    failure: BaseException | None = None
    plans: dict[str, Plan] = {}
    for schedule in store.list_schedules():
        if schedule.last_tick is None:
            start = now.timestamp()
            store.advance_schedule(schedule.name, None, start, _next(schedule, now))
            continue
        due = due_ticks(schedule, now)
        if not due:
            continue
        chosen, last = _to_fire(schedule, due, now, grace)
        try:
            plan = plans.get(schedule.plan_fingerprint) or _plan(store, schedule)
            plans[schedule.plan_fingerprint] = plan
            for tick in chosen:
                execution_id = tick_execution_id(schedule.name, tick)
                try:
                    submit(plan, dict(schedule.inputs), execution_id, schedule.queue,
                           tick_trigger(schedule.name, tick))
                except ExecutionExists:
                    continue
                except ConcurrencyLimitReached as exc:  # `reject`: this tick starts no run
                    log.warning("schedule %s: tick %s skipped: %s", schedule.name,
                                tick.isoformat(), exc)
                    continue
                fired.append(execution_id)
        except Exception as exc:  # re-raised below, after the other schedules
            failure = failure or exc
            continue
        store.advance_schedule(schedule.name, schedule.last_tick, last.timestamp(),
                               _next(schedule, last))
    if failure is not None:
        raise failure
    return fired


def tick_trigger(name: str, tick: datetime) -> Trigger:
    """What started the run of ``name``'s ``tick``: kind ``schedule``, actor
    ``schedule:NAME``, the tick in UTC ISO 8601."""
    return Trigger(TriggerKind.SCHEDULE, f"schedule:{name}",
                   tick=tick.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))


def _next(schedule: ScheduleRecord, after: datetime) -> float | None:
    tick = next_tick(schedule.cron, schedule.timezone, after)
    return tick.timestamp() if tick is not None else None


@dataclass(frozen=True)
class Declared:
    """A plan's schedule as it stands in the store after :func:`declare_schedule`, and
    whether that call ``registered`` it, ``updated`` it, or found it ``unchanged``."""

    schedule: ScheduleRecord
    change: Literal["registered", "updated", "unchanged"]


def declare_schedule(store: ScheduleStore, plan: Plan, queue: str | None = None, *,
                     new_queue: str | None = None) -> Declared:
    """Put ``plan``'s schedule into effect in ``store``: register it under the workflow's
    name, or update the one registered (``tether deploy``, ``tether schedules add``, and each
    worker started with ``--workflows``).

    Idempotent, however many processes declare at once: the schedule is keyed by name, so a
    race makes one row (``put_schedule``: insert-or-ignore, then an update of the same
    values), and one already equal to the plan's is left untouched. An update keeps the ticks
    already handled (``last_tick``); a new schedule counts from now. ``queue``: the queue of
    its runs (None keeps the registered one's, else ``new_queue``, else ``default``)."""
    from tether.cron import next_tick

    spec = plan.schedule
    if spec is None:
        raise TetherError(f"workflow '{plan.name}' has no schedule")
    now = time.time()
    existing = store.get_schedule(plan.name)
    last = existing.last_tick if existing is not None and existing.last_tick is not None \
        else now
    if queue is None:
        queue = existing.queue if existing is not None else new_queue
    upcoming = next_tick(spec.cron, spec.timezone, datetime.fromtimestamp(last, UTC))
    record = ScheduleRecord(
        name=plan.name, plan_fingerprint=plan.fingerprint, cron=spec.cron,
        timezone=spec.timezone, catchup=spec.catchup, inputs=dict(spec.inputs), queue=queue,
        created_at=now, updated_at=now, last_tick=last,
        next_tick=upcoming.timestamp() if upcoming is not None else None)
    if existing is not None and _same_schedule(existing, record):
        return Declared(existing, "unchanged")
    store.put_schedule(record, plan.to_json())
    return Declared(record, "updated" if existing is not None else "registered")


def _same_schedule(old: ScheduleRecord, new: ScheduleRecord) -> bool:
    return (old.plan_fingerprint, old.cron, old.timezone, old.catchup, old.inputs,
            old.queue) == (new.plan_fingerprint, new.cron, new.timezone, new.catchup,
                           new.inputs, new.queue)


def _plan(store: RunStore, schedule: ScheduleRecord) -> Plan:
    text = store.get_plan(schedule.plan_fingerprint)
    if text is None:
        raise TetherError(f"schedule {schedule.name}: its plan "
                          f"{schedule.plan_fingerprint[:12]} is missing from the store")
    return Plan.from_json(text)


__all__ = ["GRACE_SECONDS", "MAX_TICKS_PER_CALL", "Declared", "Submit", "declare_schedule",
           "due_ticks", "fire_schedules", "tick_execution_id", "tick_trigger"]
