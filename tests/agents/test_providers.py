"""The providers through the real SDK clients, against the scripted server over loopback:
what goes on the wire, what comes back, and how failures are classified."""

from __future__ import annotations

import json
import pickle
import socket
from typing import Any

import pytest
from agents_support import ANTHROPIC_KEY, OPENAI_KEY, PROVIDERS, call

from tether.agents import (
    AssistantMessage,
    Conversation,
    ModelError,
    Reply,
    StopReason,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
    tool_spec,
)
from tether.agents.providers.openai import tool_call
from tether.testing import ScriptedError, ScriptedModelServer, ScriptedReply, ScriptedToolCall


def lookup(invoice: str) -> dict[str, str]:
    """Look an invoice up."""
    return {"invoice": invoice}


def history(provider: str) -> tuple[str, str]:
    return ("call_1", "call_2") if provider == "openai" else ("toolu_1", "toolu_2")


TOOLS = [tool_spec(lookup, "billing.lookup")]
TWO_CALLS = ScriptedReply(text="Checking both.", tool_calls=(
    ScriptedToolCall(name="billing_lookup", arguments={"invoice": "INV-1"}),
    ScriptedToolCall(name="billing_lookup", arguments={"invoice": "INV-2"}),
), usage=Usage(input_tokens=11, output_tokens=7))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_text_reply(server: ScriptedModelServer, provider: str) -> None:
    """System prompt and history go out in the provider's shape; text and usage come back."""
    server.add_replies([ScriptedReply(text="Hello!", usage=Usage(input_tokens=7,
                                                                 output_tokens=3))])
    reply = call(server, provider, [UserMessage(content="hi")], system="Be brief.")
    assert reply == Reply(text="Hello!", usage=Usage(input_tokens=7, output_tokens=3),
                          stop_reason=StopReason.END_TURN)
    body = server.requests[0].body
    if provider == "openai":
        assert body == {"model": "test-model", "max_completion_tokens": 256, "messages": [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}
    else:
        assert body == {"model": "test-model", "max_tokens": 256, "system": "Be brief.",
                        "messages": [{"role": "user", "content": "hi"}]}


def expected_turn_two(provider: str) -> list[dict[str, Any]]:
    first, second = history(provider)
    if provider == "openai":
        return [
            {"role": "user", "content": "Pay INV-1 and INV-2."},
            {"role": "assistant", "content": "Checking both.", "tool_calls": [
                {"id": first, "type": "function",
                 "function": {"name": "billing_lookup", "arguments": '{"invoice":"INV-1"}'}},
                {"id": second, "type": "function",
                 "function": {"name": "billing_lookup", "arguments": '{"invoice":"INV-2"}'}}]},
            {"role": "tool", "tool_call_id": first, "content": '{"holder":"Ann"}'},
            {"role": "tool", "tool_call_id": second, "content": "no such invoice"},
        ]
    return [
        {"role": "user", "content": "Pay INV-1 and INV-2."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": first, "name": "billing_lookup",
             "input": {"invoice": "INV-1"}},
            {"type": "tool_use", "id": second, "name": "billing_lookup",
             "input": {"invoice": "INV-2"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": first, "content": '{"holder":"Ann"}'},
            {"type": "tool_result", "tool_use_id": second, "content": "no such invoice",
             "is_error": True}]},
    ]


def run_two_call_turn(server: ScriptedModelServer, provider: str) -> Conversation:
    server.add_replies([TWO_CALLS, ScriptedReply(text="Paid INV-1.")])
    conversation = Conversation([UserMessage(content="Pay INV-1 and INV-2.")])
    reply = call(server, provider, conversation.messages, TOOLS)
    first, second = history(provider)
    assert reply.tool_calls == (
        ToolCall(id=first, name="billing_lookup", arguments={"invoice": "INV-1"}),
        ToolCall(id=second, name="billing_lookup", arguments={"invoice": "INV-2"}))
    assert (reply.text, reply.stop_reason, reply.usage) == (
        "Checking both.", StopReason.TOOL_USE, Usage(input_tokens=11, output_tokens=7))
    conversation = conversation.append(
        reply.message,
        ToolResult(call_id=first, tool_name="billing_lookup", content='{"holder":"Ann"}'),
        ToolResult(call_id=second, tool_name="billing_lookup", content="no such invoice",
                   is_error=True))
    assert call(server, provider, conversation.messages, TOOLS).text == "Paid INV-1."
    return conversation


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_turn_with_two_tool_calls_and_their_results(server: ScriptedModelServer,
                                                        provider: str) -> None:
    """Ids are preserved, both calls are in one assistant message with its text, and the
    results follow in order (Anthropic: in one user message, the error flagged)."""
    run_two_call_turn(server, provider)
    requests = server.requests
    assert [r.status for r in requests] == [200, 200]
    assert requests[1].body["messages"] == expected_turn_two(provider)
    tools = requests[1].body["tools"]
    schema = {"type": "object", "properties": {"invoice": {"type": "string"}},
              "required": ["invoice"], "additionalProperties": False}
    if provider == "openai":
        assert tools == [{"type": "function", "function": {
            "name": "billing_lookup", "description": "Look an invoice up.",
            "parameters": schema}}]
    else:
        assert tools == [{"name": "billing_lookup", "description": "Look an invoice up.",
                          "input_schema": schema}]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_resumed_history_is_sent_byte_for_byte(server: ScriptedModelServer,
                                                 provider: str) -> None:
    """The history read back from its stored JSON (by a new client) makes the same request."""
    conversation = run_two_call_turn(server, provider)
    resumed = Conversation.from_json(conversation.to_json())
    server.add_replies([ScriptedReply(text="Paid INV-1.")])
    call(server, provider, resumed.messages, TOOLS)
    original, again = server.requests[1].body, server.requests[2].body
    assert json.dumps(again) == json.dumps(original)


def test_anthropic_merges_results_and_a_following_user_message_into_one_turn(
        server: ScriptedModelServer) -> None:
    """Roles alternate on the wire however the neutral history is split."""
    server.add_replies([ScriptedReply(text="ok")])
    call(server, "anthropic", [
        UserMessage(content="first"), UserMessage(content="second"),
        AssistantMessage(tool_calls=(ToolCall(id="t1", name="billing_lookup",
                                              arguments={"invoice": "A"}),)),
        ToolResult(call_id="t1", tool_name="billing_lookup", content=""),
        UserMessage(content="Answer as JSON."),
    ], TOOLS)
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "first"},
                                     {"type": "text", "text": "second"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1",
                                           "name": "billing_lookup",
                                           "input": {"invoice": "A"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"},
                                     {"type": "text", "text": "Answer as JSON."}]},
    ]


