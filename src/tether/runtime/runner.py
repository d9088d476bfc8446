"""The Runner: start, resume and fork runs of a plan against a checkpointer.

Resume follows the decision table of the design (``docs/runtime.md``):

======================  ==============  ===============================================
latest checkpoint       caller passes   result
======================  ==============  ===============================================
run finished            anything        ``AlreadyResumed``, nothing written
interrupted             ``Resume``      claim the pending row (atomic); re-run the node
interrupted             nothing         ``ResumeError``, nothing changed
completed / failed      nothing         continue with the nodes not yet committed
======================  ==============  ===============================================

Ownership of a running run is a lease in the store: a resumer that finds a live owner gets
``AlreadyResumed``; one that finds a dead owner (or an expired lease) takes the run over.
"""

from __future__ import annotations

import asyncio
import atexit
import copy
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tether.compiler.plan import Plan
from tether.errors import (
    AlreadyResumed,
    CheckpointNotFound,
    InputError,
    InterruptSignal,
    ResumeError,
    ResumeValueError,
    RunNotFound,
    TaskError,
    TetherError,
)
from tether.runtime.context import RUN, Resume, RunContext
from tether.runtime.execution import Event, Execution, RunFailure, Session
from tether.runtime.idempotent import forget_locks
from tether.runtime.ids import new_execution_id
from tether.runtime.invoke import check_values, error_info
from tether.runtime.journal import SNAPSHOT_EVERY, Journal
from tether.runtime.lease import LeaseKeeper, held_by_other, take_over
from tether.runtime.pinning import check_compatible, check_same_plan
from tether.runtime.registry import resolve_tasks
from tether.runtime.state import (
    FAILED,
    INTERRUPTED,
    StatePath,
    ensure_unit,
    get_path,
    locate_unit,
    new_state,
    reopen,
)
from tether.runtime.values import dumps, to_json
from tether.stores.base import Checkpointer
from tether.stores.leases import current_owner
from tether.stores.records import RUN_END, Checkpoint, PendingInterrupt, RunRecord, utc

RunStatusName = Literal["completed", "paused", "failed"]


@dataclass(frozen=True)
class RunResult:
    """The outcome of ``run``, ``resume`` or ``fork``."""

    status: RunStatusName
    execution_id: str
    output: Any = None
    state: dict[str, Any] = field(default_factory=dict)
    pending_interrupt: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


PlanSource = Plan | str | os.PathLike[str]


def load_plan(source: PlanSource) -> Plan:
    """A Plan from a Plan, a plan JSON file, or a workflow file (compiled)."""
    if isinstance(source, Plan):
        return source
    path = Path(source)
    if path.suffix.lower() == ".json":
        try:
            return Plan.from_json(path.read_bytes())
        except OSError as exc:
            raise TetherError(f"cannot read plan {path}: {exc.strerror}") from None
    from tether.compiler import compile as compile_workflow

    return compile_workflow(path)


_PLANS: dict[str, Plan] = {}  # plans by fingerprint: a fingerprint names one plan for good
_LOOPS = threading.local()
SYNC_TASK_THREADS = 32


def _remember_plan(plan: Plan) -> None:
    if len(_PLANS) >= 256:
        _PLANS.pop(next(iter(_PLANS)))
    _PLANS[plan.fingerprint] = plan


def _event_loop_runner() -> asyncio.Runner:
    """This thread's event loop, kept between calls of the sync API (a new loop per call
    would also start a new thread pool for sync tasks every time)."""
    runner: asyncio.Runner | None = getattr(_LOOPS, "runner", None)
    if runner is None:
        runner = asyncio.Runner()
        _new_executor(runner.get_loop())
        _LOOPS.runner = runner
        if threading.current_thread() is threading.main_thread():
            atexit.register(runner.close)
    return runner


def _new_executor(loop: asyncio.AbstractEventLoop) -> None:
    loop.set_default_executor(
        ThreadPoolExecutor(SYNC_TASK_THREADS, thread_name_prefix="tether-task"))


