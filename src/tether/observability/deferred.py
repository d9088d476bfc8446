"""Deferred node spans: what a ``tether.node`` span costs the run thread, made small.

The SDK's ``Tracer.start_span`` and ``Span.end`` cost about as much as a whole W0 node
(sampler, id, attribute validation, locks, ``on_start``, a ``ReadableSpan`` copy, ``on_end``).
Node spans are the many spans of a run, so when the provider is the SDK's own
``TracerProvider`` (tether's, or a host application's) a node attempt does only what its
correctness needs on the run thread: a span id from the provider's id generator, a
``SpanContext`` in the run's trace (its trace flags and state: sampling follows the parent),
a :class:`DeferredSpan` made current while the task body runs (a task's own spans nest under
it; ``get_current_span().set_attribute`` works as on an SDK span), two ``time.time_ns()`` and
one record appended to a deque. A daemon thread (one per provider) turns the records into
SDK ``ReadableSpan`` s (resource and instrumentation scope of the provider, attributes bounded
by the SDK's span limits) and hands them to the provider's span processors' ``on_end``.

No span is lost: a run attempt's end waits until its node spans have reached the processors
(before its own ``tether.run`` span ends), and a :class:`Flusher` processor, put first among
the provider's processors, drains the queue in ``force_flush`` and ``shutdown`` (so the
exporters after it flush what it drained), and at process exit.

The trade-off: the processors see node spans only at ``on_end`` (``on_start`` and the SDK's
``_on_ending`` are not called for them); a sampler's decision for a node span is its parent's
(the sampler is not consulted per node). Other providers (a vendor's, or an SDK provider with
a concurrent multi-processor) get real SDK spans as before, and ``TETHER_DEFERRED_SPANS=0``
asks for real spans everywhere.
"""

from __future__ import annotations

import atexit
import logging
import os
import random
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import (
    Event,
    ReadableSpan,
    SpanLimits,
    SpanProcessor,
    SynchronousMultiSpanProcessor,
)
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode

from tether.observability.deferred_span import WAKE_AT, DeferredSpan

__all__ = ["WAKE_AT", "DeferredSpan", "Flusher", "Pipe", "drain_all", "enabled", "pipe_for",
           "put_first"]

log = logging.getLogger(__name__)

SWITCH = "TETHER_DEFERRED_SPANS"
"""The environment variable that turns deferred node spans off (``0``, ``false``, ``no``)."""

INTERVAL = 0.5
"""Seconds between the drain thread's rounds when nothing wakes it."""

_UNSET = Status(StatusCode.UNSET)


def _zero(bits: int) -> int:
    return 0


class Flusher(SpanProcessor):
    """The first of the provider's processors: its ``force_flush`` and ``shutdown`` hand the
    queued node spans to the processors after it, which then flush them."""

    def __init__(self, pipe: Pipe) -> None:
        self._pipe = weakref.ref(pipe)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        pipe = self._pipe()
        if pipe is not None:
            pipe.drain()
        return True

    def shutdown(self) -> None:
        self.force_flush()


