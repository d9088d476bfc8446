"""How a worker undoes a claim it could not use: the run goes back (paused, released, or
released with a backoff), and a ``released`` event closes the claim's ``claimed`` event in
the run's history (``tests/workers/test_give_back.py``)."""

from __future__ import annotations

import logging
import time

from tether.errors import TetherError
from tether.runtime.run_events import add_event
from tether.stores.base import Checkpointer
from tether.stores.events import RunEvent, released_event
from tether.stores.queueing import ClaimedRun, ClaimReason
from tether.workers import claims

log = logging.getLogger("tether.workers")


def released(claim: ClaimedRun, worker: str, why: str) -> RunEvent:
    """The ``released`` event that closes ``claim``'s ``claimed`` event when ``worker`` gives
    it back unused (``why``: what the history shows)."""
    return released_event(claim.run.execution_id, claim.owner, claim.run.attempt, worker, why)


def give_back(store: Checkpointer, claim: ClaimedRun, event: RunEvent | None = None) -> None:
    """Undo a claim a worker could not use: a paused run goes back to paused (its answer
    stays recorded), anything else is released. ``event`` (:func:`released`) closes the
    claim's ``claimed`` event in the run's history: written with the release (in its
    transaction) or after the pause, only if this claim still held the run."""
    try:
        if claim.reason == ClaimReason.ANSWERED:
            store.pause_run(claim.run.execution_id, claim.owner, [])
            if event is not None:
                add_event(store, event)
        else:
            store.release(claim.run.execution_id, claim.owner, event)
    except TetherError as exc:
        log.warning("run %s: giving it back failed (%s); its lease expires",
                    claim.run.execution_id, exc)


def retry_later(store: Checkpointer, claim: ClaimedRun, worker: str, error: str) -> bool:
    """A drive that failed for a reason other than fencing: no worker takes the run again
    before a backoff (doubling with each failure, capped), and the failure is recorded on it
    (``tether runs --stuck``). An answered pause goes back to paused instead: True, and the
    worker should not claim it again at once."""
    if claim.reason == ClaimReason.ANSWERED:
        give_back(store, claim, released(claim, worker, f"given back: {error}"))
        return True
    failures = claim.run.recovery_failures + 1
    delay = claims.backoff_seconds(failures)
    reason = f"recovery failed {failures} time(s), next try in {delay:g} s: {error}"
    try:
        store.retry_later(claim.run.execution_id, claim.owner, time.time() + delay, reason,
                          released(claim, worker, reason))
    except TetherError as exc:
        log.warning("run %s: giving it back failed (%s); its lease expires",
                    claim.run.execution_id, exc)
    return False
