"""Agent nodes end to end: the real SDK clients against the scripted server, on SQLite and
PostgreSQL, through both wire protocols: the rows of a turn, pauses inside tools resumed by a
new process, approvals, failures after the loop, workers and handoffs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import agent_tasks
import pytest
from agents_support import PROVIDERS
from runs_support import (
    DIAGONAL,
    TASKS,
    agent,
    agent_rows,
    calls,
    messages,
    run_json,
    shape,
    tether_cli,
    tool_results,
    url_for,
    write_workflow,
)

from tether import Resume, Runner
from tether.errors import ResumeValueError
from tether.stores.open import open_checkpointer
from tether.testing import ScriptedModelServer, ScriptedReply, ScriptedToolCall

TOOLS = {"shop.lookup": agent_tasks.lookup, "shop.charge": agent_tasks.charge,
         "shop.review": agent_tasks.review, "shop.block": agent_tasks.block}


def call(name: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, arguments=arguments)


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls.log"
    monkeypatch.setenv("AGENT_LOG", str(path))
    monkeypatch.setenv("AGENT_RELEASE", str(tmp_path / "release"))
    return path


@pytest.fixture
def store(shared_url: str) -> Iterator[Any]:
    checkpointer = open_checkpointer(shared_url)
    yield checkpointer
    checkpointer.close()


def test_one_turn_with_two_tool_calls_writes_a_turn_row_then_one_row_per_call(
        tmp_path: Path, server: ScriptedModelServer, provider: str, store: Any,
        log: Path) -> None:
    """turn:0 (llm_call, node_index 0, snapshot {messages, turn}), then a tool_call row per
    call with its exact arguments, then turn:1 whose history answers both calls in order."""
    server.add_replies([
        ScriptedReply(text="Looking.", tool_calls=(call("shop_lookup", invoice="INV-7"),
                                                   call("shop_charge", invoice="INV-7",
                                                        amount=120)),
                      usage={"input_tokens": 100, "output_tokens": 20}),
        ScriptedReply(text="Paid INV-7.", usage={"input_tokens": 150, "output_tokens": 5}),
    ])
    path = write_workflow(tmp_path, {"payer": {"agent": agent(
        provider, server, instructions="You pay invoices.", prompt="{{ inputs.request }}",
        tools=["shop.lookup", "shop.charge"])}})
    result = Runner(path, store, TOOLS).run({"request": "Pay INV-7"})
    assert result.status == "completed" and result.output == "Paid INV-7."
    rows = agent_rows(store, result.execution_id)
    assert shape(rows) == [
        ("payer/turn:0", "llm_call", "completed", "agent:payer"),
        ("payer/turn:0/tool:shop.lookup", "tool_call", "completed",
         "agent:payer/tool:shop.lookup"),
        ("payer/turn:0/tool:shop.charge", "tool_call", "completed",
         "agent:payer/tool:shop.charge"),
        ("payer/turn:1", "llm_call", "completed", "agent:payer"),
    ]
    assert [c.node_index for c in rows] == [0, 0, 0, 1]
    assert rows[1].node_input == {"invoice": "INV-7"}
    assert rows[2].node_input == {"invoice": "INV-7", "amount": 120}
    first, last = rows[0].state_snapshot, rows[3].state_snapshot
    assert first["turn"] == 0 and [m["role"] for m in first["messages"]] == ["user"]
    assert last["turn"] == 1
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", "tool", "tool"]
    assert calls(log) == ["lookup INV-7", "charge INV-7 120"]
    answered = tool_results(server, 1, provider)
    assert [r["call_id"] for r in answered] == [c["id"] for c in _calls_of(server, 0, provider)]
    assert result.usage == {"input_tokens": 250, "output_tokens": 25}
    per_call = rows[3].state_snapshot["usage"]["calls"]
    assert [(u["agent"], u["turn"], u["input_tokens"]) for u in per_call] == [("payer", 0, 100)]
    assert store.get_last(result.execution_id).state_snapshot["usage"]["input_tokens"] == 250


def _calls_of(server: ScriptedModelServer, index: int, provider: str) -> list[dict[str, Any]]:
    """The tool calls the model answered request ``index`` with (from the next request)."""
    for message in messages(server, index + 1):
        if message["role"] == "assistant":
            if provider == "openai":
                return [{"id": c["id"]} for c in message["tool_calls"]]
            return [{"id": b["id"]} for b in message["content"] if b["type"] == "tool_use"]
    raise AssertionError("no assistant message")


@pytest.mark.parametrize(("wire", "backend"), DIAGONAL)
def test_a_pause_in_the_first_tool_resumed_by_a_new_process(
        tmp_path: Path, server: ScriptedModelServer, wire: str, backend: str, log: Path,
        request: pytest.FixtureRequest) -> None:
    """The tool's interrupt() pauses the run (hitl_pause row at the tool's address, pending
    with its frozen context); a new process resumes it: the tool runs again and gets the
    answer, its sibling is answered "did not run", and the model is called once per turn."""
    server.add_replies([
        ScriptedReply(tool_calls=(call("shop_review", invoice="INV-9"),
                                  call("shop_charge", invoice="INV-9", amount=900))),
        ScriptedReply(text="Reviewed; not charged yet."),
    ])
    provider, shared_url = wire, url_for(backend, tmp_path, request)
    path = write_workflow(tmp_path, {"payer": {"agent": agent(
        provider, server, prompt="{{ inputs.request }}", tools=["shop.review", "shop.charge"])}})
    common = ["--db", shared_url, "--tasks", str(TASKS), "--json"]
    first = tether_cli("run", str(path), "-i", "request=Pay INV-9", *common)
    assert first.returncode == 4, first.stderr
    execution_id = run_json(first)["execution_id"]
    pending = json.loads(tether_cli("pending", "--db", shared_url, "--json").stdout)
    assert [(p["node_id"], p["agent_path"], p["reason"], p["context"]) for p in pending] == [
        ("payer/turn:0/tool:shop.review", "agent:payer/tool:shop.review", "manager_review",
         {"invoice": "INV-9", "why": "large amount"})]
    second = tether_cli("resume", execution_id, "--value", '{"approved": true}', *common)
    assert second.returncode == 0, second.stderr
    assert run_json(second)["output"] == "Reviewed; not charged yet."
    assert calls(log) == ["review INV-9", "review INV-9"]
    assert len(server.requests) == 2
    results = tool_results(server, 1, provider)
    assert json.loads(results[0]["content"]) == {"invoice": "INV-9", "approved": True}
    assert "did not run" in results[1]["content"]
    with open_checkpointer(shared_url) as store:
        rows = shape(agent_rows(store, execution_id))
    assert rows == [
        ("payer/turn:0", "llm_call", "completed", "agent:payer"),
        ("payer/turn:0/tool:shop.review", "tool_call", "completed",
         "agent:payer/tool:shop.review"),
        ("payer/turn:0/tool:shop.review", "hitl_pause", "interrupted",
         "agent:payer/tool:shop.review"),
        ("payer/turn:0/tool:shop.review", "tool_call", "completed",
         "agent:payer/tool:shop.review"),
        ("payer/turn:1", "llm_call", "completed", "agent:payer"),
    ]


@pytest.mark.parametrize("answer", ["approve", "edit", "deny"])
def test_approve_tools_pauses_before_each_call_and_binds_the_answer_to_it(
        tmp_path: Path, server: ScriptedModelServer, provider: str, store: Any, log: Path,
        answer: str) -> None:
    """A listed tool's call pauses with {call_id, tool, arguments}; the answer approves it,
    approves it with edited (validated) arguments, or denies it with a message the model
    receives as the call's result."""
    server.add_replies([
        ScriptedReply(tool_calls=(call("shop_charge", invoice="INV-3", amount=30),)),
        ScriptedReply(text="Finished."),
    ])
    path = write_workflow(tmp_path, {"payer": {"agent": agent(
        provider, server, prompt="Pay INV-3", tools=["shop.charge"],
        approve_tools=["shop.charge"])}})
    runner = Runner(path, store, TOOLS)
    paused = runner.run({"request": "x"})
    assert paused.status == "paused" and calls(log) == []
    (pending,) = paused.pending
    assert pending.node_id == "payer/turn:0/tool:shop.charge"
    assert pending.agent_path == "agent:payer/tool:shop.charge"
    call_id = pending.context["call_id"]
    assert pending.context["tool"] == "shop.charge"
    assert pending.context["arguments"] == {"invoice": "INV-3", "amount": 30}
    with pytest.raises(ResumeValueError):
        runner.resume(paused.execution_id, Resume(arguments={"invoice": "INV-3"}))
    with pytest.raises(ResumeValueError):
        runner.resume(paused.execution_id, Resume(approved=True, call_id="call_other"))
    value = {"approve": Resume(approved=True),
             "edit": Resume(arguments={"invoice": "INV-3", "amount": 25}),
             "deny": Resume(approved=False, message="Do not pay INV-3: it is disputed.")}
    done = runner.resume(paused.execution_id, value[answer])
    assert done.status == "completed", done.error
    sent = tool_results(server, 1, provider)
    assert [r["call_id"] for r in sent] == [call_id]
    if answer == "deny":
        assert calls(log) == []
        assert sent[0]["content"] == "Do not pay INV-3: it is disputed."
    else:
        amount = 30 if answer == "approve" else 25
        assert calls(log) == [f"charge INV-3 {amount}"]
        assert json.loads(sent[0]["content"])["charged"] == amount
        tool_rows = [c for c in agent_rows(store, done.execution_id)
                     if c.step_type == "tool_call"]
        assert [c.node_input["amount"] for c in tool_rows] == [amount]


