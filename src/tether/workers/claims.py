"""How a worker learns there is work: the lease length, and wake-ups.

PostgreSQL: every enqueue (``Runner.submit``, ``tether submit``, ``enqueue_run``) sends
``NOTIFY tether_runs`` in its transaction; a worker holds one extra connection that
``LISTEN``\\ s and wakes its loop at once, and still polls every second (a notification is
lost while that connection is down, and recovery of expired leases has no notification).
SQLite has no notifications: workers poll every 0.2 s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable

from tether.errors import TetherError
from tether.stores.base import Checkpointer
from tether.stores.lease_env import DEFAULT_LEASE_SECONDS as DEFAULT_LEASE_SECONDS
from tether.stores.lease_env import LEASE_ENV as LEASE_ENV

log = logging.getLogger("tether.workers")

POSTGRES_POLL_SECONDS = 1.0
SQLITE_POLL_SECONDS = 0.2
BACKOFF_FIRST_SECONDS = 1.0  # a failed drive: the first wait before any worker retries it
BACKOFF_CAP_SECONDS = 300.0
REBLOCK_SECONDS = 5.0  # how often a worker re-marks the runs of a plan it cannot serve


def backoff_seconds(failures: int) -> float:
    """The wait after the ``failures``-th failed drive of a run: 1 s, doubling, at most
    5 minutes."""
    return min(BACKOFF_CAP_SECONDS, BACKOFF_FIRST_SECONDS * 2.0 ** max(0, failures - 1))


def lease_seconds(explicit: float | None = None) -> float:
    """The lease length: ``explicit``, else ``$TETHER_LEASE_SECONDS``, else 30 s."""
    if explicit is not None:
        value = float(explicit)
    else:
        raw = os.environ.get(LEASE_ENV, "").strip()
        try:
            value = float(raw) if raw else DEFAULT_LEASE_SECONDS
        except ValueError:
            raise TetherError(f"{LEASE_ENV}={raw!r} is not a number of seconds") from None
    if not 0 < value <= 86400:
        raise TetherError(f"a lease of {value:g} s is out of range (above 0, at most 86400)")
    return value


def poll_seconds(store: Checkpointer) -> float:
    """How often a worker looks for work without being woken."""
    return POSTGRES_POLL_SECONDS if _channel(store) is not None else SQLITE_POLL_SECONDS


def _channel(store: Checkpointer) -> str | None:
    channel = getattr(store, "notify_channel", None)
    return channel if isinstance(channel, str) else None


class Listener:
    """A thread that calls ``wake`` whenever PostgreSQL announces an enqueue (a no-op for
    stores without notifications). Reconnects after a lost connection."""

    def __init__(self, store: Checkpointer, wake: Callable[[], None]) -> None:
        self._channel = _channel(store)
        engine = getattr(store, "engine", None)
        self._dsn = engine.url.set(drivername="postgresql").render_as_string(
            hide_password=False) if engine is not None and self._channel else None
        self._wake = wake
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._channel is None or self._dsn is None:
            return
        self._thread = threading.Thread(target=self._listen, name="tether-worker-listen",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(5)

    def _listen(self) -> None:
        import psycopg

        assert self._dsn is not None
        while not self._stopped.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f'LISTEN "{self._channel}"')
                    self._wake()  # anything enqueued while not listening
                    while not self._stopped.is_set():
                        for _ in conn.notifies(timeout=0.5):
                            self._wake()
            except Exception as exc:  # the database is unreachable: polling goes on
                log.info("LISTEN connection lost (%s); polling meanwhile", exc)
                with contextlib.suppress(Exception):
                    self._stopped.wait(1.0)
