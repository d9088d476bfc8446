"""Webhook events: ``--notify-url`` gets a signed JSON POST when a run pauses, fails or
completes, whichever process made it do so, as long as it shares the store.

Watching: a thread reads :meth:`~tether.stores.base.Checkpointer.runs_changed` every
:data:`POLL_SECONDS` from a cursor, re-reading a window of :data:`LOOKBACK_SECONDS` behind it
(a writer's clock or commit may lag), and remembers what it sent in that window, so each
change is sent once. Changes made before the console started are not sent.

Delivering: a second thread POSTs each event with ``X-Tether-Signature: sha256=<hex>``, the
HMAC-SHA256 of the exact body bytes under ``TETHER_WEBHOOK_SECRET``, and retries a failed
delivery (a connection error, a timeout, any status but 2xx) with exponential backoff
(0.5 s, 1 s, 2 s, ... up to :data:`ATTEMPTS` tries). Neither thread is in any run's way: runs
write the store and go on; the queue is bounded (the oldest event is dropped, with a warning,
when a receiver stays down long enough to fill it).

An event::

    {"event": "run.paused", "id": "<execution id>:<status>:<time>", "execution_id": ...,
     "workflow": ..., "status": "paused", "at": "<ISO time>", "url": "<run page>",
     "error": null, "output": null,
     "pending": [{"node_id", "agent_path", "reason", "context", "checkpoint_id",
                  "approval_url", "link_expires_at"}]}

``approval_url`` is a signed one-use link (see :mod:`tether.web.links`).
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from tether.errors import TetherError
from tether.status import RUN_END, RunStatus
from tether.stores.base import Checkpointer
from tether.stores.records import RunCursor, RunRecord
from tether.web.config import ServeConfig
from tether.web.links import Links
from tether.web.present import iso
from tether.web.urls import run_url

log = logging.getLogger("tether.web.notify")

POLL_SECONDS = 0.5
LOOKBACK_SECONDS = 5.0
ATTEMPTS = 8
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
TIMEOUT_SECONDS = 10.0
QUEUE_LIMIT = 10_000
_EVENTS: dict[str, str] = {RunStatus.PAUSED.value: "run.paused",
                           RunStatus.FAILED.value: "run.failed",
                           RunStatus.COMPLETED.value: "run.completed"}


def signature(secret: bytes, body: bytes) -> str:
    """The ``X-Tether-Signature`` value of ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class Notifier:
    """The watcher and the sender (see the module docstring)."""

    def __init__(self, store: Checkpointer, links: Links, url: str, secret: bytes,
                 base_url: str, *, poll: float = POLL_SECONDS) -> None:
        self.store = store
        self.links = links
        self.url = url
        self.secret = secret
        self.base_url = base_url
        self.poll = poll
        self._stop = threading.Event()
        self._queue: collections.deque[bytes] = collections.deque()
        self._ready = threading.Condition()
        self._sent: dict[str, float] = {}  # event id -> change time, within the window
        self._start = time.time()
        self._cursor = RunCursor(self._start, "")
        self._threads: list[threading.Thread] = []
        self.delivered = 0
        self.failed = 0

    @classmethod
    def from_config(cls, config: ServeConfig, store: Checkpointer, links: Links) -> Notifier:
        assert config.notify_url is not None and config.webhook_secret is not None
        return cls(store, links, config.notify_url, config.webhook_secret, config.base_url)

    def start(self) -> None:
        for target, name in ((self._watch, "tether-notify-watch"),
                             (self._deliver, "tether-notify-send")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        with self._ready:
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(5)

    # -- watching ----------------------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self.scan()
            except TetherError as exc:
                log.warning("notifications: cannot read the store: %s", exc)

    def scan(self) -> int:
        """Queue the events of changes since the last scan; how many were queued."""
        queued = 0
        after: RunCursor | None = RunCursor(self._cursor.at - LOOKBACK_SECONDS, "")
        while after is not None:
            runs, nxt = self.store.runs_changed(after, limit=500)
            for run in runs:
                queued += self._consider(run)
            if nxt is not None and nxt > self._cursor:
                self._cursor = nxt
            after = nxt if len(runs) == 500 else None
        horizon = self._cursor.at - 2 * LOOKBACK_SECONDS
        self._sent = {k: t for k, t in self._sent.items() if t >= horizon}
        return queued

    def _consider(self, run: RunRecord) -> int:
        changed = run.updated_at.timestamp()
        name = _EVENTS.get(run.status)
        if name is None or changed < self._start:
            return 0
        event_id = f"{run.execution_id}:{run.status}:{changed!r}"
        if event_id in self._sent:
            return 0
        self._sent[event_id] = changed
        self._enqueue(json.dumps(self.event(run, name, event_id), ensure_ascii=False,
                                 separators=(",", ":")).encode())
        return 1

    def event(self, run: RunRecord, name: str, event_id: str) -> dict[str, Any]:
        """The JSON of one event."""
        pending = []
        output = None
        if run.status == RunStatus.PAUSED:
            for item in self.store.list_pending(run.execution_id):
                link = self.links.mint(item)
                pending.append({"node_id": item.node_id, "agent_path": item.agent_path,
                                "reason": item.reason, "context": item.context,
                                "checkpoint_id": item.checkpoint_id,
                                "waiting_since": iso(item.created_at),
                                "approval_url": link.url,
                                "link_expires_at": iso(link.expires_at)})
        elif run.status == RunStatus.COMPLETED:
            last = self.store.get_last(run.execution_id)
            if last is not None and last.node_id == RUN_END:
                output = last.node_output
        return {"event": name, "id": event_id, "execution_id": run.execution_id,
                "workflow": run.workflow, "status": run.status, "at": iso(run.updated_at),
                "url": self.base_url + run_url(run.execution_id), "error": run.error,
                "output": output, "pending": pending}

    def _enqueue(self, body: bytes) -> None:
        with self._ready:
            if len(self._queue) >= QUEUE_LIMIT:
                self._queue.popleft()
                log.warning("notifications: %s is not taking events; dropped the oldest",
                            self.url)
            self._queue.append(body)
            self._ready.notify()

    # -- delivering --------------------------------------------------------------------------
    def _deliver(self) -> None:
        while not self._stop.is_set():
            with self._ready:
                while not self._queue and not self._stop.is_set():
                    self._ready.wait(1.0)
                if self._stop.is_set():
                    return
                body = self._queue.popleft()
            if self.send(body):
                self.delivered += 1
            else:
                self.failed += 1

    def send(self, body: bytes) -> bool:
        """POST one event, retrying with backoff; whether the receiver took it."""
        delay = FIRST_BACKOFF
        for attempt in range(1, ATTEMPTS + 1):
            problem = self._post(body)
            if problem is None:
                return True
            log.warning("notifications: attempt %d of %d to %s failed: %s", attempt,
                        ATTEMPTS, self.url, problem)
            if attempt < ATTEMPTS and self._stop.wait(delay):
                return False
            delay = min(delay * 2, MAX_BACKOFF)
        return False

    def _post(self, body: bytes) -> str | None:
        request = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Content-Type": "application/json", "User-Agent": "tether-console",
            "X-Tether-Signature": signature(self.secret, body)})
        try:
            with _OPENER.open(request, timeout=TIMEOUT_SECONDS) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            moved = " (a redirect: not followed)" if 300 <= exc.code < 400 else ""
            return f"HTTP {exc.code}{moved}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return str(getattr(exc, "reason", exc))
        return None if 200 <= status < 300 else f"HTTP {status}"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx answer is a failed delivery, never followed: following it would send the event
    (and its ``X-Tether-Signature``) somewhere the operator did not configure, or turn the
    POST into a GET that loses it while counting it delivered."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)
