"""What a resume that leaves the run to others says (``lifecycle.route``), in one place.

Standard library only: ``tether resume --enqueue`` on SQLite (``stores/sqlite_answer.py``)
prints the same sentences without importing the runtime (issue 25, fast start).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["held_message", "left_message"]


def _recorded(address: str | None) -> str:
    return f"answer recorded for '{address}'; " if address else ""


def held_message(execution_id: str, address: str | None, holder: str) -> str:
    """The run is held by a live attempt (``holder``, as ``describe_owner`` says it), which
    applies the answer recorded for ``address`` (None: no answer was given)."""
    return (f"{_recorded(address)}run {execution_id} is being executed by {holder}"
            + (", which applies it" if address else ""))


def left_message(execution_id: str, address: str | None, queue: str, live: Sequence[str],
                 advice: str) -> str:
    """The run is left on ``queue``: to its ``live`` workers (``host/pid``), or, with none
    live, to whoever follows ``advice`` (``NotContinued.advice``)."""
    start = f"{_recorded(address)}run {execution_id} is left to the workers of queue " \
            f"'{queue}' to continue"
    if live:
        return f"{start} ({len(live)} live: {', '.join(live[:3])})"
    return f"{start}, but none is live now: {advice}"
