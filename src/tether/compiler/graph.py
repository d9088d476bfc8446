"""Graph checks: unknown needs, cycles, order, loops and their bodies, upstream relations.

networkx is used here and nowhere at run time: the plan stores the results as plain tuples.
"Upstream" queries walk the dependencies backwards from the reader, never below the target's
position in topological order, so the common case (reading a node that is needed directly or
a few steps back) costs a few steps and checking stays linear in the workflow's size.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tether.compiler.context import Context
from tether.compiler.switches import add_switch_edges
from tether.diagnostics import Related
from tether.suggest import did_you_mean

if TYPE_CHECKING:
    import networkx as nx

    from tether.dsl.document import NodeSpec


@dataclass
class Graph:
    """The dependency structure of one workflow, as the later checks and the plan need it."""

    declared: list[str]
    needs: dict[str, list[str]]
    acyclic: bool = True
    cyclic: set[str] = field(default_factory=set)
    broken_needs: dict[str, list[str]] = field(default_factory=dict)
    """Needs that name nodes set aside for schema errors (kept to tell what is upstream)."""
    order: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)
    deps: dict[str, list[str]] = field(default_factory=dict)
    bodies: dict[str, list[str]] = field(default_factory=dict)
    enclosing: dict[str, list[str]] = field(default_factory=dict)
    waits_for: dict[str, list[str]] = field(default_factory=dict)
    generations: list[list[str]] = field(default_factory=list)

    def is_upstream(self, node: str, of: str) -> bool:
        """Whether ``node`` is a (transitive) dependency of ``of``."""
        if node in self.deps.get(of, ()) and node in self.index and of in self.index:
            return True  # a direct dependency: the walk's first step (the common case)
        return node in self.within(of, node, self.deps, backwards=True)

    def within(self, start: str, stop: str, edges: dict[str, list[str]], *,
               backwards: bool) -> set[str]:
        """Nodes reachable from ``start`` along ``edges`` without passing ``stop``'s position
        in topological order (backwards: not below it; forwards: not above it)."""
        index = self.index
        bound = index.get(stop)
        if bound is None or start not in index:
            return set()
        seen = {start}
        stack = [start]
        while stack:
            for nxt in edges.get(stack.pop(), ()):
                position = index[nxt]
                if nxt not in seen and (position >= bound if backwards else position <= bound):
                    seen.add(nxt)
                    stack.append(nxt)
        seen.discard(start)
        return seen

    def reads_broken(self, broken: str, of: str) -> bool:
        """Whether ``broken`` (a node set aside for errors) is needed by ``of`` or one of its
        upstream nodes."""
        return any(broken in self.broken_needs.get(n, ())
                   for n in ({of} | self.within(of, self.order[0], self.deps, backwards=True)
                             if self.order else {of}))

    def share_loop(self, a: str, b: str) -> bool:
        """Whether ``a`` and ``b`` are in the body of one loop."""
        return bool(set(self.enclosing.get(a, ())) & set(self.enclosing.get(b, ())))


def analyse_graph(ctx: Context) -> Graph:
    """Check ``needs``, order the nodes, and resolve loops; report what is wrong."""
    nodes = ctx.graph_nodes
    known = set(nodes) | set(ctx.workflow.broken_nodes)
    graph = Graph(declared=list(nodes), needs={})
    for node_id, node in nodes.items():
        graph.needs[node_id] = _checked_needs(ctx, node_id, node, known, graph.broken_needs)
    position = {node_id: i for i, node_id in enumerate(graph.declared)}
    switches = any(node.switch is not None for node in ctx.workflow.nodes.values())
    edges: _Edges | None = None
    order: list[str] | None = None
    if not switches and _declared_in_order(graph.needs, position):
        order = list(position)  # the common case: no graph to build
    else:
        edges = _Edges(graph.declared, graph.needs)
        digraph: nx.DiGraph[str] | None = None
        if switches:
            digraph = edges.networkx()
            add_switch_edges(ctx, graph.needs, digraph)
        else:
            order = _topological_order(edges, position)
        if order is None:  # switches, or a cycle: networkx finds and reports the cycles
            digraph = digraph or edges.networkx()
            cycles = _report_cycles(ctx, digraph)
            graph.acyclic = not cycles
            for component in cycles:  # drop the cycle's edges so the other checks can run
                members = set(component)
                graph.cyclic |= members
                for node_id in component:
                    graph.needs[node_id] = [n for n in graph.needs[node_id] if n not in members]
                    digraph.remove_edges_from([(n, node_id) for n in members])
            edges = _Edges.of(digraph)
            order = _topological_order(edges, position)
    graph.order = _acyclic(order)
    graph.index = {node_id: i for i, node_id in enumerate(graph.order)}
    graph.deps = graph.needs
    _resolve_loops(ctx, graph)
    _order_for_run(graph, edges, position)
    graph.deps = graph.waits_for
    return graph


class _Edges:
    """A directed graph as plain adjacency (successors and predecessors, each a dict used as
    an ordered set, as networkx keeps them): what the common checks need, built and walked
    without networkx's views. networkx takes over where a workflow has switches or cycles."""

    def __init__(self, nodes: list[str], needs: dict[str, list[str]]) -> None:
        self.succ: dict[str, dict[str, None]] = {node: {} for node in nodes}
        self.pred: dict[str, dict[str, None]] = {node: {} for node in nodes}
        for node, node_needs in needs.items():
            for need in node_needs:
                self.add(need, node)

    @classmethod
    def of(cls, digraph: nx.DiGraph[str]) -> _Edges:
        edges = cls([], {})
        edges.succ = {node: dict.fromkeys(adjacent) for node, adjacent in digraph.succ.items()}
        edges.pred = {node: dict.fromkeys(adjacent) for node, adjacent in digraph.pred.items()}
        return edges

    def add(self, source: str, target: str) -> None:
        self.succ[source][target] = None
        self.pred[target][source] = None

    def networkx(self) -> nx.DiGraph[str]:
        import networkx as nx  # (imported when needed: most checks never build a graph)

        digraph: nx.DiGraph[str] = nx.DiGraph()
        digraph.add_nodes_from(self.succ)
        for node, targets in self.succ.items():
            digraph.add_edges_from((node, target) for target in targets)
        return digraph


