"""Keeping a run's lease alive while this process executes it (a daemon heartbeat thread)."""

from __future__ import annotations

import threading
import time

from tether.stores.base import Checkpointer
from tether.stores.leases import lease_free, owner_is_dead
from tether.stores.records import RunRecord


class LeaseKeeper:
    """Renews ``owner``'s lease on a run every third of its length until stopped."""

    def __init__(self, store: Checkpointer, execution_id: str, owner: str,
                 seconds: float) -> None:
        self.store = store
        self.execution_id = execution_id
        self.owner = owner
        self.seconds = seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True,
                                        name=f"tether-lease-{execution_id[:8]}")

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                self.store.renew(self.execution_id, self.owner, time.time() + self.seconds)
            except Exception:  # the next beat retries; expiry is the safety net
                continue


def take_over(store: Checkpointer, run: RunRecord, owner: str, seconds: float) -> bool:
    """Acquire a run's lease: free, expired, ours, or held by a dead process on this host."""
    now = time.time()
    steal = run.owner if run.owner and owner_is_dead(run.owner) else None
    return store.acquire(run.execution_id, owner, now + seconds, now, steal_from=steal)


def held_by_other(run: RunRecord, owner: str, now: float) -> bool:
    """Whether another live process holds the run's lease (so ``take_over`` would fail)."""
    dead = run.owner if run.owner and owner_is_dead(run.owner) else None
    return not lease_free(run.owner, run.lease_until, owner, now, dead)
