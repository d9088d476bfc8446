"""Agent nodes survive SIGKILL: a process killed inside a tool, or while its model call is in
flight, is resumed by a new process from the store (real SDK clients, the scripted server in
this process, the CLI in children)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

AGENTS = Path(__file__).resolve().parents[1] / "agents"
sys.path.insert(0, str(AGENTS))

from agents_support import ANTHROPIC_KEY, OPENAI_KEY  # noqa: E402
from runs_support import (  # noqa: E402
    DIAGONAL,
    TASKS,
    agent,
    agent_rows,
    calls,
    run_json,
    shape,
    tether_cli,
    tool_results,
    url_for,
    write_workflow,
)

from tether.stores.open import open_checkpointer  # noqa: E402
from tether.testing import ScriptedModelServer, ScriptedReply, ScriptedToolCall  # noqa: E402

DEADLINE = 90.0


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"AGENT_LOG": str(tmp_path / "calls.log"), "AGENT_RELEASE": str(tmp_path / "go"),
            "OPENAI_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": ANTHROPIC_KEY}


def _start(path: Path, url: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tether", "run", str(path), "-i", "request=go", "--db", url,
         "--tasks", str(TASKS), "--json", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


def _wait_for(check: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _kill(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL


def _only_run(url: str) -> str:
    with open_checkpointer(url) as store:
        (run,) = store.list_runs()
        return run.execution_id


@pytest.mark.parametrize(("provider", "backend"), DIAGONAL)
def test_sigkill_inside_a_tool_reinvokes_only_that_tool_without_calling_the_model(
        tmp_path: Path, provider: str, backend: str, env: dict[str, str],
        request: pytest.FixtureRequest) -> None:
    """The finished sibling's result is kept, the killed tool runs again with its saved
    arguments, and the model is not called again for that turn."""
    url = url_for(backend, tmp_path, request)
    with ScriptedModelServer([
        ScriptedReply(tool_calls=(ScriptedToolCall(name="shop_lookup",
                                                   arguments={"invoice": "INV-1"}),
                                  ScriptedToolCall(name="shop_block",
                                                   arguments={"invoice": "INV-1"}))),
        ScriptedReply(text="All done."),
    ]) as server:
        path = write_workflow(tmp_path, {"payer": {"agent": agent(
            provider, server, prompt="{{ inputs.request }}",
            tools=["shop.lookup", "shop.block"])}})
        child = _start(path, url, env)
        _wait_for(Path(env["AGENT_LOG"] + ".blocked").exists, "the tool to block")
        _kill(child)
        execution_id = _only_run(url)
        with open_checkpointer(url) as store:
            assert shape(agent_rows(store, execution_id))[-1] == (
                "payer/turn:0/tool:shop.block", "tool_call", "completed",
                "agent:payer/tool:shop.block")
        Path(env["AGENT_RELEASE"]).touch()
        resumed = tether_cli("resume", execution_id, "--db", url, "--tasks", str(TASKS),
                             "--json", env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert run_json(resumed)["output"] == "All done."
        assert calls(Path(env["AGENT_LOG"])) == ["lookup INV-1", "block INV-1", "block INV-1"]
        assert len(server.requests) == 2
        results = tool_results(server, 1, provider)
        assert json.loads(results[0]["content"])["invoice"] == "INV-1"
        assert results[1]["content"] == "INV-1 done"
        with open_checkpointer(url) as store:
            blocks = [c for c in agent_rows(store, execution_id)
                      if c.node_id == "payer/turn:0/tool:shop.block"]
        assert [c.node_input for c in blocks] == [{"invoice": "INV-1"}] * 2


@pytest.mark.parametrize(("provider", "backend"), DIAGONAL)
def test_sigkill_during_a_model_call_reissues_it_from_the_saved_history(
        tmp_path: Path, provider: str, backend: str, env: dict[str, str],
        request: pytest.FixtureRequest) -> None:
    """Killed while the model is answering turn 0: the new process sends the same request
    again (the same history, byte for byte) and goes on; no tool runs twice."""
    url = url_for(backend, tmp_path, request)
    lookup = (ScriptedToolCall(name="shop_lookup", arguments={"invoice": "INV-2"}),)
    with ScriptedModelServer([
        ScriptedReply(tool_calls=lookup, delay=60),  # the call the killed process waits on
        ScriptedReply(tool_calls=lookup),
        ScriptedReply(text="INV-2 is 120 EUR."),
    ]) as server:
        path = write_workflow(tmp_path, {"payer": {"agent": agent(
            provider, server, prompt="{{ inputs.request }}", tools=["shop.lookup"])}})
        child = _start(path, url, env)
        assert len(server.wait_for_requests(1, timeout=DEADLINE)) == 1
        _kill(child)
        execution_id = _only_run(url)
        with open_checkpointer(url) as store:
            assert shape(agent_rows(store, execution_id)) == [
                ("payer/turn:0", "llm_call", "completed", "agent:payer")]
        resumed = tether_cli("resume", execution_id, "--db", url, "--tasks", str(TASKS),
                             "--json", env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert run_json(resumed)["output"] == "INV-2 is 120 EUR."
        first, again = server.requests[0].body, server.requests[1].body
        assert again == first
        assert calls(Path(env["AGENT_LOG"])) == ["lookup INV-2"]
        assert len(server.requests) == 3


@pytest.mark.parametrize(("provider", "backend"), DIAGONAL)
def test_sigkill_in_the_middle_of_many_calls_keeps_the_results_before_it(
        tmp_path: Path, provider: str, backend: str, env: dict[str, str],
        request: pytest.FixtureRequest) -> None:
    """A reply of 25 calls, killed inside the 13th: the resumed process runs only the 13th
    again and the 12 after it, and the model gets all 25 results in order (rebuilt from the
    turn's messages and the results stored in the calls' own rows)."""
    url = url_for(backend, tmp_path, request)
    echoes = [ScriptedToolCall(name="shop_echo", arguments={"text": f"result {i}"})
              for i in range(25)]
    echoes[12] = ScriptedToolCall(name="shop_block", arguments={"invoice": "INV-13"})
    with ScriptedModelServer([ScriptedReply(tool_calls=tuple(echoes)),
                              ScriptedReply(text="All 25.")]) as server:
        path = write_workflow(tmp_path, {"payer": {"agent": agent(
            provider, server, prompt="{{ inputs.request }}",
            tools=["shop.echo", "shop.block"])}})
        child = _start(path, url, env)
        _wait_for(Path(env["AGENT_LOG"] + ".blocked").exists, "the tool to block")
        _kill(child)
        execution_id = _only_run(url)
        assert calls(Path(env["AGENT_LOG"])) == ["echo"] * 12 + ["block INV-13"]
        Path(env["AGENT_RELEASE"]).touch()
        resumed = tether_cli("resume", execution_id, "--db", url, "--tasks", str(TASKS),
                             "--json", env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert run_json(resumed)["output"] == "All 25."
        assert calls(Path(env["AGENT_LOG"])) == (
            ["echo"] * 12 + ["block INV-13", "block INV-13"] + ["echo"] * 12)
        assert len(server.requests) == 2
        contents = [r["content"] for r in tool_results(server, 1, provider)]
        expected = [f"result {i}" for i in range(25)]
        expected[12] = "INV-13 done"
        assert contents == expected
        with open_checkpointer(url) as store:
            rows = agent_rows(store, execution_id)
        tool_rows = [c for c in rows if c.step_type == "tool_call"]
        assert len(tool_rows) == 26  # the 13th twice
        assert rows[-1].node_id == "payer/turn:1"
        stored = rows[-1].state_snapshot["messages"][-25:]
        assert [m["content"] for m in stored] == expected


@pytest.mark.parametrize(("provider", "backend"), DIAGONAL)
def test_sigkill_inside_a_workers_tool_keeps_its_earlier_calls(
        tmp_path: Path, provider: str, backend: str, env: dict[str, str],
        request: pytest.FixtureRequest) -> None:
    """A supervisor asks a worker, whose reply has three echoes then a blocking call; killed
    in that call, the new process runs only it again (the worker's state is nested in the
    supervisor's call and stored as deltas of its own entries), then both agents finish."""
    url = url_for(backend, tmp_path, request)
    echoes = tuple(ScriptedToolCall(name="shop_echo", arguments={"text": f"w{i}"})
                   for i in range(3))
    with ScriptedModelServer([
        ScriptedReply(tool_calls=(ScriptedToolCall(name="helper",
                                                   arguments={"request": "do it"}),)),
        ScriptedReply(tool_calls=(*echoes, ScriptedToolCall(
            name="shop_block", arguments={"invoice": "INV-W"}))),
        ScriptedReply(text="helper done"),
        ScriptedReply(text="boss done"),
    ]) as server:
        path = write_workflow(tmp_path, {
            "boss": {"agent": agent(provider, server, prompt="{{ inputs.request }}",
                                    tools=["helper"])},
            "helper": {"agent": agent(provider, server, tools=["shop.echo", "shop.block"])}})
        child = _start(path, url, env)
        _wait_for(Path(env["AGENT_LOG"] + ".blocked").exists, "the tool to block")
        _kill(child)
        execution_id = _only_run(url)
        Path(env["AGENT_RELEASE"]).touch()
        resumed = tether_cli("resume", execution_id, "--db", url, "--tasks", str(TASKS),
                             "--json", env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert run_json(resumed)["output"] == "boss done"
        assert calls(Path(env["AGENT_LOG"])) == ["echo"] * 3 + ["block INV-W"] * 2
        assert len(server.requests) == 4
        contents = [r["content"] for r in tool_results(server, 2, provider)]
        assert contents == ["w0", "w1", "w2", "INV-W done"]
        assert [r["content"] for r in tool_results(server, 3, provider)] == ["helper done"]