def test_max_turns_reached_writes_a_boundary_row_and_resume_asks_the_model_again(
        tmp_path: Path, server: ScriptedModelServer, provider: str, store: Any,
        log: Path) -> None:
    """The failure after the loop: a failed turn row one past the last turn, the failed node
    and run_end; resuming asks the model (with a fresh budget) and never re-runs a tool."""
    server.add_replies([ScriptedReply(tool_calls=(call("shop_lookup", invoice=f"INV-{i}"),))
                        for i in (1, 2)])
    path = write_workflow(tmp_path, {"payer": {"agent": agent(
        provider, server, prompt="look", tools=["shop.lookup"], max_turns=2)}})
    runner = Runner(path, store, TOOLS)
    failed = runner.run({"request": "x"})
    assert failed.status == "failed" and failed.error["type"] == "MaxTurnsExceeded"
    rows = store.list(failed.execution_id)
    assert [(c.node_id, c.step_type, c.status) for c in rows[-3:]] == [
        ("payer/turn:2", "llm_call", "failed"), ("payer", "node", "failed"),
        ("run_end", "run_end", "failed")]
    assert rows[-3].node_index == 2 and rows[-3].state_snapshot["turn"] == 2
    server.add_replies([ScriptedReply(text="Both looked up.")])
    done = runner.resume(failed.execution_id)
    assert done.status == "completed" and done.output == "Both looked up."
    assert calls(log) == ["lookup INV-1", "lookup INV-2"]
    assert len(server.requests) == 3
    assert [c.node_id for c in agent_rows(store, done.execution_id)][-1] == "payer/turn:2"


