"""Progress of a run, for live displays (the CLI's progress lines, the console)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """A unit ``started`` or ``finished`` (with its status and how long it took)."""

    kind: str
    execution_id: str
    node_id: str
    agent_path: str
    status: str = ""
    seconds: float = 0.0
    title: str | None = None
    """The node's ``title``, when it has one (displays show it beside the id)."""
