"""``renamed_from:``: the ids a node had before a rename (C100, C101).

A live run moved to a new plan by ``tether upgrade`` keeps the checkpoints, counters and
pending interrupts of a renamed node only when the old id maps to exactly one new node, and no
node of the new plan still has that id (else which node inherits the progress is ambiguous).
"""

from __future__ import annotations

from tether.compiler.context import Context
from tether.diagnostics.model import Span


def _claims(ctx: Context) -> list[tuple[str, str, Span]]:
    """(node id, old id, where the old id is written) for every ``renamed_from`` entry."""
    found: list[tuple[str, str, Span]] = []
    for node_id, node in ctx.workflow.nodes.items():
        value = node.renamed_from
        if isinstance(value, str):
            found.append((node_id, value, ctx.span("nodes", node_id, "renamed_from")))
        elif value is not None:
            found.extend((node_id, old, ctx.span("nodes", node_id, "renamed_from", i))
                         for i, old in enumerate(value))
    return found


def check_renames(ctx: Context) -> None:
    """Report a ``renamed_from`` naming an id the workflow still has, or an old id claimed by
    two nodes (or twice by one)."""
    nodes = ctx.workflow.nodes
    first: dict[str, str] = {}
    for node_id, old, span in _claims(ctx):
        if old in nodes:
            which = "this node's own id" if old == node_id else f"node `{old}`, which still exists"
            ctx.report("C100", f"node `{node_id}` is renamed from `{old}`: {which}", span,
                       help=f"remove `{old}` from `renamed_from`, or rename node `{old}`")
        elif old in first:
            ctx.report("C101", f"nodes `{first[old]}` and `{node_id}` both claim to be renamed "
                       f"from `{old}`" if first[old] != node_id else
                       f"node `{node_id}` names `{old}` twice in `renamed_from`", span,
                       help="an old id's checkpoints can move to one node only: keep "
                       f"`{old}` on one of them")
        else:
            first[old] = node_id