def test_openai_arguments_that_are_not_an_object_are_kept_raw(
        server: ScriptedModelServer) -> None:
    """A model's broken arguments string stays in the history exactly as it came."""
    broken = tool_call("call_9", "billing_lookup", '{"invoice": "INV-1"')
    assert (broken.arguments, broken.invalid_arguments) == ({}, '{"invoice": "INV-1"')
    assert tool_call("c", "t", "[1, 2]").invalid_arguments == "[1, 2]"
    assert tool_call("c", "t", '{"x": NaN}').invalid_arguments == '{"x": NaN}'
    assert tool_call("c", "t", "  ") == ToolCall(id="c", name="t")
    server.add_replies([ScriptedReply(text="ok")])
    call(server, "openai", [
        UserMessage(content="go"), AssistantMessage(tool_calls=(broken,)),
        ToolResult(call_id="call_9", tool_name="billing_lookup", is_error=True,
                   content="the arguments are not JSON")], TOOLS)
    sent = server.requests[0].body["messages"][1]["tool_calls"][0]["function"]
    assert sent["arguments"] == '{"invoice": "INV-1"'


@pytest.mark.parametrize(("provider", "finish"), [("openai", "length"),
                                                  ("anthropic", "max_tokens")])
def test_stop_reasons_are_neutral(server: ScriptedModelServer, provider: str,
                                  finish: str) -> None:
    server.add_replies([ScriptedReply(text="cut", stop_reason=StopReason.MAX_TOKENS)])
    assert call(server, provider, [UserMessage(content="hi")]).stop_reason is (
        StopReason.MAX_TOKENS)


def model_error(server: ScriptedModelServer, provider: str,
                messages: list[UserMessage | AssistantMessage | ToolResult],
                tools: list[ToolSpec] | None = None, timeout: float = 30.0) -> ModelError:
    with pytest.raises(ModelError) as caught:
        call(server, provider, messages, TOOLS if tools is None else tools, timeout=timeout)
    return caught.value


def calls_without_results(*answered: str) -> list[UserMessage | AssistantMessage | ToolResult]:
    calls = (ToolCall(id="a1", name="billing_lookup", arguments={"invoice": "A"}),
             ToolCall(id="a2", name="billing_lookup", arguments={"invoice": "B"}))
    return [UserMessage(content="go"), AssistantMessage(text="Looking.", tool_calls=calls),
            *[ToolResult(call_id=i, tool_name="billing_lookup", content="ok") for i in answered],
            UserMessage(content="and?")]


HISTORY_VIOLATIONS = [
    ("openai", calls_without_results("a1"),
     "An assistant message with 'tool_calls' must be followed by tool messages responding to "
     "each 'tool_call_id'. The following tool_call_ids did not have response messages: a2"),
    ("anthropic", calls_without_results(),
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
     "a1, a2. Each `tool_use` block must have a corresponding `tool_result` block in the "
     "next message."),
    ("openai", calls_without_results("a1", "a2", "zz")[:-1],
     "Invalid parameter: 'tool_call_id' of 'zz' not found in 'tool_calls' of previous "
     "message."),
    ("openai", [UserMessage(content="go"), ToolResult(call_id="a1", tool_name="t", content="x")],
     "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
     "with 'tool_calls'."),
    ("anthropic", calls_without_results("a1", "a2", "zz"),
     "messages.2.content.2: unexpected `tool_use_id` found in `tool_result` blocks: zz. Each "
     "`tool_result` block must have a corresponding `tool_use` block in the previous "
     "message."),
    ("anthropic", [AssistantMessage(text="Hello, how can I help?"), UserMessage(content="hi")],
     'messages: first message must use the "user" role'),
    ("anthropic", [UserMessage(content="")],
     "messages.0: all messages must have non-empty content except for the optional final "
     "assistant message"),
    ("anthropic", [UserMessage(content="a"), AssistantMessage(), UserMessage(content="b")],
     "messages.1: all messages must have non-empty content except for the optional final "
     "assistant message"),
]


