"""Keeping a run's lease alive while this process executes it (a daemon heartbeat thread)."""

from __future__ import annotations

import threading
import time

from tether.stores.base import Checkpointer
from tether.stores.leases import lease_free, owner_is_dead
from tether.stores.records import RunRecord


class _Heartbeat:
    """One daemon thread per process renewing the leases of every run this process executes.

    A run registers when it starts executing and unregisters when it stops; each lease is
    renewed every third of its length. (One thread for all runs: starting a thread per run
    would cost more than a short run itself.)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._leases: dict[int, tuple[Checkpointer, str, str, float, float]] = {}
        self._next_id = 0
        self._thread: threading.Thread | None = None

    def register(self, store: Checkpointer, execution_id: str, owner: str,
                 seconds: float) -> int:
        with self._lock:
            self._next_id += 1
            due = time.monotonic() + seconds / 3
            self._leases[self._next_id] = (store, execution_id, owner, seconds, due)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._beat, daemon=True,
                                                name="tether-lease-heartbeat")
                self._thread.start()
            self._wake.notify()
            return self._next_id

    def unregister(self, ticket: int) -> None:
        with self._lock:
            self._leases.pop(ticket, None)

    def _beat(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                due = [(t, lease) for t, lease in self._leases.items() if lease[4] <= now]
                for ticket, (store, eid, owner, seconds, _) in due:
                    self._leases[ticket] = (store, eid, owner, seconds, now + seconds / 3)
                soonest = min((lease[4] for lease in self._leases.values()), default=now + 60)
            for _, (store, eid, owner, seconds, _) in due:
                try:
                    store.renew(eid, owner, time.time() + seconds)
                except Exception:  # the next beat retries; expiry is the safety net
                    continue
            with self._lock:
                self._wake.wait(timeout=max(0.01, soonest - time.monotonic()))


HEARTBEAT = _Heartbeat()


class LeaseKeeper:
    """Keeps ``owner``'s lease on a run renewed while the block runs."""

    def __init__(self, store: Checkpointer, execution_id: str, owner: str,
                 seconds: float) -> None:
        self.store = store
        self.execution_id = execution_id
        self.owner = owner
        self.seconds = seconds
        self._ticket = 0

    def __enter__(self) -> LeaseKeeper:
        self._ticket = HEARTBEAT.register(self.store, self.execution_id, self.owner,
                                          self.seconds)
        return self

    def __exit__(self, *exc: object) -> None:
        HEARTBEAT.unregister(self._ticket)


def take_over(store: Checkpointer, run: RunRecord, owner: str, seconds: float) -> bool:
    """Acquire a run's lease: free, expired, ours, or held by a dead process on this host."""
    now = time.time()
    steal = run.owner if run.owner and owner_is_dead(run.owner) else None
    return store.acquire(run.execution_id, owner, now + seconds, now, steal_from=steal)


def held_by_other(run: RunRecord, owner: str, now: float) -> bool:
    """Whether another live process holds the run's lease (so ``take_over`` would fail)."""
    dead = run.owner if run.owner and owner_is_dead(run.owner) else None
    return not lease_free(run.owner, run.lease_until, owner, now, dead)
