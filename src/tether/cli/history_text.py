"""``tether show``'s text timeline: one line per event of a run's history.

Every id, name and value printed is data, shown through ``terminal.py`` (escaped). The
``--json`` form is the history's own JSON (``History.to_json``), the API's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.cli.terminal import console, printable, shorten, text
from tether.runtime.history_text import describe
from tether.trigger import Trigger

if TYPE_CHECKING:
    from tether.runtime.history import History


DETAIL_WIDTH = 90


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """``rows`` as lines of left-aligned columns two spaces apart (a table of hundreds of
    rows is formatted here in a few milliseconds; laying it out cell by cell costs more than
    reading the history)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            .rstrip() for row in rows]


def print_history(history: History) -> None:
    """The header, then the timeline of one page of ``history``."""
    from rich.text import Text

    out = console()
    out.print(Text.assemble("run ", text(history.execution_id), "  workflow ",
                            text(history.workflow), "  status ", text(history.status, "bold")))
    out.print(text("inputs: " + shorten(history.inputs, 100)))
    trigger = Trigger.from_dict(history.trigger)
    if trigger is not None:
        out.print(text(f"started by: {trigger.describe()}"))
    if history.parent_execution_id:
        out.print(text(f"forked from {history.parent_execution_id} at "
                       f"{history.parent_checkpoint_id}"))
    rows: list[tuple[str, ...]] = [("time", "event", "node", "attempt", "detail", "checkpoint")]
    start = history.created_at
    for event in history.events:
        offset = (event.at - start).total_seconds() * 1000
        node = event.node or ""
        view = history.nodes.get(node)
        named = view.title if view is not None else None
        shown = f"{node} ({named})" if named else node
        if event.agent_path:
            shown = f"{event.agent_path} {shown}"
        rows.append((f"+{offset:,.0f} ms", event.kind, printable(shown),
                     str(event.attempt) if event.attempt is not None else "",
                     shorten(describe(event), DETAIL_WIDTH), printable(event.checkpoint_id or "")))
    for line in _aligned(rows):
        out.print(text(line))
    usage = history.usage
    if usage is not None:
        out.print(text(f"tokens: {usage.get('input_tokens', 0):,} in, "
                       f"{usage.get('output_tokens', 0):,} out (every model call of the run "
                       "so far)"))
