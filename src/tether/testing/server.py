"""A scripted model server: a real HTTP server on 127.0.0.1 speaking OpenAI's and
Anthropic's wire protocols, for offline tests of anything that calls a model.

::

    with ScriptedModelServer([ScriptedReply(text="hello")]) as server:
        model = open_model({"provider": "openai", "name": "gpt-4.1-mini",
                            "base_url": server.openai_base_url})
        ...
        assert server.requests[0].body["messages"][0]["content"] == "hi"

Endpoints (``base_url`` for OpenAI is ``http://127.0.0.1:PORT/v1``, for Anthropic
``http://127.0.0.1:PORT``):

- ``POST /v1/chat/completions`` and ``POST /v1/messages``: checked like the real APIs (a
  request they would refuse is answered 400 in their shape), then answered by the next step
  of the script;
- ``GET /_tether/requests[?wait_for=N&timeout=S]``: every request received and how it was
  answered, waiting until at least N arrived (so a crash test can kill a client at the right
  moment without sleeping);
- ``GET /_tether/state``: the script position and the number of steps left;
- ``POST /_tether/replies``: more steps for the script (JSON, as in a script file).

The state lives in the server, not in its clients: a client process can be killed and
another can carry on against the same server (see :class:`ScriptedServerClient`).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tether.testing.anthropic_wire import AnthropicWire
from tether.testing.openai_wire import OpenAIWire
from tether.testing.script import (
    RecordedRequest,
    Responder,
    Script,
    ScriptedError,
    ScriptError,
    Step,
    load_script,
)
from tether.testing.wire import Wire, WireError, undeclared_tool

DEFAULT_WAIT = 10.0


@dataclass(frozen=True)
class Answer:
    """What the server sends back for one request."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str]
    delay: float = 0.0