def _topological_order(edges: _Edges, position: dict[str, int]) -> list[str] | None:
    """``nx.lexicographical_topological_sort`` by ``position`` (unique, so the order is the
    same), without its generator and per-node tuples: the lowest ready node comes next.
    None when the graph has a cycle."""
    if _declared_in_order(edges.pred, position):
        return list(position)
    succ = edges.succ
    indegree = {node: len(preds) for node, preds in edges.pred.items()}
    ready = [position[node] for node, degree in indegree.items() if not degree]
    heapq.heapify(ready)
    by_position = {i: node for node, i in position.items()}
    order: list[str] = []
    while ready:
        node = by_position[heapq.heappop(ready)]
        order.append(node)
        for child in succ[node]:
            indegree[child] -= 1
            if not indegree[child]:
                heapq.heappush(ready, position[child])
    return order if len(order) == len(indegree) else None


def _declared_in_order(deps: Mapping[str, Iterable[str]], position: dict[str, int]) -> bool:
    """Whether every node comes after all it depends on (``deps``: each node's; ``position``
    lists the nodes in order of position): then that order is the lexicographical
    topological sort (the lowest node left is always ready), found without a heap or a
    graph. The common case."""
    if len(deps) != len(position):
        return False
    for node, at in position.items():
        for before in deps[node]:
            if position[before] >= at:
                return False
    return True


def _acyclic(order: list[str] | None) -> list[str]:
    if order is None:  # what networkx's sort raises
        import networkx as nx

        raise nx.NetworkXUnfeasible("Graph contains a cycle or graph changed during iteration")
    return order


