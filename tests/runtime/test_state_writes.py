"""Run state is written through the state model's typed methods only (issue 21).

The hot-path writer that builds a completed node's JSON by concatenation is checked against
``dumps`` of the same entry; a real run on SQLite proves that what the journal stores of every
kind of write (complete, retried complete, skip, loop restart and counters, for_each elements,
polling) reads back as the state the run held; and a scan of the source keeps the rule true:
no module outside the state models indexes the state's raw mappings, and no JSON is built by
concatenation outside the two commented writers.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import tether
from tether.runtime.state import RunState, UnitState, completed_entry
from tether.runtime.values import dumps
from tether.status import SkipReason, UnitStatus

SRC = Path(__file__).resolve().parents[2] / "src" / "tether"

TRICKY = [None, 0, -1.5, 10**30, True, "", 'a "quoted" } ] , : text', "é 日本 \u2028 \\",
          [], {}, {"status": "failed", "output": "}"}, [[1, {"a": None}], "x"],
          {"nested": {"deep": [1, 2, {"k": "v\n"}]}}]


@pytest.mark.parametrize("output", TRICKY)
def test_the_hot_path_writer_equals_dumps_of_the_same_entry(output: Any) -> None:
    state = RunState.new({})
    text = state.complete_text("n", output, dumps(output))
    assert text == dumps(completed_entry(output))
    assert json.loads(text) == state.nodes["n"] == {"status": "completed", "output": output}


def test_typed_writes_leave_the_stored_shapes_of_earlier_releases() -> None:
    state = RunState.new({"x": 1})
    state.complete("a", {"v": 1}, ({"attempt": 1, "error": {"type": "E"}},))
    state.skip("b", UnitStatus.UPSTREAM_FAILED, SkipReason.UPSTREAM_FAILED)
    state.set_counter("loop", 3)
    state.restart("a")
    state.unit("f").complete_item("0", [1])
    state.unit("p").polled({"done": False}, 2)
    assert state.data == {
        "inputs": {"x": 1}, "counters": {"loop": 3},
        "nodes": {"a": {"status": "pending", "output": {"v": 1}},
                  "b": {"status": "upstream_failed", "output": None,
                        "reason": "upstream_failed"},
                  "f": {"items": {"0": {"status": "completed", "output": [1]}}},
                  "p": {"status": "running", "output": {"done": False}, "attempts": 2}}}
    assert state.counter("loop") == 3 and state.has_counter("loop")
    assert not state.has_counter("other") and state.counter("other") == 1
    assert state.unit("f").item_status("0") == "completed"
    assert state.unit("f").item_status("1") is None and state.unit("f").item("1") is None
    assert state.unit("f").item_outputs(1) == [[1]]
    assert state.unit("p").attempts_made == 2 and UnitState({}).attempts_made == 0
    assert state.with_output("p", 5)["p"] == {"status": "running", "output": 5}
    assert state.nodes["p"]["output"] == {"done": False}  # (a copy; the state is unchanged)


WORKFLOW = """\
tether: 1
name: writes
nodes:
  first:
    task: t.tricky
  flaky:
    needs: [first]
    task: t.flaky
    retry: {max_attempts: 3, backoff: 1ms, strategy: fixed}
  never:
    needs: [first]
    when: "{{ nodes.first.output[0] is not none }}"
    task: t.tricky
  fan:
    needs: [first]
    for_each: [1, 2, 3]
    task: t.echo
    with: {x: "{{ item }}"}
  poll:
    needs: [first]
    task: t.count
    until: "{{ nodes.poll.output.n >= 3 }}"
    retry: {max_attempts: 5, backoff: 1ms, strategy: fixed}
  draft:
    needs: [flaky, fan, poll, never]
    trigger: all_done
    task: t.count
  critique:
    needs: [draft]
    task: t.echo
    with: {x: "{{ iteration }}"}
    loop: {to: draft, while: "{{ iteration < 3 }}", max_iterations: 5}
output:
  first: "{{ nodes.first.output }}"
"""


def _tasks() -> dict[str, Any]:
    calls = {"flaky": 0, "count": 0}

    def tricky() -> Any:
        return TRICKY

    def flaky() -> str:
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise RuntimeError('first "}" try fails')
        return "ok"

    def count() -> dict[str, int]:
        calls["count"] += 1
        return {"n": calls["count"]}

    def echo(x: Any) -> Any:
        return {"echo": x}

    return {"t.tricky": tricky, "t.flaky": flaky, "t.count": count, "t.echo": echo}


def test_every_kind_of_write_reads_back_from_the_store_as_the_run_held_it(
        tmp_path: Path) -> None:
    """The attacker's case: the journal writes the hot-path text and the marked paths of
    every typed write; a state rebuilt from the stored rows must be the run's state."""
    path = tmp_path / "writes.yaml"
    path.write_text(WORKFLOW, encoding="utf-8")
    with tether.SQLiteCheckpointer(tmp_path / "runs.db") as store:
        result = tether.Runner(path, store, _tasks()).run({})
        assert result.status == "completed", result.error
        nodes = result.state["nodes"]
        assert nodes["first"]["output"] == TRICKY
        assert nodes["flaky"]["status"] == "completed" and len(nodes["flaky"]["attempts"]) == 1
        assert nodes["never"] == {"status": "skipped", "output": None, "reason": "when"}
        assert nodes["fan"] == {"status": "completed",
                                "output": [{"echo": 1}, {"echo": 2}, {"echo": 3}]}
        assert nodes["poll"]["output"]["n"] >= 3
        assert nodes["critique"]["output"] == {"echo": 3}
        assert result.state["counters"] == {"critique": 3}
        stored = store.latest_forkable(result.execution_id)
        assert stored is not None
        assert stored.state_snapshot["nodes"] == nodes
        assert stored.state_snapshot["counters"] == result.state["counters"]


