"""Agent tool calls are bounded and stored linearly: ``max_tool_calls`` refuses a reply that
asks for too many before any of them runs, and a turn of N calls stores bytes per call that do
not grow with N (a tool call's row holds what it adds, never the conversation again)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import agent_tasks
import pytest
from runs_support import (
    TASKS,
    agent,
    agent_rows,
    calls,
    run_json,
    tether_cli,
    tool_results,
    url_for,
    write_workflow,
)

from tether import Runner
from tether.stores.open import open_checkpointer
from tether.testing import ScriptedModelServer, ScriptedReply, ScriptedToolCall

TOOLS = {"shop.echo": agent_tasks.echo, "shop.lookup": agent_tasks.lookup}


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls.log"
    monkeypatch.setenv("AGENT_LOG", str(path))
    return path


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    url = f"sqlite:///{tmp_path / 'tether.db'}"
    store = open_checkpointer(url)
    yield url, store
    store.close()


def echoes(count: int, size: int = 120) -> tuple[ScriptedToolCall, ...]:
    """``count`` calls of shop.echo, each with its own text of ``size`` characters."""
    return tuple(ScriptedToolCall(name="shop_echo", arguments={"text": f"{i:06d}" * (size // 6)})
                 for i in range(count))


def test_a_reply_asking_for_ten_thousand_calls_fails_at_the_limit_before_any_runs(
        tmp_path: Path, server: ScriptedModelServer, db: tuple[str, Any], log: Path) -> None:
    """The default per-turn limit (64) refuses the reply: ToolCallLimit naming the node, the
    count and the limit; no tool runs, no tool_call row is written, little is stored."""
    url, store = db
    server.add_replies([ScriptedReply(tool_calls=echoes(10_000, size=12))])
    path = write_workflow(tmp_path, {"payer": {"agent": agent(
        "openai", server, prompt="{{ inputs.request }}", tools=["shop.echo"])}})
    result = Runner(path, store, TOOLS).run({"request": "go"})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error["type"] == "ToolCallLimit" and result.error["node_id"] == "payer"
    message = result.error["message"]
    assert "10000 tool calls" in message and "limit is 64" in message
    assert "max_tool_calls.per_turn" in message
    assert calls(log) == []
    rows = agent_rows(store, result.execution_id)
    assert [r.step_type for r in rows] == ["llm_call"]
    assert len(server.requests) == 1
    assert _stored_bytes(url, result.execution_id) < 200_000  # the refused reply is not kept


def test_the_per_run_limit_counts_calls_over_turns_and_a_resume_counts_afresh(
        tmp_path: Path, server: ScriptedModelServer, db: tuple[str, Any], log: Path) -> None:
    """per_run 3: two calls at turn 0 run, the two more asked at turn 1 are refused (4 > 3);
    `tether resume` asks the model again with a fresh count, and the run completes."""
    url, _ = db
    server.add_replies([
        ScriptedReply(tool_calls=echoes(2)),
        ScriptedReply(tool_calls=echoes(2)),
        ScriptedReply(text="Done."),
    ])
    path = write_workflow(tmp_path, {"payer": {"agent": agent(
        "openai", server, prompt="{{ inputs.request }}", tools=["shop.echo"],
        max_tool_calls={"per_run": 3})}})
    failed = tether_cli("run", str(path), "-i", "request=go", "--db", url, "--tasks",
                        str(TASKS), "--json", env={"AGENT_LOG": str(log)})
    assert failed.returncode == 1, failed.stderr
    data = run_json(failed)
    assert data["status"] == "failed"
    assert data["error"]["type"] == "ToolCallLimit"
    assert "4 in this run; the limit is 3 (max_tool_calls.per_run)" in data["error"]["message"]
    assert calls(log) == ["echo", "echo"]
    resumed = tether_cli("resume", data["execution_id"], "--db", url, "--tasks", str(TASKS),
                         "--json", env={"AGENT_LOG": str(log)})
    assert resumed.returncode == 0, resumed.stderr
    assert run_json(resumed)["output"] == "Done."
    assert calls(log) == ["echo", "echo"]  # the refused calls never ran
    assert len(server.requests) == 3


def test_per_turn_limit_lets_a_reply_of_exactly_the_limit_run(
        tmp_path: Path, server: ScriptedModelServer, db: tuple[str, Any], log: Path) -> None:
    _, store = db
    server.add_replies([ScriptedReply(tool_calls=echoes(5)), ScriptedReply(text="ok")])
    path = write_workflow(tmp_path, {"payer": {"agent": agent(
        "anthropic", server, prompt="{{ inputs.request }}", tools=["shop.echo"],
        max_tool_calls={"per_turn": 5})}})
    result = Runner(path, store, TOOLS).run({"request": "go"})
    assert result.status == "completed" and result.output == "ok"
    assert calls(log) == ["echo"] * 5


_BYTES = ("SELECT SUM(LENGTH(state) + COALESCE(LENGTH(node_input), 0) "
          "+ COALESCE(LENGTH(node_output), 0) + COALESCE(LENGTH(interrupt_context), 0) "
          "+ LENGTH(iteration_counters)) FROM checkpoints WHERE execution_id = ")


def _stored_bytes(url: str, execution_id: str) -> int:
    """The characters of every JSON column of the run's checkpoint rows, as stored."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
            (total,) = connection.execute(_BYTES + "?", (execution_id,)).fetchone()
        return int(total)
    import psycopg

    base, _, schema = url.partition("?schema=")
    with psycopg.connect(base) as connection:
        connection.execute(f'SET search_path TO "{schema}"')
        row = connection.execute(_BYTES + "%s", (execution_id,)).fetchone()
    assert row is not None
    return int(row[0])


