"""Executing one plan level: scheduling, trigger rules, guards, loops, for_each, sub-runs.

The scheduler follows graphlib's protocol (``take`` the ready nodes, report them ``finished``)
over the plan's ``waits_for`` edges. Nodes run concurrently as asyncio tasks; sync task bodies
run in worker threads, bounded by the session's semaphore. When a unit suspends, no new unit
starts anywhere in the run; the in-flight ones finish and checkpoint; then the suspension is
raised to the caller. A failed node does not stop independent branches: its dependents follow
their trigger rule, and the run fails once nothing more can run.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tether.compiler.plan import Plan, PlanNode
from tether.errors import InterruptSignal, NotJSONError
from tether.runtime.context import UNIT, RunContext, UnitScope, interrupt
from tether.runtime.invoke import NodeFailure, call_task, check_values
from tether.runtime.journal import Journal
from tether.runtime.render import RenderError, namespace, render, truthy
from tether.runtime.state import (
    COMPLETED,
    FAILED,
    FINISHED,
    INTERRUPTED,
    NOT_OK,
    PENDING,
    RUNNING,
    SKIPPED,
    UPSTREAM_FAILED,
    StatePath,
    first_failure,
    new_state,
    status_of,
)
from tether.runtime.values import dumps, to_json


class RunFailure(Exception):
    """A (sub-)run ended with failed nodes, or its output could not be produced."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error
        super().__init__(error.get("message", "the run failed"))


class Stopped(Exception):
    """A level stopped early because another branch suspended; it is not finished."""


@dataclass(frozen=True)
class Event:
    """Progress of a run, for live displays: a unit ``started`` or ``finished``."""

    kind: str
    execution_id: str
    node_id: str
    agent_path: str
    status: str = ""
    seconds: float = 0.0


@dataclass
class Session:
    """What every level of one execution shares."""

    execution_id: str
    journal: Journal | None
    tasks: Mapping[str, Callable[..., Any]]
    semaphore: asyncio.Semaphore
    max_concurrency: int
    run: RunContext
    listener: Callable[[Event], None] | None = None
    stopping: bool = False

    def emit(self, event: Event) -> None:
        if self.listener is not None:
            self.listener(event)


class Readiness:
    """Which nodes of a level can start: a counter of unfinished dependencies per node.

    Nodes handed out by :meth:`take` stay *started* until reported :meth:`finished` (or
    :meth:`restart`-ed), so a rebuild while they are in flight never hands them out twice.
    """

    def __init__(self, plan: Plan, state: dict[str, Any]) -> None:
        self.plan = plan
        self.state = state
        self.started: set[str] = set()
        self.rebuild()

    def rebuild(self) -> None:
        self.count: dict[str, int] = {}
        self.heap: list[tuple[int, str]] = []
        for node in self.plan.nodes:
            if node.id in self.started or status_of(self.state, node.id) in FINISHED:
                continue
            waiting = sum(1 for d in node.waits_for if status_of(self.state, d) not in FINISHED)
            self.count[node.id] = waiting
            if waiting == 0:
                heapq.heappush(self.heap, (node.index, node.id))

    def take(self) -> PlanNode | None:
        """The next node ready to start, in plan order, or None."""
        while self.heap:
            _, node_id = heapq.heappop(self.heap)
            if self.count.pop(node_id, None) is not None:
                self.started.add(node_id)
                return self.plan.node(node_id)
        return None

    def restart(self, node_id: str) -> None:
        """``node_id`` closed its loop: the loop's nodes are pending again; recount."""
        self.started.discard(node_id)
        self.rebuild()

    def finished(self, node_id: str) -> None:
        self.started.discard(node_id)
        for dependent in self.plan.dependents[node_id]:
            if dependent in self.count:
                self.count[dependent] -= 1
                if self.count[dependent] == 0:
                    heapq.heappush(self.heap, (self.plan.node(dependent).index, dependent))


