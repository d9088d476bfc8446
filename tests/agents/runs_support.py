"""Helpers for agent runs: workflow files pointing at a scripted server, the CLI in a child
process, the rows an agent wrote, and what the model was asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from agents_support import base_url

from tether.stores.base import Checkpointer
from tether.stores.records import Checkpoint
from tether.testing import ScriptedModelServer

TASKS = Path(__file__).resolve().parent / "agent_tasks.py"
CHILD_TIMEOUT = 120


def agent(provider: str, server: ScriptedModelServer, **settings: Any) -> dict[str, Any]:
    """An agent mapping whose model is on ``server``, speaking ``provider``'s protocol."""
    model = {"provider": provider, "name": "test-model", "base_url": base_url(server, provider)}
    return {"model": model, "max_turns": 4, **settings}


def write_workflow(directory: Path, nodes: dict[str, Any], *, name: str = "agents",
                   output: Any = None) -> Path:
    """A workflow file with an input ``request`` and ``nodes``; its output is the first node's
    unless ``output`` says otherwise."""
    doc: dict[str, Any] = {"tether": 1, "name": name, "inputs": {"request": {"type": "string"}},
                           "nodes": nodes}
    first = next(iter(nodes))
    doc["output"] = output if output is not None else "{{ nodes." + first + ".output }}"
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def tether_cli(*args: str, env: dict[str, str] | None = None,
               cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``tether ARGS`` in a new process (the agent tools importable)."""
    return subprocess.run([sys.executable, "-m", "tether", *args], capture_output=True,
                          text=True, timeout=CHILD_TIMEOUT, env={**os.environ, **(env or {})},
                          cwd=cwd)


def run_json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.stdout, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def agent_rows(store: Checkpointer, execution_id: str) -> list[Checkpoint]:
    """The checkpoints agents wrote (turns, tool calls, pauses, handoffs), oldest first."""
    return [c for c in store.list(execution_id)
            if c.step_type in ("llm_call", "tool_call", "hitl_pause", "handoff")]


def shape(rows: list[Checkpoint]) -> list[tuple[str, str, str, str]]:
    """(node_id, step_type, status, agent_path) of each row."""
    return [(c.node_id, c.step_type, c.status, c.agent_path) for c in rows]


def calls(log: Path) -> list[str]:
    """The tool calls the tools logged, in order."""
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def messages(server: ScriptedModelServer, index: int) -> list[dict[str, Any]]:
    """The messages of the model request ``index`` (OpenAI's system message left out)."""
    body = server.requests[index].body
    return [m for m in body["messages"] if m.get("role") != "system"]


def tool_results(server: ScriptedModelServer, index: int, provider: str) -> list[dict[str, Any]]:
    """The tool results sent in request ``index``, as {call_id, content, is_error}."""
    found = []
    for message in messages(server, index):
        if provider == "openai" and message["role"] == "tool":
            found.append({"call_id": message["tool_call_id"], "content": message["content"],
                          "is_error": None})
        elif provider == "anthropic" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    found.append({"call_id": block["tool_use_id"],
                                  "content": block.get("content"),
                                  "is_error": block.get("is_error", False)})
    return found


DIAGONAL = [("openai", "sqlite"), ("anthropic", "postgres")]
"""Provider and store pairs for the tests that start processes: each provider and each SQL
store once (the in-process tests run the whole matrix)."""


def url_for(backend: str, tmp_path: Path, request: Any) -> str:
    """A store URL for ``backend`` that child processes can open."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'tether.db'}"
    url, schema = request.getfixturevalue("pg_schema")
    return f"{url}?schema={schema}"
