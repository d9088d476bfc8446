"""The Runner: start, resume and fork runs of a plan against a checkpointer.

Each call is one *attempt* with a fresh owner token and its own lease (``attempt.py``); every
write it makes is fenced on that token, so two attempts never both execute a run, whether they
are threads of one process, processes, containers or hosts. How resume decides is in
``resume.py``; how an attempt runs and ends is in ``driver.py``; the sync methods run the async
ones on a per-thread event loop (``bridge.py``).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from tether.errors import (
    CheckpointNotFound,
    ForkError,
    InputError,
    RunNotFound,
    TetherError,
)
from tether.observability.observer import remember_caller
from tether.runtime.attempt import Attempt
from tether.runtime.concurrency import (
    cancel_boundary,
    cancelled_result,
    keyed,
    start_in_place,
)
from tether.runtime.context import Resume
from tether.runtime.dedup import Submitted, create_once
from tether.runtime.events import Event
from tether.runtime.fork_patch import check_patch_effect, merge_patch
from tether.runtime.ids import new_execution_id
from tether.runtime.input_values import check_values
from tether.runtime.journal import SNAPSHOT_EVERY, Journal
from tether.runtime.lifecycle import DEFAULT_QUEUE, Answer, route, run_queue
from tether.runtime.pinning import check_compatible, check_same_plan
from tether.runtime.plans import PlanSource, check_tasks, load_plan, remember, stored_plan
from tether.runtime.registry import resolve_tasks
from tether.runtime.render import RunInfo
from tether.runtime.results import RunResult
from tether.runtime.run_events import record_forked
from tether.runtime.state import RunState
from tether.runtime.submission import check_queue, queued_run, start_values, utc_now
from tether.runtime.timer_answers import due_approval, fired_answer
from tether.runtime.values import max_value_bytes as value_cap
from tether.runtime.values import to_json
from tether.status import RUN_END, CheckpointStatus, RunStatus, StepType
from tether.stores.base import Checkpointer
from tether.stores.records import Checkpoint, PendingInterrupt, RunRecord
from tether.templating import DEFAULT_BUDGET, TemplateBudget
from tether.trigger import UNKNOWN_TRIGGER, Trigger, local_trigger

if TYPE_CHECKING:
    from tether.compiler.plan import Plan
    from tether.runtime.resume import Claimed, Prepared

# Imported where they are used, not here: submitting a run (``tether submit``, the API)
# drives nothing, so it does not pay for the driver, the executors, asyncio or resuming
# (docs/performance.md, "Start-up of the command"): ``bridge.run_sync``, ``driver.Driver``,
# ``resume.Resumption``.

__all__ = ["RunResult", "Runner", "load_plan"]

MAX_LEASE_SECONDS = 86400.0


class Runner:
    """Executes a plan durably against a checkpointer (or in memory, without one).

    Args:
        plan_or_path: a Plan, a plan JSON file, or a workflow file. Optional for resume and
            fork, which use the plan stored with the run.
        checkpointer: where checkpoints go; ``None`` runs in memory, and ``interrupt()`` then
            raises its signal to the caller.
        tasks: a mapping of task names to callables, module names to import, or None for the
            tasks registered with ``@tether.task``.
        max_concurrency: how many task bodies run at once.
        lease_seconds: how long an attempt's lease lasts without renewal (it is renewed every
            third of that while the attempt runs): how long a crashed attempt on another host
            (or in another container) holds a run before another may take it over.
        on_event: called with an :class:`Event` as units start and finish.
        template_budget: what one template render may spend (default 1 s and 1,000,000
            characters); a render also counts toward its node's ``timeout``. Going over is a
            ``TemplateLimit`` failure of the node, naming the field.
        park_timers: what a durable timer (a ``sleep`` node) does once recorded. False (in
            place: ``tether run``, ``tether resume``): its branch waits in this process and
            fires it when due. True (workers): the unit stays waiting and the run pauses once
            nothing else can run; :func:`tether.runtime.timers.fire_due` fires it when due.
        max_value_bytes: the most bytes of JSON one node output (and the run's result) may
            have; a larger one fails its node with ``ValueTooLarge`` naming the node, the size
            and the limit. Default: ``TETHER_MAX_VALUE_BYTES``, else 16 MB.
    """

    def __init__(self, plan_or_path: PlanSource | None = None,
                 checkpointer: Checkpointer | None = None,
                 tasks: Mapping[str, Callable[..., Any]] | Iterable[str] | None = None, *,
                 max_concurrency: int = 16, lease_seconds: float = 30.0,
                 snapshot_every: int = SNAPSHOT_EVERY,
                 on_event: Callable[[Event], None] | None = None,
                 template_budget: TemplateBudget | None = None,
                 park_timers: bool = False, max_value_bytes: int | None = None) -> None:
        if not 0 < lease_seconds <= MAX_LEASE_SECONDS:
            raise ValueError(f"lease_seconds must be above 0 and at most {MAX_LEASE_SECONDS:g}")
        self.plan = load_plan(plan_or_path) if plan_or_path is not None else None
        if self.plan is not None:
            remember(self.plan)
        self.checkpointer = checkpointer
        self.tasks = resolve_tasks(tasks)
        self.max_concurrency = max(1, max_concurrency)
        self.lease_seconds = lease_seconds
        self.snapshot_every = snapshot_every
        self.on_event = on_event
        self.template_budget = template_budget or DEFAULT_BUDGET
        self.park_timers = park_timers
        self.max_value_bytes = value_cap(max_value_bytes)
        self.inline_bodies = True
        """A lone sync task body runs in the event loop's thread (no thread hop); a worker
        driving several runs in one loop sets this False."""
        self._signed: set[str] = set()  # plans whose task signatures this Runner recorded

    # -- sync twins --------------------------------------------------------------------------
    def run(self, inputs: Mapping[str, Any] | None = None,
            execution_id: str | None = None, *, queue: str = DEFAULT_QUEUE,
            trigger: Trigger | None = None) -> RunResult:
        """Start a run and drive it until it completes, pauses or fails."""
        from tether.runtime.bridge import run_sync

        return run_sync(self.arun(inputs, execution_id, queue=queue, trigger=trigger))

    def resume(self, execution_id: str, resume: Resume | Mapping[str, Any] | None = None, *,
               node: str | None = None, plan: PlanSource | None = None,
               resolver: str | None = None, comment: str | None = None,
               leave: bool = False, queue: str | None = None,
               channel: str | None = None) -> RunResult:
        """Resume a paused or interrupted run (see :meth:`aresume`)."""
        from tether.runtime.bridge import run_sync

        return run_sync(self.aresume(execution_id, resume, node=node, plan=plan,
                                     resolver=resolver, comment=comment, leave=leave,
                                     queue=queue, channel=channel))

    def fork(self, execution_id: str, checkpoint_id: str | None = None,
             state_patch: Mapping[str, Any] | None = None, *,
             plan: PlanSource | None = None, leave: bool = False) -> RunResult:
        """Branch a new run from a checkpoint (see :meth:`afork`)."""
        from tether.runtime.bridge import run_sync

        return run_sync(self.afork(execution_id, checkpoint_id, state_patch, plan=plan,
                                   leave=leave))

    # -- start -------------------------------------------------------------------------------
    async def arun(self, inputs: Mapping[str, Any] | None = None,
                   execution_id: str | None = None, *,
                   queue: str = DEFAULT_QUEUE, trigger: Trigger | None = None) -> RunResult:
        """Start a run of the Runner's plan with ``inputs`` and drive it here: this process
        claims its own run (a fresh owner token and lease). The run belongs to ``queue``,
        whose workers continue it once answered, or after this process crashed
        (``lifecycle.py``). ``trigger``: what started it, stored with it and read by its
        templates as ``trigger.*`` (default: kind ``python`` by the OS user)."""
        trigger = trigger or local_trigger()
        plan = self._own_plan()
        check_queue(queue)
        check_tasks(plan, frozenset(self.tasks))
        values, execution_id = start_values(plan, inputs, execution_id)
        state = RunState.new(values)
        store = self.checkpointer
        attempt = Attempt(store, execution_id, self.lease_seconds)
        journal = None
        now = utc_now()
        if store is not None:
            run = keyed(plan, RunRecord(
                execution_id=execution_id, workflow=plan.name, plan_fingerprint=plan.fingerprint,
                status=RunStatus.RUNNING, inputs=values, created_at=now, updated_at=now,
                owner=attempt.token, lease_until=attempt.until(), queue=queue,
                trigger=trigger))
            if run.concurrency_key is None:
                store.create_run(run, plan.to_json())
            else:  # waits while the key is at its limit (queue, cancel_running)
                started = await start_in_place(store, plan, run, plan.to_json(), attempt.until)
                if started.status != RunStatus.RUNNING:  # cancel_new
                    return cancelled_result(store, execution_id)
                attempt.boundary = attempt.boundary or cancel_boundary(store, execution_id)
            self._sign(store, plan)
            journal = Journal(store, execution_id, state.data,
                              snapshot_every=self.snapshot_every, attempt=attempt)
        info = RunInfo(execution_id, plan.name, now.isoformat(), trigger=trigger)
        return await self._drive(execution_id, plan, state, journal, attempt, info)

    def _sign(self, store: Checkpointer, plan: Plan) -> None:
        """Record the signatures of the plan's tasks this Runner has with the plan (issue
        24: task drift), once per plan and Runner."""
        if plan.fingerprint not in self._signed:
            # (imported here: a resume in place records none, and its dataclasses cost)
            from tether.runtime.signatures import record_signatures

            record_signatures(store, plan, self.tasks)
            self._signed.add(plan.fingerprint)

    def _own_plan(self) -> Plan:
        if self.plan is None:
            raise TetherError("this Runner has no plan: pass a plan or workflow file to start runs")
        return self.plan

    # -- submit ------------------------------------------------------------------------------
    def submit(self, inputs: Mapping[str, Any] | None = None, *,
               execution_id: str | None = None, queue: str = "default",
               priority: int = 0, dedup_key: str | None = None,
               trigger: Trigger | None = None) -> str:
        """Enqueue a run of the Runner's plan for the workers of ``queue`` and return its
        execution id at once (nothing executes here, so the task modules need not be
        importable in this process). The run is ``queued`` with its plan stored, as ``run``
        stores it; ``priority``: higher is claimed first within the queue.

        ``dedup_key``: the run's execution id, and a second submission with the same key
        returns the first run's id instead of starting another (atomically, however many
        race; see ``dedup.py``). Without it, an ``execution_id`` already taken raises
        :class:`~tether.errors.ExecutionExists`. ``trigger``: what started it, as for
        :meth:`arun` (default: kind ``python`` by the OS user)."""
        return self.submit_run(inputs, execution_id=execution_id, queue=queue,
                               priority=priority, dedup_key=dedup_key,
                               trigger=trigger).execution_id

    def submit_run(self, inputs: Mapping[str, Any] | None = None, *,
                   execution_id: str | None = None, queue: str = "default",
                   priority: int = 0, dedup_key: str | None = None,
                   trigger: Trigger | None = None) -> Submitted:
        """:meth:`submit`, saying also whether this call created the run (see
        :class:`~tether.runtime.dedup.Submitted`)."""
        plan = self._own_plan()
        run = queued_run(plan, inputs, execution_id=execution_id, queue=queue,
                         priority=priority, dedup_key=dedup_key, trigger=trigger)
        submitted = create_once(self._store(), keyed(plan, run), plan.to_json(),
                                deduplicate=dedup_key is not None, plan=plan)
        if submitted.created:  # the caller's active span is the new run's parent
            remember_caller(self._store(), submitted.execution_id)
        self._sign(self._store(), plan)
        return submitted

    # -- resume ------------------------------------------------------------------------------
    async def aresume(self, execution_id: str,
                      resume: Resume | Mapping[str, Any] | None = None, *,
                      node: str | None = None, plan: PlanSource | None = None,
                      resolver: str | None = None, comment: str | None = None,
                      claimed: Claimed | None = None,
                      boundary: Callable[[], None] | None = None,
                      leave: bool = False, queue: str | None = None,
                      channel: str | None = None) -> RunResult:
        """Continue a run: answer one of its pending interrupts, or recover it after a crash.

        Who continues it is decided first (``lifecycle.route``): this process when it has
        every task the run's plan calls, else the live workers of the run's queue (the answer
        is recorded, the run queued, a ``queued`` result returned); when neither can,
        :class:`NotContinued` names what to run. ``leave``: record and queue even when the
        tasks are here; ``queue``: the queue to leave it on (default: the run's own).

        ``claimed`` (a worker): the run as its claim took it (token, run row, lease), so this
        attempt continues under the claim's token without reading the row or taking the lease
        again (``resume.py``); ``boundary``: called before each unit starts (may raise
        ``StopAtBoundary``: the worker's cancel and shutdown checks).

        ``node`` names the interrupt to answer when several are pending; ``resolver`` and
        ``comment`` are stored with the decision, ``channel`` (an
        :class:`~tether.stores.events.AnswerChannel`; default ``python``) in the run's history.
        Raises :class:`AlreadyResumed` when the run
        finished or another attempt holds it or answered first, :class:`ResumeError` when a
        paused run is resumed without a value (or a value is given to a run that is not
        waiting for one), :class:`ResumeValueError` when the values do not match an
        approval's form, :class:`PlanMismatch` for a different plan. See ``resume.py``.
        """
        from tether.runtime.resume import Resumption

        store = self._store()
        run = claimed.run if claimed is not None else self._run(store, execution_id)
        execution_id = run.execution_id  # (a prefix given: the run's whole id from here on)
        pending = None if claimed is None else [] if claimed.fresh else \
            store.list_pending(execution_id)
        if claimed is None:
            routed = route(self, store, run, Answer(resume, node, resolver, comment, channel),
                           plan=plan, leave=leave, queue=queue)
            if routed is not None:
                return routed
        if resume is None:
            timed_out = due_approval(store, self.plan_for(run, plan), execution_id, pending)
            if timed_out is not None:  # its deadline passed: firing it is the resume
                return await self.afire(timed_out, plan=plan)
        prepared = Resumption(self, store, run, resume, node, plan, resolver, comment,
                              claimed=claimed, pending=pending, channel=channel).prepare()
        if isinstance(prepared, RunResult):
            return prepared
        prepared.attempt.boundary = boundary
        return await self._drive_prepared(execution_id, prepared)

    async def afire(self, pending: PendingInterrupt, *,
                    plan: PlanSource | None = None) -> RunResult:
        """Fire a due timer: claim its pending row with the timer's answer (a sleep's, or an
        approval's ``on_timeout``) and continue the run as a resume does. Exactly one of any
        number of concurrent firers (and of a person answering an approval) claims it; the
        others get :class:`AlreadyResumed`. :class:`TimerNotDue` before its due time."""
        from tether.runtime.resume import Resumption

        store = self._store()
        run = self._run(store, pending.execution_id)
        chosen = self.plan_for(run, plan)
        answer, resolver = fired_answer(chosen, pending, time.time())
        prepared = Resumption(self, store, run, answer, pending.address, plan, resolver,
                              None, fired=True).prepare()
        if isinstance(prepared, RunResult):
            return prepared
        return await self._drive_prepared(pending.execution_id, prepared)

    def record_timer(self, pending: PendingInterrupt, *,
                     plan: PlanSource | None = None) -> PendingInterrupt:
        """Fire a due timer without continuing the run here: claim its pending row with the
        timer's answer, as :meth:`afire` does, and leave the continuation to whoever claims
        the answered run (a worker, under its queue's limits). Raises as :meth:`afire`."""
        from tether.runtime.resume import Resumption

        store = self._store()
        run = self._run(store, pending.execution_id)
        answer, resolver = fired_answer(self.plan_for(run, plan), pending, time.time())
        return Resumption(self, store, run, answer, pending.address, plan, resolver, None,
                          fired=True).record()

    def answer(self, execution_id: str, resume: Resume | Mapping[str, Any], *,
               node: str | None = None, resolver: str | None = None,
               comment: str | None = None, channel: str | None = None) -> PendingInterrupt:
        """Record an answer to a pending interrupt (the atomic claim) without continuing
        the run here: a worker (or ``resume`` elsewhere) continues it. Returns the
        interrupt answered; raises as :meth:`aresume` does for a value."""
        from tether.runtime.resume import Resumption

        store = self._store()
        return Resumption(self, store, self._run(store, execution_id), resume, node, None,
                          resolver, comment, channel=channel).record()

    async def _drive_prepared(self, execution_id: str, prepared: Prepared) -> RunResult:
        record = prepared.run
        info = RunInfo(execution_id, prepared.plan.name, record.created_at.isoformat(),
                       prepared.attempt.number, record.parent_execution_id,
                       record.trigger or UNKNOWN_TRIGGER)
        return await self._drive(execution_id, prepared.plan, prepared.state, prepared.journal,
                                 prepared.attempt, info)

    # -- fork --------------------------------------------------------------------------------
    async def afork(self, execution_id: str, checkpoint_id: str | None = None,
                    state_patch: Mapping[str, Any] | None = None, *,
                    plan: PlanSource | None = None, leave: bool = False) -> RunResult:
        """Start a new run from a checkpoint of another (default: its newest, markers skipped).

        The original run is left untouched. A paused node is run again in the branch (it asks
        again); failed nodes run again. ``state_patch`` is merged into the state first; a
        patch that could not change what the branch does is refused, writing nothing
        (:class:`~tether.errors.IneffectivePatch`, see ``fork_patch.py``). The run's end
        marker is not a checkpoint to fork from (:class:`CheckpointNotFound`). The branch
        belongs to the original's queue. ``leave``: write the branch's origin and leave its
        nodes to the workers of that queue (a ``queued`` result; no task runs here, so none
        need be importable).
        """
        store = self._store()
        run = self._run(store, execution_id)
        execution_id = run.execution_id  # (a prefix given: the run's whole id from here on)
        chosen = self.plan_for(run, plan)
        if not leave:
            check_tasks(chosen, frozenset(self.tasks))
        if checkpoint_id is not None:
            checkpoint_id = store.resolve_checkpoint_id(execution_id, checkpoint_id)
        origin = self._origin(store, execution_id, checkpoint_id)
        state = RunState.from_snapshot(origin.state_snapshot) if origin is not None \
            else RunState.new(copy.deepcopy(run.inputs or {}))
        if state_patch:
            merge_patch(state.data, state_patch)
            problems = RunState(state.data).problems(chosen)
            if problems:
                raise ForkError(execution_id, problems)
        data, _ = to_json(state.data, "the forked state")
        state = RunState(data)
        values, wrong = check_values(chosen.inputs, state.inputs, "input")
        if wrong:
            raise InputError(wrong)
        state.set_inputs(values)
        if chosen.fingerprint != run.plan_fingerprint:
            check_compatible(execution_id, stored_plan(store, run), chosen, state.data)
        state.reopen(chosen, forget_answers=True)
        if state_patch:
            check_patch_effect(chosen, state, state_patch, execution_id=execution_id,
                               origin=origin.checkpoint_id if origin else None)
        branch = new_execution_id()
        attempt = Attempt(store, branch, self.lease_seconds)
        now = utc_now()
        store.create_run(RunRecord(
            execution_id=branch, workflow=chosen.name, plan_fingerprint=chosen.fingerprint,
            status=RunStatus.RUNNING, inputs=values, created_at=now, updated_at=now,
            parent_execution_id=execution_id,
            parent_checkpoint_id=origin.checkpoint_id if origin else None,
            owner=attempt.token, lease_until=attempt.until(), queue=run_queue(run),
            trigger=run.trigger), chosen.to_json())
        journal = Journal(store, branch, state.data, snapshot_every=self.snapshot_every,
                          attempt=attempt)
        journal.put(node_id=origin.node_id if origin else "start",
                    node_index=origin.node_index if origin else -1,
                    step_type=StepType.FORK_ORIGIN, status=CheckpointStatus.COMPLETED,
                    full=True, counters=state.counters,
                    parent_checkpoint_id=origin.checkpoint_id if origin else None)
        record_forked(store, branch, execution_id, origin, state_patch, chosen)
        attempt.reason = "forked"
        if leave:  # released: the first worker of its queue to claim it runs the branch
            attempt.release()
            return RunResult(RunStatus.QUEUED, branch, message=f"forked run {execution_id} "
                             f"as {branch}, left to the workers of queue '{run_queue(run)}'")
        info = RunInfo(branch, chosen.name, now.isoformat(), 1, execution_id,
                       run.trigger or UNKNOWN_TRIGGER)
        return await self._drive(branch, chosen, state, journal, attempt, info)

    @staticmethod
    def _origin(store: Checkpointer, execution_id: str,
                checkpoint_id: str | None) -> Checkpoint | None:
        if checkpoint_id is None:
            return store.latest_forkable(execution_id)
        origin = store.get(execution_id, checkpoint_id)
        if origin is None:
            raise CheckpointNotFound(execution_id, checkpoint_id)
        if origin.node_id == RUN_END or origin.step_type == StepType.RUN_END:
            raise CheckpointNotFound(
                execution_id, checkpoint_id, "is the run's end marker, not a point to fork "
                "from; fork from the checkpoint before it (omit --checkpoint for the newest)")
        return origin

    # -- driving -----------------------------------------------------------------------------
    async def _drive(self, execution_id: str, plan: Plan, state: RunState,
                     journal: Journal | None, attempt: Attempt,
                     info: RunInfo | None = None) -> RunResult:
        from tether.runtime.driver import Driver

        driver = Driver(execution_id, plan, state, journal, attempt, self.tasks,
                        self.max_concurrency, self.on_event, self.template_budget, info,
                        self.inline_bodies)
        driver.session.park_timers = self.park_timers
        driver.session.max_value_bytes = self.max_value_bytes
        return await driver.drive()

    # -- helpers -----------------------------------------------------------------------------
    def _store(self) -> Checkpointer:
        if self.checkpointer is None:
            raise TetherError("resume and fork need a checkpointer")
        return self.checkpointer

    @staticmethod
    def _run(store: Checkpointer, execution_id: str) -> RunRecord:
        """The run ``execution_id`` names, in full or by a unique prefix of 8 or more
        characters (``stores/idprefix.py``; an exact id is one lookup, as before)."""
        # PostgreSQL cannot even look up an id holding a NUL; no store holds one (see arun)
        run = store.get_run(execution_id) if "\x00" not in execution_id else None
        if run is None:
            run = store.get_run(store.resolve_execution_id(execution_id))
        if run is None:
            raise RunNotFound(execution_id)
        return run

    def plan_for(self, run: RunRecord, explicit: PlanSource | None) -> Plan:
        """The plan to continue ``run`` with: the one asked for, else the stored one (which a
        Runner made for another plan refuses)."""
        stored = stored_plan(self._store(), run)
        if explicit is not None:
            return load_plan(explicit)
        if self.plan is not None:
            check_same_plan(run.execution_id, stored, self.plan)
        return stored


