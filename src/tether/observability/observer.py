"""The runtime's one hook for traces and metrics: a :class:`RunObserver` per run attempt.

The driver asks :func:`observer_for` once per attempt. It returns None unless tracing is on
(a real ``TracerProvider`` is installed) or this process serves metrics; with None the
scheduler's path is what it was without observability (no span, no clock read, no call per
node: the observer's attribute read and a comparison). With an observer, the scheduler opens
each unit's node span (:meth:`RunObserver.open`) before it starts the unit, in place or as a
task (:func:`observed_task`), and closes it with the unit's outcome (:meth:`Opened.finish`):
no coroutine wraps the unit. The span is current while the task body runs: a task started
for the unit copies that context, sync bodies in threads get a copy of it, and a task's own
spans (an httpx or psycopg instrumentor's) nest under its node.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from tether.errors import InterruptSignal, LeaseLost
from tether.runtime.units import Suspended, UnitResult, UnitSkipped
from tether.status import UnitStatus

if TYPE_CHECKING:
    from tether.compiler.plan import PlanNode
    from tether.observability.spans import RunSpans
    from tether.stores.base import Checkpointer


class MetricsSink(Protocol):
    """What the runtime reports to the process's metrics (``observability/metrics.py``)."""

    def run_started(self, workflow: str) -> None: ...

    def run_finished(self, workflow: str, status: str) -> None: ...

    def node_finished(self, workflow: str, kind: str, status: str,
                      seconds: float | None) -> None: ...

    def tokens(self, model: str, input_tokens: int, output_tokens: int) -> None: ...

    def lease_lost(self) -> None: ...

    def claimed(self, waited: float) -> None: ...

    def timer_fired(self) -> None: ...


SINK: MetricsSink | None = None
"""The process's metrics, once it serves them (set by ``observability/metrics.py``)."""