class Pipe:
    """The queue of one SDK tracer's ended node spans and the thread that drains it."""

    def __init__(self, tracer: SdkTracer, multi: SynchronousMultiSpanProcessor) -> None:
        self.tracer = tracer
        self.processor = multi
        self.ids = tracer.id_generator
        self.random: Callable[[int], int] = random.getrandbits \
            if type(self.ids) is RandomIdGenerator else _zero
        """``random.getrandbits`` when the ids are the SDK's random ones (its
        ``generate_span_id`` without its frame: 0, never a span id, asks it)."""
        self.kind = DeferredSpan
        """The class of the spans (``NodeSpan`` makes them without :meth:`span`)."""
        self.parent: tuple[object, SpanContext | None] = (None, None)
        """The span the last node span was made under and its context, if valid (most
        nodes of a run have the run's span as their parent: asked once)."""
        info = tracer.instrumentation_info
        self.scope = InstrumentationScope(info.name, info.version, info.schema_url)
        self.limits = SpanLimits()
        self.queue: deque[DeferredSpan | threading.Event] = deque()
        self.wake = threading.Event()
        self.lock = threading.RLock()  # held while draining (a flush waits for the round)
        self.cpu = 0.0
        """CPU seconds spent building and handing on spans (by whichever thread drained)."""
        self.thread: threading.Thread | None = None
        self._started = threading.Lock()

    # -- the run thread ----------------------------------------------------------------------
    def span(self, name: str, parent: SpanContext, attributes: Mapping[str, Any],
             links: Sequence[Link] | None = None) -> DeferredSpan:
        """Start a span, a child of ``parent`` (a sampled span's context)."""
        if self.thread is None:
            self.start_thread()
        return DeferredSpan(self, name, parent, attributes, links)

    def flush(self) -> None:
        """Return once every span ended before the call has reached the processors: the
        drain thread builds them (this thread only waits), or this one if that is gone."""
        thread = self.thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            done = threading.Event()
            self.queue.append(done)
            self.wake.set()
            while not done.wait(1.0):
                if not thread.is_alive():
                    break
            else:
                return
        self.drain()

    # -- off the run thread ------------------------------------------------------------------
    def start_thread(self) -> None:
        with self._started:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="tether-spans",
                                               daemon=True)
                self.thread.start()

    def _loop(self) -> None:
        while True:
            self.wake.wait(INTERVAL)
            self.wake.clear()
            self.drain()

    def drain(self) -> None:
        """Build every queued span and hand it to the processors' ``on_end``."""
        queue = self.queue
        with self.lock:
            started = time.thread_time()
            while queue:
                try:
                    item = queue.popleft()
                except IndexError:
                    break
                if isinstance(item, threading.Event):
                    item.set()
                    continue
                try:
                    self.processor.on_end(self._readable(item))
                except Exception:  # one processor's failure loses no other span
                    log.exception("a span processor failed on a tether.node span")
            self.cpu += time.thread_time() - started

    def _readable(self, span: DeferredSpan) -> ReadableSpan:
        limits = self.limits
        attributes = span._attributes
        if span._extra:
            attributes = {**attributes, **span._extra}
        elif span._node_status is not None:
            attributes = {**attributes, "tether.node.status": span._node_status}
        built: list[Event] = []
        for event, given, timestamp in (span._events or ())[:limits.max_events]:
            built.append(Event(event, BoundedAttributes(
                limits.max_event_attributes, given, immutable=True,
                max_value_len=limits.max_attribute_length), timestamp))
        return ReadableSpan(
            name=span._name, context=span.get_span_context(), parent=span._parent,
            resource=self.tracer.resource,
            attributes=BoundedAttributes(limits.max_span_attributes, attributes,
                                         immutable=True,
                                         max_value_len=limits.max_span_attribute_length),
            events=tuple(built), links=tuple((span._links or ())[:limits.max_links]),
            kind=SpanKind.INTERNAL, status=span._status or _UNSET, start_time=span._start,
            end_time=span._end,
            instrumentation_info=self.tracer.instrumentation_info,
            instrumentation_scope=self.scope)

    def reset(self) -> None:
        """In a forked child: the parent's thread and queue are not this process's."""
        self.queue.clear()
        self.wake = threading.Event()
        self.lock = threading.RLock()
        self._started = threading.Lock()
        self.thread = None


_PIPES: weakref.WeakKeyDictionary[SdkTracer, Pipe] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether node spans may be deferred (``TETHER_DEFERRED_SPANS`` is not off)."""
    return environ.get(SWITCH, "").strip().lower() not in {"0", "false", "no", "off"}


def pipe_for(tracer: trace.Tracer) -> Pipe | None:
    """The pipe of ``tracer``, or None when its node spans must be real SDK spans (not the
    SDK's tracer, a concurrent multi-processor, the SDK changed, or turned off)."""
    if not isinstance(tracer, SdkTracer) or not enabled():
        return None
    pipe = _PIPES.get(tracer)
    if pipe is not None:
        return pipe
    multi = tracer.span_processor
    if type(multi) is not SynchronousMultiSpanProcessor:
        return None
    with _LOCK:
        pipe = _PIPES.get(tracer)
        if pipe is None:
            pipe = Pipe(tracer, multi)
            try:
                put_first(multi, Flusher(pipe))
            except AttributeError as exc:
                log.warning("this opentelemetry-sdk's span processors are not as tether "
                            "knows them (%s): node spans are real SDK spans", exc)
                return None
            _PIPES[tracer] = pipe
    return pipe


def put_first(multi: SynchronousMultiSpanProcessor, processor: SpanProcessor) -> None:
    """Make ``processor`` the first that ``multi`` calls.

    PRIVATE SDK MEMBERS, the only ones tether touches: ``SynchronousMultiSpanProcessor
    ._span_processors`` (a tuple of processors, called in order) and ``._lock`` (opentelemetry-
    sdk 1.45). The public ``add_span_processor`` appends last, and the processors before the
    flusher would flush (or shut down) before the queued node spans reach them.
    tests/observability/test_deferred_spans.py fails loudly if the SDK changes them; should
    they go, :func:`pipe_for` falls back to real SDK spans."""
    with multi._lock:
        multi._span_processors = (processor, *multi._span_processors)


def drain_all() -> None:
    """Hand every queued span on (at process exit, before the provider's own shutdown:
    ``atexit`` runs this module's handler first, registered after the provider's)."""
    for pipe in list(_PIPES.values()):
        pipe.drain()


def _after_fork() -> None:
    for pipe in list(_PIPES.values()):
        pipe.reset()


atexit.register(drain_all)
os.register_at_fork(after_in_child=_after_fork)
