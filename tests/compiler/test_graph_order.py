"""The graph's run order, computed on plain adjacency, is networkx's lexicographical
topological sort by declaration position, on every example and golden file and on random
workflows (the plain walk replaced networkx on the common path)."""

from __future__ import annotations

import random
from pathlib import Path

import networkx as nx
import pytest

from tether.compiler.context import Context
from tether.compiler.graph import Graph, analyse_graph
from tether.dsl.loader import read_workflow, workflow_from_text

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    path for folder in (ROOT / "examples", ROOT / "tests" / "golden" / "cases")
    for pattern in ("*.yaml", "*.flow") for path in folder.rglob(pattern)
)


def _networkx_order(graph: Graph) -> list[str]:
    position = {node_id: i for i, node_id in enumerate(graph.declared)}
    digraph: nx.DiGraph[str] = nx.DiGraph()
    digraph.add_nodes_from(graph.declared)
    for node_id, waits in graph.waits_for.items():
        digraph.add_edges_from((wait, node_id) for wait in waits)
    return list(nx.lexicographical_topological_sort(digraph, key=position.__getitem__))


def _assert_networkx_order(graph: Graph) -> None:
    assert graph.order == _networkx_order(graph)
    assert graph.index == {node_id: i for i, node_id in enumerate(graph.order)}


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_order_of_every_example_and_golden_file_is_networkx_order(path: Path) -> None:
    workflow, _ = read_workflow(path)
    if workflow is None:
        return
    _assert_networkx_order(analyse_graph(Context(workflow)))


@pytest.mark.parametrize("seed", range(20))
def test_the_order_of_random_workflows_is_networkx_order(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.randint(2, 60)
    ids = [f"n{i}" for i in range(size)]
    rng.shuffle(ids)  # declaration order differs from dependency order
    rank = {node_id: i for i, node_id in enumerate(sorted(ids, key=lambda n: int(n[1:])))}
    lines = ["tether: 1", "name: random", "nodes:"]
    for node_id in ids:
        earlier = [n for n in ids if rank[n] < rank[node_id]]
        needs = rng.sample(earlier, min(len(earlier), rng.randint(0, 3)))
        lines += [f"  {node_id}:", "    task: t", f"    needs: [{', '.join(needs)}]"]
    workflow, diagnostics = workflow_from_text("\n".join(lines) + "\n", "random.yaml", "yaml")
    assert workflow is not None, diagnostics
    _assert_networkx_order(analyse_graph(Context(workflow)))


@pytest.mark.parametrize("seed", range(20))
def test_overlapping_loops_are_reported_pair_by_pair_in_order(seed: int) -> None:
    """E306 for every pair of loops that overlap without nesting, in the order of the pairs
    (first loop, then second, as declared): only pairs sharing a node are compared now."""
    rng = random.Random(seed)
    size = rng.randint(5, 40)
    lines = ["tether: 1", "name: loops", "nodes:"]
    for i in range(size):
        lines += [f"  n{i}:", "    task: t"] + ([f"    needs: [n{i - 1}]"] if i else [])
        if i and rng.random() < 0.4:
            lines.append(f'    loop: {{to: n{rng.randint(0, i)}, while: "{{{{ iteration < 2 }}}}", '
                         "max_iterations: 3}")
    workflow, _ = workflow_from_text("\n".join(lines) + "\n", "loops.yaml", "yaml")
    assert workflow is not None
    ctx = Context(workflow)
    graph = analyse_graph(ctx)
    closers = list(graph.bodies)
    expected = [
        (first, second) for i, first in enumerate(closers) for second in closers[i + 1:]
        if (a := set(graph.bodies[first])) & (b := set(graph.bodies[second]))
        and not (a <= b or b <= a)
    ]
    reported = [d.message.split("`")[1:4:2] for d in ctx.diagnostics if d.code == "E306"]
    assert reported == [list(pair) for pair in expected]


def test_a_loop_exit_declared_after_its_reader_reorders_the_nodes() -> None:
    """`x` needs `a`, inside the loop `a`..`c`, and is declared before `c`: it waits for the
    loop's exit `c`, so the run order is no longer the declaration order."""
    text = """tether: 1
name: exits
nodes:
  a: {task: t}
  x: {task: t, needs: [a]}
  b: {task: t, needs: [a]}
  c:
    task: t
    needs: [b]
    loop: {to: a, while: "{{ iteration < 2 }}", max_iterations: 3}
"""
    workflow, diagnostics = workflow_from_text(text, "exits.yaml", "yaml")
    assert workflow is not None, diagnostics
    graph = analyse_graph(Context(workflow))
    _assert_networkx_order(graph)
    assert graph.order == ["a", "b", "c", "x"]
    assert graph.waits_for["x"] == ["a", "c"]
