"""The history of an agent whose process is killed inside a tool: the tool call the dead
owner dispatched is abandoned (never shown completed), the re-run completes, and the model
turns and the claims of both owners are there (real processes, the scripted model server)."""

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
from runs_support import DIAGONAL, TASKS, agent, tether_cli, url_for, write_workflow  # noqa: E402

from tether.stores.open import open_checkpointer  # noqa: E402
from tether.testing import ScriptedModelServer, ScriptedReply, ScriptedToolCall  # noqa: E402

DEADLINE = 90.0


@pytest.mark.parametrize(("provider", "backend"), DIAGONAL)
def test_kill_9_inside_an_agent_tool_shows_it_abandoned_then_completed(
        tmp_path: Path, provider: str, backend: str, request: pytest.FixtureRequest) -> None:
    url = url_for(backend, tmp_path, request)
    env = {"AGENT_LOG": str(tmp_path / "calls.log"), "AGENT_RELEASE": str(tmp_path / "go"),
           "OPENAI_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    block = ScriptedToolCall(name="shop_block", arguments={"invoice": "INV-9"})
    with ScriptedModelServer([ScriptedReply(tool_calls=(block,)),
                              ScriptedReply(text="Blocked.")]) as server:
        path = write_workflow(tmp_path, {"payer": {"agent": agent(
            provider, server, prompt="{{ inputs.request }}", tools=["shop.block"])}})
        child = subprocess.Popen(
            [sys.executable, "-m", "tether", "run", str(path), "-i", "request=go", "--db",
             url, "--tasks", str(TASKS), "--json", "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **env})
        try:
            deadline = time.monotonic() + DEADLINE
            while not Path(env["AGENT_LOG"] + ".blocked").exists():
                assert time.monotonic() < deadline, "the tool never started"
                time.sleep(0.01)
            os.kill(child.pid, signal.SIGKILL)
            assert child.wait(timeout=30) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            child.stdout.close()  # type: ignore[union-attr]
            child.stderr.close()  # type: ignore[union-attr]
        with open_checkpointer(url) as store:
            (run,) = store.list_runs()
        execution_id = run.execution_id
        Path(env["AGENT_RELEASE"]).touch()
        resumed = tether_cli("resume", execution_id, "--db", url, "--tasks", str(TASKS),
                             "--json", env=env)
        assert resumed.returncode == 0, resumed.stderr
    shown = tether_cli("show", execution_id, "--db", url, "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    events = json.loads(shown.stdout)["events"]
    tools = [(e["kind"], e["detail"]) for e in events if e["kind"].startswith("tool_call")]
    arguments = {"arguments": {"invoice": "INV-9"}}
    assert tools == [("tool_call_started", arguments), ("tool_call_abandoned", arguments),
                     ("tool_call_started", arguments),
                     ("tool_call_completed", {**arguments, "result": "INV-9 done"})]
    claims = [e for e in events if e["kind"] == "claimed"]
    abandoned = next(e for e in events if e["kind"] == "tool_call_abandoned")
    assert len(claims) == 2 and claims[0]["pid"] == child.pid
    assert abandoned["owner"] == claims[0]["owner"]
    assert abandoned["at"] <= claims[1]["at"]
    assert [e["kind"] for e in events].count("agent_turn") >= 2
    assert events[-1]["kind"] == "run_ended" and events[-1]["status"] == "completed"
