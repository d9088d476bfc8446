"""The scheduler: one plan level (the top-level plan, or a sub-workflow's plan inside a node).

It follows graphlib's protocol (``take`` the ready nodes, report them ``finished``) over the
plan's ``waits_for`` edges, and knows nothing of node kinds: each unit goes to its kind's
executor (``executors/``). When exactly one unit can run, it runs inline (no task, and a sync
task body without a timeout runs in this thread); otherwise units run as asyncio tasks, sync
bodies in worker threads bounded by the session's semaphore, and finished tasks are taken from
a queue (O(1) per unit at any concurrency).

A unit that asks a human (``interrupt()``, an approval) pauses only the nodes that depend on it:
its pause is recorded at once (an interrupted checkpoint and a pending row, in one transaction)
and independent branches keep running. A failed node does not stop independent branches
either: its dependents follow their trigger rule. When nothing more can run, the level returns
its output, raises :class:`RunFailure`, or raises :class:`Suspended` if units wait for answers.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from tether.errors import InterruptSignal, NotJSONError, Picklable, TemplateLimit, ValueTooLarge
from tether.kinds import NodeKind
from tether.observability.observer import RunObserver, observed_task
from tether.paths import StatePath
from tether.runtime.attempt import Attempt
from tether.runtime.bridge import interrupted
from tether.runtime.context import RunContext
from tether.runtime.events import Event
from tether.runtime.executors import execute
from tether.runtime.foreach import ForEach
from tether.runtime.invoke import Bodies, NodeFailure
from tether.runtime.journal import Journal
from tether.runtime.needs import NeedsView
from tether.runtime.render import RenderError, RunInfo, failure_of, namespace, render, truthy
from tether.runtime.secrets import SecretsView, masked_error
from tether.runtime.settings import count_setting
from tether.runtime.state import NodeError, RunState, SkipReason, unit_path
from tether.runtime.titles import shown_title
from tether.runtime.triggers import gated_off, trigger_verdict
from tether.runtime.units import Suspended, Unit, UnitResult, UnitSkipped
from tether.runtime.values import MAX_VALUE_BYTES, check_size, dumps, to_json
from tether.status import FINISHED, CheckpointStatus, StepType, UnitStatus
from tether.stores.records import PendingInterrupt, utc
from tether.templating import DEFAULT_BUDGET, TemplateBudget

if TYPE_CHECKING:
    from tether.compiler.plan import Plan, PlanNode, TaskNode, WorkflowNode

__all__ = ["Event", "Level", "RunFailure", "Session", "Suspended"]

Outcome = UnitResult | NodeFailure | InterruptSignal | Suspended | UnitSkipped


class RunFailure(Picklable, Exception):
    """A (sub-)run ended with failed nodes, or its output could not be produced."""

    def __init__(self, error: NodeError) -> None:
        self.error = error
        super().__init__(error.message)


@dataclass
class Session:
    """What every level of one execution attempt shares."""

    execution_id: str
    journal: Journal | None
    tasks: Mapping[str, Callable[..., Any]]
    semaphore: asyncio.Semaphore
    max_concurrency: int
    run: RunContext
    attempt: Attempt | None = None
    listener: Callable[[Event], None] | None = None
    pending: list[PendingInterrupt] = field(default_factory=list)
    bodies: Bodies = field(default_factory=Bodies)
    budget: TemplateBudget = DEFAULT_BUDGET
    secrets: SecretsView | None = None
    info: RunInfo | None = None
    park_timers: bool = False  # True: a timer parks its unit (workers); False: wait in place
    max_value_bytes: int = MAX_VALUE_BYTES
    """The cap on a unit's output and the run's result, in bytes of JSON (``ValueTooLarge``)."""
    inline: bool = True
    """Whether the only runnable unit's sync body may run in the event loop's thread (a
    worker driving several runs in one loop turns this off: bodies always run in threads)."""
    observer: RunObserver | None = None
    """The attempt's traces and metrics (None when neither is on: ``observability/``)."""

    def emit(self, event: Event) -> None:
        if self.listener is not None:
            self.listener(event)

    def check(self) -> None:
        """Stop (LeaseLost) before starting anything once the attempt lost the run; the node
        boundary where a worker's attempt stops for a cancel or a shutdown (StopAtBoundary),
        and where Ctrl-C stops a sync call whose bodies run in place (KeyboardInterrupt)."""
        if interrupted():
            raise KeyboardInterrupt()
        if self.attempt is not None:
            self.attempt.check()
            if self.attempt.boundary is not None:
                self.attempt.boundary()


