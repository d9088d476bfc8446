"""Who continues a run: the resume policy of the one lifecycle.

Every run belongs to a queue (``default`` unless said otherwise), including runs started in
place by ``Runner.run``. A run that is answered, failed-and-resumed, crashed or due on a timer
is continued by whichever process claims it, through the one path (``Runner.aresume``):

==================================  ===================================================
the resuming process                what :func:`route` does
==================================  ===================================================
has every task the plan calls       nothing: the caller continues the run here, under
                                    its own owner token and lease
lacks some (or ``leave=True``)      records the answer (the atomic claim), puts the run
                                    on its queue, and says who continues it:
 - a worker of the queue is live    ``RunResult(status=queued)`` naming the workers
 - none is (and not ``leave``)      :class:`~tether.errors.NotContinued` naming the
                                    commands that would continue it (exit code 5)
==================================  ===================================================

Before either, a paused run resumed without a value that waits only for sleeps not due yet
is refused with :class:`~tether.errors.TimerNotDue` (nothing changed; exit code 4), so a
resume never sits in a process until a timer is due. The answer stays recorded and the run
stays on its queue either way, so the commands named
finish the job whenever they are run: ``tether worker --queue Q --tasks MODULE`` (claims it)
or ``tether resume ID --tasks MODULE`` (continues it here, no value needed). A live worker is
one heard from within two leases (what ``tether workers`` lists).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.errors import NotContinued, ResumeError
from tether.runtime.context import Resume
from tether.runtime.plans import PlanSource, task_names
from tether.runtime.results import RunResult
from tether.runtime.route_rules import alive_since, continues_here, held, left
from tether.runtime.route_text import held_message
from tether.runtime.timer_rules import not_due
from tether.status import RunStatus
from tether.stores.base import Checkpointer
from tether.stores.owners import describe_owner
from tether.stores.queueing import WorkerRecord
from tether.stores.records import Decision, RunRecord

if TYPE_CHECKING:
    from tether.runtime.runner import Runner

__all__ = ["DEFAULT_QUEUE", "Answer", "Awaiting", "awaiting", "live_workers", "route",
           "run_queue"]

DEFAULT_QUEUE = "default"


@dataclass(frozen=True)
class Answer:
    """What a resume carries: the value (None: continue without one) and who gave it."""

    value: Resume | Mapping[str, Any] | None
    node: str | None = None
    resolver: str | None = None
    comment: str | None = None
    channel: str | None = None
    """How the answer arrived (an :class:`~tether.stores.events.AnswerChannel`), for the
    run's history."""


def run_queue(run: RunRecord) -> str:
    """The queue a run belongs to (runs stored before every run had one: ``default``)."""
    return run.queue or DEFAULT_QUEUE


def live_workers(store: Checkpointer, queue: str, lease_seconds: float,
                 now: float | None = None) -> list[WorkerRecord]:
    """The workers of ``queue`` heard from within two leases (``tether workers``)."""
    since = alive_since(time.time() if now is None else now, lease_seconds)
    return [w for w in store.list_workers(alive_since=since) if queue in w.queues]


def route(runner: Runner, store: Checkpointer, run: RunRecord, answer: Answer, *,
          plan: PlanSource | None = None, leave: bool = False,
          queue: str | None = None) -> RunResult | None:
    """Decide who continues ``run`` (see the module docstring): None when the caller does,
    here; otherwise the answer is recorded, the run is on its queue and the result (status
    ``queued``, or ``running`` when a live attempt holds it and applies the answer) says
    who continues it. Raises :class:`NotContinued` when nothing live can."""
    if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        return None  # nothing to continue: the resume protocol says why (resume.py)
    chosen = runner.plan_for(run, plan)
    if answer.value is None and run.status == RunStatus.PAUSED:
        # waiting only for sleeps not due: say when, change nothing (continuing here would
        # sit in this process until then; a worker fires the timer when it is due)
        not_due(run.execution_id, chosen, store.list_pending(run.execution_id))
    missing = tuple(sorted(task_names(chosen) - set(runner.tasks)))
    if continues_here(missing, leave):
        return None
    if plan is not None:
        raise ResumeError(run.execution_id, "a plan switch (--plan) runs here: it needs the "
                          "run's tasks in this process (--tasks)")
    eid = run.execution_id
    address = _record(runner, store, run, answer)
    fresh = store.get_run(eid) or run
    if held(fresh.owner, fresh.lease_until, time.time()):
        return RunResult(RunStatus.RUNNING, eid, message=held_message(
            eid, address, describe_owner(fresh.owner)))
    where = queue or run_queue(run)
    store.enqueue_run(eid, where, run.priority)
    workers = live_workers(store, where, runner.lease_seconds)
    outcome = left(eid, address, where, missing, [f"{w.host}/{w.pid}" for w in workers],
                   leave)
    if outcome.error is not None:
        raise outcome.error
    return RunResult(RunStatus.QUEUED, eid, message=outcome.message)


def _record(runner: Runner, store: Checkpointer, run: RunRecord,
            answer: Answer) -> str | None:
    """Claim the answer (None: there is none; a paused run must then have one already)."""
    from tether.runtime.resume import Resumption

    if answer.value is not None:
        return Resumption(runner, store, run, answer.value, answer.node, None,
                          answer.resolver, answer.comment,
                          channel=answer.channel).record().address
    if run.status == RunStatus.PAUSED and not _answered_since_pause(store, run):
        pending = store.list_pending(run.execution_id)
        not_due(run.execution_id, runner.plan_for(run, None), pending)
        first = pending[0].address if pending else "?"
        raise ResumeError(run.execution_id, f"it is paused at node '{first}' waiting for "
                          "input; answer it with --value (Resume(...))")
    return None


def _answered_since_pause(store: Checkpointer, run: RunRecord) -> bool:
    """Whether a decision was recorded after the run last changed status (paused)."""
    since = run.updated_at.timestamp()
    return any(d.created_at.timestamp() >= since for d in store.decisions(run.execution_id))


@dataclass(frozen=True)
class Awaiting:
    """A paused run whose answer is recorded but that nothing has continued yet."""

    run: RunRecord
    answered: tuple[Decision, ...]
    workers: tuple[WorkerRecord, ...]

    @property
    def queue(self) -> str:
        return run_queue(self.run)

    def who(self) -> str:
        """Who continues it, or what to run so that someone does (a command that works as
        printed, given the task modules for MODULE)."""
        if self.workers:
            names = ", ".join(f"{w.host}/{w.pid}" for w in self.workers[:3])
            return f"a live worker of queue '{self.queue}' continues it ({names})"
        advice = NotContinued(self.run.execution_id, self.queue, ()).advice
        return f"no live worker serves queue '{self.queue}': {advice}"


def awaiting(store: Checkpointer, lease_seconds: float, limit: int = 200) -> list[Awaiting]:
    """Paused runs answered since they paused (not yet continued), newest first."""
    found = []
    workers: dict[str, tuple[WorkerRecord, ...]] = {}
    for run in store.find_runs(status=RunStatus.PAUSED.value, limit=limit):
        since = run.updated_at.timestamp()
        answered = tuple(d for d in store.decisions(run.execution_id)
                         if d.created_at.timestamp() >= since)
        if not answered:
            continue
        queue = run_queue(run)
        if queue not in workers:
            workers[queue] = tuple(live_workers(store, queue, lease_seconds))
        found.append(Awaiting(run, answered, workers[queue]))
    return found
