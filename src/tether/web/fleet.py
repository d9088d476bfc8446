"""Who continues the work the console records: the console's side of the one lifecycle.

The console never runs a task in a request, and it has no job path of its own. Answering a
pause claims it (the store's atomic claim: one winner) and puts the run on its queue;
resuming a failed run queues it; forking writes the branch's origin and leaves the branch to
the workers of the original's queue. Whoever claims the run then continues it through the
ordinary ``Runner.aresume``: any ``tether worker`` of the run's queue (any process sharing
the store), or ``tether resume ID`` where the task modules are (``runtime/lifecycle.py``).

``tether serve --worker`` adds one ordinary :class:`tether.workers.Worker` of the ``default``
queue to this process (a thread with its own event loop and store connection), so one
process serves a single machine: answered, queued, crashed and due runs, schedule ticks and
timers are served as by ``tether worker``, under the same claims, leases and fencing.

Cancelling is the workers' cancel request, recorded in the store by the console itself
(:meth:`~tether.stores.base.Checkpointer.request_cancel`): a run nothing executes ends
``cancelled`` at once, one a worker holds stops at its next node boundary.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tether.errors import RunStateError
from tether.runtime.lifecycle import live_workers, run_queue
from tether.stores.base import Checkpointer
from tether.stores.records import RunRecord

if TYPE_CHECKING:
    from tether.workers.loop import Worker

log = logging.getLogger("tether.web.fleet")

STOP_SECONDS = 30.0


class FleetUnavailable(RunStateError):
    """Nothing in this console can do that (HTTP 503)."""


class Fleet:
    """The console's link to the lifecycle: records requests, says who continues them.

    Args:
        store: the console's store.
        lease_seconds: the workers' lease (a worker is live when heard from within two).
        worker: an ordinary worker run in this process (``tether serve --worker``), or None.
    """

    can_cancel = True  # the cancel request is a store write (see the module docstring)

    def __init__(self, store: Checkpointer, lease_seconds: float,
                 worker: Worker | None = None) -> None:
        self.store = store
        self.lease_seconds = lease_seconds
        self.worker = worker
        self._thread: threading.Thread | None = None

    @property
    def can_run(self) -> bool:
        """Whether a worker runs in this console."""
        return self.worker is not None

    # -- requests ----------------------------------------------------------------------------
    def answered(self, execution_id: str) -> None:
        """A pause was answered (claimed) just now: make sure the run is on its queue (runs
        stored before every run had one get ``default``), where a worker claims it."""
        self._enqueue(execution_id)

    def resume(self, execution_id: str) -> None:
        """Queue a failed run for the workers of its queue."""
        self._enqueue(execution_id)

    def fork(self, execution_id: str, checkpoint_id: str | None,
             patch: Mapping[str, Any] | None) -> str:
        """Branch a new run (its origin written here, its nodes left to the workers of the
        original's queue); its execution id."""
        from tether.runtime.runner import Runner

        return Runner(None, self.store, {}, lease_seconds=self.lease_seconds).fork(
            execution_id, checkpoint_id, patch, leave=True).execution_id

    def _enqueue(self, execution_id: str) -> None:
        run = self.store.get_run(execution_id)
        if run is not None:
            self.store.enqueue_run(execution_id, run_queue(run), run.priority)

    def who_continues(self, run: RunRecord) -> str:
        """Who continues ``run`` once it may: the live workers of its queue, or what to run
        (a command that works as printed, given the task modules for MODULE)."""
        from tether.errors import NotContinued

        queue = run_queue(run)
        workers = live_workers(self.store, queue, self.lease_seconds)
        if workers:
            names = ", ".join(f"{w.host}/{w.pid}" for w in workers[:3])
            return f"A live worker of queue '{queue}' continues the run ({names})."
        return (f"No live worker serves queue '{queue}' now: "
                f"{NotContinued(run.execution_id, queue, ()).advice}.")

    # -- the embedded worker -----------------------------------------------------------------
    def start(self) -> None:
        """Start the embedded worker (if any) in a thread of its own."""
        worker = self.worker
        if worker is None:
            return
        self._thread = threading.Thread(target=worker.run_forever,
                                        name="tether-console-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the embedded worker: its runs in flight stop at their next node boundary and
        are handed back."""
        if self.worker is not None:
            self.worker.stop()
        if self._thread is not None:
            self._thread.join(STOP_SECONDS)
            if self._thread.is_alive():
                log.warning("the console's worker did not stop within %g s", STOP_SECONDS)
