"""The webhook sender never follows a redirect (issue 22): against real HTTP servers on
loopback, a receiver answering 302 to another server's address (a trap) gets a failed
delivery that is retried, never counted delivered, and the trap never sees a request, a
signature or a body, for 301, 302, 303, 307 and 308 alike."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tether.stores.open import open_checkpointer
from tether.web.links import Links
from tether.web.notify import Notifier


class Recorder:
    """A loopback server: answers ``status`` (with ``Location: location``) to the first
    ``redirects`` requests, 204 after; records every request's method and headers."""

    def __init__(self, redirects: int = 0, status: int = 302, location: str = "") -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                recorder.requests.append((self.command, dict(self.headers)))
                if len(recorder.requests) <= redirects:
                    self.send_response(status)
                    self.send_header("Location", location)
                else:
                    self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = _any

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hook"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def trap() -> Iterator[Recorder]:
    found = Recorder()
    yield found
    found.close()


def _notifier(tmp_path: Path, url: str) -> Notifier:
    store = open_checkpointer(f"sqlite:///{tmp_path / 'n.db'}")
    return Notifier(store, Links(b"k" * 32, "http://console", 60.0), url, b"s" * 32,
                    "http://console")


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failed_attempt_and_the_trap_sees_nothing(
        tmp_path: Path, trap: Recorder, status: int) -> None:
    receiver = Recorder(redirects=1, status=status, location=trap.url)
    try:
        problem = _notifier(tmp_path, receiver.url)._post(b'{"event": "run.paused"}')
        assert problem == f"HTTP {status} (a redirect: not followed)"
        assert [method for method, _ in receiver.requests] == ["POST"]
        assert trap.requests == []
    finally:
        receiver.close()


def test_an_event_refused_by_redirects_is_retried_and_delivered_only_on_a_2xx(
        tmp_path: Path, trap: Recorder) -> None:
    receiver = Recorder(redirects=2, status=302, location=trap.url)
    try:
        notifier = _notifier(tmp_path, receiver.url)
        assert notifier.send(b'{"event": "run.paused"}') is True
        assert [method for method, _ in receiver.requests] == ["POST"] * 3
        assert all(headers.get("X-Tether-Signature", "").startswith("sha256=")
                   for _, headers in receiver.requests)
        assert trap.requests == []  # no signature ever left for the other address
    finally:
        receiver.close()


def test_an_event_that_only_meets_redirects_is_never_counted_delivered(
        tmp_path: Path, trap: Recorder) -> None:
    """Stopping the notifier ends the retries: the event counts as failed, not delivered."""
    receiver = Recorder(redirects=10**6, status=302, location=trap.url)
    try:
        notifier = _notifier(tmp_path, receiver.url)
        notifier._stop.set()
        assert notifier.send(b'{"event": "run.failed"}') is False
        assert len(receiver.requests) == 1 and trap.requests == []
    finally:
        receiver.close()