def test_an_answer_failing_the_output_schema_is_asked_again_within_max_turns(
        tmp_path: Path, server: ScriptedModelServer, provider: str, store: Any,
        log: Path) -> None:
    """With `output`, the answer is parsed and validated; the model is told what is wrong;
    when the re-asks run out the run fails (OutputValidationError) and a resume asks again."""
    schema = {"type": "object", "properties": {"paid": {"type": "boolean"}},
              "required": ["paid"]}
    server.add_replies([ScriptedReply(text="I paid it."), ScriptedReply(text='{"paid": "yes"}')])
    path = write_workflow(tmp_path, {"payer": {"agent": agent(
        provider, server, prompt="pay", max_turns=2, output=schema)}})
    runner = Runner(path, store, TOOLS)
    failed = runner.run({"request": "x"})
    assert failed.status == "failed" and failed.error["type"] == "OutputValidationError"
    reask = messages(server, 1)[-1]
    text = reask["content"] if isinstance(reask["content"], str) else reask["content"][0]["text"]
    assert reask["role"] == "user" and "not JSON" in text
    server.add_replies([ScriptedReply(text='```json\n{"paid": true}\n```')])
    done = runner.resume(failed.execution_id)
    assert done.status == "completed" and done.output == {"paid": True}
    assert "'yes' is not of type 'boolean'" in json.dumps(messages(server, 2))