def _abandon(loop: asyncio.AbstractEventLoop) -> None:
    """After a call ended by an exception: cancel what is left of it, and wait for the sync
    task bodies still running in threads, so nothing of that call runs on afterwards."""
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    executor = getattr(loop, "_default_executor", None)
    if isinstance(executor, ThreadPoolExecutor):
        executor.shutdown(wait=True)
        _new_executor(loop)


def _sync(coroutine: Coroutine[Any, Any, RunResult]) -> RunResult:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        runner = _event_loop_runner()
        try:
            return runner.run(coroutine)
        except BaseException:
            _abandon(runner.get_loop())
            raise
    coroutine.close()
    raise TetherError("the sync API cannot be called from a running event loop; "
                      "await arun/aresume/afork instead")


def _answer(resume: Resume | Mapping[str, Any]) -> dict[str, Any]:
    values = dict(resume)
    value, _ = to_json(values, "the resume values")
    return dict(value)


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


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
        lease_seconds: how long a crashed worker on another host holds a run.
        on_event: called with an :class:`Event` as units start and finish.
    """

    def __init__(self, plan_or_path: PlanSource | None = None,
                 checkpointer: Checkpointer | None = None,
                 tasks: Mapping[str, Callable[..., Any]] | Iterable[str] | None = None, *,
                 max_concurrency: int = 16, lease_seconds: float = 30.0,
                 snapshot_every: int = SNAPSHOT_EVERY,
                 on_event: Callable[[Event], None] | None = None) -> None:
        self.plan = load_plan(plan_or_path) if plan_or_path is not None else None
        if self.plan is not None:
            _remember_plan(self.plan)
        self.checkpointer = checkpointer
        self.tasks = resolve_tasks(tasks)
        self.max_concurrency = max(1, max_concurrency)
        self.lease_seconds = lease_seconds
        self.snapshot_every = snapshot_every
        self.on_event = on_event

    # -- sync twins --------------------------------------------------------------------------
    def run(self, inputs: Mapping[str, Any] | None = None,
            execution_id: str | None = None) -> RunResult:
        """Start a run and drive it until it completes, pauses or fails."""
        return _sync(self.arun(inputs, execution_id))

    def resume(self, execution_id: str, resume: Resume | Mapping[str, Any] | None = None, *,
               plan: PlanSource | None = None) -> RunResult:
        """Resume a paused or interrupted run (see :meth:`aresume`)."""
        return _sync(self.aresume(execution_id, resume, plan=plan))

    def fork(self, execution_id: str, checkpoint_id: str | None = None,
             state_patch: Mapping[str, Any] | None = None, *,
             plan: PlanSource | None = None) -> RunResult:
        """Branch a new run from a checkpoint (see :meth:`afork`)."""
        return _sync(self.afork(execution_id, checkpoint_id, state_patch, plan=plan))

    # -- start -------------------------------------------------------------------------------
    async def arun(self, inputs: Mapping[str, Any] | None = None,
                   execution_id: str | None = None) -> RunResult:
        """Start a run of the Runner's plan with ``inputs``."""
        if self.plan is None:
            raise TetherError("this Runner has no plan: pass a plan or workflow file to start runs")
        plan = self.plan
        self._check_tasks(plan)
        values, problems = check_values(plan.inputs, dict(inputs or {}), "input")
        if problems:
            raise InputError(problems)
        values, _ = to_json(values, "the run's inputs")
        if execution_id and not _storable_id(execution_id):
            raise TetherError(f"the execution id {execution_id!r} cannot be stored: it must "
                              f"have at most {MAX_ID} characters and no NUL character")
        execution_id = execution_id or new_execution_id()
        state = new_state(values)
        store, owner, journal = self.checkpointer, current_owner(), None
        if store is not None:
            now = time.time()
            store.create_run(RunRecord(
                execution_id=execution_id, workflow=plan.name, plan_fingerprint=plan.fingerprint,
                status="running", inputs=values, created_at=utc(now), updated_at=utc(now),
                owner=owner, lease_until=now + self.lease_seconds), plan.to_json())
            journal = Journal(store, execution_id, state, snapshot_every=self.snapshot_every)
        return await self._drive(execution_id, plan, state, journal, owner)

    # -- resume ------------------------------------------------------------------------------
    async def aresume(self, execution_id: str,
                      resume: Resume | Mapping[str, Any] | None = None, *,
                      plan: PlanSource | None = None) -> RunResult:
        """Continue a run: answer its pending interrupt, or recover it after a crash.

        Raises :class:`AlreadyResumed` when the run finished or another resumer holds it,
        :class:`ResumeError` when an interrupted run is resumed without a value (or a value is
        given to a run that is not waiting for one; see :meth:`_check_value`),
        :class:`ResumeValueError` when the values do not match an approval's form,
        :class:`PlanMismatch` for a different plan.
        """
        store = self._store()
        run = self._run(store, execution_id)
        last, checkpoint = store.resume_point(execution_id, run.inputs)
        if last is not None and last.node_id == RUN_END and last.status == "completed":
            raise AlreadyResumed(execution_id)
        chosen = self._plan_for(run, plan)
        self._check_tasks(chosen)
        state = self._state_of(run, checkpoint)
        if chosen.fingerprint != run.plan_fingerprint:
            check_compatible(execution_id, self._stored_plan(run), chosen, state)
        owner = current_owner()
        if checkpoint is not None and checkpoint.status == INTERRUPTED:
            answer = self._claim(store, run, checkpoint, chosen, state, resume, owner)
            self._answer(chosen, state, checkpoint, answer)
        else:
            if resume is not None and not self._reanswer(store, run, chosen, state, resume,
                                                         owner):
                self._check_value(store, run, checkpoint, resume, owner)
            self._own(store, run, owner)
        if chosen.fingerprint != run.plan_fingerprint:
            store.set_run_plan(execution_id, chosen.fingerprint, chosen.to_json())
        journal = Journal(store, execution_id, state, snapshot_every=self.snapshot_every,
                          last_id=last.checkpoint_id if last else None)
        for path in reopen(chosen, state, forget_answers=False):
            journal.mark(path)
        return await self._drive(execution_id, chosen, state, journal, owner)

    def _check_value(self, store: Checkpointer, run: RunRecord, checkpoint: Checkpoint | None,
                     resume: Resume | Mapping[str, Any], owner: str) -> None:
        """A value for a run that is not paused (any more). The answer its interrupt was
        claimed with, given again (a retry after the claimer died), recovers the run; a run
        another process holds, or one that finished meanwhile, is :class:`AlreadyResumed`
        (a concurrent resumer lost); anything else is a :class:`ResumeError`."""
        execution_id = run.execution_id
        fresh = store.get_run(execution_id) or run
        decision = fresh.decision
        if isinstance(decision, dict) and decision.get("value") == _answer(resume):
            return
        if held_by_other(fresh, owner, time.time()):
            raise AlreadyResumed(execution_id, f"it is being executed by {fresh.owner}")
        if store.finished(execution_id):
            raise AlreadyResumed(execution_id)
        where = f"node '{checkpoint.node_id}'" if checkpoint else "its start"
        raise ResumeError(execution_id, f"it is not waiting for input (it stopped after "
                          f"{where}); resume it without a value")

    def _reanswer(self, store: Checkpointer, run: RunRecord, plan: Plan, state: dict[str, Any],
                  resume: Resume | Mapping[str, Any], owner: str) -> bool:
        """A new value for a claimed interrupt whose node failed after ``interrupt()`` returned
        (so it never committed): take the run and replace that answer and the stored decision.
        False when the run has no such answer."""
        decision = (store.get_run(run.execution_id) or run).decision
        asked = store.get(run.execution_id, str(decision.get("checkpoint_id"))) \
            if isinstance(decision, dict) else None
        if asked is None or asked.status != INTERRUPTED:
            return False
        try:
            _, path = locate_unit(plan, state, asked.agent_path, asked.node_id)
            unit = get_path(state, path)
        except (KeyError, TypeError):
            return False
        if not isinstance(unit, dict) or unit.get("status") != FAILED or not unit.get("answers"):
            return False
        answer = _answer(resume)
        self._validate_answer(run.execution_id, plan, asked, answer)
        self._own(store, run, owner)
        unit["answers"][-1] = answer
        store.set_decision(run.execution_id, {"checkpoint_id": asked.checkpoint_id,
                                              "value": answer})
        return True

    def _claim(self, store: Checkpointer, run: RunRecord, checkpoint: Checkpoint, plan: Plan,
               state: dict[str, Any], resume: Resume | Mapping[str, Any] | None,
               owner: str) -> dict[str, Any]:
        """Take the right to answer the interrupt; return the answer to give the node."""
        execution_id = run.execution_id
        pending = store.get_pending(execution_id)
        if resume is None:
            if pending is not None:
                raise ResumeError(
                    execution_id, f"it is paused at node '{checkpoint.node_id}' waiting for "
                    f"input ({checkpoint.interrupt_reason}); resume it with Resume(...)",
                    node_id=checkpoint.node_id)
            self._own(store, run, owner)
            return self._stored_answer(store, execution_id, checkpoint)
        answer = _answer(resume)
        self._validate_answer(execution_id, plan, checkpoint, answer)
        decision = {"checkpoint_id": checkpoint.checkpoint_id, "value": answer}
        if pending is not None:
            claimed = store.delete_pending_interrupt_atomic(
                execution_id, owner=owner, until=time.time() + self.lease_seconds,
                decision=decision)
            if claimed is None:
                raise AlreadyResumed(execution_id, "another resumer answered it first")
            return answer
        self._own(store, run, owner)  # claimed earlier by a resumer that then died
        self._stored_answer(store, execution_id, checkpoint)
        store.set_decision(execution_id, decision)
        return answer

    def _stored_answer(self, store: Checkpointer, execution_id: str,
                       checkpoint: Checkpoint) -> dict[str, Any]:
        run = store.get_run(execution_id)
        decision = run.decision if run is not None else None
        if not isinstance(decision, dict) or decision.get("checkpoint_id") != \
                checkpoint.checkpoint_id:
            store.release(execution_id, current_owner())
            raise AlreadyResumed(execution_id, "its interrupt was answered and the run moved on")
        return dict(decision["value"])

    def _own(self, store: Checkpointer, run: RunRecord, owner: str) -> None:
        if not take_over(store, run, owner, self.lease_seconds):
            fresh = store.get_run(run.execution_id)
            holder = fresh.owner if fresh is not None else run.owner
            raise AlreadyResumed(run.execution_id, f"it is being executed by {holder}")
        if store.finished(run.execution_id):
            store.release(run.execution_id, owner)
            raise AlreadyResumed(run.execution_id)

    def _validate_answer(self, execution_id: str, plan: Plan, checkpoint: Checkpoint,
                         answer: dict[str, Any]) -> None:
        level, _ = locate_unit(plan, {"nodes": {}}, checkpoint.agent_path, checkpoint.node_id)
        node = level.node(checkpoint.node_id.partition("/item:")[0])
        if node.approval is not None and node.approval.form is not None:
            _, problems = check_values(node.approval.form, answer, "field")
            if problems:
                raise ResumeValueError(execution_id, node.id, problems)

    def _answer(self, plan: Plan, state: dict[str, Any], checkpoint: Checkpoint,
                answer: dict[str, Any]) -> None:
        _, path = locate_unit(plan, state, checkpoint.agent_path, checkpoint.node_id)
        unit = ensure_unit(state, path)
        unit.setdefault("answers", []).append(answer)

    # -- fork --------------------------------------------------------------------------------
    async def afork(self, execution_id: str, checkpoint_id: str | None = None,
                    state_patch: Mapping[str, Any] | None = None, *,
                    plan: PlanSource | None = None) -> RunResult:
        """Start a new run from a checkpoint of another (default: its newest, markers skipped).

        The original run is left untouched. A paused node is run again in the branch (it asks
        again); failed nodes run again. ``state_patch`` is merged into the state first.
        """
        store = self._store()
        run = self._run(store, execution_id)
        chosen = self._plan_for(run, plan)
        self._check_tasks(chosen)
        if checkpoint_id is not None:
            origin = store.get(execution_id, checkpoint_id)
            if origin is None:
                raise CheckpointNotFound(execution_id, checkpoint_id)
        else:
            origin = store.latest_forkable(execution_id)
        state = self._state_of(run, origin)
        if state_patch:
            _merge(state, state_patch)
        state, _ = to_json(state, "the forked state")
        values, problems = check_values(chosen.inputs, state.get("inputs") or {}, "input")
        if problems:
            raise InputError(problems)
        state["inputs"] = values
        if chosen.fingerprint != run.plan_fingerprint:
            check_compatible(execution_id, self._stored_plan(run), chosen, state)
        reopen(chosen, state, forget_answers=True)
        branch, owner, now = new_execution_id(), current_owner(), time.time()
        store.create_run(RunRecord(
            execution_id=branch, workflow=chosen.name, plan_fingerprint=chosen.fingerprint,
            status="running", inputs=values, created_at=utc(now), updated_at=utc(now),
            parent_execution_id=execution_id,
            parent_checkpoint_id=origin.checkpoint_id if origin else None,
            owner=owner, lease_until=now + self.lease_seconds), chosen.to_json())
        journal = Journal(store, branch, state, snapshot_every=self.snapshot_every)
        journal.put(node_id=origin.node_id if origin else "start",
                    node_index=origin.node_index if origin else -1,
                    step_type="fork_origin", status="completed", full=True,
                    counters=state.get("counters"),
                    parent_checkpoint_id=origin.checkpoint_id if origin else None)
        return await self._drive(branch, chosen, state, journal, owner)

    # -- driving a run -----------------------------------------------------------------------
    async def _drive(self, execution_id: str, plan: Plan, state: dict[str, Any],
                     journal: Journal | None, owner: str) -> RunResult:
        store = self.checkpointer
        session = Session(execution_id, journal, self.tasks,
                          asyncio.Semaphore(self.max_concurrency), self.max_concurrency,
                          RunContext(execution_id, store), self.on_event)
        token = RUN.set(session.run)
        keeper = LeaseKeeper(store, execution_id, owner, self.lease_seconds) if store else None
        try:
            if keeper is not None:
                keeper.__enter__()
            try:
                output = await Execution(session, plan, state).run()
            except InterruptSignal as signal:
                if journal is None:
                    raise
                return self._pause(plan, state, journal, signal, owner)
            except RunFailure as failure:
                return self._end(plan, state, journal, "failed", None, failure.error, owner)
            except TetherError:
                raise
            except Exception as exc:  # a failure outside any node: record it, never hide it
                error = error_info(exc, None)
                return self._end(plan, state, journal, "failed", None, error, owner)
            return self._end(plan, state, journal, "completed", output, None, owner)
        finally:
            if keeper is not None:
                keeper.__exit__()
            RUN.reset(token)
            forget_locks(execution_id)

    def _pause(self, plan: Plan, state: dict[str, Any], journal: Journal,
               signal: InterruptSignal, owner: str) -> RunResult:
        address = signal.node_id or ""
        level, path = locate_unit(plan, state, signal.agent_path, address)
        counters = _level_state(state, path).get("counters", {})
        context_json = dumps(signal.context)
        row = journal.row(node_id=address, node_index=level.node(address.partition("/item:")[0])
                          .index, step_type="hitl_pause", status=INTERRUPTED,
                          agent_path=signal.agent_path, counters=counters, full=True,
                          reason=signal.reason, context_json=context_json)
        pending = PendingInterrupt(journal.execution_id, row.checkpoint_id, address,
                                   signal.agent_path, signal.reason, signal.context,
                                   utc(row.created_at))
        try:
            journal.store.record_interrupt(row, pending, owner)
        except BaseException:
            journal.undo()
            raise
        return RunResult("paused", journal.execution_id, None, state, pending.as_dict())

    def _end(self, plan: Plan, state: dict[str, Any], journal: Journal | None, status: str,
             output: Any, error: dict[str, Any] | None, owner: str) -> RunResult:
        if journal is not None:
            payload = dumps(error if status == "failed" else output)
            row = journal.row(node_id=RUN_END, node_index=len(plan.nodes), step_type=RUN_END,
                              status=status, counters=state.get("counters"),
                              node_output_json=payload)
            try:
                journal.store.finish_run(row, status, error, owner)
            except BaseException:
                journal.undo()
                raise
        result_status: RunStatusName = "completed" if status == "completed" else "failed"
        execution_id = journal.execution_id if journal else ""
        return RunResult(result_status, execution_id or _current_id(), output, state, None,
                         error)

    # -- helpers -----------------------------------------------------------------------------
    def _store(self) -> Checkpointer:
        if self.checkpointer is None:
            raise TetherError("resume and fork need a checkpointer")
        return self.checkpointer

    @staticmethod
    def _run(store: Checkpointer, execution_id: str) -> RunRecord:
        # PostgreSQL cannot even look up an id holding a NUL; no store holds one (see arun)
        run = store.get_run(execution_id) if "\x00" not in execution_id else None
        if run is None:
            raise RunNotFound(execution_id)
        return run

    def _stored_plan(self, run: RunRecord) -> Plan:
        """The plan a run was started with (parsed once per process and fingerprint)."""
        fingerprint = run.plan_fingerprint
        plan = _PLANS.get(fingerprint)
        if plan is None:
            text = self._store().get_plan(fingerprint)
            if text is None:
                raise TetherError(f"run {run.execution_id}: its plan {fingerprint[:12]} is "
                                  "missing from the store")
            plan = Plan.from_json(text)
            _remember_plan(plan)
        return plan

    def _plan_for(self, run: RunRecord, explicit: PlanSource | None) -> Plan:
        stored = self._stored_plan(run)
        if explicit is not None:
            return load_plan(explicit)
        if self.plan is not None:
            check_same_plan(run.execution_id, stored, self.plan)
        return stored

    @staticmethod
    def _state_of(run: RunRecord, checkpoint: Checkpoint | None) -> dict[str, Any]:
        if checkpoint is None:
            return new_state(copy.deepcopy(run.inputs or {}))
        state = copy.deepcopy(checkpoint.state_snapshot)
        state.setdefault("nodes", {})
        state.setdefault("counters", {})
        return state

    def _check_tasks(self, plan: Plan) -> None:
        missing = sorted(_task_names(plan) - set(self.tasks))
        if missing:
            raise TaskError("the plan calls tasks that are not registered: "
                            + ", ".join(missing) + " (import the modules that define them: "
                            "--tasks MODULE or [tool.tether] tasks in pyproject.toml on the "
                            "command line, tasks= for a Runner)", task=missing[0])


MAX_ID = 200  # the execution id columns of the stores (schema.py) hold at most this


def _storable_id(execution_id: str) -> bool:
    """Whether every store can hold ``execution_id`` (PostgreSQL refuses NUL and longer ids;
    SQLite and memory would take them, so the runner refuses them the same everywhere)."""
    return 0 < len(execution_id) <= MAX_ID and "\x00" not in execution_id


def _task_names(plan: Plan) -> set[str]:
    names = {n.task for n in plan.nodes if n.task}
    for node in plan.nodes:
        if node.workflow is not None:
            names |= _task_names(node.workflow.plan)
    return names


def _level_state(state: dict[str, Any], unit: StatePath) -> dict[str, Any]:
    """The state of the (sub-)run that holds the unit at ``unit``."""
    level = state
    path = list(unit)
    while "sub" in path:
        cut = path.index("sub")
        for key in path[: cut + 1]:
            level = level[key]
        path = path[cut + 1:]
    return level


def _current_id() -> str:
    run = RUN.get()
    return run.execution_id if run else ""
