"""The worker: claims runnable runs from a shared store and executes them, fenced.

A :class:`Worker` registers itself (the ``workers`` table), then loops: claim up to
``concurrency`` runs (:meth:`~tether.stores.base.Checkpointer.claim_runs` writes a fresh owner
token and lease into each), drive each with the ordinary ``Runner.aresume`` under that token
(the resume protocol decides: a queued run starts, a crashed one is recovered, an answered
pause continues; from the claimed row, without reading it or taking the lease again:
``resume.Claimed``), and wait for a wake-up (PostgreSQL NOTIFY, a run finishing, or the poll
interval). The lease of each run is renewed by the runtime's heartbeat like any attempt's; a
run whose lease is lost stops (``LeaseLost``) and writes nothing more.

Before each unit starts, a run's ``boundary`` hook stops it when ``tether cancel`` asked (the
run ends ``cancelled``) or when the worker is stopping (the run is handed back: lease
released, still ``running``, so another worker continues it at once). :meth:`Worker.stop`
(SIGTERM, SIGINT) therefore lets the nodes in flight finish and checkpoint, then returns.

On PostgreSQL each claimed run is driven in a slot of its own (``slots.py``: a thread, an
event loop and a store connection), so the runs of one worker overlap their round trips; when
its run ends, the slot claims the next one itself and drives it (``chain.py``), and goes back
to this loop only when that claim finds nothing. Elsewhere the runs share this loop and store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tether.compiler.plan import Plan
from tether.errors import AlreadyResumed, LeaseLost, ResumeError, TetherError, TimerNotDue
from tether.observability import observer
from tether.runtime.attempt import StopAtBoundary
from tether.runtime.drift import task_drift
from tether.runtime.plans import task_names
from tether.runtime.resume import Claimed, first_claim
from tether.runtime.runner import Runner
from tether.runtime.signatures import loads, record_signatures
from tether.stores.base import Checkpointer, SeenCancel
from tether.stores.owners import new_owner, parse_owner
from tether.stores.queueing import ClaimedRun, ClaimReason, NextClaim, WorkerRecord
from tether.stores.records import FencedWrite
from tether.stores.write_group import WriteGroup
from tether.workers import claims, give_back
from tether.workers.chain import Chain, Switches, Turn
from tether.workers.schedules import enqueue_into, fire_schedules
from tether.workers.slots import Slot, Slots

__all__ = ["Worker"]

log = logging.getLogger("tether.workers")

SEEN_FRESH_SECONDS = 0.05
"""How old a checkpoint write's reading of ``cancel_requested_at`` may be for a node boundary
to use it instead of reading the run row: the write and the boundary after it run in one
stretch of the scheduler without waiting (microseconds apart); a boundary reached later than
this after the run's last write, or after another boundary took that reading, reads."""


