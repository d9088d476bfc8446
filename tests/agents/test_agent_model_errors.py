"""Model failures become node retries with backoff (each retry its own turn row); refusals
fail the node at once; the API key is masked in everything stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import agent_tasks
import pytest
from agents_support import OPENAI_KEY
from runs_support import agent, agent_rows, write_workflow

from tether import Runner, SQLiteCheckpointer
from tether.testing import ScriptedError, ScriptedModelServer, ScriptedReply, ScriptedToolCall

TOOLS = {"shop.echo": agent_tasks.echo}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AGENT_LOG", str(tmp_path / "calls.log"))
    with SQLiteCheckpointer(tmp_path / "t.db") as checkpointer:
        yield checkpointer


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_rate_limits_and_server_errors_are_retried_with_a_turn_row_per_attempt(
        tmp_path: Path, server: ScriptedModelServer, store: Any, provider: str) -> None:
    server.add_replies([ScriptedError(status=429, retry_after=0), ScriptedError(status=503),
                        ScriptedReply(text="Third time lucky.")])
    path = write_workflow(tmp_path, {"a": {"agent": agent(provider, server, prompt="hi"),
                                           "retry": {"max_attempts": 3, "backoff": "10ms"}}})
    result = Runner(path, store, TOOLS).run({"request": "x"})
    assert result.status == "completed" and result.output == "Third time lucky."
    rows = agent_rows(store, result.execution_id)
    assert [(c.node_id, c.node_input["attempt"]) for c in rows] == [
        ("a/turn:0", 1), ("a/turn:0", 2), ("a/turn:0", 3)]
    assert len(server.requests) == 3


def test_a_refusal_fails_the_node_without_retrying(tmp_path: Path, server: ScriptedModelServer,
                                                   store: Any) -> None:
    server.add_replies([ScriptedError(status=401, message="bad key")])
    path = write_workflow(tmp_path, {"a": {"agent": agent("openai", server, prompt="hi")}})
    result = Runner(path, store, TOOLS).run({"request": "x"})
    assert result.status == "failed" and result.error["type"] == "ModelError"
    assert "HTTP 401" in result.error["message"] and len(server.requests) == 1


def test_the_api_key_is_masked_in_every_stored_row(tmp_path: Path, server: ScriptedModelServer,
                                                   store: Any) -> None:
    """A key that reaches the conversation (here the model sends it to a tool) is stored as
    *** in arguments, histories and results, like a declared secret."""
    server.add_replies([
        ScriptedReply(tool_calls=(ScriptedToolCall(name="shop_echo",
                                                   arguments={"text": OPENAI_KEY}),)),
        ScriptedReply(text="done"),
    ])
    path = write_workflow(tmp_path, {"a": {"agent": agent(
        "openai", server, prompt="hi", tools=["shop.echo"])}})
    result = Runner(path, store, TOOLS).run({"request": "x"})
    assert result.status == "completed"
    stored = repr(store.rows(result.execution_id))
    assert OPENAI_KEY not in stored and "***" in stored
    assert OPENAI_KEY not in repr(result.state)