def _checked_needs(ctx: Context, node_id: str, node: NodeSpec, known: set[str],
                   broken: dict[str, list[str]]) -> list[str]:
    result: list[str] = []
    first: dict[str, int] = {}
    for i, need in enumerate(node.needs or []):
        if need in first:
            ctx.report("E307", f"node `{node_id}` needs `{need}` twice",
                       ctx.span("nodes", node_id, "needs", i), node_id=node_id,
                       related=[Related(ctx.span("nodes", node_id, "needs", first[need]),
                                        f"`{need}` is first listed here")],
                       help="remove the second entry")
            continue
        first[need] = i
        if need in ctx.called:
            callers = ", ".join(f"`{c}`" for c in ctx.called[need])
            ctx.report("E910", f"node `{node_id}` needs `{need}`, an agent that runs only when "
                       f"called (by {callers})", ctx.span("nodes", node_id, "needs", i),
                       node_id=node_id, help="need the agent that calls it instead")
        elif need in ctx.graph_nodes:
            result.append(need)
        elif need in known:
            broken.setdefault(node_id, []).append(need)
        else:
            ctx.report("E301", f"node `{node_id}` needs `{need}`, which does not exist",
                       ctx.span("nodes", node_id, "needs", i), node_id=node_id,
                       help=did_you_mean(need, list(ctx.graph_nodes)))
    return result


def _report_cycles(ctx: Context, digraph: nx.DiGraph[str]) -> list[list[str]]:
    import networkx as nx  # (imported when needed: most checks never build a graph)

    position = {node_id: i for i, node_id in enumerate(ctx.graph_nodes)}
    components = [
        sorted(c, key=position.__getitem__)
        for c in nx.strongly_connected_components(digraph)
        if len(c) > 1 or digraph.has_edge(next(iter(c)), next(iter(c)))
    ]
    for component in sorted(components, key=lambda c: position[c[0]]):
        cycle = _one_cycle(digraph.subgraph(component), component[0])
        path = " -> ".join([*cycle, cycle[0]])
        related = []
        for i, node_id in enumerate(cycle):
            following = cycle[(i + 1) % len(cycle)]
            needs = ctx.workflow.nodes[following].needs or []
            if node_id in needs:
                where = ctx.span("nodes", following, "needs", needs.index(node_id))
                related.append(Related(where, f"`{following}` needs `{node_id}`"))
            else:  # the edge of a switch to a node of one of its cases
                related.append(Related(ctx.key_span("nodes", node_id, "switch"),
                                       f"`{following}` is a case of switch `{node_id}`"))
        extra = len(component) - len(cycle)
        others = f" (and {extra} more nodes in the same cycle)" if extra else ""
        ctx.report(
            "E302",
            f"dependency cycle: {path}{others}",
            ctx.key_span("nodes", cycle[0]),
            related=related,
            node_id=cycle[0],
            help="`needs` must not loop; to repeat nodes, declare a bounded `loop:` "
            "on the node that closes the cycle",
        )
    return components


def _one_cycle(subgraph: nx.DiGraph[str], start: str) -> list[str]:
    """A simple cycle through ``start``, as the list of its nodes in dependency order."""
    import networkx as nx

    edges = nx.find_cycle(subgraph, source=start)
    cycle = [u for u, _ in edges]
    while cycle[0] != start and start in cycle:
        cycle.append(cycle.pop(0))
    return cycle


def _resolve_loops(ctx: Context, graph: Graph) -> None:
    dependents: dict[str, list[str]] = {node_id: [] for node_id in graph.order}
    for node_id in graph.order:
        for need in graph.needs[node_id]:
            dependents[need].append(node_id)
    for closer, node in ctx.graph_nodes.items():
        if node.loop is None:
            continue
        target = node.loop.to
        if target not in graph.index:
            if target not in ctx.workflow.broken_nodes:
                ctx.report("E303", f"`loop.to` of node `{closer}` names `{target}`, which does "
                           "not exist", ctx.span("nodes", closer, "loop", "to"), node_id=closer,
                           help=did_you_mean(target, graph.order))
            continue
        if target != closer and not graph.is_upstream(target, closer):
            ctx.report("E303", f"`loop.to` of node `{closer}` is `{target}`, which is not "
                       f"upstream of `{closer}`", ctx.span("nodes", closer, "loop", "to"),
                       node_id=closer,
                       help=f"a loop runs again from `to`, so `{closer}` must (transitively) "
                       f"need `{target}`")
            continue
        between = graph.within(closer, target, graph.needs, backwards=True) & graph.within(
            target, closer, dependents, backwards=False)
        body = between | {target, closer}
        graph.bodies[closer] = sorted(body, key=graph.index.__getitem__)
    _check_nesting(ctx, graph)
    by_size = sorted(graph.bodies, key=lambda c: len(graph.bodies[c]))
    for closer in by_size:  # innermost loops first
        for member in graph.bodies[closer]:
            graph.enclosing.setdefault(member, []).append(closer)


