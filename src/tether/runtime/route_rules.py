"""Who continues a resumed run: the decisions of ``lifecycle.route``, in one place.

Standard library only (with ``tether.errors`` and the owners' liveness test), so that
``tether resume`` on SQLite without task modules (``stores/sqlite_answer.py``) decides with
the functions the runtime's ``route`` calls, without importing the runtime (issue 25, fast
start). Each reader supplies the facts from its own rows (the plan's tasks, the run row, the
live workers); what follows from them is decided here only.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from tether.errors import NotContinued
from tether.runtime.route_text import left_message
from tether.stores.owners import provably_dead

__all__ = ["Left", "alive_since", "continues_here", "held", "left"]


def alive_since(now: float, lease_seconds: float) -> float:
    """The time after which a worker heard from is live: within two leases of ``now``."""
    return now - 2 * lease_seconds


def continues_here(missing: Collection[str], leave: bool) -> bool:
    """Whether the resuming process continues the run itself: it has every task the run's
    plan calls (none ``missing``) and was not told to leave the run to the workers."""
    return not missing and not leave


def held(owner: str | None, lease_until: float | None, now: float) -> bool:
    """Whether a live attempt holds the run (its lease runs, its owner is not provably
    dead): the answer recorded is then applied by that attempt."""
    return bool(owner) and lease_until is not None and lease_until >= now and \
        not provably_dead(owner or "")


class Left:
    """A run left on its queue: what to say, and the error to raise instead (exit 5) when
    nothing live continues it. (A plain class: a dataclass would compile its methods at
    import, a few million instructions on the path that exists to be cheap.)"""

    __slots__ = ("error", "message")

    def __init__(self, message: str, error: NotContinued | None) -> None:
        self.message = message
        self.error = error


def left(execution_id: str, address: str | None, queue: str, missing: Sequence[str],
         live: Sequence[str], leave: bool) -> Left:
    """The run was left on ``queue`` (its answer to ``address`` recorded; None: no answer
    given) by a process lacking the tasks ``missing``, or told to ``leave`` it: left to its
    ``live`` workers (``host/pid``), else :class:`NotContinued` unless ``leave``."""
    error = NotContinued(execution_id, queue, missing, address)
    message = left_message(execution_id, address, queue, live, error.advice)
    return Left(message, None if live or leave else error)