def _bytes_per_call(directory: Path, url: str, calls_in_turn: int) -> float:
    with ScriptedModelServer([ScriptedReply(tool_calls=echoes(calls_in_turn)),
                              ScriptedReply(text="ok")]) as server:
        path = write_workflow(directory, {"payer": {"agent": agent(
            "openai", server, prompt="{{ inputs.request }}", tools=["shop.echo"],
            max_tool_calls={"per_turn": 1000})}}, name=f"turn{calls_in_turn}")
        with open_checkpointer(url) as store:
            result = Runner(path, store, TOOLS).run({"request": "go"})
            assert result.status == "completed", result.error
            assert len(agent_rows(store, result.execution_id)) == calls_in_turn + 2
    return _stored_bytes(url, result.execution_id) / calls_in_turn


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_turn_stores_bytes_per_call_that_do_not_grow_with_the_calls(
        tmp_path: Path, log: Path, backend: str, request: pytest.FixtureRequest) -> None:
    """50 and 200 calls of one reply: four times the calls, about the same bytes per call
    (storing the conversation again in each call's row made it about four times as many)."""
    url = url_for(backend, tmp_path, request)
    small = _bytes_per_call(tmp_path, url, 50)
    large = _bytes_per_call(tmp_path, url, 200)
    assert large < 1.5 * small, (small, large)


AGENT_YAML = """\
tether: 1
name: pay
inputs:
  request: {type: string}
nodes:
  payer:
    agent:
      model: openai:gpt-4.1-mini
      prompt: "{{ inputs.request }}"
      max_turns: 8
"""


