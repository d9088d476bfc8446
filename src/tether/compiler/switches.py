"""Switch nodes in the graph: the nodes of every case follow their switch.

Each node listed in a case (or the default) of a switch waits for the switch, whether or not
its ``needs`` say so: it cannot be decided before the switch has chosen. A node listed in two
cases, an unknown node, and a node that runs before the switch (so cannot follow it) are
errors; a switch without ``default`` is a warning (when no case matches, none of its nodes
run).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from tether.compiler.context import Context
from tether.diagnostics import Related
from tether.dsl.source import Path
from tether.suggest import did_you_mean

if TYPE_CHECKING:
    import networkx as nx

    from tether.dsl.document import SwitchSpec


def branches(switch: SwitchSpec) -> Iterator[tuple[Path, str, str]]:
    """Every listed node: its path under the switch, how to name its case, and its id."""
    for case, members in switch.cases.items():
        for i, member in enumerate(members):
            yield ("switch", "cases", case, i), f"case `{case}`", member
    for i, member in enumerate(switch.default or ()):
        yield ("switch", "default", i), "the default", member


def add_switch_edges(ctx: Context, needs: dict[str, list[str]],
                     digraph: nx.DiGraph[str]) -> None:
    """Check every switch's cases; make each listed node need its switch."""
    import networkx as nx  # (imported when needed: most checks never build a graph)

    nodes = ctx.workflow.nodes
    for switch_id, node in nodes.items():
        if node.switch is None:
            continue
        base: Path = ("nodes", switch_id)
        before = nx.ancestors(digraph, switch_id)
        first: dict[str, tuple[Path, str]] = {}
        for path, case, member in branches(node.switch):
            where = ctx.span(*base, *path)
            if member in first:
                at, other = first[member]
                ctx.report("E308", f"node `{member}` is listed in {other} and in {case} of "
                           f"switch `{switch_id}`", where, node_id=switch_id,
                           related=[Related(ctx.span(*base, *at), f"`{member}` is first "
                                            f"listed in {other} here")],
                           help="a node belongs to at most one case; to run it in several, "
                           "make it need the case nodes with a trigger rule such as "
                           "`none_failed_min_one_success`")
                continue
            first[member] = (path, case)
            if member not in nodes:
                if member not in ctx.workflow.broken_nodes:
                    ctx.report("E309", f"{case} of switch `{switch_id}` names `{member}`, "
                               "which does not exist", where, node_id=switch_id,
                               help=did_you_mean(member, list(nodes)))
            elif member == switch_id or member in before:
                ctx.report("E309", f"{case} of switch `{switch_id}` names `{member}`, which "
                           f"runs before the switch", where, node_id=switch_id,
                           help="a case lists nodes that follow the switch and run only "
                           "when their case is chosen")
            elif switch_id not in needs[member]:
                needs[member].append(switch_id)
                digraph.add_edge(switch_id, member)
        # `default: null` (`.flow`: `default null`) says so on purpose: no warning
        if node.switch.default is None and "default" not in node.switch.model_fields_set:
            flow = ctx.workflow.file.endswith(".flow")
            add = "`default ID`" if flow else "`default: [...]`"
            ctx.report("W104", f"switch `{switch_id}` has no `default`", ctx.key_span(
                *base, "switch"), node_id=switch_id,
                help=f"when no case matches, none of the listed nodes run; add {add} (a "
                f"`fail` node, say) to handle the other values, or write "
                f"{'`default null`' if flow else '`default: null`'} to say none is needed")