def test_a_supervisor_asks_a_worker_in_the_same_run_with_nested_agent_paths(
        tmp_path: Path, server: ScriptedModelServer, provider: str, store: Any,
        log: Path) -> None:
    """A worker runs only when called (it is no node of the plan), with `request` as its
    prompt; its rows nest under agent:<supervisor>/worker:<worker>; one run_end."""
    server.add_replies([
        ScriptedReply(tool_calls=(call("researcher", request="What is due on INV-5?"),)),
        ScriptedReply(tool_calls=(call("shop_lookup", invoice="INV-5"),)),
        ScriptedReply(text="INV-5: 120 EUR due."),
        ScriptedReply(text="120 EUR is due."),
    ])
    path = write_workflow(tmp_path, {
        "boss": {"agent": agent(provider, server, prompt="{{ inputs.request }}",
                                tools=["researcher"])},
        "researcher": {"agent": agent(provider, server, instructions="You research.",
                                      tools=["shop.lookup"])},
    })
    runner = Runner(path, store, TOOLS)
    assert [n.id for n in runner.plan.nodes] == ["boss"]
    result = runner.run({"request": "What is due?"})
    assert result.status == "completed" and result.output == "120 EUR is due."
    assert shape(agent_rows(store, result.execution_id)) == [
        ("boss/turn:0", "llm_call", "completed", "agent:boss"),
        ("boss/turn:0/tool:researcher", "tool_call", "completed", "agent:boss/tool:researcher"),
        ("researcher/turn:0", "llm_call", "completed", "agent:boss/worker:researcher"),
        ("researcher/turn:0/tool:shop.lookup", "tool_call", "completed",
         "agent:boss/worker:researcher/tool:shop.lookup"),
        ("researcher/turn:1", "llm_call", "completed", "agent:boss/worker:researcher"),
        ("boss/turn:1", "llm_call", "completed", "agent:boss"),
    ]
    assert messages(server, 1)[0]["content"] == "What is due on INV-5?"
    assert tool_results(server, 3, provider)[0]["content"] == "INV-5: 120 EUR due."
    assert [c.node_id for c in store.list(result.execution_id)].count("run_end") == 1


def test_a_handoff_writes_a_handoff_row_and_continues_under_the_target(
        tmp_path: Path, server: ScriptedModelServer, provider: str, store: Any,
        log: Path) -> None:
    """transfer_to_<node> hands the conversation over: a handoff row, then the target's
    turns under agent:<target>; the target's answer is the node's output."""
    server.add_replies([
        ScriptedReply(tool_calls=(call("transfer_to_disputes", reason="the customer disputes"),)),
        ScriptedReply(text="Dispute D-1 opened."),
    ])
    path = write_workflow(tmp_path, {
        "triage": {"agent": agent(provider, server, prompt="{{ inputs.request }}",
                                  handoffs=["disputes"])},
        "disputes": {"agent": agent(provider, server, instructions="You open disputes.")},
    }, output="{{ nodes.triage.output }}")
    result = Runner(path, store, TOOLS).run({"request": "INV-4 is wrong"})
    assert result.status == "completed", result.error
    assert result.output == "Dispute D-1 opened."
    rows = agent_rows(store, result.execution_id)
    assert shape(rows) == [
        ("triage/turn:0", "llm_call", "completed", "agent:triage"),
        ("triage/turn:0/tool:transfer_to_disputes", "handoff", "completed",
         "agent:triage/tool:transfer_to_disputes"),
        ("disputes/turn:0", "llm_call", "completed", "agent:disputes"),
    ]
    assert rows[1].node_output == {"from": "triage", "to": "disputes", "turn": 0}
    history = messages(server, 1)
    assert history[0]["content"] == "INV-4 is wrong" and len(history) == 3


