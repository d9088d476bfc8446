"""Node kinds: the one table of what a node can be, and which settings each kind refuses.

Every node has exactly one kind. The table below is read by document validation (exactly one
kind per node, settings that do not apply), the ``.flow`` reader and both writers, the plan
(its node variants and the shape of its JSON) and the docs test. Adding a kind (an ``agent``
node, say) starts with a member of :class:`NodeKind` and a row of :data:`KINDS`; mypy then
points at every ``match`` over kinds that does not handle it yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


class NodeKind(StrEnum):
    """What a node does; the kind's name is also the key that introduces it in a workflow."""

    TASK = "task"
    APPROVAL = "approval"
    WORKFLOW = "workflow"
    AGENT = "agent"
    SWITCH = "switch"
    NOOP = "noop"
    FAIL = "fail"
    SLEEP = "sleep"
    SLEEP_UNTIL = "sleep_until"


NodeKindName = Literal["task", "approval", "workflow", "agent", "switch", "noop", "fail",
                       "sleep", "sleep_until"]
"""The kinds as a ``Literal``, for pydantic discriminators (equal to :class:`NodeKind`)."""

SETTINGS: tuple[str, ...] = ("with", "retry", "timeout", "idempotent", "for_each", "concurrency",
                             "until", "fail_fast", "matrix")
"""The node settings some kinds refuse. Every other key (``needs``, ``when``, ``trigger``,
``loop``, ``title``) applies to every kind."""


@dataclass(frozen=True)
class KindSpec:
    """One row of the table: a kind, how messages name it, and the settings it refuses."""

    kind: NodeKind
    noun: str
    summary: str
    refuses: tuple[str, ...] = ()

    def takes(self, setting: str) -> bool:
        """Whether a node of this kind may have ``setting`` (one of :data:`SETTINGS`)."""
        return setting not in self.refuses


KINDS: dict[NodeKind, KindSpec] = {
    spec.kind: spec
    for spec in (
        KindSpec(NodeKind.TASK, "a task node", "calls a registered Python function"),
        KindSpec(NodeKind.APPROVAL, "an approval node", "pauses the run for a human decision",
                 refuses=SETTINGS),
        KindSpec(NodeKind.WORKFLOW, "a workflow node", "runs another workflow file as a sub-run",
                 refuses=("retry", "timeout", "idempotent", "until")),
        KindSpec(NodeKind.AGENT, "an agent node", "runs an LLM loop with tools",
                 refuses=("with", "idempotent", "for_each", "concurrency", "until", "fail_fast",
                          "matrix")),
        KindSpec(NodeKind.SWITCH, "a switch node", "runs the nodes of one case, skips the others",
                 refuses=SETTINGS),
        KindSpec(NodeKind.NOOP, "a noop node", "does nothing and completes", refuses=SETTINGS),
        KindSpec(NodeKind.FAIL, "a fail node", "fails with its rendered message",
                 refuses=SETTINGS),
        KindSpec(NodeKind.SLEEP, "a sleep node", "waits a duration (a durable timer)",
                 refuses=SETTINGS),
        KindSpec(NodeKind.SLEEP_UNTIL, "a sleep_until node",
                 "waits until a timestamp (a durable timer)", refuses=SETTINGS),
    )
}

KIND_NAMES: tuple[str, ...] = tuple(kind.value for kind in NodeKind)
KIND_KEYS: tuple[tuple[NodeKind, str], ...] = tuple((kind, kind.value) for kind in NodeKind)
"""Each kind with its key, in order (quicker to go through than the enum, once per node)."""


def spec_of(kind: NodeKind | str) -> KindSpec:
    """The row of ``kind`` (a :class:`NodeKind` or its name)."""
    return KINDS[NodeKind(kind)]


__all__ = ["KINDS", "KIND_KEYS", "KIND_NAMES", "SETTINGS", "KindSpec", "NodeKind", "NodeKindName",
           "spec_of"]
