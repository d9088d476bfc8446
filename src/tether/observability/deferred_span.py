"""A deferred node span: recorded on the run thread, built into an SDK span off it.

Only the OpenTelemetry API is needed here (``spans.NodeSpan`` is one, and ``spans`` is
imported with any provider); the SDK side (the queue's drain thread, the ``ReadableSpan``) is
``deferred.py``.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, Status, StatusCode
from opentelemetry.util import types

if TYPE_CHECKING:
    from tether.observability.deferred import Pipe

__all__ = ["WAKE_AT", "DeferredSpan"]

WAKE_AT = 512
"""Records queued before the drain thread is woken (it also wakes every :data:`INTERVAL`)."""


class DeferredSpan(trace.Span):
    """A node span recorded on the run thread and built into an SDK span off it: once ended
    it is the queue's record (nothing changes it after), read by the drain thread."""

    # what most spans never set, read from the class until set (fewer stores per span)
    _extra: dict[str, Any] | None = None
    """Attributes set after the start (``attributes`` is shared, never changed)."""
    _events: list[tuple[str, types.Attributes, int]] | None = None
    _status: Status | None = None
    _context: SpanContext | None = None
    _node_status: str | None = None
    """``tether.node.status`` when nothing else was set after the start (no dict for it)."""
    _ended = False
    _end = 0
    _name = "tether.node"
    _links: Sequence[Link] | None = None

    def __init__(self, pipe: Pipe, name: str, parent: SpanContext,
                 attributes: Mapping[str, Any], links: Sequence[Link] | None) -> None:
        self._pipe = pipe
        if name != "tether.node":
            self._name = name
        self._id = pipe.random(64) or pipe.ids.generate_span_id()
        self._parent = parent
        self._attributes = attributes
        if links:
            self._links = links
        self._start = time.time_ns()

    def get_span_context(self) -> SpanContext:
        """Built when first asked (a task's own span, a log line; else by the drain thread):
        the same value whichever thread builds it."""
        context = self._context
        if context is None:
            parent = self._parent
            context = self._context = SpanContext(parent.trace_id, self._id, False,
                                                  parent.trace_flags, parent.trace_state)
        return context

    def is_recording(self) -> bool:
        return not self._ended

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        if self._ended:
            return
        if self._extra is None:
            self._extra = {}
        self._extra[key] = value

    def close(self, status: str) -> None:
        """End the span with its ``tether.node.status`` (:meth:`set_attribute` and
        :meth:`end` in one call, with no dict when nothing else was set)."""
        if self._ended:
            return
        if self._extra is None:
            self._node_status = status
        else:
            self._extra["tether.node.status"] = status
        self.end()

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def add_event(self, name: str, attributes: types.Attributes = None,
                  timestamp: int | None = None) -> None:
        if self._ended:
            return
        if self._events is None:
            self._events = []
        self._events.append((name, attributes, timestamp or time.time_ns()))

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if self._ended or not context.is_valid:
            return
        self._links = [*(self._links or ()), Link(context, attributes)]

    def update_name(self, name: str) -> None:
        if not self._ended:
            self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """As the SDK's: an OK status is final, UNSET is ignored."""
        if self._ended or (self._status is not None
                           and self._status.status_code is StatusCode.OK):
            return
        found = status if isinstance(status, Status) else Status(status, description)
        if found.status_code is not StatusCode.UNSET:
            self._status = found

    def record_exception(self, exception: BaseException, attributes: types.Attributes = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        """As the SDK's: an ``exception`` event (a task's own call; tether never makes it)."""
        found: dict[str, Any] = {
            "exception.type": type(exception).__qualname__,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(
                type(exception), exception, exception.__traceback__)),
            "exception.escaped": str(escaped)}
        if attributes:
            found.update(attributes)
        self.add_event("exception", found, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self._ended:
            return
        self._end = end_time or time.time_ns()
        self._ended = True
        pipe = self._pipe
        queue = pipe.queue
        queue.append(self)
        if len(queue) >= WAKE_AT and not pipe.wake.is_set():  # (no lock taken when set)
            pipe.wake.set()
