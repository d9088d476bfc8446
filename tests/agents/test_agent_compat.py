"""``tether compat`` / ``upgrade`` for a run paused inside an agent's loop (C113): a change of
the agent's prompt, tools or model pins it; a change elsewhere lets it move and it finishes on
the new plan without a repeated tool call (real CLI, the scripted model server)."""

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


def test_an_agent_mid_loop(tmp_path: Path, server: ScriptedModelServer,
                           env: dict[str, str]) -> None:
    server.add_replies([ScriptedReply(tool_calls=(ScriptedToolCall(
        name="shop_charge", arguments={"invoice": "INV-1", "amount": 10}),)),
        ScriptedReply(text="paid")])
    url = f"sqlite:///{tmp_path / 'tether.db'}"
    (tmp_path / "v1").mkdir()
    path = write_workflow(tmp_path / "v1", _nodes(server))
    run = tether_cli("run", str(path), "-i", "request=pay", "--db", url, "--tasks", str(TASKS),
                     env=env)
    assert run.returncode == 4, run.stderr
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
