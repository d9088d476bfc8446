"""Who continues the work the console records: the one seam between the console and workers.

The console never runs a task in a request. Answering a pause claims it (the store's atomic
claim: one winner) and then tells the fleet; resuming a failed run, forking and cancelling are
requests to the fleet. Two fleets exist today:

- :class:`NoFleet` (plain ``tether serve``): an answer waits in the store, where any process
  that shares it continues the run (``tether resume ID`` without a value, or a worker);
  resume and fork are refused with :class:`FleetUnavailable`, saying what to start.
- :class:`EmbeddedWorker` (``tether serve --worker``): one thread of this process with its
  own event loop and its own store connection runs those continuations with the task modules
  of ``--tasks`` (or ``[tool.tether] tasks``), through the ordinary ``Runner.aresume`` and
  ``Runner.afork``, whose leases and fencing keep any other process from running the same run
  at the same time; each stops at its next node boundary when cancelled. It also sweeps the
  store every few seconds for paused runs answered by other processes (a decision newer than
  the run's last status change), and runs a :class:`tether.workers.Worker` of the ``default``
  queue on the same loop: submitted runs, crashed runs, due timers and schedule ticks are
  served as by ``tether worker``, so one process serves a single machine.

Cancelling is the workers' cancel request, recorded in the store by the console itself
(:meth:`~tether.stores.base.Checkpointer.request_cancel`): a run nothing executes ends
``cancelled`` at once, one a worker holds stops at its next node boundary.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tether.errors import AlreadyResumed, ResumeError, RunStateError, TetherError
from tether.runtime.events import Event
from tether.status import RunStatus
from tether.stores.base import Checkpointer

log = logging.getLogger("tether.web.fleet")

SWEEP_SECONDS = 3.0
SWEEP_LIMIT = 200
FORK_ID_WAIT = 30.0
CONCURRENT_JOBS = 4


class FleetUnavailable(RunStateError):
    """Nothing in this console can do that (HTTP 503): no worker runs here."""



class Fleet:
    """What the console asks of whoever runs work."""

    can_run = False
    can_cancel = True  # the cancel request is a store write (see the module docstring)

    def answered(self, execution_id: str) -> None:
        """A pause of the run was answered (claimed) just now."""

    def resume(self, execution_id: str) -> None:
        raise FleetUnavailable(
            "no worker runs in this console: start it with --worker (and --tasks), or run "
            f"`tether resume {execution_id}` where the task modules are")

    def fork(self, execution_id: str, checkpoint_id: str | None,
             patch: Mapping[str, Any] | None) -> str | None:
        raise FleetUnavailable(
            "no worker runs in this console: start it with --worker (and --tasks), or run "
            f"`tether fork {execution_id}` where the task modules are")

    def start(self) -> None:
        """Start background work (if any)."""

    def stop(self) -> None:
        """Stop background work (if any)."""


class NoFleet(Fleet):
    """Plain ``tether serve``: answers are recorded and wait for a process to continue them."""


@dataclass
class _Job:
    kind: str  # "resume" or "fork"
    execution_id: str
    checkpoint_id: str | None = None
    patch: Mapping[str, Any] | None = None
    branch: concurrent.futures.Future[str | None] = field(
        default_factory=concurrent.futures.Future)


class EmbeddedWorker(Fleet):
    """``tether serve --worker``: continuations run in a thread of this process (see the
    module docstring). ``open_store`` gives the worker its own store connection."""

    can_run = True

    def __init__(self, open_store: Callable[[], Checkpointer],
                 tasks: Mapping[str, Callable[..., Any]] | None) -> None:
        self._open_store = open_store
        self._tasks = tasks
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[_Job | None] | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._store: Checkpointer | None = None
        self._seen: dict[str, float] = {}  # run -> newest decision time already continued

    # -- the console's side (any thread) -----------------------------------------------------
    def answered(self, execution_id: str) -> None:
        self._submit(_Job("resume", execution_id))

    def resume(self, execution_id: str) -> None:
        self._submit(_Job("resume", execution_id))

    def fork(self, execution_id: str, checkpoint_id: str | None,
             patch: Mapping[str, Any] | None) -> str | None:
        job = _Job("fork", execution_id, checkpoint_id, patch)
        self._submit(job)
        try:
            return job.branch.result(FORK_ID_WAIT)
        except concurrent.futures.TimeoutError:
            return None

    def _submit(self, job: _Job) -> None:
        if not self._ready.wait(10) or self._loop is None or self._queue is None:
            raise FleetUnavailable("the console's worker is not running")
        self._loop.call_soon_threadsafe(self._queue.put_nowait, job)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="tether-console-worker",
                                        daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        if self._loop is not None and self._queue is not None:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
        if self._thread is not None:
            self._thread.join(10)

    # -- the worker's thread -----------------------------------------------------------------
    def _main(self) -> None:
        self._store = self._open_store()
        try:
            asyncio.run(self._serve())
        finally:
            self._store.close()

    async def _serve(self) -> None:
        from tether.workers.loop import Worker

        assert self._store is not None
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        fleet_worker = Worker(self._store, self._tasks, ("default",), CONCURRENT_JOBS)
        serving = asyncio.create_task(fleet_worker.arun())
        try:
            await self._jobs()
        finally:
            fleet_worker.stop()
            await asyncio.gather(serving, return_exceptions=True)

    async def _jobs(self) -> None:
        queue = self._queue
        assert queue is not None
        self._ready.set()
        slots = asyncio.Semaphore(CONCURRENT_JOBS)
        running: set[asyncio.Task[None]] = set()
        while True:
            try:
                job = await asyncio.wait_for(queue.get(), SWEEP_SECONDS)
            except TimeoutError:
                for execution_id in await asyncio.to_thread(self._answered_elsewhere):
                    queue.put_nowait(_Job("resume", execution_id))
                continue
            if job is None:
                break
            task = asyncio.create_task(self._run(job, slots))
            running.add(task)
            task.add_done_callback(running.discard)
        for task in list(running):
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    async def _run(self, job: _Job, slots: asyncio.Semaphore) -> None:
        from tether.runtime.runner import Runner

        assert self._store is not None
        async with slots:
            try:
                if job.kind == "fork":
                    runner = Runner(None, self._store, self._tasks,
                                    on_event=_first_branch_event(job))
                    result = await runner.afork(job.execution_id, job.checkpoint_id,
                                                job.patch)
                    if not job.branch.done():
                        job.branch.set_result(result.execution_id)
                else:
                    await Runner(None, self._store, self._tasks).aresume(
                        job.execution_id, boundary=self._boundary(job.execution_id))
            except (AlreadyResumed, ResumeError) as exc:
                log.info("run %s: %s", job.execution_id, exc)
            except TetherError as exc:
                log.warning("run %s: %s", job.execution_id, exc)
                if not job.branch.done():
                    job.branch.set_exception(exc)
            finally:
                if not job.branch.done():
                    job.branch.set_result(None)

    def _boundary(self, execution_id: str) -> Callable[[], None]:
        """Before each unit of a continuation: stop there once a cancel was requested."""
        from tether.runtime.attempt import StopAtBoundary

        store = self._store
        assert store is not None

        def check() -> None:
            if store.cancel_requested_at(execution_id) is not None:
                raise StopAtBoundary(execution_id, cancel=True)
        return check

    def _answered_elsewhere(self) -> list[str]:
        """Paused runs with a decision newer than their last status change (answered by
        another process, or before this console started)."""
        assert self._store is not None
        found = []
        for run in self._store.find_runs(status=RunStatus.PAUSED.value, limit=SWEEP_LIMIT):
            newest = max((d.created_at.timestamp() for d in self._store.decisions(
                run.execution_id)), default=0.0)
            if newest > run.updated_at.timestamp() and self._seen.get(
                    run.execution_id) != newest:
                self._seen[run.execution_id] = newest
                found.append(run.execution_id)
        return found


def _first_branch_event(job: _Job) -> Callable[[Event], None]:
    """An event listener that resolves the job's branch id from the fork's first event."""
    def listen(event: Event) -> None:
        if event.execution_id != job.execution_id and not job.branch.done():
            job.branch.set_result(event.execution_id)
    return listen
