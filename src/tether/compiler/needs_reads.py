"""Reads of ``needs`` (E215): the statuses of the reading node's needs, as one object
(``needs.statuses``, ``needs.all_success``, ``needs.failed``; see
:mod:`tether.runtime.needs`)."""

from __future__ import annotations

from tether.compiler.context import Context, Where
from tether.dsl.expressions import Reference
from tether.suggest import did_you_mean

FIELDS = ("statuses", "all_success", "failed")
"""The fields of ``needs`` (the runtime's :data:`tether.runtime.needs.FIELDS`)."""


def check_needs_read(ctx: Context, ref: Reference, span: Where, reader: str | None,
                     needs: list[str]) -> None:
    """Report a read of ``needs`` outside a node with needs, of a field it lacks, or of
    the status of a node that is not one of the reader's ``needs`` (as the plan has them:
    a switch's case nodes need the switch)."""
    if reader is None or not needs:
        where = f"node `{reader}` has no `needs`" if reader is not None else \
            "the workflow's output belongs to no node"
        ctx.report("E215", f"`needs` is read where {where}", span, node_id=reader,
                   help="`needs` holds the statuses of the node's needs; read one node with "
                   "`nodes.<id>.status`")
        return
    if not ref.attrs:
        return
    field = ref.attrs[0]
    if field not in FIELDS:
        one = f"`nodes.{field}.status`" if field in ctx.workflow.nodes else None
        ctx.report("E215", f"`needs` has no field `{field}`", span, node_id=reader,
                   help=(f"`needs` is one object over all the needs; read {one}, or "
                         f"`needs.statuses.{field}`") if one else
                   did_you_mean(field, FIELDS) or "its fields: " + ", ".join(
                       f"`{f}`" for f in FIELDS))
        return
    if field == "statuses" and len(ref.attrs) > 1 and ref.attrs[1] not in needs:
        target = ref.attrs[1]
        ctx.report("E215", f"`{target}` is not one of the needs of `{reader}`", span,
                   node_id=reader, help=did_you_mean(target, needs) or "its needs: " + ", ".join(
                       f"`{n}`" for n in needs))