class Worker:
    """A worker process's loop (see the module docstring).

    Args:
        store: a store URL (the worker opens its own connection) or a Checkpointer.
        tasks: task callables by name, module names to import, or None for the registered
            ones (as for :class:`~tether.runtime.runner.Runner`).
        queues: the queues served.
        concurrency: how many runs execute at once.
        lease_seconds: each claimed run's lease (default ``$TETHER_LEASE_SECONDS``, 30 s):
            how long a crashed worker holds its runs before another takes them over.
        poll_seconds: how often to look for work without a wake-up (default 1 s on
            PostgreSQL, 0.2 s on SQLite).
        connect: opens another store on the same database (a URL as ``store`` needs none).
            With it, on a store whose connections overlap (PostgreSQL), each of the
            ``concurrency`` runs is driven in a thread of its own on a store of its own
            (``slots.py``); otherwise all runs share this worker's event loop and store.
        group_commit: the slots share a write group (``stores/write_group.py``): at most
            one checkpoint statement of this worker in flight, the writes that arrive
            meanwhile going together in the next one (one commit for several steps). Off
            (the default), each slot commits its own fenced writes on its own connection
            and the database groups the concurrent commits' WAL flushes: about 20-30% more
            steps/s per worker on a 2-core machine, for about 15-20% more database CPU per
            step (docs/workers.md, "Checkpoint commits"). Without slots it does nothing.
    """

    def __init__(self, store: str | Checkpointer,
                 tasks: Mapping[str, Callable[..., Any]] | Iterable[str] | None = None,
                 queues: Sequence[str] = ("default",), concurrency: int = 4, *,
                 lease_seconds: float | None = None, poll_seconds: float | None = None,
                 max_concurrency: int = 16,
                 connect: Callable[[], Checkpointer] | None = None,
                 group_commit: bool = False) -> None:
        if concurrency < 1:
            raise TetherError("a worker's concurrency must be at least 1")
        self.queues = tuple(dict.fromkeys(queues)) or ("default",)
        self.concurrency = concurrency
        self.lease_seconds = claims.lease_seconds(lease_seconds)
        self.worker_id = new_owner()
        self._store_source = store
        self._connect = connect
        self._slots: Slots | None = None
        self._group_commit = group_commit
        self._writes: WriteGroup[FencedWrite, tuple[bool, float | None]] | None \
            = None  # the slots' group commit (_open_slots), with group_commit
        self._finished_lock = threading.Lock()
        self._tasks = tasks
        self._poll = poll_seconds
        self._max_concurrency = max_concurrency
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._cancel: set[str] = set()
        self._running: dict[str, asyncio.Future[None]] = {}
        self._tokens: dict[str, str] = {}  # execution id: the claim token it is driven under
        self._reported_lost: set[str] = set()  # claim tokens whose lost lease was logged
        self._switches = Switches(self._switch)  # the chains' next runs (chain.py)
        self._task_names: frozenset[str] = frozenset()
        self._task_registry: Mapping[str, Callable[..., Any]] = {}
        self._servable: set[str] = set()  # plan fingerprints whose tasks this worker has
        self._unservable: dict[str, str] = {}  # fingerprint: why not
        self._blocked_at: dict[str, float] = {}  # fingerprint: when its runs were marked
        self.finished = 0
        """Runs this worker drove to an end of their attempt (for tests and logs)."""
        self.chained = 0
        """Runs a slot claimed itself when its previous run ended (``chain.py``)."""
        self.claimed_with_end = 0
        """Runs claimed in the transaction of the previous run's end
        (``stores/pg_end_claim.py``), driven or, the worker stopping, given back."""

    # -- control (any thread, or a signal handler) -------------------------------------------
    def stop(self) -> None:
        """Stop claiming; runs in flight stop at their next node boundary and are handed
        back; :meth:`run_forever` returns once they have."""
        self._stopping.set()
        self._poke()

    def busy_slots(self) -> int:
        """How many runs this worker executes now (read from any thread: a metric)."""
        return len(self._running)

    def write_batch_fallbacks(self) -> int:
        """How many of the slots' batched writes failed and were written row by row (read
        from any thread: a metric; always 0 without ``group_commit``)."""
        return self._writes.fallbacks if self._writes is not None else 0

    def _poke(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(wake.set)

    def run_forever(self) -> None:
        """Run until :meth:`stop` is called."""
        asyncio.run(self.arun())

    # -- the loop ----------------------------------------------------------------------------
    async def arun(self) -> None:
        store = self._open()
        store.use_for_worker()  # the boundary check rides on the writes
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        poll = self._poll if self._poll is not None else claims.poll_seconds(store)
        runner = Runner(None, store, self._tasks, max_concurrency=self._max_concurrency,
                        lease_seconds=self.lease_seconds, park_timers=True)
        runner.inline_bodies = False  # several runs share this loop: bodies in threads
        self._task_names = frozenset(runner.tasks)
        self._task_registry = runner.tasks
        self._slots = self._open_slots(store, runner)
        owner = parse_owner(self.worker_id)
        now = time.time()
        store.register_worker(WorkerRecord(
            self.worker_id, owner.host if owner else "-", os.getpid(), self.queues,
            self.concurrency, now, now))
        listener = claims.Listener(store, self._poke)
        listener.start()
        beat_every = min(poll, self.lease_seconds / 3)
        next_beat = 0.0
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                claimed, sent = self._claim(store)
                for claim in claimed:
                    self._start(runner, store, Turn(claim, sent))
                if time.monotonic() >= next_beat:
                    self._heartbeat(store)
                    self._fire_schedules(store)
                    self._fire_timers(runner, store)
                    next_beat = time.monotonic() + beat_every
                if claimed and len(self._running) < self.concurrency:
                    continue  # there may be more waiting
                wait = min(poll, max(0.0, next_beat - time.monotonic()))
                await self._sleep(wait)
            if self._running:
                log.info("worker stopping: %d run(s) stop at their next node boundary",
                         len(self._running))
            while held := [f for f in self._running.values() if not f.done()]:
                # again: a chain may have switched to a run it claimed as the stop came
                await asyncio.gather(*held, return_exceptions=True)
        finally:
            listener.stop()
            try:
                store.deregister_worker(self.worker_id)
            finally:
                if self._slots is not None:
                    self._slots.close()
                if self.claimed_with_end:
                    log.info("runs claimed with the end of the run before them: %d",
                             self.claimed_with_end)
                if self._writes is not None and self._writes.items:
                    log.info("checkpoint writes: %d write(s) in %d statement(s) (group "
                             "commit; a run's end carries its last node's row)",
                             self._writes.items, self._writes.batches)
                if not isinstance(self._store_source, Checkpointer):
                    store.close()

    async def _sleep(self, seconds: float) -> None:
        """Until a wake-up or ``seconds`` have passed: a timer that sets the wake-up event
        (``asyncio.wait_for`` made a task, a future and their callbacks at every turn of
        this loop, that is for every run a worker claims)."""
        wake, loop = self._wake, self._loop
        assert wake is not None and loop is not None
        if wake.is_set():
            return
        timer = loop.call_later(seconds, wake.set)
        try:
            await wake.wait()
        finally:
            timer.cancel()

    def _open(self) -> Checkpointer:
        if isinstance(self._store_source, Checkpointer):
            return self._store_source
        from tether.stores.open import open_checkpointer

        return open_checkpointer(self._store_source, create=False)

    def _open_slots(self, store: Checkpointer, runner: Runner) -> Slots | None:
        """One thread, loop and store per concurrent run (``slots.py``), when this store's
        connections overlap and the worker can open more of them; with ``group_commit``,
        their stores share one write group."""
        connect = self._connect
        if connect is None and isinstance(self._store_source, str):
            from tether.stores.open import open_checkpointer

            url = self._store_source
            connect = lambda: open_checkpointer(url, create=False)  # noqa: E731
        if connect is None or not store.concurrent_connections:
            return None
        tasks = dict(runner.tasks)
        group = self._writes = WriteGroup() if self._group_commit else None

        def make_runner(slot_store: Checkpointer) -> Runner:
            slot_store.use_for_worker(write_group=group)  # None: each slot commits its own
            slot_store.share_statements(store)  # one compile per statement per process
            made = Runner(None, slot_store, tasks, max_concurrency=self._max_concurrency,
                          lease_seconds=self.lease_seconds, park_timers=True)
            # A lone body runs inline in the slot's loop (no thread hop per node); a lost
            # lease gives the run up at once all the same (Worker._lost_hook).
            return made

        return Slots(connect, make_runner, self.concurrency)

    def _claim(self, store: Checkpointer) -> tuple[list[ClaimedRun], float]:
        """Claim runs of the plans this worker can serve; when that finds none, look at the
        plans of the claimable runs first (each new one checked against this worker's tasks
        once), so a run whose tasks it lacks is never claimed here: it stays queued with
        the reason recorded, for a worker that has them. Also returns the monotonic time
        from before the claim that took them was sent (their leases run from it)."""
        free = self.concurrency - len(self._running)
        if self._slots is not None:  # a run given up while its body runs holds its slot
            free = min(free, self._slots.free)
        sent = time.monotonic()
        if free <= 0:
            return [], sent
        try:
            claimed = self._claim_servable(store, free)
            if not claimed and self._learn_plans(store):
                sent = time.monotonic()
                claimed = self._claim_servable(store, free)
            return claimed, sent
        except TetherError as exc:  # the database is unreachable: try again next poll
            log.warning("claiming runs failed: %s", exc)
            return [], sent

    def _claim_servable(self, store: Checkpointer, free: int) -> list[ClaimedRun]:
        """From this loop or a slot's thread (``_claim_next``): the plans are a snapshot."""
        plans = frozenset(self._servable)
        if not plans:
            return []
        now = time.time()
        return store.claim_runs(self.worker_id, self.queues, free, now,
                                now + self.lease_seconds, plans=plans)

    def _claim_next(self, store: Checkpointer) -> Turn | None:
        """On a slot's thread and store, its run having ended: one more run for it (None:
        none, or the claim failed, logged as :meth:`_claim` does). Plans not yet known to be
        servable are left to this loop's claim (:meth:`_learn_plans`), once the slot is
        back. A run its store claimed with the ended run's end is taken instead (if that
        claim found nothing, this claims alone as before: docs/decisions.md, endclaim26);
        the worker stopping, it is given back at once and None returned."""
        taken = store.take_end_claim()
        if taken is not None and taken.claimed is not None:
            claimed, sent = [taken.claimed], taken.sent
            with self._finished_lock:
                self.claimed_with_end += 1
            if self._stopping.is_set():
                give_back.give_back(store, claimed[0], give_back.released(
                    claimed[0], self.worker_id, "given back: the worker is stopping"))
                return None
        else:
            sent = time.monotonic()
            try:
                claimed = [] if self._stopping.is_set() else self._claim_servable(store, 1)
            except TetherError as exc:
                log.warning("claiming runs failed: %s", exc)
                return None
            if not claimed:
                return None
        self._note(claimed[0])
        with self._finished_lock:
            self.chained += 1
        return Turn(claimed[0], sent)

    def _learn_plans(self, store: Checkpointer) -> bool:
        """Check the plans of claimable runs not known to be servable; True if one is now.
        Runs of plans this worker cannot serve get the reason (again after a while, for
        runs enqueued since)."""
        now = time.time()
        learned = False
        for fingerprint in store.claimable_plans(self.queues, now, self._servable):
            reason = self._unservable.get(fingerprint)
            if reason is None:
                reason = self._check_plan(store, fingerprint)
                if reason is None:
                    self._servable.add(fingerprint)
                    learned = True
                    continue
                self._unservable[fingerprint] = reason
                log.warning("runs of plan %s stay queued: %s", fingerprint[:12], reason)
            if time.monotonic() - self._blocked_at.get(fingerprint, -1e9) >= \
                    claims.REBLOCK_SECONDS:
                store.block_runs(fingerprint, self.queues, reason, now)
                self._blocked_at[fingerprint] = time.monotonic()
        return learned

    def _check_plan(self, store: Checkpointer, fingerprint: str) -> str | None:
        """Why this worker cannot serve runs of the plan (None: it can)."""
        owner = parse_owner(self.worker_id)
        who = f"worker {owner.host if owner else '-'}/{os.getpid()}"
        text = store.get_plan(fingerprint)
        if text is None:
            return f"its plan {fingerprint[:12]} is missing from the store"
        try:
            plan = Plan.from_json(text)
        except (ValueError, TetherError) as exc:
            return f"{who} cannot read its plan {fingerprint[:12]}: {exc}"
        missing = sorted(task_names(plan) - self._task_names)
        if missing:
            return f"{who} lacks tasks: {', '.join(missing)}"
        recorded = loads(store.get_plan_tasks(fingerprint))
        drift = task_drift(plan, self._task_registry, recorded)
        if drift is not None:
            return f"{who}: {drift}"
        if not recorded:  # submitted where the tasks were not importable: the first claimer's
            record_signatures(store, plan, self._task_registry)  # code is the one to keep
        return None

    def _fire_schedules(self, store: Checkpointer) -> None:
        """Enqueue the runs of the schedules' due ticks (exactly one per tick fleet-wide)."""
        try:
            fired = fire_schedules(store, datetime.now(UTC), enqueue_into(store))
        except TetherError as exc:
            log.warning("firing schedules failed: %s", exc)
            return
        if fired:
            log.info("schedules started %s", ", ".join(fired))
            self._poke()

    def _fire_timers(self, runner: Runner, store: Checkpointer) -> None:
        """Fire the due timers (sleeps, approval timeouts): record each one's answer (the
        claim of its pending row picks one firer fleet-wide; the others skip it) and leave
        the continuation to the claim of answered runs, so a fired run is continued by a
        worker of its queue, within the queue's limits, like an answered approval. A run no
        queue holds (stored before every run had one) is handed to this worker's first
        queue, as ``resume --enqueue`` would, so the firing is never left unfinished."""
        if self._stopping.is_set():
            return
        try:
            due = store.due_pending(time.time(), 100)
        except TetherError as exc:
            log.warning("listing due timers failed: %s", exc)
            return
        fired = 0
        for row in due:
            try:
                runner.record_timer(row)
            except (AlreadyResumed, ResumeError, TimerNotDue):
                continue  # another firer won it, or a person answered first
            except TetherError as exc:
                log.warning("run %s: firing %s failed: %s", row.execution_id, row.address,
                            exc)
                continue
            log.info("run %s: timer %s fired", row.execution_id, row.address)
            fired += 1
            observer.timer_fired()
            self._adopt(store, row.execution_id)
        if fired:
            self._poke()

    def _adopt(self, store: Checkpointer, execution_id: str) -> None:
        """Queue a run that is in no queue on this worker's first one."""
        try:
            run = store.get_run(execution_id)
            if run is not None and run.queue is None:
                store.enqueue_run(execution_id, self.queues[0], run.priority)
        except TetherError as exc:
            log.warning("run %s: queueing it failed: %s", execution_id, exc)

    def _heartbeat(self, store: Checkpointer) -> None:
        """Report this worker's runs (``tether workers``)."""
        self._switches.settle()
        try:
            store.heartbeat_worker(self.worker_id, time.time(), sorted(self._running))
        except TetherError as exc:
            log.warning("worker heartbeat failed: %s", exc)

    def _note(self, claim: ClaimedRun) -> None:
        """What every claim records before its drive (on this loop or a slot's thread)."""
        observer.claimed(claim.reason == ClaimReason.QUEUED, claim.run.created_at.timestamp(),
                         claim.run.available_at)
        if claim.run.cancel_requested_at is not None:
            self._cancel.add(claim.run.execution_id)

    def _start(self, runner: Runner, store: Checkpointer, turn: Turn) -> None:
        """Drive the claimed run: in a free slot (its own thread, loop and store), which
        then chains the runs it claims itself (``chain.py``), or as a task of this loop on
        the worker's store."""
        claim = turn.claim
        execution_id = claim.run.execution_id
        self._note(claim)
        self._tokens[execution_id] = claim.owner
        slots = self._slots
        if slots is None:
            store.take_cancel_seen(execution_id, 0.0)  # an earlier attempt's reading
            held = Claimed(claim.owner, claim.run, turn.sent + self.lease_seconds,
                           worker=self.worker_id, fresh=first_claim(claim.reason, claim.run))
            self._track(claim, asyncio.create_task(
                self._drive(runner, store, claim, held, turn.sent)), None)
            return
        slot = slots.take()
        assert self._loop is not None
        chain = Chain(slot, turn, drive=self._drive_turn, claim=self._claim_next,
                      switch=self._switches.queue, loop=self._loop)
        self._track(claim, chain.future, lambda: slots.give(slot), chain)

    def _drive_turn(self, slot: Slot, turn: Turn) -> Coroutine[Any, Any, None]:
        """On the slot's thread: drive a run of its chain, its lease running from
        ``turn.sent``."""
        claim = turn.claim
        slot.store.take_cancel_seen(claim.run.execution_id, 0.0)  # an earlier attempt's
        slot.store.arm_end_claim(NextClaim(  # its end claims the next run (pg_end_claim.py)
            claim.run.execution_id, self.worker_id, self.queues, frozenset(self._servable),
            self.lease_seconds) if self._servable else None)
        held = Claimed(claim.owner, claim.run, turn.sent + self.lease_seconds,
                       self._lost_hook(claim), worker=self.worker_id,
                       fresh=first_claim(claim.reason, claim.run))
        return self._drive(slot.runner, slot.store, claim, held, turn.sent)

    def _switch(self, chain: Chain, old: ClaimedRun, new: ClaimedRun) -> None:
        """On this loop (:meth:`Switches.settle`): ``chain``'s slot ended ``old``'s drive and
        drives ``new`` now (queued before that drive began, settled before ``new``'s
        lost-lease :meth:`_forget` and the chain's done callback). ``old`` is dropped unless
        :meth:`_forget` dropped it already (or it is ``new`` again, claimed anew)."""
        with self._finished_lock:
            self._reported_lost.discard(old.owner)
        old_id, new_id = old.run.execution_id, new.run.execution_id
        if old_id != new_id and self._running.get(old_id) is chain.future:
            self._drop(old_id)
        chain.held = new
        self._running[new_id] = chain.future
        self._tokens[new_id] = new.owner

    def _track(self, claim: ClaimedRun, future: asyncio.Future[None],
               free: Callable[[], None] | None, chain: Chain | None = None) -> None:
        self._running[claim.run.execution_id] = future

        def done(_: asyncio.Future[None]) -> None:
            # The claim's token leaves the logged set here, on the loop, after any
            # _forget its lost-lease hook queued before the drive ended (call_soon_threadsafe
            # keeps their order): the drive's own report and _forget's log it once between
            # them, whichever thread sees the loss first. A chain's last run is the one
            # its last _switch (queued before the future ended) made it hold.
            self._switches.settle()
            last = chain.held if chain is not None else claim
            execution_id = last.run.execution_id
            with self._finished_lock:
                self._reported_lost.discard(last.owner)
            if free is not None:
                free()
            if self._running.get(execution_id) is future:  # not given up (_forget) already
                self._drop(execution_id)
            if self._wake is not None:
                self._wake.set()

        future.add_done_callback(done)

    def _lost_hook(self, claim: ClaimedRun) -> Callable[[str], None]:
        """For a run in a slot: called from the thread that finds its lease lost. A slot
        runs a lone body inline, so its loop cannot stop the drive until that body returns;
        the worker gives the run up at once instead (:meth:`_forget`). The slot itself stays
        taken until the body returns (a body that hangs holds its slot, as it would hold a
        thread)."""
        loop = self._loop
        assert loop is not None

        def lost(reason: str) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(self._forget, claim, reason)
        return lost

    def _forget(self, claim: ClaimedRun, reason: str) -> None:
        """On this worker's loop: a run whose lease was lost while its drive still runs is
        no longer this worker's: logged once (here or by the drive, whichever is first:
        :meth:`_report_lost`), no longer reported as held, its place free for a claim once
        its slot is."""
        self._switches.settle()
        execution_id = claim.run.execution_id
        future = self._running.get(execution_id)
        if future is None or future.done() or self._tokens.get(execution_id) != claim.owner:
            return  # ended meanwhile (or claimed again since)
        self._report_lost(claim, LeaseLost(execution_id, reason))
        self._drop(execution_id)
        if self._wake is not None:
            self._wake.set()

    def _drop(self, execution_id: str) -> None:
        self._running.pop(execution_id, None)
        self._tokens.pop(execution_id, None)
        self._cancel.discard(execution_id)

    def _report_lost(self, claim: ClaimedRun, exc: LeaseLost) -> None:
        """Log a lost lease once per claim (its token), from any thread."""
        with self._finished_lock:
            if claim.owner in self._reported_lost:
                return
            self._reported_lost.add(claim.owner)
        log.warning("%s", exc)

    def _boundary(self, store: Checkpointer, claim: ClaimedRun,
                  read_at: float) -> Callable[[], None]:
        """Before each unit: a cancel request (the run row's ``cancel_requested_at``) or this
        worker stopping. The run row is read here, one primary-key read of one column,
        unless the run's checkpoint write that just ended the previous node read it in its
        own statement (PostgreSQL; :data:`SEEN_FRESH_SECONDS`): in a chain that write is the
        run's last store contact before this boundary, so a request is never missed between
        two nodes either way (docs/workers.md, "Cancelling"). Before the first node the claim
        is that contact: its ``UPDATE ... RETURNING`` read the run row (``read_at``: the
        monotonic time from before the claim was sent), and that reading stands in for the
        read while as fresh."""
        execution_id = claim.run.execution_id
        claimed: SeenCancel | None = SeenCancel(claim.run.cancel_requested_at)  # used once

        def check() -> None:
            nonlocal claimed
            if execution_id in self._cancel:
                raise StopAtBoundary(execution_id, cancel=True)
            seen = store.take_cancel_seen(execution_id, SEEN_FRESH_SECONDS)
            if seen is None and time.monotonic() - read_at <= SEEN_FRESH_SECONDS:
                seen = claimed
            claimed = None
            requested = seen.requested_at if seen is not None else \
                store.cancel_requested_at(execution_id)
            if requested is not None:
                self._cancel.add(execution_id)
                raise StopAtBoundary(execution_id, cancel=True)
            if self._stopping.is_set():
                raise StopAtBoundary(execution_id, cancel=False)
        return check

    async def _drive(self, runner: Runner, store: Checkpointer, claim: ClaimedRun,
                     held: Claimed, read_at: float) -> None:
        execution_id = claim.run.execution_id
        try:
            result = await runner.aresume(execution_id, claimed=held,
                                          boundary=self._boundary(store, claim, read_at))
            log.info("run %s (%s): %s", execution_id, claim.reason, result.status)
        except LeaseLost as exc:
            self._report_lost(claim, exc)
        except (AlreadyResumed, ResumeError) as exc:
            log.info("run %s: %s", execution_id, exc)
            give_back.give_back(store, claim, give_back.released(
                claim, self.worker_id, f"given back: {exc}"))
        except TetherError as exc:
            log.warning("run %s: %s", execution_id, exc)
            await self._retry_later(store, claim, str(exc))
        except Exception as exc:  # a bug: never take the worker down with it
            log.exception("run %s: internal error", execution_id)
            await self._retry_later(store, claim, f"internal error: {exc!r}")
        finally:
            with self._finished_lock:
                self.finished += 1

    async def _retry_later(self, store: Checkpointer, claim: ClaimedRun, error: str) -> None:
        if give_back.retry_later(store, claim, self.worker_id, error):
            await asyncio.sleep(self._poll or 1.0)  # do not claim the answered run at once