class ScriptedModelServer:
    """A scripted model behind a real HTTP server, usable as a context manager.

    Args:
        replies: the steps answering model requests, in order (a step may be a function of
            the request).
        respond: answers every request once ``replies`` are used up; without it such a
            request is refused (400) with a message saying the script is used up.
        host: the address to listen on (loopback by default).
        port: the port; 0 picks a free one.
    """

    def __init__(self, replies: Iterable[Step | Responder] = (), *,
                 respond: Responder | None = None, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self._script = Script(replies, respond)
        self._requests: list[RecordedRequest] = []
        self._changed = threading.Condition()
        self._closing = threading.Event()
        self._tool_ids = itertools.count(1)
        self._wires: dict[str, Wire] = {wire.path: wire for wire in (OpenAIWire(),
                                                                     AnthropicWire())}
        self._address = (host, port)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> ScriptedModelServer:
        """Start listening (in a background thread); returns the server."""
        if self._httpd is None:
            self._httpd = _HTTPServer(self._address, _Handler, self)
            self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                            name="tether-scripted-model", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop listening; requests still waiting out a delay are answered at once."""
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- where it listens ----------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._httpd is None:
            raise RuntimeError("the scripted model server is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self._address[0]}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """The ``base_url`` for OpenAI clients."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The ``base_url`` for Anthropic clients."""
        return self.url

    # -- state -----------------------------------------------------------------------------

    @property
    def requests(self) -> tuple[RecordedRequest, ...]:
        """Every request received so far, oldest first."""
        with self._changed:
            return tuple(self._requests)

    @property
    def position(self) -> int:
        """How many script steps have answered requests."""
        return self._script.position

    @property
    def remaining(self) -> int:
        """How many queued steps are left."""
        return self._script.remaining

    def add_replies(self, steps: Iterable[Step | Responder]) -> None:
        """Queue more steps after the current ones."""
        self._script.extend(steps)

    def wait_for_requests(self, count: int, timeout: float = DEFAULT_WAIT
                          ) -> tuple[RecordedRequest, ...]:
        """The requests, once at least ``count`` have arrived (or ``timeout`` passed)."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._requests) >= count, timeout)
            return tuple(self._requests)

    def state(self) -> dict[str, Any]:
        """The script position, the steps left and the number of requests."""
        return {"position": self.position, "remaining": self.remaining,
                "requests": len(self.requests)}

    # -- answering ---------------------------------------------------------------------------

    def answer(self, path: str, raw: bytes) -> Answer:
        """The answer to a model request (the HTTP layer only moves bytes)."""
        wire = self._wires[path]
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._changed:
            index = len(self._requests)
            request = RecordedRequest(index, wire.name, path, body, status=0)
            error, step, position = self._choose(wire, request)
            answer = self._render(wire, request, step, error)
            self._requests.append(RecordedRequest(
                index, wire.name, path, body, answer.status,
                None if error else position, _error_message(answer)))
            self._changed.notify_all()
        return answer

    def _choose(self, wire: Wire, request: RecordedRequest
                ) -> tuple[WireError | None, Step | None, int | None]:
        refused = wire.check_request(request.body, _request_id(request))
        if refused:
            return refused, None, None
        chosen = self._script.peek(request)
        if chosen is None:
            return wire.error(400, f"tether.testing: the script is used up ({self.position} "
                                   "steps answered) and has no reply for this request",
                              _request_id(request)), None, None
        position, step = chosen
        if not isinstance(step, ScriptedError):
            message = undeclared_tool(step, wire.declared_tools(request.body))
            if message:
                return wire.error(400, message, _request_id(request)), None, None
        self._script.advance(position)
        return None, step, position

    def _render(self, wire: Wire, request: RecordedRequest, step: Step | None,
                error: WireError | None) -> Answer:
        request_id = _request_id(request)
        headers = {"request-id": request_id, "x-request-id": request_id}
        if error is None and isinstance(step, ScriptedError):
            error = wire.scripted_error(step, request_id)
        if error is not None:
            return Answer(error.status, error.body, {**headers, **error.headers},
                          step.delay if step else 0.0)
        assert step is not None and not isinstance(step, ScriptedError)
        body = wire.reply(step, request.body, lambda: self._next_tool_id(wire), request_id)
        return Answer(200, body, headers, step.delay)

    def _next_tool_id(self, wire: Wire) -> str:
        prefix = "call_" if wire.name == "openai" else "toolu_"
        return f"{prefix}{next(self._tool_ids)}"

    def wait(self, delay: float) -> None:
        """Wait out a step's delay (cut short when the server closes)."""
        if delay > 0:
            self._closing.wait(delay)

    def is_model_path(self, path: str) -> bool:
        """Whether ``path`` is one of the wire protocols' endpoints."""
        return path in self._wires


def _request_id(request: RecordedRequest) -> str:
    return f"tether_{request.index}"


def _error_message(answer: Answer) -> str | None:
    if answer.status < 400:
        return None
    error = answer.body.get("error")
    return str(error.get("message")) if isinstance(error, dict) else None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 model: ScriptedModelServer) -> None:
        self.model = model
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tether-scripted-model"
    server: _HTTPServer

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        model = self.server.model
        if model.is_model_path(path):
            answer = model.answer(path, raw)
            model.wait(answer.delay)
            self._send(answer.status, answer.body, answer.headers)
        elif path == "/_tether/replies":
            self._add_replies(raw)
        else:
            self._send(404, {"error": {"message": f"no endpoint {path}"}})

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        model = self.server.model
        if parts.path == "/_tether/requests":
            query = parse_qs(parts.query)
            count = int(query.get("wait_for", ["0"])[0])
            timeout = float(query.get("timeout", [str(DEFAULT_WAIT)])[0])
            requests = model.wait_for_requests(count, timeout)
            self._send(200, {**model.state(),
                             "requests": [request.to_data() for request in requests]})
        elif parts.path == "/_tether/state":
            self._send(200, model.state())
        else:
            self._send(404, {"error": {"message": f"no endpoint {parts.path}"}})

    def _add_replies(self, raw: bytes) -> None:
        try:
            steps = load_script(json.loads(raw))
        except (ValueError, ScriptError) as exc:
            self._send(400, {"error": {"message": str(exc)}})
            return
        self.server.model.add_replies(steps)
        self._send(200, self.server.model.state())

    def _send(self, status: int, body: dict[str, Any],
              headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout): nothing to do

    def log_message(self, format: str, *args: Any) -> None:
        return
