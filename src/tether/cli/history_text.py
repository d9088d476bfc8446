"""``tether show``'s text timeline: one line per event of a run's history.

Every id, name and value printed is data, shown through ``terminal.py`` (escaped). The
``--json`` form is the history's own JSON (``History.to_json``), the API's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.cli.terminal import console, shorten, text
from tether.runtime.history_text import describe

if TYPE_CHECKING:
    from tether.runtime.history import History


def print_history(history: History) -> None:
    """The header, then the timeline of one page of ``history``."""
    from rich.table import Table
    from rich.text import Text

    out = console()
    out.print(Text.assemble("run ", text(history.execution_id), "  workflow ",
                            text(history.workflow), "  status ", text(history.status, "bold")))
    out.print(text("inputs: " + shorten(history.inputs, 100)))
    if history.parent_execution_id:
        out.print(text(f"forked from {history.parent_execution_id} at "
                       f"{history.parent_checkpoint_id}"))
    table = Table(box=None, pad_edge=False)
    for column in ("time", "event", "node", "attempt"):
        table.add_column(column, no_wrap=True)
    table.add_column("detail", no_wrap=True, overflow="ellipsis", max_width=90)
    table.add_column("checkpoint", no_wrap=True)
    start = history.created_at
    for event in history.events:
        offset = (event.at - start).total_seconds() * 1000
        node = event.node or ""
        view = history.nodes.get(node)
        named = view.title if view is not None else None
        shown = f"{node} ({named})" if named else node
        if event.agent_path:
            shown = f"{event.agent_path} {shown}"
        table.add_row(f"+{offset:,.0f} ms", text(event.kind), text(shown),
                      str(event.attempt) if event.attempt is not None else "",
                      text(describe(event)), text(event.checkpoint_id or ""))
    out.print(table)
    usage = history.usage
    if usage is not None:
        out.print(text(f"tokens: {usage.get('input_tokens', 0):,} in, "
                       f"{usage.get('output_tokens', 0):,} out (every model call of the run "
                       "so far)"))
