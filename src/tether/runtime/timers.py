"""Firing due timers: what a worker calls on every poll.

A timer is a pending row with a due time (``pending_interrupts.due_at``): a ``sleep`` node's,
or an approval's with a ``timeout``. :func:`fire_due` lists the rows due at ``now`` and fires
each through :meth:`Runner.afire <tether.runtime.runner.Runner.afire>`: the claim of the row
(exactly one winner among any number of processes calling this at the same instant) records
the timer's answer, and the winner continues the run by the ordinary resume path. Losers
skip the row. A timer therefore fires once, whichever processes die or restart meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tether.errors import AlreadyResumed, ResumeError
from tether.runtime.bridge import run_sync
from tether.runtime.results import RunResult
from tether.runtime.runner import Runner
from tether.runtime.timer_answers import TIMEOUT_RESOLVER, TIMER_RESOLVER
from tether.stores.base import Checkpointer

__all__ = ["TIMEOUT_RESOLVER", "TIMER_RESOLVER", "afire_due", "fire_due"]

RunnerFactory = Callable[[Checkpointer], Runner]
"""Makes the Runner that continues a fired run (its tasks, limits; ``park_timers=True``)."""


def _runner_for(store: Checkpointer, factory: RunnerFactory | None) -> Runner:
    if factory is None:
        return Runner(checkpointer=store, park_timers=True)
    return factory(store)


async def afire_due(store: Checkpointer, runner_factory: RunnerFactory | None = None,
                    now: float | None = None, limit: int = 100) -> list[RunResult]:
    """Fire every timer due at ``now`` (default: the clock), at most ``limit``; the results of
    the runs this call continued (runs another firer won are left out)."""
    moment = time.time() if now is None else now
    results: list[RunResult] = []
    for row in store.due_pending(moment, limit):
        runner = _runner_for(store, runner_factory)
        try:
            results.append(await runner.afire(row))
        except (AlreadyResumed, ResumeError):
            continue  # another firer (or a person, before the deadline) won this row
    return results


def fire_due(store: Checkpointer, runner_factory: RunnerFactory | None = None,
             now: float | None = None, limit: int = 100) -> list[RunResult]:
    """The sync twin of :func:`afire_due`."""
    return run_sync(afire_due(store, runner_factory, now, limit))