def tracing_enabled() -> bool:
    """Whether spans are recorded: a real TracerProvider is installed.

    Nobody imported ``opentelemetry.trace`` means nobody installed a provider: no import
    (about 25 ms) just to find that out. The API's default is a proxy (no-op) provider."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return False
    provider = api.get_tracer_provider()
    return not isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider)


def observer_for(execution_id: str, workflow: str, attempt: int, parent_id: str | None,
                 store: Checkpointer | None, *, claimed: bool = False,
                 first: bool = True) -> RunObserver | None:
    """The observer of one run attempt, or None when neither traces nor metrics are on."""
    spans: RunSpans | None = None
    if tracing_enabled():
        from tether.observability.spans import RunSpans
        spans = RunSpans(execution_id, workflow, attempt, parent_id, store, claimed)
    if spans is None and SINK is None:
        return None
    return RunObserver(workflow, spans, SINK, first)


_STATUS: dict[type[BaseException], str] = {
    InterruptSignal: UnitStatus.INTERRUPTED, Suspended: UnitStatus.INTERRUPTED,
    UnitSkipped: UnitStatus.SKIPPED}


class RunObserver:
    """Spans and metrics of one run attempt (see the module docstring)."""

    def __init__(self, workflow: str, spans: RunSpans | None, sink: MetricsSink | None,
                 first: bool = True) -> None:
        self.workflow = workflow
        self.first = first
        self.spans = spans
        self.sink = sink
        self.open: Callable[[PlanNode, str | None], Opened | None] = \
            spans.node if spans is not None and sink is None else self._timed
        """Open one unit's node span (``address``: a for_each element's, else None), current
        from here (the scheduler starts the unit in this context) until
        :meth:`Opened.finish`, timed for the metrics; None when there is nothing to record
        (the run's span not sampled, no metrics). Traces alone: the spans' own method (no
        call of the observer's in between)."""

    def start(self) -> None:
        """The attempt starts driving (the run span opens and becomes current)."""
        if self.spans is not None:
            self.spans.start()
        if self.sink is not None and self.first:
            self.sink.run_started(self.workflow)

    def end(self, status: str, exc: BaseException | None = None) -> None:
        """The attempt ends: the run's status (``running`` when only the attempt stopped)."""
        if isinstance(exc, LeaseLost) and self.sink is not None:
            self.sink.lease_lost()
        if self.spans is not None:
            self.spans.end(status, exc)
        if self.sink is not None and status in _FINAL:
            self.sink.run_finished(self.workflow, status)

    def _timed(self, node: PlanNode, address: str | None) -> Opened | None:
        spans = self.spans
        timed = _new_timed(Timed)  # (its fields set here: no __init__ frame per node)
        timed.observer = self
        timed.kind = node.kind
        timed.span = spans.node(node, address) if spans is not None else None
        timed.started = time.perf_counter()
        return timed

    def skipped(self, node: PlanNode, status: str, reason: str) -> None:
        """A node that did not run: a zero-length span with its skip reason, and a count."""
        if self.spans is not None:
            self.spans.skipped(node, status, reason)
        if self.sink is not None:
            self.sink.node_finished(self.workflow, node.kind, status, None)


_FINAL = frozenset({"completed", "failed", "cancelled"})


class Opened(Protocol):
    """A unit's open node span and metrics (:meth:`RunObserver.open`): the scheduler closes
    it with the unit's outcome, around the unit (no coroutine of its own)."""

    def leave(self) -> None:
        """The unit started as a task (a copy of this context): reset the context here."""

    def finish(self, outcome: object) -> None:
        """The unit ended: ``outcome`` is its result, or what it raised."""

    def done(self, task: asyncio.Task[Any]) -> None:
        """The unit's task ended (a done callback): :meth:`finish` with its outcome."""


class Timed:
    """A unit observed for the metrics (and its span, if any): made by
    :meth:`RunObserver.open`."""

    __slots__ = ("kind", "observer", "span", "started")

    observer: RunObserver
    kind: str
    span: Opened | None
    started: float

    def leave(self) -> None:
        if self.span is not None:
            self.span.leave()

    def finish(self, outcome: object) -> None:
        if self.span is not None:
            self.span.finish(outcome)
        observer = self.observer
        assert observer.sink is not None
        observer.sink.node_finished(
            observer.workflow, self.kind, UnitStatus.COMPLETED
            if not isinstance(outcome, BaseException) else status_of(outcome),
            time.perf_counter() - self.started)

    def done(self, task: asyncio.Task[Any]) -> None:
        self.finish(outcome_of(task))


_new_timed = object.__new__


def status_of(outcome: object) -> str:
    """A unit's status from its outcome (its result, or what it raised)."""
    if not isinstance(outcome, BaseException):
        return UnitStatus.COMPLETED
    return _STATUS.get(type(outcome), "failed" if isinstance(outcome, Exception)
                       else "cancelled")


def outcome_of(task: asyncio.Task[Any]) -> object:
    """A finished task's outcome: its result, or what it raised (``CancelledError``)."""
    if task.cancelled():
        return asyncio.CancelledError()
    exc = task.exception()
    return task.result() if exc is None else exc


def observed_task(opened: Opened | None,
                  coroutine: Coroutine[Any, Any, UnitResult]) -> asyncio.Task[UnitResult]:
    """Start a unit as a task inside its node span (``opened``, current here: the task runs in
    a copy of this context); the span closes when the task ends."""
    if opened is None:
        return asyncio.create_task(coroutine)
    try:
        task = asyncio.create_task(coroutine)
    except BaseException as exc:
        opened.finish(exc)  # (the context reset, the span ended)
        raise
    opened.leave()
    task.add_done_callback(opened.done)
    return task


def retried(node_id: str, attempt: int, exc: BaseException | None, backoff: float) -> None:
    """A task attempt of ``node_id`` failed (``exc``), or a poll's output did not satisfy
    its ``until`` (``exc`` None), and another follows after ``backoff`` seconds: its node
    span ends (with the backoff), when traced."""
    if tracing_enabled():
        from tether.observability.spans import retried as on_span
        on_span(node_id, attempt, exc, backoff)


def next_attempt(node_id: str, attempt: int, *, resumed: bool = False) -> None:
    """Attempt ``attempt`` of a retried task or poll starts: its own node span, when traced
    (``resumed``: the first attempt of this process, the ones before were another's: the
    unit's span is this attempt's)."""
    if tracing_enabled():
        from tether.observability.spans import next_attempt as on_span
        on_span(node_id, attempt, resumed)


class Turn:
    """One agent model call (``tether.agent.turn``) or tool call (``tether.agent.tool``):
    a context manager around the call; :meth:`usage` records what the reply used."""

    def __init__(self, observer: RunObserver | None, name: str, model: str,
                 attributes: dict[str, Any]) -> None:
        self.observer = observer
        self.name = name
        self.model = model
        self.attributes = attributes
        self.span: Any = None
        self._scope: Any = None

    def __enter__(self) -> Turn:
        spans = self.observer.spans if self.observer is not None else None
        if spans is not None:
            self._scope = spans.tracer.start_as_current_span(
                self.name, attributes=self.attributes, record_exception=False,
                set_status_on_exception=False)
            self.span = self._scope.__enter__()
        return self

    def usage(self, input_tokens: int, output_tokens: int, finish: str | None = None) -> None:
        """The model's reply: its token usage (a span attribute and a metric)."""
        if self.span is not None:
            self.span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
            self.span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
            if finish:
                self.span.set_attribute("gen_ai.response.finish_reasons", [finish])
        sink = self.observer.sink if self.observer is not None else None
        if sink is not None:
            sink.tokens(self.model, input_tokens, output_tokens)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        if self._scope is None:
            return
        if isinstance(exc, InterruptSignal):  # a pause (an approval of the call) is no error
            self.span.add_event("tether.approval", {"tether.approval.state": "requested"})
        elif exc is not None:
            from tether.observability.spans import error_status
            error_status(self.span, exc)
        self._scope.__exit__(kind, exc, tb)


def agent_turn(observer: RunObserver | None, provider: str, model: str, agent: str,
               turn: int) -> Turn:
    """The span and token metrics of one model call of ``agent``."""
    return Turn(observer, "tether.agent.turn", model, {
        "gen_ai.operation.name": "chat", "gen_ai.system": provider,
        "gen_ai.provider.name": provider, "gen_ai.request.model": model,
        "tether.agent.name": agent, "tether.agent.turn": turn})


def agent_tool(observer: RunObserver | None, agent: str, tool: str, call_id: str) -> Turn:
    """The span of one tool call of ``agent`` (its arguments are not recorded)."""
    return Turn(observer, "tether.agent.tool", "", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id, "tether.agent.name": agent})


def claimed(queued: bool, created_at: float, available_at: float | None) -> None:
    """A worker claimed a run: how long it waited, claimable, when it was queued."""
    sink = SINK
    if sink is not None and queued:
        sink.claimed(time.time() - max(created_at, available_at or 0.0))


def timer_fired() -> None:
    """A worker fired a durable timer."""
    if SINK is not None:
        SINK.timer_fired()


def remember_caller(store: Checkpointer, execution_id: str) -> None:
    """A run was submitted: the span active here becomes its parent, when traced."""
    if tracing_enabled():
        from tether.observability.spans import remember_caller as keep
        keep(store, execution_id)
