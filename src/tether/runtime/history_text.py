"""What each event of a run's history says, in one line of plain text (``tether show``'s
detail column, the console's history table). The caller escapes it for its medium."""

from __future__ import annotations

import json
from typing import Any, assert_never

from tether.runtime.history import EventKind, HistoryEvent

__all__ = ["describe"]


def _short(value: Any, width: int = 60) -> str:
    """``value`` on one line (JSON unless a string), cut to ``width`` characters."""
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                            default=str)
    shown = " ".join(shown.split())
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def _who(event: HistoryEvent) -> str:
    where = f"pid {event.pid} on host {event.host!s}" if event.pid is not None \
        else str(event.owner or "an unknown owner")
    return where + (f", worker {event.worker!s}" if event.worker else "")


def _error(event: HistoryEvent) -> str:
    error = event.error or {}
    return f"{error.get('type')}: {_short(error.get('message'), 70)}"


def _answer(event: HistoryEvent) -> str:
    by = f"by {event.actor}" if event.actor else "by someone"
    through = f" through {event.channel}" if event.channel else ""
    comment = f" ({_short(event.comment, 60)})" if event.comment else ""
    return f"{by}{through}: {_short(event.detail, 40)}{comment}"


def describe(event: HistoryEvent) -> str:
    """One line saying what ``event`` was (exhaustive over the kinds)."""
    kind = event.kind
    match kind:
        case EventKind.RUN_CREATED:
            return "queued" if event.detail else ""
        case EventKind.FORKED:
            return f"from {_short(event.detail, 70)} at {event.checkpoint_id}"
        case EventKind.CLAIMED:
            return f"{_who(event)} ({event.reason})"
        case EventKind.RELEASED | EventKind.LEASE_LOST:
            return f"{_who(event)}: {event.reason}"
        case EventKind.NODE_STARTED:
            return ""
        case EventKind.NODE_FAILED | EventKind.NODE_TIMED_OUT:
            return _error(event)
        case EventKind.NODE_RETRIED:
            return f"again after {event.backoff_seconds:g} s"
        case EventKind.NODE_ABANDONED | EventKind.TOOL_CALL_ABANDONED:
            return f"{event.reason}"
        case EventKind.NODE_COMPLETED:
            return f"{event.duration_ms:,.0f} ms: {_short(event.detail, 40)}"
        case EventKind.NODE_SKIPPED:
            if event.reason is not None and str(event.reason) == str(event.status):
                return str(event.status)  # upstream_failed says why by itself
            return f"{event.status}: {event.reason or 'reason not recorded'}"
        case EventKind.PAUSED:
            return f"asks: {event.reason}"
        case EventKind.ANSWERED | EventKind.TIMED_OUT:
            return _answer(event)
        case EventKind.UPGRADED:
            detail = event.detail or {}
            renamed = detail.get("renamed") or {}
            moved = "".join(f", {old} now {new}" for old, new in sorted(renamed.items()))
            return f"plan {str(detail.get('from'))[:12]} -> {str(detail.get('to'))[:12]}" + \
                moved
        case EventKind.CONCURRENCY:
            return f"{event.reason}"
        case EventKind.CANCEL_REQUESTED:
            return f"by {event.actor or 'someone'} through {event.channel}: {event.status}"
        case EventKind.AGENT_TURN:
            return f"turn {event.attempt} ({event.status})"
        case EventKind.TOOL_CALL_STARTED | EventKind.TOOL_CALL_COMPLETED:
            return "arguments " + _short((event.detail or {}).get("arguments"), 50)
        case EventKind.HANDOFF:
            return _short(event.detail, 60)
        case EventKind.RUN_ENDED:
            return _error(event) if event.error else _short(event.detail, 60)
        case _:
            assert_never(kind)
