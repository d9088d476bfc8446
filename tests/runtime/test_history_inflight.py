"""What an owner had in flight inside a node when it died (``history_inflight.py``), read
from real compiled plans and run states: the first ``concurrency`` unfinished elements, the
runnable nodes of a sub-workflow at any depth, and only elements that provably exist when
nobody re-ran them."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tether.compiler import compile as compile_plan
from tether.runtime.history_inflight import DEFAULT_CONCURRENCY, InFlight, inside
from tether.runtime.history_nodes import PlanOutline
from tether.runtime.state import RunState

INNER = """
tether: 1
name: inner
nodes:
  one:
    noop: true
  two:
    needs: [one]
    noop: true
"""

OUTER = """
tether: 1
name: outer
inputs:
  keys: {type: array, default: [1, 2, 3, 4, 5, 6]}
nodes:
  listed:
    for_each: [a, b, c, d, e]
    concurrency: 2
    task: inflight.echo
  templated:
    for_each: "{{ inputs.keys }}"
    task: inflight.echo
  child:
    workflow: inner.yaml
  children:
    for_each: [x, y]
    workflow: inner.yaml
"""


def _outline(tmp_path: Path) -> PlanOutline:
    (tmp_path / "inner.yaml").write_text(textwrap.dedent(INNER))
    (tmp_path / "outer.yaml").write_text(textwrap.dedent(OUTER))
    plan = compile_plan(tmp_path / "outer.yaml")
    outline = PlanOutline.read(plan.to_json())
    assert outline is not None
    return outline


def _units(outline: PlanOutline, node: str, state: RunState) -> list[InFlight]:
    return list(inside(outline, outline.by_id[node], state))


def test_the_first_concurrency_unfinished_elements_were_in_flight(tmp_path: Path) -> None:
    """Concurrency 2, element 1 done, element 2 waiting for an answer: 0 and 3 were in
    flight (4 had not started); the plan writes the list, so they provably exist."""
    outline = _outline(tmp_path)
    state = RunState({"nodes": {"listed": {"status": "running", "items": {
        "1": {"status": "completed"}, "2": {"status": "interrupted"}}}}})
    assert _units(outline, "listed", state) == [
        InFlight("listed/item:0", "", True), InFlight("listed/item:3", "", True)]


def test_a_templated_list_counts_with_the_default_and_is_not_known(tmp_path: Path) -> None:
    """How many elements a templated list has is unknown: candidates up to the default
    concurrency, none of them known to exist unless the state has an entry for it."""
    outline = _outline(tmp_path)
    found = _units(outline, "templated", RunState({"nodes": {}}))
    assert [u.address for u in found] == [f"templated/item:{i}"
                                          for i in range(DEFAULT_CONCURRENCY)]
    assert not any(u.known for u in found)
    started = RunState({"nodes": {"templated": {"status": "running", "items": {
        "0": {"status": "completed"}, "1": {"status": "running"}}}}})
    found = _units(outline, "templated", started)
    assert found[0] == InFlight("templated/item:1", "", True)  # its entry says it exists
    assert not any(u.known for u in found[1:])


def test_a_sub_workflows_runnable_nodes_were_in_flight_at_any_depth(tmp_path: Path) -> None:
    """A sub-workflow not begun yet: its roots; half done: the next node; inside a
    ``for_each`` of sub-workflows: each element and its own sub-run's nodes."""
    outline = _outline(tmp_path)
    path = "workflow:outer/node:child"
    assert _units(outline, "child", RunState({"nodes": {}})) == [InFlight("one", path, True)]
    half = RunState({"nodes": {"child": {"status": "running", "sub": {
        "nodes": {"one": {"status": "completed"}}}}}})
    assert _units(outline, "child", half) == [InFlight("two", path, True)]
    each = RunState({"nodes": {"children": {"status": "running", "items": {
        "1": {"status": "running", "sub": {"nodes": {"one": {"status": "completed"}}}}}}}})
    assert _units(outline, "children", each) == [
        InFlight("children/item:0", "", True),
        InFlight("one", "workflow:outer/node:children/item:0", True),
        InFlight("children/item:1", "", True),
        InFlight("two", "workflow:outer/node:children/item:1", True)]