def test_max_tool_calls_in_both_syntaxes_is_one_plan_and_the_default_keeps_the_fingerprint(
        tmp_path: Path) -> None:
    from tether.compiler import compile
    from tether.dsl.flow_writer import write_flow
    from tether.dsl.loader import workflow_from_text

    (tmp_path / "plain.yaml").write_text(AGENT_YAML)
    (tmp_path / "default.yaml").write_text(
        AGENT_YAML + "      max_tool_calls: {per_turn: 64}\n")
    limited = AGENT_YAML + "      max_tool_calls: {per_turn: 8, per_run: 100}\n"
    (tmp_path / "limited.yaml").write_text(limited)
    workflow, diagnostics = workflow_from_text(limited, "limited.yaml", "yaml")
    assert diagnostics == [] and workflow is not None
    flow = write_flow(workflow.doc)
    assert "    max_tool_calls {per_turn: 8, per_run: 100}\n" in flow
    (tmp_path / "limited.flow").write_text(flow)
    plain, default, yaml_plan, flow_plan = (compile(tmp_path / name) for name in (
        "plain.yaml", "default.yaml", "limited.yaml", "limited.flow"))
    assert plain.fingerprint == default.fingerprint  # the default is not written
    assert "max_tool_calls" not in plain.to_json()
    assert yaml_plan.fingerprint == flow_plan.fingerprint != plain.fingerprint
    limits = yaml_plan.nodes[0].agent.max_tool_calls
    assert (limits.per_turn, limits.per_run) == (8, 100)
    assert yaml_plan.from_json(yaml_plan.to_json()) == yaml_plan


@pytest.mark.parametrize("limits", ["{per_turn: 0}", "{per_run: -3}"])
def test_a_bound_below_one_is_e913_at_its_place(tmp_path: Path, limits: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(AGENT_YAML + f"      max_tool_calls: {limits}\n")
    result = tether_cli("check", str(path))
    assert result.returncode == 1
    assert "bad.yaml:11:" in result.stdout + result.stderr
    assert "error[E913]" in result.stdout + result.stderr
    assert "agent `payer`" in result.stdout + result.stderr


def test_the_schema_offers_max_tool_calls_to_editors() -> None:
    import json

    schema = json.loads(tether_cli("schema").stdout)
    limits = schema["$defs"]["ToolCallLimitsSpec"]
    assert set(limits["properties"]) == {"per_turn", "per_run"}
    assert limits["additionalProperties"] is False
    assert limits["properties"]["per_turn"]["minimum"] == 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_pause_in_the_middle_of_a_turn_keeps_the_results_before_it(
        tmp_path: Path, server: ScriptedModelServer, log: Path, backend: str,
        request: pytest.FixtureRequest) -> None:
    """Six calls, the fourth pauses: resumed, the three before it keep their results (not run
    again), the paused one runs with the answer, the two after it are answered "did not
    run", and the model receives the six results in the reply's order."""
    url = url_for(backend, tmp_path, request)
    before = echoes(3)
    after = tuple(ScriptedToolCall(name="shop_echo", arguments={"text": f"late {i}"})
                  for i in range(2))
    review = ScriptedToolCall(name="shop_review", arguments={"invoice": "INV-4"})
    server.add_replies([ScriptedReply(tool_calls=(*before, review, *after)),
                        ScriptedReply(text="Reviewed.")])
    path = write_workflow(tmp_path, {"payer": {"agent": agent(
        "anthropic", server, prompt="{{ inputs.request }}",
        tools=["shop.echo", "shop.review"])}})
    tools = {**TOOLS, "shop.review": agent_tasks.review}
    with open_checkpointer(url) as store:
        paused = Runner(path, store, tools).run({"request": "go"})
        assert paused.status == "paused", paused.error
        assert calls(log) == ["echo"] * 3 + ["review INV-4"]
    with open_checkpointer(url) as store:  # another store handle: nothing kept in memory
        done = Runner(path, store, tools).resume(paused.execution_id, {"approved": True})
    assert done.status == "completed" and done.output == "Reviewed."
    assert calls(log) == ["echo"] * 3 + ["review INV-4", "review INV-4"]
    sent = tool_results(server, 1, "anthropic")
    assert [r["content"] for r in sent[:3]] == [c.arguments["text"] for c in before]
    assert json.loads(sent[3]["content"]) == {"invoice": "INV-4", "approved": True}
    assert all("did not run" in r["content"] for r in sent[4:]) and len(sent) == 6
