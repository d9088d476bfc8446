"""The spans of a run attempt (imported only once tracing is on: ``observer.py``).

One trace per run: the first attempt's ``tether.run`` span is the trace's root for the run
(the child of the caller's span, when the caller had one), and its context is stored with
the run, so every later attempt (a resume days later, another worker) opens its own
``tether.run`` span as a child of it, in the same trace, linked to the attempt before (the
wait of an approval). No schema change was possible for this, so the context lives in the
run's idempotency cache under reserved keys (:data:`ROOT_KEY`, ``tether.trace/<attempt>``):
first write wins, it is pruned with the run, and no task's key (a sha256) can collide.

Attributes never carry values of the run (inputs, outputs, arguments: they may hold secrets);
error messages are the ones the runtime already masked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tether.errors import LeaseLost, TetherError
from tether.observability.deferred_span import DeferredSpan
from tether.observability.observer import outcome_of, status_of
from tether.runtime.invoke import NodeFailure

if TYPE_CHECKING:
    from tether.compiler.plan import PlanNode
    from tether.observability.deferred import Pipe
    from tether.stores.base import Checkpointer

log = logging.getLogger(__name__)

ROOT_KEY = "tether.trace"
"""The idempotency-cache key of the run's trace context (its first ``tether.run`` span)."""

CALLER_KEY = f"{ROOT_KEY}/caller"
"""The key of the span active where a queued run was submitted (its first span's parent)."""

TRACER = "tether"
_CACHED: dict[int, tuple[PlanNode, dict[str, Any]]] = {}
"""A node's span attributes by the node (every run of a plan shares them)."""
_CACHE_SIZE = 4096
_PROPAGATOR = TraceContextTextMapPropagator()


def attempt_key(attempt: int) -> str:
    """The key of one attempt's ``tether.run`` span context."""
    return f"{ROOT_KEY}/{attempt}"


def _dump(span: Span) -> str:
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, trace.set_span_in_context(span))
    return json.dumps(carrier, sort_keys=True)


def _load(text: str | None) -> SpanContext | None:
    if not text:
        return None
    try:
        carrier = json.loads(text)
    except ValueError:
        return None
    if not isinstance(carrier, dict):
        return None
    found = trace.get_current_span(_PROPAGATOR.extract(carrier)).get_span_context()
    return found if found.is_valid else None