class Readiness:
    """Which nodes of a level can start: a counter of unfinished dependencies per node.

    Nodes handed out by :meth:`take` stay *started* until reported :meth:`finished`,
    :meth:`suspended` or :meth:`restart`-ed, so a rebuild while they are in flight never hands
    them out twice. An interrupted node is neither ready nor finished: its dependents wait.
    """

    def __init__(self, plan: Plan, state: RunState) -> None:
        self.plan = plan
        self.state = state
        self.started: set[str] = set()
        self.rebuild()

    def rebuild(self) -> None:
        self.count: dict[str, int] = {}
        self.heap: list[tuple[int, str]] = []
        status = self.state.status
        for node in self.plan.nodes:
            mine = status(node.id)
            if node.id in self.started or mine in FINISHED or mine == UnitStatus.INTERRUPTED:
                continue
            waiting = sum(1 for d in node.waits_for if status(d) not in FINISHED)
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

    def suspended(self, node_id: str) -> None:
        self.started.discard(node_id)

    def finished(self, node_id: str) -> None:
        self.started.discard(node_id)
        for dependent in self.plan.dependents[node_id]:
            if dependent in self.count:
                self.count[dependent] -= 1
                if self.count[dependent] == 0:
                    heapq.heappush(self.heap, (self.plan.node(dependent).index, dependent))


