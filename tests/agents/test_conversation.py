"""The neutral conversation: canonical JSON that round-trips byte for byte, and the repair of
unanswered tool calls."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.agents import (
    AgentSnapshot,
    AssistantMessage,
    Conversation,
    ConversationError,
    Reply,
    StopReason,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)


def sample() -> Conversation:
    return Conversation([
        UserMessage(content="Pay invoice INV-7 — €120,50 «urgent» 🚀"),
        AssistantMessage(text="Looking it up.", tool_calls=(
            ToolCall(id="call_1", name="billing_lookup",
                     arguments={"invoice": "INV-7", "limits": {"max": 1.5e-7, "n": [1, 2]}}),
            ToolCall(id="call_2", name="billing_history", arguments={}),
        )),
        ToolResult(call_id="call_1", tool_name="billing_lookup", content='{"holder": "Ann"}'),
        ToolResult(call_id="call_2", tool_name="billing_history", content="boom",
                   is_error=True),
        AssistantMessage(text="Paid."),
    ])


def test_json_round_trip_is_byte_identical() -> None:
    """A conversation read back from its JSON writes the same bytes, and equals the original."""
    text = sample().to_json()
    again = Conversation.from_json(text)
    assert again == sample()
    assert again.to_json() == text
    assert Conversation.from_json(text.encode()).to_json() == text


def test_json_is_canonical_and_keeps_argument_order() -> None:
    """Compact, ASCII-only, fields in model order, tool arguments in the order given."""
    text = sample().to_json()
    assert text.isascii()
    assert text == json.dumps(json.loads(text), separators=(",", ":"))
    data = json.loads(text)
    assert list(data[0]) == ["role", "content"]
    assert list(data[1]) == ["role", "text", "tool_calls"]
    assert list(data[1]["tool_calls"][0]["arguments"]) == ["invoice", "limits"]
    assert list(data[2]) == ["role", "call_id", "tool_name", "content", "is_error"]
    reordered = Conversation([AssistantMessage(tool_calls=(
        ToolCall(id="c", name="t", arguments={"b": 1, "a": 2}),))])
    assert '"arguments":{"b":1,"a":2}' in reordered.to_json()


def test_to_data_is_what_a_snapshot_stores() -> None:
    """The ``{messages, turn}`` snapshot round-trips through plain data."""
    snapshot = AgentSnapshot.of(sample(), turn=3)
    data = snapshot.to_data()
    assert data == {"messages": sample().to_data(), "turn": 3}
    back = AgentSnapshot.from_data(json.loads(json.dumps(data)))
    assert back == snapshot and back.conversation == sample()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
calls = st.builds(ToolCall, id=st.text(min_size=1), name=st.text(min_size=1),
                  arguments=st.dictionaries(st.text(), json_values, max_size=3))
messages = st.one_of(
    st.builds(UserMessage, content=st.text()),
    st.builds(AssistantMessage, text=st.text(),
              tool_calls=st.lists(calls, max_size=2, unique_by=lambda c: c.id).map(tuple)),
    st.builds(ToolResult, call_id=st.text(min_size=1), tool_name=st.text(),
              content=st.text(), is_error=st.booleans()),
)


@given(st.lists(messages, max_size=5))
def test_any_conversation_round_trips_byte_for_byte(items: list[object]) -> None:
    """Whatever the text (any Unicode) and arguments, JSON -> values -> JSON is the identity."""
    conversation = Conversation(items)  # type: ignore[arg-type]
    text = conversation.to_json()
    assert Conversation.from_json(text).to_json() == text
    assert Conversation.from_json(text) == conversation


def test_unreadable_json_is_a_conversation_error() -> None:
    """Bad JSON and bad shapes are reported with where the problem is."""
    with pytest.raises(ConversationError, match="not JSON"):
        Conversation.from_json("[{")
    with pytest.raises(ConversationError, match=r"messages\.0\.user\.content: Field required"):
        Conversation.from_json('[{"role": "user"}]')
    with pytest.raises(ConversationError, match="does not match any of the expected tags"):
        Conversation.from_json('[{"role": "system", "content": "x"}]')
    with pytest.raises(ConversationError, match="Extra inputs are not permitted"):
        Conversation.from_json('[{"role": "user", "content": "x", "name": "ann"}]')


def test_nan_cannot_be_stored() -> None:
    """A NaN argument would not be JSON: it is refused instead of written as ``NaN``."""
    conversation = Conversation([AssistantMessage(tool_calls=(
        ToolCall(id="c", name="t", arguments={"x": float("nan")}),))])
    with pytest.raises(ConversationError, match="Out of range float values"):
        conversation.to_json()


def test_tool_call_ids_are_unique_within_a_message() -> None:
    """Two calls with one id could not be answered unambiguously."""
    with pytest.raises(ValueError, match="tool call ids must be unique"):
        AssistantMessage(tool_calls=(ToolCall(id="a", name="t"), ToolCall(id="a", name="u")))


def test_values_are_frozen() -> None:
    """Messages cannot be changed after they are made."""
    message = UserMessage(content="hi")
    with pytest.raises(ValueError, match="frozen"):
        message.content = "changed"  # type: ignore[misc]


def did_not_run(call: ToolCall) -> ToolResult:
    return ToolResult(call_id=call.id, tool_name=call.name, content="did not run",
                      is_error=True)


def three_calls(*answered: str) -> Conversation:
    calls = tuple(ToolCall(id=f"c{n}", name="t") for n in (1, 2, 3))
    results = [ToolResult(call_id=i, tool_name="t", content="ok") for i in answered]
    return Conversation([UserMessage(content="go"), AssistantMessage(tool_calls=calls),
                         *results])


def test_unanswered_calls_are_those_without_a_result_right_after() -> None:
    """A result counts only in the block of results that directly follows its call."""
    assert [c.id for c in three_calls("c2").unanswered_tool_calls()] == ["c1", "c3"]
    assert three_calls("c1", "c2", "c3").unanswered_tool_calls() == ()
    late = three_calls("c1", "c2").append(UserMessage(content="hm"),
                                          ToolResult(call_id="c3", tool_name="t", content="x"))
    assert [c.id for c in late.unanswered_tool_calls()] == ["c3"]


def test_answer_unanswered_adds_results_after_the_existing_ones_in_call_order() -> None:
    """A paused sibling call is answered "did not run", placed where providers expect it."""
    fixed = three_calls("c2").append(UserMessage(content="next"))
    fixed = fixed.answer_unanswered(did_not_run)
    roles = [(m.role, getattr(m, "call_id", None)) for m in fixed]
    assert roles == [("user", None), ("assistant", None), ("tool", "c2"), ("tool", "c1"),
                     ("tool", "c3"), ("user", None)]
    assert fixed.unanswered_tool_calls() == ()
    assert fixed.answer_unanswered(did_not_run) is fixed


def test_answer_unanswered_at_the_end_of_the_history() -> None:
    """The common case: the process died between the model's reply and the tool results."""
    fixed = three_calls().answer_unanswered(did_not_run)
    assert [m.call_id for m in fixed.messages[2:] if isinstance(m, ToolResult)] == [
        "c1", "c2", "c3"]


def test_reply_message_and_usage() -> None:
    """A reply becomes the assistant message to append; usage adds up."""
    call = ToolCall(id="c", name="t", arguments={"a": 1})
    reply = Reply(text="x", tool_calls=(call,), usage=Usage(input_tokens=3, output_tokens=4),
                  stop_reason=StopReason.TOOL_USE)
    assert reply.message == AssistantMessage(text="x", tool_calls=(call,))
    total = reply.usage + Usage(input_tokens=1, output_tokens=1)
    assert (total.input_tokens, total.output_tokens, total.total_tokens) == (4, 5, 9)