class Execution:
    """One level of a run: the top-level plan, or a sub-workflow's plan inside a node."""

    def __init__(self, session: Session, plan: Plan, state: dict[str, Any],
                 prefix: StatePath = (), agent_path: str = "") -> None:
        self.session = session
        self.plan = plan
        self.state = state
        self.prefix = prefix
        self.agent_path = agent_path

    # -- scheduling --------------------------------------------------------------------------
    async def run(self) -> Any:
        """Run every runnable node; return the output, or raise a suspension or failure."""
        ready = Readiness(self.plan, self.state)
        flight: dict[asyncio.Task[Any], tuple[PlanNode, float]] = {}
        suspended: InterruptSignal | None = None
        try:
            while True:
                while not self.session.stopping and (node := ready.take()) is not None:
                    self._start(node, ready, flight)
                if not flight:
                    break
                done, _ = await asyncio.wait(flight, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=lambda t: flight[t][0].index):
                    node, started = flight.pop(task)
                    suspended = self._finish(node, task, started, ready, suspended)
        except BaseException:
            for task in flight:
                task.cancel()
            raise
        if suspended is not None:
            raise suspended
        if any(status_of(self.state, n.id) not in FINISHED for n in self.plan.nodes):
            raise Stopped()
        failure = first_failure(self.plan, self.state)
        if failure is not None:
            raise RunFailure(failure)
        return self._output()

    def _start(self, node: PlanNode, ready: Readiness,
               flight: dict[asyncio.Task[Any], tuple[PlanNode, float]]) -> None:
        try:
            decision = self._decide(node)
        except RenderError as exc:
            self._fail(node, {"type": "TemplateError", "message": str(exc), "node_id": node.id})
            ready.finished(node.id)
            return
        if decision != RUNNING:
            self._set(node.id, {"status": decision, "output": None})
            ready.finished(node.id)
            return
        self.session.emit(Event("started", self.session.execution_id, node.id, self.agent_path))
        flight[asyncio.create_task(self._execute(node))] = (node, time.perf_counter())

    def _decide(self, node: PlanNode) -> str:
        """``running``, ``skipped`` or ``upstream_failed``: trigger rule, then guard."""
        statuses = [status_of(self.state, n) for n in node.needs]
        if statuses and node.trigger != "all_done":
            ok = [s == COMPLETED for s in statuses]
            if not (all(ok) if node.trigger == "all_success" else any(ok)):
                return UPSTREAM_FAILED if any(s in NOT_OK for s in statuses) else SKIPPED
        if node.when is not None and not truthy(node.when, self._names(node), "when"):
            return SKIPPED
        return RUNNING

    def _finish(self, node: PlanNode, task: asyncio.Task[Any], started: float,
                ready: Readiness, suspended: InterruptSignal | None) -> InterruptSignal | None:
        exc = task.exception()
        seconds = time.perf_counter() - started
        if isinstance(exc, InterruptSignal):
            if suspended is None:
                self.session.stopping = True
                self._entry(node.id)["status"] = INTERRUPTED
                self._mark(("nodes", node.id))
                self._emit_finished(node, INTERRUPTED, seconds)
                return exc
            return suspended  # a sibling suspended meanwhile: treated as not run
        if isinstance(exc, Stopped):
            return suspended
        if isinstance(exc, NodeFailure | RunFailure):
            self._fail(node, exc.error if isinstance(exc, NodeFailure)
                       else _wrap_child_error(node, exc.error))
        elif exc is not None:
            raise exc
        else:
            output, text, node_input = task.result()
            if self._complete(node, output, text, node_input):
                ready.restart(node.id)
                self._emit_finished(node, COMPLETED, seconds)
                return suspended
        self._emit_finished(node, status_of(self.state, node.id), seconds)
        ready.finished(node.id)
        return suspended

    def _emit_finished(self, node: PlanNode, status: str, seconds: float) -> None:
        self.session.emit(Event("finished", self.session.execution_id, node.id,
                                self.agent_path, status, seconds))

    # -- state and checkpoints ---------------------------------------------------------------
    def _entry(self, node_id: str) -> dict[str, Any]:
        entry: dict[str, Any] = self.state["nodes"].setdefault(node_id, {})
        return entry

    def _set(self, node_id: str, entry: dict[str, Any], text: str | None = None) -> None:
        """Replace a node's entry; ``text`` is its JSON when already known (the hot path)."""
        self.state["nodes"][node_id] = entry
        self._mark(("nodes", node_id), text)

    def _mark(self, path: StatePath, text: str | None = None) -> None:
        if self.session.journal is not None:
            self.session.journal.mark((*self.prefix, *path), text)

    def _checkpoint(self, address: str, node: PlanNode, status: str, output_json: str | None,
                    node_input: Any = None) -> None:
        journal = self.session.journal
        if journal is None:
            return
        journal.put(node_id=address, node_index=node.index, step_type="node", status=status,
                    agent_path=self.agent_path, counters=self.state["counters"],
                    node_input=node_input, node_output_json=output_json)

    def _fail(self, node: PlanNode, error: dict[str, Any]) -> None:
        entry = dict(self.state["nodes"].get(node.id) or {})
        entry.update(status=FAILED, error=error)  # answers stay: resume re-uses them
        self._set(node.id, entry)
        self._checkpoint(node.id, node, FAILED, dumps(error))

    def _complete(self, node: PlanNode, output: Any, text: str, node_input: Any) -> bool:
        """Record a completed node; return True if it restarted its loop."""
        self._set(node.id, {"status": COMPLETED, "output": output},
                  '{"status":"completed","output":' + text + "}")
        restarted = False
        if node.loop is not None:
            try:
                restarted = self._close_loop(node)
            except RenderError as exc:
                error = {"type": "TemplateError", "message": str(exc), "node_id": node.id}
                entry = {"status": FAILED, "output": output, "error": error}
                self._set(node.id, entry)
                self._checkpoint(node.id, node, FAILED, dumps(error), node_input)
                return False
        status = status_of(self.state, node.id)
        if status == FAILED:
            self._checkpoint(node.id, node, FAILED, dumps(self.state["nodes"][node.id]["error"]),
                             node_input)
        else:
            self._checkpoint(node.id, node, COMPLETED, text, node_input)
        return restarted

    def _close_loop(self, node: PlanNode) -> bool:
        loop = node.loop
        assert loop is not None
        counters = self.state["counters"]
        current = int(counters.get(node.id, 1))
        names = self._names(node, iteration=current)
        if not truthy(loop.while_, names, "loop.while"):
            return False
        if current >= loop.max_iterations:
            if loop.on_exhausted == "fail":
                message = (f"the loop closed by '{node.id}' ran {loop.max_iterations} times "
                           "and its condition still holds")
                entry = dict(self.state["nodes"][node.id])
                entry.update(status=FAILED, error={"type": "LoopExhausted", "message": message,
                                                   "node_id": node.id})
                self._set(node.id, entry)
            return False
        counters[node.id] = current + 1
        self._mark(("counters", node.id))
        for member in loop.body:
            previous = self.state["nodes"].get(member) or {}
            self._set(member, {"status": PENDING, "output": previous.get("output")})
            inner = self.plan.node(member)
            if member != node.id and inner.loop is not None and member in counters:
                counters[member] = 1
                self._mark(("counters", member))
        return True

    def _names(self, node: PlanNode, *, item: Any = None, has_item: bool = False,
               iteration: int | None = None) -> dict[str, Any]:
        if iteration is None and node.loops:
            iteration = int(self.state["counters"].get(node.loops[0], 1))
        return namespace(self.plan, self.state, item=item, has_item=has_item,
                         iteration=iteration)

    def _output(self) -> Any:
        if self.plan.output is None:
            return None
        names = namespace(self.plan, self.state)
        try:
            value = render(self.plan.output, names, "output")
            output, _ = to_json(value, "the workflow's output")
        except (RenderError, NotJSONError) as exc:
            raise RunFailure({"type": type(exc).__name__, "message": str(exc),
                              "node_id": None}) from None
        return output

    # -- units -------------------------------------------------------------------------------
    async def _execute(self, node: PlanNode) -> tuple[Any, str, Any]:
        if node.for_each is not None:
            return await self._for_each(node)
        return await self._unit(node, ("nodes", node.id), node.id)

    async def _unit(self, node: PlanNode, path: StatePath, address: str, *,
                    item: Any = None, has_item: bool = False) -> tuple[Any, str, Any]:
        """Run one unit (a node, or one element of a for_each) to its output."""
        entry = self._lookup(path)
        names = self._names(node, item=item, has_item=has_item)
        try:
            if node.kind == "task":
                return await self._task(node, names, entry, address)
            if node.kind == "approval":
                return self._approval(node, names, entry, address)
            return await self._subworkflow(node, names, path, item is not None or has_item)
        except RenderError as exc:
            raise NodeFailure({"type": "TemplateError", "message": str(exc),
                               "node_id": node.id}) from None
        except NotJSONError as exc:
            raise NodeFailure({"type": "NotJSONError", "message": str(exc),
                               "node_id": node.id}) from None

    def _lookup(self, path: StatePath) -> dict[str, Any]:
        value: Any = self.state
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
            if value is None:
                return {}
        return value if isinstance(value, dict) else {}

    async def _task(self, node: PlanNode, names: dict[str, Any], entry: dict[str, Any],
                    address: str) -> tuple[Any, str, Any]:
        args = render(node.args, names, "with")
        to_json(args, f"the arguments of node '{node.id}'", node_id=node.id)
        fn = self.session.tasks[node.task or ""]
        scope = UnitScope(address, self.agent_path, list(entry.get("answers", [])))
        output, text = await call_task(fn, node, args, scope, self.session.semaphore,
                                       self.session.execution_id)
        return output, text, args

    def _approval(self, node: PlanNode, names: dict[str, Any], entry: dict[str, Any],
                  address: str) -> tuple[Any, str, Any]:
        approval = node.approval
        assert approval is not None
        reason = render(approval.reason, names, "approval.reason")
        context = render(approval.context, names, "approval.context")
        token = UNIT.set(UnitScope(address, self.agent_path, list(entry.get("answers", []))))
        try:
            answer = interrupt(str(reason), context)
        finally:
            UNIT.reset(token)
        values = dict(answer)
        if approval.form is not None:
            values, problems = check_values(approval.form, values, "field")
            if problems:
                raise NodeFailure({"type": "ResumeValueError", "message": "; ".join(problems),
                                   "node_id": node.id})
        output, text = to_json(values, f"the answer of approval '{node.id}'", node_id=node.id)
        return output, text, context

    async def _subworkflow(self, node: PlanNode, names: dict[str, Any], path: StatePath,
                           is_item: bool) -> tuple[Any, str, Any]:
        assert node.workflow is not None
        plan = node.workflow.plan
        given = render(node.args, names, "with")
        inputs, problems = check_values(plan.inputs, given, "input")
        if problems:
            raise NodeFailure({"type": "InputError", "node_id": node.id,
                               "message": f"sub-workflow '{plan.name}': " + "; ".join(problems)})
        to_json(inputs, f"the inputs of sub-workflow node '{node.id}'", node_id=node.id)
        entry = self._unit_dict(path)
        if "sub" not in entry:
            entry["sub"] = new_state(inputs)
        entry["status"] = RUNNING
        self._mark(path)
        segment = f"workflow:{self.plan.name}/node:{node.id}"
        if is_item:
            segment += f"/item:{path[-1]}"
        agent_path = f"{self.agent_path}/{segment}" if self.agent_path else segment
        child = Execution(self.session, plan, entry["sub"], (*self.prefix, *path, "sub"),
                          agent_path)
        output = await child.run()
        return output, dumps(output), inputs

    def _unit_dict(self, path: StatePath) -> dict[str, Any]:
        target = self.state
        for key in path:
            target = target.setdefault(key, {})
        return target

    async def _for_each(self, node: PlanNode) -> tuple[Any, str, Any]:
        try:
            items = render(node.for_each, self._names(node), "for_each")
        except RenderError as exc:
            raise NodeFailure({"type": "TemplateError", "message": str(exc),
                               "node_id": node.id}) from None
        if not isinstance(items, list):
            raise NodeFailure({"type": "TypeError", "node_id": node.id,
                               "message": f"for_each of node '{node.id}' must be a list, "
                               f"not {type(items).__name__}"})
        entry = self._entry(node.id)
        entry["status"] = RUNNING
        entry.setdefault("items", {})
        self._mark(("nodes", node.id))
        await _ForEach(self, node, items, entry["items"]).run()
        outputs = [entry["items"][str(i)]["output"] for i in range(len(items))]
        return outputs, dumps(outputs), None