def test_an_agent_in_a_sub_workflow_nests_its_agent_path_and_resumes(
        tmp_path: Path, server: ScriptedModelServer, store: Any, log: Path) -> None:
    """Inside a sub-workflow the agent's paths extend the sub-run's: the approval pause is
    answered by address and the run completes."""
    server.add_replies([
        ScriptedReply(tool_calls=(call("shop_charge", invoice="INV-6", amount=60),)),
        ScriptedReply(text="Charged."),
    ])
    write_workflow(tmp_path, {"payer": {"agent": agent(
        "openai", server, prompt="{{ inputs.request }}", tools=["shop.charge"],
        approve_tools=["shop.charge"])}}, name="inner")
    outer = tmp_path / "outer.yaml"
    outer.write_text("tether: 1\nname: outer\nnodes:\n  sub:\n    workflow: inner.yaml\n"
                     "    with: {request: Pay INV-6}\noutput: '{{ nodes.sub.output }}'\n")
    runner = Runner(outer, store, TOOLS)
    paused = runner.run()
    (pending,) = paused.pending
    assert pending.agent_path == "workflow:outer/node:sub/agent:payer/tool:shop.charge"
    done = runner.resume(paused.execution_id, Resume(approved=True),
                         node="payer/turn:0/tool:shop.charge")
    assert done.status == "completed" and done.output == "Charged."
    assert calls(log) == ["charge INV-6 60"]
    assert {c.agent_path for c in agent_rows(store, done.execution_id)
            if c.step_type == "llm_call"} == {"workflow:outer/node:sub/agent:payer"}


def test_a_pause_inside_a_worker_is_answered_where_it_waits(
        tmp_path: Path, server: ScriptedModelServer, store: Any, log: Path) -> None:
    """A worker's tool pauses the whole run (agent_path agent:<s>/worker:<w>/tool:<t>); the
    answer reaches that tool; the worker finishes, and the supervisor's other call of the
    turn is answered "did not run"."""
    server.add_replies([
        ScriptedReply(tool_calls=(call("researcher", request="Check INV-8"),
                                  call("shop_charge", invoice="INV-8", amount=80))),
        ScriptedReply(tool_calls=(call("shop_review", invoice="INV-8"),)),
        ScriptedReply(text="INV-8 approved by the manager."),
        ScriptedReply(text="Checked; charging next turn."),
    ])
    path = write_workflow(tmp_path, {
        "boss": {"agent": agent("anthropic", server, prompt="go",
                                tools=["researcher", "shop.charge"])},
        "researcher": {"agent": agent("anthropic", server, tools=["shop.review"])},
    })
    runner = Runner(path, store, TOOLS)
    paused = runner.run({"request": "x"})
    (pending,) = paused.pending
    assert (pending.node_id, pending.agent_path) == (
        "researcher/turn:0/tool:shop.review", "agent:boss/worker:researcher/tool:shop.review")
    done = runner.resume(paused.execution_id, Resume(approved=True))
    assert done.status == "completed", done.error
    assert done.output == "Checked; charging next turn."
    assert calls(log) == ["review INV-8", "review INV-8"]
    boss_results = tool_results(server, 3, "anthropic")
    assert boss_results[0]["content"] == "INV-8 approved by the manager."
    assert "did not run" in boss_results[1]["content"] and boss_results[1]["is_error"]
    assert len(server.requests) == 4


def test_a_fork_from_a_turn_row_asks_the_model_again_with_that_history(
        tmp_path: Path, server: ScriptedModelServer, store: Any, log: Path) -> None:
    """Forking at turn:1 re-enters the agent there: the model is asked with the saved
    history (the tool's result included) and the tool does not run again."""
    server.add_replies([
        ScriptedReply(tool_calls=(call("shop_lookup", invoice="INV-1"),)),
        ScriptedReply(text="First answer."),
        ScriptedReply(text="Second answer."),
    ])
    path = write_workflow(tmp_path, {"payer": {"agent": agent(
        "openai", server, prompt="go", tools=["shop.lookup"])}})
    runner = Runner(path, store, TOOLS)
    first = runner.run({"request": "x"})
    assert first.output == "First answer."
    (turn_1,) = [c for c in agent_rows(store, first.execution_id) if c.node_id == "payer/turn:1"]
    branch = runner.fork(first.execution_id, turn_1.checkpoint_id)
    assert branch.status == "completed" and branch.output == "Second answer."
    assert calls(log) == ["lookup INV-1"]
    assert server.requests[2].body["messages"] == server.requests[1].body["messages"]
