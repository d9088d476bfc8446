"""A real OTLP/HTTP trace receiver on 127.0.0.1, for the trace tests.

It decodes each ``ExportTraceServiceRequest`` with opentelemetry-proto (as a collector does)
and keeps every span as a :class:`Received` value the tests can arrange into a tree.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

WAIT_SECONDS = 120.0


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


@dataclass(frozen=True)
class Received:
    """One span as the receiver decoded it (ids in hex)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[str, str, dict[str, Any]]]
    status_code: int
    status_message: str
    service: str


class Receiver:
    """The receiver (a context manager): ``endpoint`` for OTEL_EXPORTER_OTLP_ENDPOINT."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._take(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def env(self) -> dict[str, str]:
        """The environment a child process exports its spans here with."""
        return {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
                "OTEL_SERVICE_NAME": "tether-test", "OTEL_BSP_SCHEDULE_DELAY": "200"}

    def _take(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            service = str(_attributes(resource_spans.resource.attributes).get(
                "service.name", ""))
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    found.append(Received(
                        span.name, span.trace_id.hex(), span.span_id.hex(),
                        span.parent_span_id.hex(), _attributes(span.attributes),
                        [(e.name, _attributes(e.attributes)) for e in span.events],
                        [(link.trace_id.hex(), link.span_id.hex(),
                          _attributes(link.attributes)) for link in span.links],
                        span.status.code, span.status.message, service))
        with self._lock:
            self.spans.extend(found)

    def wait_for(self, condition: Callable[[list[Received]], bool],
                 timeout: float = WAIT_SECONDS) -> list[Received]:
        """The spans once ``condition`` holds for them (fails after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                spans = list(self.spans)
            if condition(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"the spans never met the condition: "
                                     f"{[(s.name, s.attributes) for s in spans]}")
            time.sleep(0.1)


def named(spans: list[Received], name: str, **attributes: Any) -> list[Received]:
    """The spans called ``name`` whose attributes include ``attributes`` (dots as ``__``)."""
    wanted = {k.replace("__", "."): v for k, v in attributes.items()}
    return [s for s in spans if s.name == name
            and all(s.attributes.get(k) == v for k, v in wanted.items())]


def children(spans: list[Received], parent: Received) -> Iterator[Received]:
    """The spans whose parent is ``parent``."""
    return (s for s in spans if s.parent_id == parent.span_id and s.trace_id == parent.trace_id)
