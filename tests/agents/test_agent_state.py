"""The agent loop's stored state: the conversation rebuilt from the messages and the results
kept in the calls' entries, the changed paths a checkpoint stores, and the state earlier
releases stored (results in the messages) read the same way."""

from __future__ import annotations

from tether.agents.conversation import AssistantMessage, ToolCall, ToolResult, UserMessage
from tether.runtime.agent.state import AgentState, Changes


def _reply() -> AssistantMessage:
    return AssistantMessage(text="", tool_calls=(
        ToolCall(id="c1", name="a", arguments={}), ToolCall(id="c2", name="b", arguments={}),
        ToolCall(id="c3", name="a", arguments={})))


def _data(*messages: UserMessage | AssistantMessage | ToolResult) -> list[dict[str, object]]:
    return [m.model_dump(mode="json") for m in messages]


def test_results_live_in_their_entries_until_the_next_turn() -> None:
    state = AgentState({"agent": "x", "path": "agent:x", "turn": 0, "phase": "tools",
                        "messages": _data(UserMessage(content="go"), _reply()), "calls": {}})
    state.changes.take()
    state.answer(ToolResult(call_id="c2", tool_name="b", content="two"))
    state.answer(ToolResult(call_id="c1", tool_name="a", content="one"))
    assert state.changes.take() == [("agent", "calls", "c2"), ("agent", "calls", "c1")]
    assert len(state.data["messages"]) == 2  # the messages are not written again
    assert [m.content for m in state.conversation.messages[2:]] == ["one", "two"]  # reply order
    assert state.answered("c1") and not state.answered("c3")
    state.next_turn()
    assert [m["role"] for m in state.data["messages"]] == ["user", "assistant", "tool", "tool"]
    assert state.data["calls"] == {} and state.turn == 1
    assert ("agent", "messages") in state.changes.take()


def test_a_state_of_an_earlier_release_keeps_its_answered_calls() -> None:
    """Results stored in the messages after the reply count as answered: a run paused or
    crashed mid-turn under the earlier layout does not run those calls again."""
    state = AgentState({"agent": "x", "path": "agent:x", "turn": 0, "phase": "tools",
                        "messages": _data(UserMessage(content="go"), _reply(),
                                          ToolResult(call_id="c1", tool_name="a",
                                                     content="one")),
                        "calls": {"c2": {"answers": [{"ok": True}]}}, "active": "c2"})
    assert state.answered("c1") and not state.answered("c2")
    assert state.reply().tool_calls[2].id == "c3"
    state.answer(ToolResult(call_id="c2", tool_name="b", content="two"))
    assert [m.content for m in state.conversation.messages[2:]] == ["one", "two"]


def test_changes_keep_a_path_once_and_not_under_a_listed_ancestor() -> None:
    changes = Changes()
    changes.add(("agent", "calls", "c1", "worker", "turn"))
    changes.add(("agent", "calls", "c1"))
    changes.add(("agent", "calls", "c1", "worker"))
    changes.add(("agent", "turn"))
    changes.add(("agent", "calls"))
    assert changes.take() == [("agent", "turn"), ("agent", "calls")]
    assert changes.take() == []