class Level:
    """One level of a run: its plan, its state, where that state sits in the run's state
    (``prefix``, for checkpoint deltas) and in the run's nesting (``agent_path``)."""

    def __init__(self, session: Session, plan: Plan, state: RunState,
                 prefix: StatePath = (), agent_path: str = "") -> None:
        self.session = session
        self.plan = plan
        self.state = state
        self.prefix = prefix
        self.agent_path = agent_path

    def child(self, plan: Plan, state: RunState, prefix: StatePath, agent_path: str) -> Level:
        """The level of a sub-run nested in this one."""
        return Level(self.session, plan, state, (*self.prefix, *prefix), agent_path)

    # -- scheduling --------------------------------------------------------------------------
    async def run(self, *, hold_last: bool = False) -> Any:
        """Run every runnable node; return the output, or raise RunFailure or Suspended.

        ``hold_last`` (the run's top level): the checkpoint of a node that ran alone with no
        other node left to start is held by the journal (``Journal.hold_next``), and the
        caller writes it with the run's end, in one transaction (``Driver._end``; any other
        way out, a pause or a release, writes it first; so does the next row, if any). No
        await lies between the node's end and either write. Other nodes, the path of every
        node, pay one test of ``ready.count``."""
        ready = Readiness(self.plan, self.state)
        journal = self.session.journal if hold_last else None
        done: asyncio.Queue[asyncio.Task[Any]] = asyncio.Queue()
        flight: dict[asyncio.Task[Any], tuple[PlanNode, float]] = {}
        try:
            while True:
                node = ready.take()
                while node is not None:
                    self.session.check()
                    following = ready.take()
                    if self._open(node, ready):
                        started = self._started(node)
                        if following is None and not flight:
                            outcome = await self._in_place(node)
                            if journal is not None and not ready.count and node.loop is None:
                                self._settle_last(node, outcome, started, ready, journal)
                            else:
                                self._settle(node, outcome, started, ready)
                            following = ready.take()
                        else:
                            observer = self.session.observer
                            if observer is None or fans_out(node):
                                task = asyncio.create_task(self._execute(node, inline=False))
                            else:
                                task = observed_task(observer.open(node, None), self.unit(
                                    node, unit_path(node.id), node.id, inline=False))
                            task.add_done_callback(done.put_nowait)
                            flight[task] = (node, started)
                    elif following is None:
                        following = ready.take()  # its dependents may be ready now
                    node = following
                if not flight:
                    break
                task = await done.get()
                node, started = flight.pop(task)
                self._settle(node, task_outcome(task), started, ready)
        except BaseException:
            for task in flight:
                task.cancel()
            raise
        return self._end()

    def _end(self) -> Any:
        statuses = [self.state.status(n.id) for n in self.plan.nodes]
        if any(s == UnitStatus.INTERRUPTED for s in statuses):
            raise Suspended()
        if any(s not in FINISHED for s in statuses):  # pragma: no cover - a scheduler bug
            raise RuntimeError(f"the scheduler stopped with unfinished nodes in "
                               f"'{self.plan.name}'")
        failure = self.state.first_failure(self.plan)
        if failure is not None:
            raise RunFailure(failure)
        return self._output()

    def _started(self, node: PlanNode) -> float:
        """When ``node`` started (for the listener's events; 0.0 without a listener)."""
        if self.session.listener is None:
            return 0.0
        self.session.emit(Event("started", self.session.execution_id, node.id,
                                self.agent_path, title=shown_title(self, node)))
        return time.perf_counter()

    def _open(self, node: PlanNode, ready: Readiness) -> bool:
        """Decide whether ``node`` runs; record it skipped (or failed) when it does not."""
        try:
            decision = self._decide(node)
        except (RenderError, TemplateLimit) as exc:
            self._fail(node, failure_of(exc, node.id))
            ready.finished(node.id)
            return False
        if decision != UnitStatus.RUNNING:
            reason = self._skip_reason(node, decision)
            if self.session.observer is not None:
                self.session.observer.skipped(node, decision, reason)
            self.state.skip(node.id, decision, reason)
            self.mark(("nodes", node.id))
            ready.finished(node.id)
            return False
        return True

    def _skip_reason(self, node: PlanNode, decision: UnitStatus) -> SkipReason:
        """Why :meth:`_decide` did not run ``node`` (kept in its entry for the history),
        decided again in the same order, off the path of nodes that run."""
        if decision == UnitStatus.UPSTREAM_FAILED:
            return SkipReason.UPSTREAM_FAILED
        status = self.state.status
        if node.needs and trigger_verdict(node.trigger, [status(n) for n in node.needs]) \
                != UnitStatus.RUNNING:
            return SkipReason.TRIGGER_RULE
        if node.id in self.plan.gates and gated_off(
                self.plan, node, status, lambda n: self.state.unit(n).output):
            return SkipReason.SWITCH
        return SkipReason.WHEN

    def _decide(self, node: PlanNode) -> UnitStatus:
        """``running``, ``skipped`` or ``upstream_failed``: trigger rule, switch, then guard."""
        status = self.state.status
        for need in node.needs:
            if status(need) != UnitStatus.COMPLETED:  # (all completed: every rule runs it)
                verdict = trigger_verdict(node.trigger, [status(n) for n in node.needs])
                if verdict != UnitStatus.RUNNING:
                    return verdict
                break
        if node.id in self.plan.gates and gated_off(
                self.plan, node, self.state.status, lambda n: self.state.unit(n).output):
            return UnitStatus.SKIPPED
        if node.when is not None and not truthy(node.when, self.names(node), "when",
                                                self.session.budget):
            return UnitStatus.SKIPPED
        return UnitStatus.RUNNING

    def _settle(self, node: PlanNode, outcome: Outcome, started: float,
                ready: Readiness) -> None:
        seconds = time.perf_counter() - started if started else 0.0
        if isinstance(outcome, UnitResult):  # the common case first
            if self._complete(node, outcome):
                ready.restart(node.id)
                self._emit_finished(node, UnitStatus.COMPLETED, seconds)
                return
        elif isinstance(outcome, InterruptSignal | Suspended):
            if isinstance(outcome, InterruptSignal):
                self.suspend(node, unit_path(node.id), node.id, outcome)
            else:
                self.state.at(unit_path(node.id)).status = UnitStatus.INTERRUPTED
                self.mark(unit_path(node.id))
            ready.suspended(node.id)
            self._emit_finished(node, UnitStatus.INTERRUPTED, seconds)
            return
        elif isinstance(outcome, NodeFailure):
            self._fail(node, outcome.error, outcome.tries)
        else:
            self.state.skip(node.id, UnitStatus.SKIPPED, SkipReason.TIMED_OUT)
            self.mark(("nodes", node.id))
            self.checkpoint(node.id, node, CheckpointStatus.COMPLETED, "null")
        if self.session.listener is not None:
            self._emit_finished(node, self.state.status(node.id), seconds)
        ready.finished(node.id)

    def _settle_last(self, node: PlanNode, outcome: Outcome, started: float,
                     ready: Readiness, journal: Journal) -> None:
        """Settle a node after which nothing is left to start (no node counted, no loop to
        close) with its row held (``run``'s ``hold_last``); written at once if something
        became ready all the same."""
        journal.hold_next()
        try:
            self._settle(node, outcome, started, ready)
        finally:
            journal.hold_next(False)
        if ready.count or ready.heap:
            journal.flush()

    def _emit_finished(self, node: PlanNode, status: str, seconds: float) -> None:
        if self.session.listener is not None:
            self.session.emit(Event("finished", self.session.execution_id, node.id,
                                    self.agent_path, status, seconds,
                                    shown_title(self, node)))

    # -- units -------------------------------------------------------------------------------
    async def _in_place(self, node: PlanNode) -> Outcome:
        """Run ``node`` as the only unit running (no task of its own): its outcome. An
        observed unit runs inside its node span, opened and closed here (no coroutine of
        the observer's around it: this is the path of every node)."""
        observer = self.session.observer
        if observer is None or fans_out(node):
            try:
                return await self._execute(node, inline=self.session.inline)
            except (NodeFailure, InterruptSignal, Suspended, UnitSkipped) as exc:
                return exc
        opened = observer.open(node, None)
        outcome: Outcome
        try:
            outcome = await self.unit(node, unit_path(node.id), node.id,
                                      inline=self.session.inline)
        except (NodeFailure, InterruptSignal, Suspended, UnitSkipped) as exc:
            outcome = exc
        except BaseException as exc:
            if opened is not None:
                opened.finish(exc)
            raise
        if opened is not None:
            opened.finish(outcome)
        return outcome

    def _execute(self, node: PlanNode, *,
                 inline: bool) -> Coroutine[Any, Any, UnitResult]:
        """The coroutine that runs ``node`` (one coroutine frame fewer per node than awaiting
        it here: this is the path of every node)."""
        if fans_out(node):
            return ForEach(self, node).run()  # (each element has its own span, not the node)
        return self.unit(node, unit_path(node.id), node.id, inline=inline)

    async def unit(self, node: PlanNode, path: StatePath, address: str, *, item: Any = None,
                   has_item: bool = False, inline: bool = False) -> UnitResult:
        """Run one unit (a node, or one element of a for_each) with its kind's executor; when
        the run masks secrets, its output and error enter the state masked (as values)."""
        unit = Unit(self, node, path, address, item, has_item, inline)
        masker = self.session.run.masker
        try:
            result = await execute(unit)
            check_size(result.text, self.session.max_value_bytes, address)
        except (RenderError, NotJSONError, TemplateLimit) as exc:
            raise NodeFailure(self._masked(failure_of(exc, node.id))) from None
        except ValueTooLarge as exc:  # not retried: the same task returns the same value
            raise NodeFailure(NodeError("ValueTooLarge", str(exc), node.id)) from None
        except RunFailure as exc:
            raise NodeFailure(self._masked(_child_error(node, exc.error))) from None
        except NodeFailure as exc:
            error = exc.error if masker is None else masked_error(masker, exc.error)
            if error is exc.error:
                raise
            raise NodeFailure(error, exc.tries) from None
        if masker is None:
            return result
        output = masker.value(result.output)  # a value enters the state masked, or not at all
        return result if output is result.output else result._replace(
            output=output, text=dumps(output))

    def _masked(self, error: NodeError) -> NodeError:
        """``error`` without the run's secret strings."""
        masker = self.session.run.masker
        return error if masker is None else masked_error(masker, error)

    def masked_tries(self, tries: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
        """The failed attempts of a node (their errors may echo a secret) as they may be
        stored: masked as values."""
        masker = self.session.run.masker
        if masker is None or not tries:
            return tries
        return tuple(masker.value(list(tries)))

    def names(self, node: PlanNode, *, item: Any = None, has_item: bool = False,
              iteration: int | None = None) -> dict[str, Any]:
        """The names a template of ``node`` reads."""
        if iteration is None and node.loops:
            iteration = self.state.counter(node.loops[0])
        names = namespace(self.plan, self.state, item=item, has_item=has_item,
                          iteration=iteration, secrets=self.session.secrets,
                          run=self.session.info)
        if node.needs:
            names["needs"] = NeedsView(self.state.nodes, node.needs)
        return names

    def answers(self, path: StatePath) -> list[Any]:
        """The answers given to the unit at ``path`` (for its ``interrupt()`` calls)."""
        found = self.state.find(path)
        return found.answers if found is not None else []

    # -- state and checkpoints ---------------------------------------------------------------
    def mark(self, path: StatePath, text: str | None = None) -> None:
        """Record that the state at ``path`` changed (``text``: its JSON, when known)."""
        if self.session.journal is not None:
            self.session.journal.mark((*self.prefix, *path), text)

    def checkpoint(self, address: str, node: PlanNode, status: CheckpointStatus,
                   output_json: str | None, node_input: Any = None) -> None:
        journal = self.session.journal
        if journal is not None:  # (in order: the path of every node)
            journal.put(address, node.index, StepType.NODE, status, self.agent_path,
                        self.state.counters, node_input, output_json)

    def suspend(self, node: PlanNode, path: StatePath, address: str,
                signal: InterruptSignal, *, agent_path: str | None = None,
                node_index: int | None = None, due_at: float | None = None) -> None:
        """Record the unit at ``path`` as waiting: its interrupted checkpoint (a full
        snapshot) and its pending row, in one transaction. Without a store, the signal goes
        to the caller. An agent's pause names its own place (``agent_path``, its turn as
        ``node_index``). ``due_at``: the pause is a timer, due then."""
        journal = self.session.journal
        if journal is None:
            raise signal
        journal.check()
        masker = self.session.run.masker
        if masker is not None:  # what a task asked with may echo its secret arguments
            signal = InterruptSignal(masker.text(signal.reason) or "",
                                     masker.value(signal.context), node_id=signal.node_id,
                                     agent_path=signal.agent_path)
        checkpoint_id = journal.next_id()
        self.state.at(path).suspend(checkpoint_id)
        self.mark(path)
        where = self.agent_path if agent_path is None else agent_path
        row = journal.row(checkpoint_id=checkpoint_id, node_id=address,
                          node_index=node.index if node_index is None else node_index,
                          step_type=StepType.HITL_PAUSE, status=CheckpointStatus.INTERRUPTED,
                          agent_path=where, counters=self.state.counters, full=True,
                          reason=signal.reason, context_json=dumps(signal.context))
        context = json.loads(row.interrupt_context) if row.interrupt_context else None
        pending = PendingInterrupt(journal.execution_id, checkpoint_id, address,
                                   where, signal.reason, context, utc(row.created_at), due_at)
        try:
            journal.store.record_interrupt(row, pending, journal.owner)
        except BaseException:
            journal.undo()
            raise
        self.session.pending.append(pending)

    def _fail(self, node: PlanNode, error: NodeError,
              tries: tuple[dict[str, Any], ...] = ()) -> None:
        error = self._masked(error)
        self.state.unit(node.id).fail(error, self.masked_tries(tries))
        self.mark(("nodes", node.id))
        self.checkpoint(node.id, node, CheckpointStatus.FAILED, dumps(error.to_json()))

    def _complete(self, node: PlanNode, result: UnitResult) -> bool:
        """Record a completed node; return True if it restarted its loop."""
        if result.tries:  # it failed before: the entry keeps the attempts (the history's)
            self.state.complete(node.id, result.output, self.masked_tries(result.tries))
            self.mark(("nodes", node.id))
        else:
            self.mark(("nodes", node.id),
                      self.state.complete_text(node.id, result.output, result.text))
        if node.loop is None:  # (then nothing can have failed it since)
            self.checkpoint(node.id, node, CheckpointStatus.COMPLETED, result.text,
                            result.node_input)
            return False
        restarted = False
        try:
            restarted = self._close_loop(node)
        except (RenderError, TemplateLimit) as exc:
            self.state.unit(node.id).fail(failure_of(exc, node.id))
            self.mark(("nodes", node.id))
        error = self.state.unit(node.id).error
        if error is not None:
            self.checkpoint(node.id, node, CheckpointStatus.FAILED, dumps(error.to_json()),
                            result.node_input)
        else:
            self.checkpoint(node.id, node, CheckpointStatus.COMPLETED, result.text,
                            result.node_input)
        return restarted

    def _close_loop(self, node: PlanNode) -> bool:
        loop = node.loop
        assert loop is not None
        current = self.state.counter(node.id)
        if not truthy(loop.while_, self.names(node, iteration=current), "loop.while",
                      self.session.budget):
            return False
        bound = count_setting(loop.max_iterations, self.names(node, iteration=current),
                              "loop.max_iterations", self.session.budget)
        if current >= bound:
            if loop.on_exhausted == "fail":
                message = (f"the loop closed by '{node.id}' ran {bound} times "
                           "and its condition still holds")
                self.state.unit(node.id).fail(NodeError("LoopExhausted", message, node.id))
                self.mark(("nodes", node.id))
            return False
        self.state.set_counter(node.id, current + 1)
        self.mark(("counters", node.id))
        for member in loop.body:
            self.state.restart(member)
            self.mark(("nodes", member))
            inner = self.plan.node(member)
            if member != node.id and inner.loop is not None and self.state.has_counter(member):
                self.state.set_counter(member, 1)
                self.mark(("counters", member))
        return True

    def _output(self) -> Any:
        if self.plan.output is None:
            return None
        try:
            value = render(self.plan.output, namespace(self.plan, self.state,
                                                       run=self.session.info), "output",
                           self.session.budget)
            output, text = to_json(value, "the workflow's output")
            check_size(text, self.session.max_value_bytes, None)
        except ValueTooLarge as exc:
            raise RunFailure(NodeError("ValueTooLarge", str(exc), None)) from None
        except TemplateLimit as exc:
            raise RunFailure(failure_of(exc, None)) from None
        except (RenderError, NotJSONError) as exc:  # run-level: named by their own type
            raise RunFailure(NodeError(type(exc).__name__, str(exc), None)) from None
        return output


def fans_out(node: PlanNode) -> TypeGuard[TaskNode | WorkflowNode]:
    """Whether ``node`` runs once per element (``for_each``, ``matrix``)."""
    return node.kind in (NodeKind.TASK, NodeKind.WORKFLOW) and node.fans_out



def task_outcome(task: asyncio.Task[UnitResult]) -> Outcome:
    """The outcome of a finished unit task (anything else is raised)."""
    exc = task.exception()
    if exc is None:
        return task.result()
    if isinstance(exc, NodeFailure | InterruptSignal | Suspended | UnitSkipped):
        return exc
    raise exc


def _child_error(node: PlanNode, error: NodeError) -> NodeError:
    """The error of a workflow node whose sub-run failed."""
    where = f" at node '{error.node_id}'" if error.node_id else ""
    return error.at(node.id, f"sub-workflow failed{where}: {error.message}")
