"""Writing the rare facts of a run's history (``run_events``, see ``stores/events.py``).

One row when an attempt takes a run, one when it lets the run go without ending it, one when
it finds its lease taken over, one per fork: never one per node. Each write is best effort:
the history is a record of the run, not part of it, so a store error here is logged and the
run goes on (its checkpoints still say what its nodes did).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tether.errors import TetherError
from tether.runtime.secrets import masker_for
from tether.stores.events import RunEvent, RunEventKind

if TYPE_CHECKING:
    from tether.compiler.plan import Plan
    from tether.runtime.attempt import Attempt
    from tether.stores.contracts import EventStore
    from tether.stores.records import Checkpoint

log = logging.getLogger("tether.history")


def _add(store: EventStore, event: RunEvent) -> None:
    try:
        store.add_event(event)
    except TetherError as exc:  # the run's own records are intact: say so and go on
        log.warning("run %s: its %s event could not be recorded: %s", event.execution_id,
                    event.kind, exc)


def add_event(store: EventStore, event: RunEvent) -> None:
    """Record ``event``, best effort (a store error is logged)."""
    _add(store, event)


def _attempt_data(attempt: Attempt) -> dict[str, Any]:
    return {"attempt": attempt.number, "reason": attempt.reason, "worker": attempt.worker}


def record_claimed(attempt: Attempt) -> None:
    """``attempt`` holds its run now (written as it starts driving it; a worker's claim
    wrote it already with the claim: ``Checkpointer.claim_runs``)."""
    if attempt.store is not None and not attempt.claimed:
        _add(attempt.store, RunEvent(attempt.execution_id, RunEventKind.CLAIMED,
                                     owner=attempt.token, data=_attempt_data(attempt)))


def record_released(attempt: Attempt, why: str) -> None:
    """``attempt`` let its run go without ending it (paused, handed back, stopped)."""
    if attempt.store is not None and attempt.lost is None:
        _add(attempt.store, RunEvent(attempt.execution_id, RunEventKind.RELEASED,
                                     owner=attempt.token,
                                     data={**_attempt_data(attempt), "why": why}))


def record_lease_lost(attempt: Attempt) -> None:
    """``attempt`` found its lease gone. Written only when another attempt took the run over
    (the database answers then); a lease lost to an unreachable database shows in the
    history as the next owner's claim of an abandoned run."""
    if attempt.store is not None and attempt.lost is not None and \
            attempt.lost.startswith("another attempt"):
        _add(attempt.store, RunEvent(attempt.execution_id, RunEventKind.LEASE_LOST,
                                     owner=attempt.token,
                                     data={**_attempt_data(attempt), "why": attempt.lost}))


def record_forked(store: EventStore, branch: str, source: str, origin: Checkpoint | None,
                  patch: Mapping[str, Any] | None, plan: Plan) -> None:
    """``branch`` was forked from ``source`` at ``origin`` with ``patch`` (masked: a secret's
    value is never stored)."""
    masker = masker_for(plan)
    shown = dict(patch) if patch else None
    if shown is not None and masker is not None:
        shown = masker.value(shown)
    _add(store, RunEvent(branch, RunEventKind.FORKED, data={
        "source": source, "checkpoint_id": origin.checkpoint_id if origin else None,
        "node_id": origin.node_id if origin else None, "patch": shown}))


def record_cancel(store: EventStore, execution_id: str, outcome: str, actor: str | None,
                  channel: str) -> None:
    """A cancel was asked for ``execution_id`` (``outcome``: cancelled at once, or requested
    of the attempt executing it)."""
    _add(store, RunEvent(execution_id, RunEventKind.CANCEL_REQUESTED, actor=actor,
                         channel=channel, data={"outcome": str(outcome)}))
