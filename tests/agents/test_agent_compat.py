"""``tether compat`` / ``upgrade`` for a run paused inside an agent's loop (C113): a change of
the agent's prompt, tools or model pins it; a change elsewhere lets it move and it finishes on
the new plan without a repeated tool call (real CLI, the scripted model server; SQLite and
PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from runs_support import TASKS, agent, calls, run_json, tether_cli, write_workflow

import tether
from tether.runtime.compat import check
from tether.stores.open import open_checkpointer
from tether.testing import ScriptedModelServer, ScriptedReply, ScriptedToolCall


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"AGENT_LOG": str(tmp_path / "calls.log")}


def _nodes(server: ScriptedModelServer, prompt: str = "{{ inputs.request }}",
           extra: bool = False) -> dict[str, Any]:
    settings: dict[str, Any] = {"prompt": prompt, "tools": ["shop.charge"],
                                "approve_tools": ["shop.charge"]}
    nodes: dict[str, Any] = {"alpha": {"agent": agent("openai", server, **settings)}}
    if extra:
        nodes["note"] = {"needs": ["alpha"], "noop": True, "title": "added after the agent"}
    return nodes


def _paused_at_the_tool(tmp_path: Path, server: ScriptedModelServer,
                        env: dict[str, str], url: str) -> str:
    """A run of agent ``alpha`` paused at its approval of ``shop.charge`` in ``url``."""
    server.add_replies([ScriptedReply(tool_calls=(ScriptedToolCall(
        name="shop_charge", arguments={"invoice": "INV-1", "amount": 10}),)),
        ScriptedReply(text="paid")])
    (tmp_path / "v1").mkdir()
    path = write_workflow(tmp_path / "v1", _nodes(server))
    run = tether_cli("run", str(path), "-i", "request=pay", "--db", url, "--tasks", str(TASKS),
                     env=env)
    assert run.returncode == 4, run.stderr
    return url


def test_an_agent_mid_loop(tmp_path: Path, server: ScriptedModelServer,
                           env: dict[str, str], shared_url: str) -> None:
    url = _paused_at_the_tool(tmp_path, server, env, shared_url)
    (tmp_path / "v2").mkdir()
    (tmp_path / "v3").mkdir()
    prompt_changed = tether.compile(write_workflow(tmp_path / "v2", _nodes(
        server, prompt="{{ inputs.request }} now")))
    downstream = write_workflow(tmp_path / "v3", _nodes(server, extra=True))
    with open_checkpointer(url) as store:
        (record,) = store.list_runs()
        report = check(store, prompt_changed)
        assert [f.code for f in report.pinned[record.execution_id]] == ["C113"]
        assert check(store, tether.compile(downstream)).movable == [record.execution_id]
    moved = tether_cli("upgrade", str(downstream), "--db", url)
    assert moved.returncode == 0 and "1 moved to the new plan" in moved.stdout, moved.stdout
    done = tether_cli("resume", record.execution_id, "--node", "agent:alpha/tool:shop.charge",
                      "--value", '{"approved": true}', "--db", url, "--tasks", str(TASKS),
                      "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert run_json(done)["output"] == "paid"
    assert len(calls(Path(env["AGENT_LOG"]))) == 1


@pytest.mark.parametrize("address", ["agent:beta/tool:shop.charge",
                                     "agent:alpha/tool:shop.charge"],
                         ids=["new-id", "old-id-mapped"])
def test_an_agent_mid_loop_in_a_renamed_node_moves_with_its_conversation(
        tmp_path: Path, server: ScriptedModelServer, env: dict[str, str], address: str,
        shared_url: str) -> None:
    """The agent node is renamed (``renamed_from``) while a run waits at its tool approval:
    the run moves, its pause answers to the new id (the old one is mapped), and the agent
    goes on from the turn it was at: the tool runs once, the model is not asked again from
    the start."""
    url = _paused_at_the_tool(tmp_path, server, env, shared_url)
    (tmp_path / "v2").mkdir()
    nodes = _nodes(server)
    nodes["beta"] = {**nodes.pop("alpha"), "renamed_from": "alpha"}
    renamed = write_workflow(tmp_path / "v2", nodes)
    moved = tether_cli("upgrade", str(renamed), "--db", url, "--json")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    with open_checkpointer(url) as store:
        (record,) = store.list_runs()
        (pending,) = store.list_pending(record.execution_id)
        assert pending.address == "agent:beta/tool:shop.charge"
        asked = len(server.requests)
        before = len(store.list(record.execution_id))
    done = tether_cli("resume", record.execution_id, "--node", address,
                      "--value", '{"approved": true}', "--db", url, "--tasks", str(TASKS),
                      "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert run_json(done)["output"] == "paid"
    assert len(calls(Path(env["AGENT_LOG"]))) == 1
    assert len(server.requests) == asked + 1  # the turn after the tool's result only
    with open_checkpointer(url) as store:
        last = store.get_last(record.execution_id)
        assert last is not None
        assert set(last.state_snapshot["nodes"]) == {"beta"}
        after = store.list(record.execution_id)[before:]  # written on the new plan
        assert after and all("alpha" not in c.agent_path and "alpha" not in c.node_id
                             for c in after), [(c.node_id, c.agent_path) for c in after]