@pytest.mark.parametrize(("provider", "messages", "message"), HISTORY_VIOLATIONS)
def test_history_rule_violations_are_final_model_errors(
        server: ScriptedModelServer, provider: str,
        messages: list[UserMessage | AssistantMessage | ToolResult], message: str) -> None:
    """A history the real API refuses is refused (400) and is not worth retrying."""
    error = model_error(server, provider, messages)
    assert (error.retryable, error.status_code, error.error_type, error.message) == (
        False, 400, "invalid_request_error", message)
    assert server.position == 0, "a refused request does not use a scripted reply"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tools_must_have_provider_safe_names(server: ScriptedModelServer,
                                             provider: str) -> None:
    """A tool declared under a name with a dot is refused as the real APIs refuse it."""
    bad = ToolSpec("billing.lookup", "billing.lookup", "", {"type": "object"})
    error = model_error(server, provider, [UserMessage(content="hi")], [bad])
    assert error.message == (
        "Invalid 'tools[0].function.name': string does not match pattern. Expected a string "
        "that matches the pattern '^[a-zA-Z0-9_-]+$'." if provider == "openai" else
        "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_scripted_call_of_an_undeclared_tool_is_refused(server: ScriptedModelServer,
                                                          provider: str) -> None:
    """A real model only calls tools it is given: a test that forgets one fails loudly."""
    server.add_replies([ScriptedReply(tool_calls=(ScriptedToolCall(name="refund"),))])
    error = model_error(server, provider, [UserMessage(content="hi")])
    assert error.message == ("tether.testing: the scripted reply calls the tool 'refund', "
                             "which this request does not declare (it declares "
                             "billing_lookup)")
    assert not error.retryable and server.remaining == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rate_limits_are_retryable_with_the_servers_wait(server: ScriptedModelServer,
                                                         provider: str) -> None:
    server.add_replies([ScriptedError(status=429, retry_after=2), ScriptedReply(text="ok")])
    error = model_error(server, provider, [UserMessage(content="hi")])
    assert (error.retryable, error.status_code, error.retry_after) == (True, 429, 2.0)
    assert error.error_type == ("requests" if provider == "openai" else "rate_limit_error")
    assert str(error).endswith("; retry after 2s")
    assert call(server, provider, [UserMessage(content="hi")]).text == "ok"


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [500, 503, 529])
def test_server_errors_are_retryable(server: ScriptedModelServer, provider: str,
                                     status: int) -> None:
    server.add_replies([ScriptedError(status=status)])
    error = model_error(server, provider, [UserMessage(content="hi")])
    assert (error.retryable, error.status_code, error.retry_after) == (True, status, None)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [401, 403, 404, 422])
def test_other_client_errors_are_final(server: ScriptedModelServer, provider: str,
                                       status: int) -> None:
    server.add_replies([ScriptedError(status=status, message="nope")])
    error = model_error(server, provider, [UserMessage(content="hi")])
    assert (error.retryable, error.status_code, error.message) == (False, status, "nope")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_timeout_is_retryable(server: ScriptedModelServer, provider: str) -> None:
    """The server answers after 30 s; the client gives up after 0.5 s."""
    server.add_replies([ScriptedReply(text="too late", delay=30)])
    error = model_error(server, provider, [UserMessage(content="hi")], timeout=0.5)
    assert (error.retryable, error.status_code, error.message) == (
        True, None, "the request timed out")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refused_connection_is_retryable(provider: str) -> None:
    """Nothing listens on the port: a connection error, worth retrying later."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ModelError) as caught:
        call(f"http://127.0.0.1:{port}/v1", provider, [UserMessage(content="hi")])
    error = caught.value
    assert (error.retryable, error.status_code) == (True, None)
    assert error.message.startswith("connection error")


@pytest.mark.parametrize(("provider", "key"), [("openai", OPENAI_KEY),
                                               ("anthropic", ANTHROPIC_KEY)])
def test_keys_never_appear_in_errors(server: ScriptedModelServer, provider: str,
                                     key: str) -> None:
    """A server that echoes the key back gets it masked, in the message and when pickled."""
    server.add_replies([ScriptedError(status=401, message=f"Incorrect API key: {key}.")])
    error = model_error(server, provider, [UserMessage(content="hi")])
    assert error.message == "Incorrect API key: ****."
    for text in (str(error), repr(error), repr(pickle.loads(pickle.dumps(error)).__dict__)):
        assert key not in text