# -- the rule, kept true ----------------------------------------------------------------------

STATE_KEYS = frozenset({"nodes", "status", "output", "counters", "items", "answers",
                        "waiting", "inputs", "attempts", "error", "agent", "messages"})
"""The keys of a run state's mappings (and of a unit's entry)."""

STATE_MODELS = {
    "runtime/state.py": "the run state model itself",
    "runtime/agent/state.py": "the agent loop's state model (the `agent` mapping of a unit)",
    "runtime/journal.py": "serialises marked paths of the state (reads, never writes)",
    "runtime/renaming.py": "renames node ids in a run's stored state as it is loaded, before "
                           "the state model wraps it (a migration of the data, issue 24)",
}
"""Modules that may index the raw mappings, and why."""

ALLOWED_INDEXING = {
    ("runtime/history_nodes.py", "data", "nodes"):
        "reads a stored *plan's* JSON (its node list), not run state",
    ("runtime/polling.py", "names", "nodes"):
        "sets the template namespace's `nodes` name (a view), not the state",
}
"""Single raw subscripts outside the state models: (module, subscripted name, key) -> why."""

JSON_WRITERS = {
    ("runtime/state.py", "complete_text"):
        "the hot-path writer of a completed node's entry (its output's JSON is at hand)",
    ("runtime/journal.py", "_delta"):
        "the journal's delta: the JSON of marked paths, each serialised once",
}
"""The functions allowed to build JSON text by concatenation, and why."""

SCANNED = ("runtime", "workers", "web")
"""Where run state is handled (dsl/ and compiler/ index the *workflow's* mappings, whose keys
overlap; stores/ index database rows)."""


def _modules(dirs: tuple[str, ...]) -> list[tuple[str, ast.Module]]:
    found = []
    for top in dirs:
        for file in sorted((SRC / top).rglob("*.py") if top else SRC.rglob("*.py")):
            rel = file.relative_to(SRC).as_posix()
            found.append((rel, ast.parse(file.read_text(encoding="utf-8"), filename=rel)))
    return found


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return type(node).__name__


def raw_state_indexing(rel: str, tree: ast.Module) -> list[str]:
    """``x["nodes"]``-style subscripts by a state key, and writes through a ``.data``."""
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            through_data = isinstance(node.value, ast.Attribute) and node.value.attr == "data"
            if (key in STATE_KEYS or through_data) and \
                    (rel, _name(node.value), key) not in ALLOWED_INDEXING:
                problems.append(f"src/tether/{rel}:{node.lineno}:{node.col_offset + 1}: "
                                f"{ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("update", "pop", "setdefault", "clear") and \
                isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "data":
            problems.append(f"src/tether/{rel}:{node.lineno}:{node.col_offset + 1}: "
                            f"{ast.unparse(node)}")
    return problems


def _json_piece(value: object) -> bool:
    """A literal piece of JSON text: an object's or array's opening, or a quoted key."""
    return isinstance(value, str) and (value.startswith(('{"', "[[", '[{"', '["'))
                                       or '":' in value)


def json_by_concatenation(rel: str, tree: ast.Module) -> list[str]:
    """``'{"k":' + text + "}"`` and f-strings building JSON text, outside the writers."""
    allowed = {id(n) for f in ast.walk(tree)
               if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
               and (rel, f.name) in JSON_WRITERS for n in ast.walk(f)}
    problems = []
    for node in ast.walk(tree):
        if id(node) in allowed:
            continue
        pieces: list[object] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            pieces = [side.value for side in (node.left, node.right)
                      if isinstance(side, ast.Constant)]
        elif isinstance(node, ast.JoinedStr) and any(
                isinstance(v, ast.FormattedValue) for v in node.values):
            pieces = [v.value for v in node.values if isinstance(v, ast.Constant)]
        if any(_json_piece(p) for p in pieces):
            problems.append(f"src/tether/{rel}:{node.lineno}:{node.col_offset + 1}: "
                            f"{ast.unparse(node)[:80]}")
    return sorted(set(problems))


def test_no_module_outside_the_state_models_indexes_the_run_state() -> None:
    problems = [p for rel, tree in _modules(SCANNED) if rel not in STATE_MODELS
                for p in raw_state_indexing(rel, tree)]
    assert problems == [], "raw run-state indexing (use the typed methods of RunState and " \
        "UnitState in runtime/state.py):\n" + "\n".join(problems)


def test_no_json_is_built_by_concatenation_outside_the_commented_writers() -> None:
    problems = [p for rel, tree in _modules(("",)) for p in json_by_concatenation(rel, tree)]
    assert problems == [], "JSON built by concatenation (use values.dumps):\n" + \
        "\n".join(problems)


def test_the_scans_find_what_they_look_for() -> None:
    """The scans themselves can fail: each flags the shapes this issue removed."""
    source = ast.parse(
        'def f(state, entry, result):\n'
        '    state.data["nodes"]["a"] = {}\n'
        '    entry.data.update({"status": "running"})\n'
        '    outputs = [units["0"]["output"]]\n'
        '    text = \'{"status":"completed","output":\' + result.text + "}"\n'
        '    other = f\'{{"output": {result.text}}}\'\n')
    assert len(raw_state_indexing("runtime/x.py", source)) == 3
    assert len(json_by_concatenation("runtime/x.py", source)) == 2
    assert json_by_concatenation("runtime/state.py", ast.parse(
        "def complete_text(t):\n    return '{\"a\":' + t + '}'\n")) == []