class RunSpans:
    """The ``tether.run`` span of one attempt and the spans under it."""

    def __init__(self, execution_id: str, workflow: str, attempt: int, parent_id: str | None,
                 store: Checkpointer | None, claimed: bool) -> None:
        self.tracer = trace.get_tracer(TRACER)
        self.execution_id = execution_id
        self.workflow = workflow
        self.attempt = attempt
        self.parent_id = parent_id
        self.store = store
        self.claimed = claimed
        self.span: Span | None = None
        self.recording = False
        self._token: object = None
        self.pipe = _pipe_for(self.tracer)
        """Where node spans go when deferred (``deferred.py``); None: real SDK spans."""

    # -- the run span ------------------------------------------------------------------------
    def start(self) -> None:
        root = self._read(self.execution_id, ROOT_KEY)
        links: list[Link] = []
        caller = trace.get_current_span().get_span_context()
        if root is not None:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(root))
            before = self._read(self.execution_id, attempt_key(self.attempt - 1)) \
                if self.attempt > 1 else None
            link: dict[str, Any] = {"tether.link": "previous_attempt"}
            if self._paused(self.attempt - 1):  # (``before`` is None: the first attempt)
                link["tether.wait"] = "paused"  # the wait for an answer (or a timer)
            links.append(Link(before or root, link))
            if caller.is_valid and caller.trace_id != root.trace_id:
                links.append(Link(caller, {"tether.link": "caller"}))
        else:  # the caller's active span: the submitter's (stored), else this process's
            submitter = self._read(self.execution_id, CALLER_KEY)
            parent = trace.set_span_in_context(trace.NonRecordingSpan(submitter)) \
                if submitter is not None else otel_context.get_current()
            origin = self._read(self.parent_id, ROOT_KEY) if self.parent_id else None
            if origin is not None:
                links.append(Link(origin, {"tether.link": "fork_origin",
                                           "tether.fork.origin": self.parent_id or ""}))
        span = self.tracer.start_span(
            "tether.run", context=parent, kind=SpanKind.INTERNAL, links=links,
            attributes={"tether.execution_id": self.execution_id,
                        "tether.workflow": self.workflow, "tether.run.attempt": self.attempt})
        self.span = span
        self.recording = span.is_recording()
        if self.claimed:
            span.add_event("tether.claim", {"tether.run.attempt": self.attempt})
        self._token = otel_context.attach(trace.set_span_in_context(span))
        self._write(span, root is None)

    def end(self, status: str, exc: BaseException | None) -> None:
        span = self.span
        if span is None:
            return
        span.set_attribute("tether.run.status", status)
        if status == "paused" and self.store is not None:
            self._put(f"{attempt_key(self.attempt)}/paused", "true")
        if isinstance(exc, LeaseLost):
            span.add_event("tether.lease_lost", {"tether.reason": exc.reason})
            span.set_status(Status(StatusCode.ERROR, "the attempt lost its lease"))
        elif status == "failed":
            span.set_status(Status(StatusCode.ERROR))
        elif exc is not None:
            span.set_attribute("error.type", type(exc).__name__)
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
            self._token = None
        if self.pipe is not None:  # its node spans reach the processors before it ends
            self.pipe.flush()
        span.end()

    def _read(self, execution_id: str | None, key: str) -> SpanContext | None:
        if self.store is None or execution_id is None:
            return None
        try:
            return _load(self.store.get_idempotent(execution_id, key))
        except TetherError as exc:  # tracing never stops a run
            log.debug("reading the trace context of %s: %s", execution_id, exc)
            return None

    def _paused(self, attempt: int) -> bool:
        assert self.store is not None
        try:
            return self.store.get_idempotent(self.execution_id,
                                             f"{attempt_key(attempt)}/paused") is not None
        except TetherError:
            return False

    def _put(self, key: str, text: str) -> None:
        assert self.store is not None
        try:
            self.store.put_idempotent(self.execution_id, key, text)
        except TetherError as exc:
            log.debug("storing the trace context of %s: %s", self.execution_id, exc)

    def _write(self, span: Span, first: bool) -> None:
        if self.store is None:
            return
        text = _dump(span)
        try:
            # the first attempt's context is the root's (one write: its attempt key would
            # hold the same; a later attempt finds no attempt key before it and takes the root)
            self.store.put_idempotent(self.execution_id,
                                      ROOT_KEY if first else attempt_key(self.attempt), text)
        except TetherError as exc:
            log.debug("storing the trace context of %s: %s", self.execution_id, exc)

    # -- node spans --------------------------------------------------------------------------
    def _attributes(self, node: PlanNode, address: str | None) -> dict[str, Any]:
        """A node span's attributes at its start (``address`` None: the node's own unit, not
        an element): given once to ``start_span`` (the SDK validates each attribute: no
        per-node ``set_attribute`` beyond the status). The run's id and workflow are on the
        parent ``tether.run`` span, not repeated per node."""
        if address is None:
            found = _CACHED.get(id(node))  # (the node is kept in the entry: no id reuse)
            if found is None:
                if len(_CACHED) >= _CACHE_SIZE:
                    _CACHED.clear()
                found = _CACHED[id(node)] = (node, {
                    "tether.node.id": node.id, "tether.node.kind": str(node.kind),
                    "tether.node.attempt": 1})
            return found[1]  # (shared by every span of the node: never changed)
        return {"tether.node.id": node.id, "tether.node.kind": str(node.kind),
                "tether.node.attempt": 1, "tether.node.address": address}

    def node(self, node: PlanNode, address: str | None = None) -> NodeSpan | None:
        """Open a unit's ``tether.node`` span (``address``: a for_each element's), current
        until :meth:`NodeSpan.finish`; None when the run's span is not sampled (its nodes
        would not be either: nothing built)."""
        if not self.recording:
            return None
        found = _CACHED.get(id(node)) if address is None else None  # (the common case here)
        return NodeSpan(self.tracer, found[1] if found is not None
                        else self._attributes(node, address), self.pipe)

    def skipped(self, node: PlanNode, status: str, reason: str) -> None:
        if not self.recording:
            return
        attributes = dict(self._attributes(node, None))
        attributes["tether.node.status"] = status
        attributes["tether.node.skip_reason"] = reason
        if self.pipe is not None:
            self.pipe.span("tether.node", trace.get_current_span().get_span_context(),
                           attributes).end()
            return
        self.tracer.start_span("tether.node", attributes=attributes).end()


def _pipe_for(tracer: Tracer) -> Pipe | None:
    """The deferred node spans' pipe of ``tracer`` (None without the SDK: a vendor's
    provider gets real spans of its own)."""
    try:
        from tether.observability.deferred import pipe_for
    except ImportError:
        return None
    return pipe_for(tracer)


