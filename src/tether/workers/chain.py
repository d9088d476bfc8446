"""A slot's chain: when a run's drive ends, the slot claims the next run itself.

On PostgreSQL a :class:`~tether.workers.loop.Worker` drives each claimed run in a slot
(``slots.py``). A slot whose run ends does not hand itself back to the worker's loop to be
given the next run (a thread hop to that loop, its claim serialised with the loop's
heartbeats, timers and the other slots' claims, another hop back: measured 3 ms of idle slot
per 8.5 ms run, docs/performance.md). It claims one more run on its own thread and
connection (the loop's claim statement, ``limit`` 1, the servable plans as they are now) and
drives it at once; it stops when the claim finds nothing or fails, or when the worker is
stopping, and only then does the slot go back to the loop (``Slots.give``).

Without a write group the claim rides with the ended run's end: the worker arms the slot's
store before each drive (``arm_end_claim``), the store sends the run's end and the claim in
one transaction and one round trip (``stores/pg_end_claim.py``), and the chain takes the run
so claimed (``take_end_claim``) instead of claiming again; the worker stopping, that run is
given back at once (``Worker._claim_next``). A claim with the end that found nothing, or
that did not go (a statement error: the end was written alone), is followed by the claim
alone, as before.

The worker's bookkeeping of the runs it holds (``_running``, ``_tokens``, the logged lost
leases) stays owned by its loop's thread: the slot queues each switch to a new run
(:class:`Switches`) *before* it starts driving it, and the loop applies the queued switches,
in order, before anything that reads that bookkeeping: a heartbeat (``tether workers``), a
chain's end (its future's done callback), a lost lease (``_forget``, queued by the new run's
drive after the switch), the stop. So the loop is not woken once per run (a self-pipe write,
an epoll wake and the interpreter lock handed to the loop's thread and back, for every run
of every slot: issue 26), and what it reads is as it was when each switch was told at once;
the loop's :attr:`Chain.held` is the run the slot holds now, as far as the loop can know
it. Between a drive's end and the next settle the loop still lists the old run (a heartbeat
then may name a run that has just ended); the count of held runs stays right.

Capacity is counted in slots: the loop claims at most as many runs as it has free slots, and
a chain claims only for the slot it runs in, after that slot's drive has returned. A run
given up while its body hangs (a lost lease: the worker ``_forget``\\ s it at once) keeps its
slot taken until the body returns; its chain claims nothing meanwhile (the drive has not
returned), and once the body returns the slot is free in fact, so claiming the next run
there is right. Claiming *ahead* (a run waiting for a slot to come free) is not done: it
would hold a lease and a place in its queue's limits while another worker may be idle.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from tether.stores.base import Checkpointer
from tether.stores.queueing import ClaimedRun
from tether.workers.slots import Slot

__all__ = ["SETTLE_AFTER", "Chain", "Switches", "Turn"]


@dataclass(frozen=True)
class Turn:
    """A claimed run about to be driven. ``sent``: the monotonic time from before the claim
    was sent (the lease runs from it; the claim's reading of the run row is that old)."""

    claim: ClaimedRun
    sent: float


class Chain:
    """One slot's runs, one after another (see the module docstring).

    Args:
        slot: the slot that drives them (taken by the caller, given back when the chain
            ends).
        first: the run the worker's loop claimed for it.
        drive: drives one run in the slot (on the slot's thread).
        claim: the slot's own claim of one more run on its store, or the run its store
            claimed with the ended run's end (None: nothing claimable, the claim failed,
            or the worker is stopping: a run claimed with the end is then given back).
        switch: on the slot's thread: the slot ended the first run and drives the second
            now (given the chain, the old and the new claim): :meth:`Switches.queue`.
        loop: the worker's loop.
    """

    def __init__(self, slot: Slot, first: Turn, *,
                 drive: Callable[[Slot, Turn], Coroutine[Any, Any, None]],
                 claim: Callable[[Checkpointer], Turn | None],
                 switch: Callable[[Chain, ClaimedRun, ClaimedRun], None],
                 loop: asyncio.AbstractEventLoop) -> None:
        self.slot = slot
        self.held = first.claim
        """The run the slot holds, as the worker's loop knows it (changed on that loop
        only, by ``switch``)."""
        self._first = first
        self._drive = drive
        self._claim = claim
        self._switch = switch
        self.loop = loop
        self.future: asyncio.Future[None] = asyncio.wrap_future(slot.submit(self._run()),
                                                               loop=loop)
        """Done when the chain has ended (the slot's last drive returned)."""

    async def _run(self) -> None:
        turn = self._first
        while True:
            await self._drive(self.slot, turn)
            following = self._claim(self.slot.store)  # None when stopping
            if following is None:
                return
            self._switch(self, turn.claim, following.claim)
            turn = following


class Switches:
    """The chains' switches to their next runs: queued by the slots' threads, applied on the
    worker's loop by :meth:`settle`, in the order they were queued (see the module
    docstring). Bounded: once :data:`SETTLE_AFTER` wait, the loop is asked to settle them
    (a switch holds its runs' records, inputs included, until it is applied)."""

    def __init__(self, apply: Callable[[Chain, ClaimedRun, ClaimedRun], None]) -> None:
        self._queued: deque[tuple[Chain, ClaimedRun, ClaimedRun]] = deque()
        self._apply = apply
        self._asked = False

    def queue(self, chain: Chain, old: ClaimedRun, new: ClaimedRun) -> None:
        """From a slot's thread, before it drives ``new``."""
        queued = self._queued
        queued.append((chain, old, new))
        if len(queued) >= SETTLE_AFTER and not self._asked:
            self._asked = True
            with contextlib.suppress(RuntimeError):  # the loop has closed
                chain.loop.call_soon_threadsafe(self.settle)

    def __len__(self) -> int:
        return len(self._queued)

    def settle(self) -> None:
        """On the worker's loop: apply the switches queued so far."""
        self._asked = False
        queued, apply = self._queued, self._apply
        while queued:
            apply(*queued.popleft())


SETTLE_AFTER = 64
"""Switches queued before the worker's loop is woken to apply them (at most one wake-up per
this many runs; the loop also applies them at each of its own turns that reads them)."""
