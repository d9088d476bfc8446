"""One attempt to execute a run: its owner token, its lease, and the moment it loses them.

Every ``run``, ``resume`` and ``fork`` (and later a worker's claim) is an :class:`Attempt` with
a fresh random token (``stores/owners.py``). The store fences every write on that token; this
module keeps the lease alive and stops the attempt as soon as the lease is gone:

- a per-process heartbeat thread renews the lease of every live attempt every third of its
  length; a renewal the store refuses (another attempt holds the run) loses the lease at once,
  and a renewal that keeps failing (the database is unreachable) loses it when the lease's
  time is up by this process's monotonic clock;
- before every write and before starting any unit, :meth:`Attempt.check` raises
  :class:`~tether.errors.LeaseLost` if the lease is lost, and renews it synchronously first if
  its time ran out unnoticed (a process stopped with SIGSTOP past its lease, whose heartbeat
  never ran, finds out here before it starts anything);
- losing the lease calls the attempt's ``on_lost`` hook, which cancels the driving task, so
  in-flight units stop at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from tether.errors import LeaseLost, RunStateError
from tether.stores.base import Checkpointer
from tether.stores.owners import new_owner


class StopAtBoundary(RunStateError):
    """Raised by an attempt's ``boundary`` hook before a unit starts: stop the attempt there.

    ``cancel``: the run was cancelled (``tether cancel``): it ends ``cancelled``; otherwise
    the attempt hands the run back (a worker shutting down): the lease is released and the
    run stays ``running`` for another attempt to continue at once."""

    def __init__(self, execution_id: str, *, cancel: bool) -> None:
        self.execution_id = execution_id
        self.cancel = cancel
        super().__init__(f"run {execution_id}: " + (
            "cancelled at a node boundary" if cancel else "handed back at a node boundary"))


class Attempt:
    """The ownership of one execution attempt of a run (see the module docstring)."""

    def __init__(self, store: Checkpointer | None, execution_id: str, seconds: float,
                 token: str | None = None, number: int = 1) -> None:
        self.store = store
        self.execution_id = execution_id
        self.seconds = seconds
        self.token = token or new_owner()
        self.number = number
        """The run row's ``attempt`` once this attempt holds the run (``run.attempt``)."""
        self.valid_until = time.monotonic() + seconds
        self.lost: str | None = None
        self.on_lost: Callable[[], None] | None = None
        self.watch_lost: Callable[[str], None] | None = None
        """Also called with the reason once the lease is lost (a worker's bookkeeping), from
        whichever thread finds it out."""
        self.boundary: Callable[[], None] | None = None
        """Called before each unit starts (a worker's cancel and shutdown checks); may raise
        :class:`StopAtBoundary`."""
        self.claimed = False
        """Whether a worker's claim took the run for this attempt (a span event; the claim
        wrote the attempt's ``claimed`` event with it)."""
        self.first = True
        """Whether this attempt starts the run (its first execution: a metric counts it)."""
        self._ticket = 0
        self.reason = "started"
        self.worker: str | None = None
        """The worker driving this attempt, when one does (shown in the run's history)."""
        """Why this attempt holds the run (its ``claimed`` event in the run's history):
        started, resumed, answered, claimed (by a worker) or forked."""

    @property
    def owner(self) -> str | None:
        """The token writes are fenced on (None without a store)."""
        return self.token if self.store is not None else None

    def until(self) -> float:
        """The wall-clock expiry to write with a new lease (and the local deadline)."""
        self.valid_until = time.monotonic() + self.seconds
        return time.time() + self.seconds

    def check(self) -> None:
        """Raise LeaseLost if the lease is gone; renew it first if its time ran out."""
        if self.lost is not None:
            raise LeaseLost(self.execution_id, self.lost)
        if self.store is not None and time.monotonic() >= self.valid_until:
            self._renew(sync=True)
            if self.lost is not None:
                raise LeaseLost(self.execution_id, self.lost)

    def lose(self, reason: str) -> None:
        """Mark the lease lost and stop the attempt (once)."""
        if self.lost is None:
            self.lost = reason
            hook = self.on_lost
            if hook is not None:
                hook()
            watch = self.watch_lost
            if watch is not None:
                watch(reason)

    def _renew(self, *, sync: bool = False) -> None:
        assert self.store is not None
        sent = time.monotonic()
        try:
            held = self.store.renew(self.execution_id, self.token, time.time() + self.seconds)
        except Exception as exc:  # unreachable: keep trying until the lease's time is up
            if sync or time.monotonic() >= self.valid_until:
                self.lose(f"the lease could not be renewed in time: {exc}")
            return
        if held:
            self.valid_until = sent + self.seconds
        else:
            self.lose("another attempt took the run over after this one's lease expired")

    def __enter__(self) -> Attempt:
        if self.store is not None:
            self._ticket = HEARTBEAT.register(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ticket:
            HEARTBEAT.unregister(self._ticket)
            self._ticket = 0

    def release(self) -> None:
        """Give the lease up (Ctrl-C, a failed start): the run can be resumed at once."""
        if self.store is not None and self.lost is None:
            with contextlib.suppress(Exception):  # best effort: the lease expires anyway
                self.store.release(self.execution_id, self.token)


class _Heartbeat:
    """One daemon thread per process renewing the lease of every live attempt.

    Each lease is renewed every third of its length. (One thread for all attempts: starting a
    thread per run would cost more than a short run itself.)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._attempts: dict[int, tuple[Attempt, float]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None
        self._wakes_at = 0.0  # when the thread's current wait ends

    def register(self, attempt: Attempt) -> int:
        with self._lock:
            self._next += 1
            due = time.monotonic() + attempt.seconds / 3
            self._attempts[self._next] = (attempt, due)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._beat, daemon=True,
                                                name="tether-lease-heartbeat")
                self._thread.start()
            elif due < self._wakes_at:  # else it wakes in time anyway (a short run does not
                self._wake.notify()     # cost a thread switch), or is awake and will see it
            return self._next

    def unregister(self, ticket: int) -> None:
        with self._lock:
            self._attempts.pop(ticket, None)

    def _beat(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                due = [a for a, at in self._attempts.values() if at <= now]
                for ticket, (attempt, at) in list(self._attempts.items()):
                    if at <= now:
                        self._attempts[ticket] = (attempt, now + attempt.seconds / 3)
            for attempt in due:
                if attempt.lost is None:
                    attempt._renew()
            with self._lock:  # the soonest renewal of every attempt registered by now
                now = time.monotonic()
                soonest = min((at for _, at in self._attempts.values()), default=now + 60)
                self._wakes_at = max(now + 0.01, soonest)
                self._wake.wait(timeout=self._wakes_at - now)
                self._wakes_at = 0.0  # awake: it looks at the attempts again before waiting


HEARTBEAT = _Heartbeat()