class _ForEach:
    """The elements of one for_each node, run with bounded concurrency, each checkpointed."""

    def __init__(self, level: Execution, node: PlanNode, items: list[Any],
                 units: dict[str, Any]) -> None:
        self.level = level
        self.node = node
        self.items = items
        self.units = units
        self.failure: NodeFailure | RunFailure | None = None
        self.suspended: InterruptSignal | None = None

    async def run(self) -> None:
        session = self.level.session
        todo = [i for i in range(len(self.items))
                if (self.units.get(str(i)) or {}).get("status") != COMPLETED]
        limit = self.node.concurrency or session.max_concurrency
        running: dict[asyncio.Task[Any], int] = {}
        position = 0
        while True:
            while (position < len(todo) and len(running) < limit and self.failure is None
                   and not session.stopping):
                index = todo[position]
                position += 1
                running[asyncio.create_task(self._one(index))] = index
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=running.__getitem__):
                self._settle(running.pop(task), task)
        if self.suspended is not None:
            raise self.suspended
        if self.failure is not None:
            raise self.failure
        if position < len(todo) or any(
                (self.units.get(str(i)) or {}).get("status") != COMPLETED
                for i in range(len(self.items))):
            raise Stopped()

    async def _one(self, index: int) -> tuple[Any, str, Any]:
        path = ("nodes", self.node.id, "items", str(index))
        return await self.level._unit(self.node, path, f"{self.node.id}/item:{index}",
                                      item=self.items[index], has_item=True)

    def _settle(self, index: int, task: asyncio.Task[Any]) -> None:
        key = str(index)
        path = ("nodes", self.node.id, "items", key)
        exc = task.exception()
        unit = self.units.setdefault(key, {})
        if exc is None:
            output, text, node_input = task.result()
            self.units[key] = {"status": COMPLETED, "output": output}
            self.level._mark(path)
            self.level._checkpoint(f"{self.node.id}/item:{index}", self.node, COMPLETED, text,
                                   node_input)
        elif isinstance(exc, InterruptSignal):
            if self.suspended is None:
                self.suspended = exc
                self.level.session.stopping = True
                unit["status"] = INTERRUPTED
                self.level._mark(path)
        elif isinstance(exc, NodeFailure | RunFailure):
            error = exc.error if isinstance(exc, NodeFailure) else _wrap_child_error(
                self.node, exc.error)
            unit.update(status=FAILED, error=error)
            self.level._mark(path)
            if self.failure is None:
                self.failure = NodeFailure(error)
        elif not isinstance(exc, Stopped):
            raise exc


def _wrap_child_error(node: PlanNode, error: dict[str, Any]) -> dict[str, Any]:
    """The error of a workflow node whose sub-run failed."""
    inner = error.get("node_id")
    where = f" at node '{inner}'" if inner else ""
    return {"type": error.get("type", "Error"), "node_id": node.id,
            "message": f"sub-workflow failed{where}: {error.get('message', '')}"}


__all__ = ["Event", "Execution", "RunFailure", "Session", "Stopped"]