def _context_var() -> ContextVar[Context] | None:
    """The context variable behind the API's runtime context, when it is the default one
    (``contextvars_context``): set and reset directly, as ``attach`` and ``detach`` would
    (two calls fewer each per node). PRIVATE API MEMBER: ``ContextVarsRuntimeContext
    ._current_context`` (opentelemetry-api 1.45; tests/observability/test_deferred_spans.py
    checks it); any other runtime context goes through ``attach`` and ``detach``."""
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    var = getattr(runtime, "_current_context", None)
    if type(runtime) is ContextVarsRuntimeContext and isinstance(var, ContextVar):
        return var
    return None


def _detach(token: Any) -> None:
    otel_context.detach(token)


_VAR = _context_var()
_GET: Callable[[], Context] = _VAR.get if _VAR is not None else otel_context.get_current
_SET: Callable[[Context], Any] = _VAR.set if _VAR is not None else otel_context.attach
_RESET: Callable[[Any], None] = _VAR.reset if _VAR is not None else _detach
SPAN_KEY = next(iter(trace.set_span_in_context(trace.INVALID_SPAN, Context())))
"""The key of the current span in a ``Context`` (the API's own, found through its API)."""
NODE_KEY = otel_context.create_key("tether.node")
"""The key of the unit's :class:`NodeSpan` in the context of a later attempt or of a real SDK
span (for :func:`retried`; a first deferred attempt is the current span itself)."""


class NodeSpan(DeferredSpan):
    """A unit's ``tether.node`` span, opened by the scheduler before the unit starts (current
    in the unit's context while it runs: a task's own spans nest under it) and closed by it
    with the unit's outcome (:meth:`finish`): no coroutine of its own around the unit. One
    span per attempt of the unit (a retried task ends one and opens the next).

    With deferred spans (``deferred.py``) this object *is* the first attempt's span (the
    record the drain thread builds into an SDK span): one object per node span; with real
    SDK spans it holds the SDK's. The context the unit runs in holds the span under the
    API's key, set with one context-variable set and reset with one reset; a later attempt's
    context also holds this object (:data:`NODE_KEY`), where a retry finds it. Between a
    retried attempt and the next, the ended span's context stays current (nothing but the
    backoff runs in it)."""

    _pipe: Pipe | None = None  # type: ignore[assignment]
    _tracer: Tracer | None = None
    """The tracer of real SDK spans (None when deferred)."""
    _previous: SpanContext | None = None
    """The last ended attempt's span (the next one links to it)."""

    def __init__(self, tracer: Tracer, attributes: dict[str, Any],
                 pipe: Pipe | None = None) -> None:
        self._outer = outer = _GET()
        self._attributes = attributes
        if pipe is not None:  # deferred, under a valid (sampled) parent only
            current = outer.get(SPAN_KEY)
            last, found = pipe.parent
            if current is not last:
                try:
                    found = current.get_span_context()  # type: ignore[attr-defined]
                except AttributeError:
                    found = None
                if found is not None and not found.is_valid:
                    found = None
                pipe.parent = (current, found)
            if found is not None:  # (DeferredSpan's fields, without its frame)
                if pipe.thread is None:
                    pipe.start_thread()
                self._pipe = pipe
                self._id = pipe.random(64) or pipe.ids.generate_span_id()
                self._parent = found
                self._start = time.time_ns()
                self.span: Span | None = self
                """The open attempt's span (None once a retried attempt ended it)."""
                self._token = _SET(Context({**outer, SPAN_KEY: self}))
                return
        self._tracer = tracer
        self.span = span = tracer.start_span("tether.node", outer, attributes=attributes)
        self._token = _SET(Context({**outer, SPAN_KEY: span, NODE_KEY: self}))

    @property
    def node_id(self) -> str:
        return str(self._attributes["tether.node.id"])

    def leave(self) -> None:
        """The unit's context was copied (a task started in it): this one is reset now."""
        token = self._token
        self._token = None
        _RESET(token)

    def done(self, task: asyncio.Task[Any]) -> None:
        """The unit's task ended (its done callback): close with its outcome."""
        self.finish(outcome_of(task))

    def finish(self, outcome: object) -> None:
        """The unit ended with ``outcome`` (its result, or what it raised): its span ends
        with the node's status (and the current context is the one before the unit)."""
        token = self._token
        if token is not None:
            self._token = None  # (the queued span keeps nothing it no longer needs)
            _RESET(token)
        span = self.span
        if span is None:  # stopped during a retry's backoff: that attempt's span ended
            return
        self.span = None
        if isinstance(outcome, BaseException):
            status = status_of(outcome)
            if status == "interrupted":
                if self._attributes["tether.node.kind"] == "approval" or \
                        getattr(outcome, "reason", None) is not None:
                    span.add_event("tether.approval", {"tether.approval.state": "requested"})
            elif status == "failed":
                _failed(span, outcome)
        else:
            status = "completed"
            if self._attributes["tether.node.kind"] == "approval":
                span.add_event("tether.approval", {"tether.approval.state": "answered"})
        if span is self:  # (DeferredSpan.close, without its frame: the path of every node)
            if not self._ended:
                if self._extra is None:
                    self._node_status = status
                else:
                    self._extra["tether.node.status"] = status
                self.end()
            return
        if self._pipe is not None:
            span.close(status)  # type: ignore[attr-defined]  # (a DeferredSpan: status, end)
            return
        span.set_attribute("tether.node.status", status)
        span.end()

    def retried(self, attempt: int, exc: BaseException | None, backoff: float) -> None:
        """Attempt ``attempt`` failed (or, ``exc`` None, returned an output its ``until``
        does not accept) and is retried after ``backoff`` seconds: its span ends (status
        ``retried``, the backoff as an attribute and on a ``tether.node.retry`` event) and
        the next opens after the backoff."""
        span = self.span
        if span is None:
            return
        event: dict[str, Any] = {"tether.node.attempt": attempt}
        if exc is not None:
            event["error.type"] = type(exc).__name__
        event["tether.node.retry.backoff_seconds"] = backoff
        span.add_event("tether.node.retry", event)
        span.set_attributes({"tether.node.status": "retried",
                             "tether.node.retry.backoff_seconds": backoff})
        if exc is not None:
            _failed(span, exc)
        self._previous = span.get_span_context()
        span.end()  # (its context stays current until the next attempt: see the class)
        self.span = None

    def next_attempt(self, attempt: int, resumed: bool = False) -> None:
        """Attempt ``attempt`` starts: its own span, a sibling of the one before (linked),
        made current in the unit's context (the first attempt's reset restores the context
        before the unit, whatever was set after it); ``resumed``: the unit's span (still
        open) is this attempt's, the first here."""
        if self.span is not None:
            if resumed:
                self.span.set_attribute("tether.node.attempt", attempt)
            return
        attributes = dict(self._attributes)
        attributes["tether.node.attempt"] = attempt
        previous = self._previous
        links = [Link(previous, {"tether.link": "previous_attempt"})] \
            if previous is not None else None
        span: Span
        if self._pipe is not None:
            span = self._pipe.span("tether.node", self._parent, attributes, links)
        else:
            assert self._tracer is not None
            span = self._tracer.start_span("tether.node", self._outer, attributes=attributes,
                                           links=links)
        self.span = span
        _SET(Context({**self._outer, SPAN_KEY: span, NODE_KEY: self}))


