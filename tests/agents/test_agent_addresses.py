"""An agent's tool pause is addressed ``agent:<node>/tool:<name>``, once, wherever it is
shown (the pause message of ``tether run``, ``tether pending``, the API's pending list, the
console's inbox), while its checkpoint keeps ``node_id`` ``<node>/turn:N/tool:<name>``; and
``--node`` with that address answers that pause, not another agent's at the same tool."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from runs_support import TASKS, agent, calls, run_json, tether_cli, write_workflow

from tether.stores.open import open_checkpointer
from tether.testing import ScriptedModelServer, ScriptedReply, ScriptedToolCall

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))
from web_support import Server

A = "agent:alpha/tool:shop.charge"
B = "agent:beta/tool:shop.charge"


def _charge(invoice: str) -> ScriptedReply:
    return ScriptedReply(tool_calls=(ScriptedToolCall(
        name="shop_charge", arguments={"invoice": invoice, "amount": 10}),))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"AGENT_LOG": str(tmp_path / "calls.log")}


def _paused_run(tmp_path: Path, server: ScriptedModelServer, url: str,
                env: dict[str, str]) -> str:
    """Two agents, each paused for the approval of its call of shop.charge."""
    server.add_replies([_charge("INV-1"), _charge("INV-2"), ScriptedReply(text="one"),
                        ScriptedReply(text="two")])
    settings: dict[str, Any] = {"prompt": "{{ inputs.request }}", "tools": ["shop.charge"],
                                "approve_tools": ["shop.charge"]}
    path = write_workflow(tmp_path, {"alpha": {"agent": agent("openai", server, **settings)},
                                     "beta": {"agent": agent("openai", server, **settings)}},
                          output="{{ nodes.alpha.output }} {{ nodes.beta.output }}")
    run = tether_cli("run", str(path), "-i", "request=pay", "--db", url, "--tasks",
                     str(TASKS), env=env)
    assert run.returncode == 4, run.stderr
    text = run.stdout + run.stderr
    for address in (A, B):
        assert f"at node '{address}' (approve_tool)" in text
        assert f"--node {address} --value" in text
    assert "/turn:" not in text and "shop.charge/" not in text
    with open_checkpointer(url) as store:
        (run_record,) = store.list_runs()
        pending = store.list_pending(run_record.execution_id)
    assert sorted((p.node_id, p.agent_path) for p in pending) == [
        ("alpha/turn:0/tool:shop.charge", A), ("beta/turn:0/tool:shop.charge", B)]
    return run_record.execution_id


def test_the_pause_message_pending_and_resume_use_the_address_once(
        tmp_path: Path, server: ScriptedModelServer, env: dict[str, str]) -> None:
    url = f"sqlite:///{tmp_path / 'tether.db'}"
    execution_id = _paused_run(tmp_path, server, url, env)
    listed = tether_cli("pending", "--db", url)
    assert listed.returncode == 0, listed.stderr
    assert f"  {A}  approve_tool  " in listed.stdout and f"  {B}  approve_tool  " in listed.stdout
    assert "/turn:" not in listed.stdout
    rows = json.loads(tether_cli("pending", "--db", url, "--json").stdout)
    assert sorted((r["address"], r["node_id"], r["agent_path"]) for r in rows) == [
        (A, "alpha/turn:0/tool:shop.charge", A), (B, "beta/turn:0/tool:shop.charge", B)]
    common = ["--db", url, "--tasks", str(TASKS), "--json"]
    denied = tether_cli("resume", execution_id, "--node", B, "--value",
                        '{"approved": false, "message": "not beta"}', *common, env=env)
    assert denied.returncode == 4, denied.stderr
    assert [p["agent_path"] for p in run_json(denied)["pending"]] == [A]
    left = json.loads(tether_cli("pending", "--db", url, "--json").stdout)
    assert [r["address"] for r in left] == [A]
    approved = tether_cli("resume", execution_id, "--node", A, "--value",
                          '{"approved": true}', *common, env=env)
    assert approved.returncode == 0, approved.stderr
    assert calls(Path(env["AGENT_LOG"])) == ["charge INV-1 10"] or \
        calls(Path(env["AGENT_LOG"])) == ["charge INV-2 10"]


def test_a_node_id_still_names_the_pause_and_an_unknown_address_is_refused(
        tmp_path: Path, server: ScriptedModelServer, env: dict[str, str]) -> None:
    url = f"sqlite:///{tmp_path / 'tether.db'}"
    execution_id = _paused_run(tmp_path, server, url, env)
    common = ["--db", url, "--tasks", str(TASKS), "--json"]
    wrong = tether_cli("resume", execution_id, "--node", "agent:gamma/tool:shop.charge",
                       "--value", '{"approved": true}', *common, env=env)
    assert wrong.returncode != 0
    assert "Traceback" not in wrong.stderr
    assert calls(Path(env["AGENT_LOG"])) == []
    by_id = tether_cli("resume", execution_id, "--node", "beta/turn:0/tool:shop.charge",
                       "--value", '{"approved": false}', *common, env=env)
    assert by_id.returncode == 4, by_id.stderr
    assert [p["agent_path"] for p in run_json(by_id)["pending"]] == [A]


def test_the_api_pending_list_and_the_inbox_show_the_address(
        tmp_path: Path, server: ScriptedModelServer, env: dict[str, str]) -> None:
    url = f"sqlite:///{tmp_path / 'tether.db'}"
    _paused_run(tmp_path, server, url, env)
    console = Server(SimpleNamespace(db=url, root=tmp_path))  # type: ignore[arg-type]
    try:
        listed = console.get("/api/pending")
        assert listed.status_code == 200, listed.text
        items = listed.json()["items"] if isinstance(listed.json(), dict) else listed.json()
        assert sorted((i["address"], i["node_id"]) for i in items) == [
            (A, "alpha/turn:0/tool:shop.charge"), (B, "beta/turn:0/tool:shop.charge")]
        inbox = console.get("/inbox")
        assert inbox.status_code == 200
        assert A in inbox.text and B in inbox.text
        assert "/turn:" not in inbox.text
    finally:
        console.stop()