def _check_nesting(ctx: Context, graph: Graph) -> None:
    closers = list(graph.bodies)
    members = [set(graph.bodies[closer]) for closer in closers]
    loops_of: dict[str, list[int]] = {}
    for i, body in enumerate(members):
        for node_id in body:
            loops_of.setdefault(node_id, []).append(i)
    sharing = sorted({(i, j) for loops in loops_of.values() for i in loops for j in loops
                      if i < j})  # the pairs of loops with a node in common, not every pair
    for i, j in sharing:
        first, second, a, b = closers[i], closers[j], members[i], members[j]
        if not (a <= b or b <= a):
            shared = sorted(a & b, key=graph.index.__getitem__)
            ctx.report(
                "E306",
                f"the loops closed by `{first}` and `{second}` overlap "
                f"(both contain {', '.join(f'`{n}`' for n in shared)})",
                ctx.key_span("nodes", second, "loop"),
                related=[Related(ctx.key_span("nodes", first, "loop"),
                                 f"the loop closed by `{first}`")],
                node_id=second,
                help="loops may nest or be disjoint; move the shared nodes into one loop",
            )
    for closer in closers:
        graph.bodies[closer] = [n for n in graph.bodies[closer] if n in graph.index]


def _order_for_run(graph: Graph, edges: _Edges | None, position: dict[str, int]) -> None:
    """Add loop exits to the dependencies, then compute the run order and generations.

    A node outside a loop that needs a node inside it must wait for the loop to finish, not
    just for one pass over the node it needs: it waits for the loop's closing node.
    """
    enclosing = graph.enclosing
    exits: list[tuple[str, str]] = []
    for node_id in graph.order:
        needs = graph.needs[node_id]
        waits = list(needs)
        own: set[str] | None = None
        for need in needs:
            for closer in enclosing.get(need, ()):
                if own is None:
                    own = set(enclosing.get(node_id, ()))
                if closer not in own and closer != node_id and closer not in waits:
                    waits.append(closer)
                    exits.append((closer, node_id))
        graph.waits_for[node_id] = waits
    # No loop exits, or (with the nodes in declaration order) exits that keep it: the order
    # stays. Else it is sorted again, on the needs edges (there already) and the exits.
    if exits and (edges is not None or not _declared_in_order(graph.waits_for, position)):
        edges = edges or _Edges(graph.declared, graph.needs)
        for closer, node_id in exits:
            edges.add(closer, node_id)
        graph.order = _acyclic(_topological_order(edges, position))
        graph.index = {node_id: i for i, node_id in enumerate(graph.order)}
    index = graph.index
    level: dict[str, int] = {}
    generations: list[list[str]] = []
    for node_id in graph.order:  # a node's generation: one more than its latest dependency's
        waits = graph.waits_for[node_id]
        generation = max([level[w] for w in waits]) + 1 if waits else 0
        level[node_id] = generation
        if generation == len(generations):
            generations.append([])
        generations[generation].append(node_id)
        if len(waits) > 1:
            waits.sort(key=index.__getitem__)
        if len(graph.needs[node_id]) > 1:
            graph.needs[node_id].sort(key=index.__getitem__)
    graph.generations = generations
    for closer, body in graph.bodies.items():
        graph.bodies[closer] = sorted(body, key=graph.index.__getitem__)