def _failed(span: Span, exc: BaseException) -> None:
    """ERROR status and ``error.type``; the message only of the runtime's own failure, which
    it masked (a task's exception, seen raw at a retry, may carry a secret anywhere)."""
    if isinstance(exc, NodeFailure):
        span.set_attribute("error.type", exc.error.type)
        message = exc.error.message
        span.set_status(Status(StatusCode.ERROR, message if isinstance(message, str)
                               else None))
        return
    error_status(span, exc)


def _current(node_id: str) -> NodeSpan | None:
    """The node span of the unit running here, if it is ``node_id``'s (a first deferred
    attempt is the current span itself; any other is under :data:`NODE_KEY`)."""
    context = _GET()
    current = context.get(SPAN_KEY)
    if not isinstance(current, NodeSpan):
        current = context.get(NODE_KEY)
    if not isinstance(current, NodeSpan) or current.node_id != node_id:
        return None
    return current


def retried(node_id: str, attempt: int, exc: BaseException | None, backoff: float) -> None:
    """A task attempt failed and will be retried (:meth:`NodeSpan.retried`)."""
    current = _current(node_id)
    if current is not None:
        current.retried(attempt, exc, backoff)


def next_attempt(node_id: str, attempt: int, resumed: bool = False) -> None:
    """Attempt ``attempt`` of a retried task starts (:meth:`NodeSpan.next_attempt`)."""
    current = _current(node_id)
    if current is not None:
        current.next_attempt(attempt, resumed)


def error_status(span: Span, exc: BaseException) -> None:
    """Mark ``span`` failed by ``exc``: its type only (a message may hold a secret)."""
    span.set_attribute("error.type", type(exc).__name__)
    span.set_status(Status(StatusCode.ERROR))


def remember_caller(store: Checkpointer, execution_id: str) -> None:
    """Store the span active where a run is submitted: its first span's parent, later."""
    span = trace.get_current_span()
    if not span.get_span_context().is_valid:
        return
    try:
        store.put_idempotent(execution_id, CALLER_KEY, _dump(span))
    except TetherError as exc:
        log.debug("storing the submitter's span of %s: %s", execution_id, exc)
