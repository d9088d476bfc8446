"""The scripted model server at the HTTP level: each provider's rules with its exact error
shape and wording, the script, and the state endpoints."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from agents_support import call

from tether.agents import ModelError, UserMessage
from tether.testing import (
    RecordedRequest,
    ScriptedError,
    ScriptedModelServer,
    ScriptedReply,
    ScriptedServerClient,
    ScriptedToolCall,
    ScriptError,
    load_script,
)

OPENAI = "/v1/chat/completions"
ANTHROPIC = "/v1/messages"


def post(server: ScriptedModelServer, path: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def openai_error(message: str, param: str | None = None, code: str | None = None) -> Any:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param,
                      "code": code}}


USER = {"role": "user", "content": "hi"}
CALLS = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}},
    {"id": "c2", "type": "function", "function": {"name": "t", "arguments": "{}"}}]}
TOOLS = [{"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}]


def tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def chat(messages: Any = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "tools": TOOLS, **extra}
    if messages is not None:
        body["messages"] = messages
    return body


OPENAI_REFUSALS = [
    ({"messages": [USER]}, openai_error("you must provide a model parameter")),
    (chat(), openai_error("Missing required parameter: 'messages'.", "messages",
                          "missing_required_parameter")),
    (chat([]), openai_error("Invalid 'messages': empty array. Expected an array with minimum "
                            "length 1, but got an empty array instead.", "messages",
                            "empty_array")),
    (chat([{"role": "bot", "content": "x"}]), openai_error(
        "Invalid value: 'bot'. Supported values are: 'system', 'assistant', 'user', "
        "'function', 'tool', and 'developer'.", "messages[0].role", "invalid_value")),
    (chat([USER, {"role": "tool", "content": "x"}]), openai_error(
        "Missing required parameter: 'messages[1].tool_call_id'.", "messages[1].tool_call_id",
        "missing_required_parameter")),
    (chat([USER, {"role": "assistant", "content": None}]), openai_error(
        "Invalid value for 'content': expected a string, got null.", "messages.[1].content")),
    (chat([USER], tools=[{"type": "function", "function": {"name": "x" * 65}}]), openai_error(
        "Invalid 'tools[0].function.name': string too long. Expected a string with maximum "
        "length 64, but got a string with length 65 instead.", "tools[0].function.name",
        "string_above_max_length")),
    (chat([USER, {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "a.b", "arguments": "{}"}}]}]),
     openai_error("Invalid 'messages[1].tool_calls[0].function.name': string does not match "
                  "pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                  "messages[1].tool_calls[0].function.name", "invalid_value")),
    (chat([USER, CALLS, tool("c1"), USER]), openai_error(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        "c2", "messages.[1].role")),
    (chat([USER, CALLS]), openai_error(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        "c1, c2", "messages.[1].role")),
    (chat([USER, CALLS, tool("c1"), tool("c1")]), openai_error(
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'.", "messages.[3].role")),
    (chat([USER, CALLS, tool("c1"), tool("c2"), USER, tool("c2")]), openai_error(
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'.", "messages.[5].role")),
    (chat([USER], stream=True), openai_error(
        "tether.testing: the scripted model server does not stream; send the request with "
        "stream=false", "stream", "unsupported_value")),
    (b"{not json", {"error": {"message": "We could not parse the JSON body of your request.",
                              "type": "invalid_request_error", "param": None, "code": None}}),
]


@pytest.mark.parametrize(("body", "expected"), OPENAI_REFUSALS)
def test_openai_refusals_have_openais_shape_and_words(server: ScriptedModelServer, body: Any,
                                                      expected: Any) -> None:
    server.add_replies([ScriptedReply(text="unused")])
    assert post(server, OPENAI, body) == (400, expected)
    assert server.position == 0 and server.requests[0].status == 400


@pytest.mark.parametrize("messages", [
    [USER, CALLS, tool("c2"), tool("c1")],
    [USER, USER, {"role": "system", "content": "late"}, {"role": "assistant", "content": "a"}],
    [{"role": "assistant", "content": "I start."}, USER],
])
def test_openai_accepts_what_openai_accepts(server: ScriptedModelServer,
                                            messages: list[Any]) -> None:
    """Results in any order, repeated roles, an assistant first: Chat Completions allows it."""
    server.add_replies([ScriptedReply(text="fine")])
    status, body = post(server, OPENAI, chat(messages))
    assert status == 200 and body["choices"][0]["message"]["content"] == "fine"


def anthropic_error(message: str, request_id: str = "tether_0") -> Any:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message},
            "request_id": request_id}


A_TOOLS = [{"name": "t", "input_schema": {"type": "object"}}]
A_USES = {"role": "assistant", "content": [
    {"type": "text", "text": "Looking."},
    {"type": "tool_use", "id": "u1", "name": "t", "input": {}},
    {"type": "tool_use", "id": "u2", "name": "t", "input": {}}]}


def results(*ids: str, text: str | None = None) -> dict[str, Any]:
    content: list[Any] = [{"type": "tool_result", "tool_use_id": i, "content": "ok"}
                          for i in ids]
    if text is not None:
        content.append({"type": "text", "text": text})
    return {"role": "user", "content": content}


def messages(items: Any = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "max_tokens": 64, "tools": A_TOOLS, **extra}
    if items is not None:
        body["messages"] = items
    return body


ANTHROPIC_REFUSALS = [
    ({"max_tokens": 5, "messages": [USER]}, "model: Field required"),
    ({"model": "m", "messages": [USER]}, "max_tokens: Field required"),
    (messages([USER], max_tokens=0), "max_tokens: Input should be greater than or equal to 1"),
    (messages(), "messages: Field required"),
    (messages([]), "messages: List should have at least 1 item after validation, not 0"),
    (messages([{"role": "system", "content": "x"}, USER]),
     "messages.0.role: Input should be 'user' or 'assistant'"),
    (messages([{"role": "assistant", "content": "x"}, USER]),
     'messages: first message must use the "user" role'),
    (messages([USER, USER]), 'messages: roles must alternate between "user" and "assistant", '
                             'but found multiple "user" roles in a row'),
    (messages([USER, {"role": "assistant", "content": "a"}, {"role": "assistant",
                                                              "content": "b"}]),
     'messages: roles must alternate between "user" and "assistant", but found multiple '
     '"assistant" roles in a row'),
    (messages([{"role": "user", "content": []}]),
     "messages.0: all messages must have non-empty content except for the optional final "
     "assistant message"),
    (messages([{"role": "user", "content": [{"type": "text", "text": ""}]}]),
     "messages: text content blocks must be non-empty"),
    (messages([USER], tools=[{"name": "t" * 129, "input_schema": {}}]),
     "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"),
    (messages([USER], tools=A_TOOLS * 2), "tools: Tool names must be unique."),
    (messages([USER, A_USES, results("u1", "u2")], tools=[]),
     "Requests which include `tool_use` or `tool_result` blocks must define tools."),
    (messages([USER, A_USES, results("u1", text="and?")]),
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
     "u2. Each `tool_use` block must have a corresponding `tool_result` block in the next "
     "message."),
    (messages([USER, A_USES]),
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
     "u1, u2. Each `tool_use` block must have a corresponding `tool_result` block in the next "
     "message."),
    (messages([results("u1")]),
     "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: u1. Each "
     "`tool_result` block must have a corresponding `tool_use` block in the previous "
     "message."),
    (messages([USER, A_USES, results("u1", "u2", "u3")]),
     "messages.2.content.2: unexpected `tool_use_id` found in `tool_result` blocks: u3. Each "
     "`tool_result` block must have a corresponding `tool_use` block in the previous "
     "message."),
    (messages([USER], stream=True), "tether.testing: the scripted model server does not "
                                    "stream; send the request with stream=false"),
]


@pytest.mark.parametrize(("body", "message"), ANTHROPIC_REFUSALS)
def test_anthropic_refusals_have_anthropics_shape_and_words(server: ScriptedModelServer,
                                                            body: Any, message: str) -> None:
    server.add_replies([ScriptedReply(text="unused")])
    assert post(server, ANTHROPIC, body) == (400, anthropic_error(message))
    assert server.position == 0


@pytest.mark.parametrize("items", [
    [USER, A_USES, results("u2", "u1", text="Now answer.")],
    [USER, {"role": "assistant", "content": ""}],
    [USER, {"role": "assistant", "content": "The answer is"}],
])
def test_anthropic_accepts_what_anthropic_accepts(server: ScriptedModelServer,
                                                  items: list[Any]) -> None:
    """Results in any order followed by text, and a final (prefill) assistant message."""
    server.add_replies([ScriptedReply(text="fine")])
    status, body = post(server, ANTHROPIC, messages(items))
    assert status == 200 and body["content"] == [{"type": "text", "text": "fine"}]


def test_the_real_sdks_read_the_error_shapes(server: ScriptedModelServer) -> None:
    """Each SDK parses our refusals into its own error fields, as it would the real API's."""
    with openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0) as client, \
            pytest.raises(openai.BadRequestError) as caught_openai:
        client.chat.completions.create(model="m", messages=[USER, CALLS])  # type: ignore[list-item]
    assert (caught_openai.value.param, caught_openai.value.type) == (
        "messages.[1].role", "invalid_request_error")
    with anthropic.Anthropic(api_key="k", base_url=server.anthropic_base_url,
                             max_retries=0) as sdk, \
            pytest.raises(anthropic.BadRequestError) as caught_anthropic:
        sdk.messages.create(model="m", max_tokens=5, messages=[USER, USER])  # type: ignore[list-item]
    assert caught_anthropic.value.type == "invalid_request_error"
    assert caught_anthropic.value.api_message == (
        'messages: roles must alternate between "user" and "assistant", but found multiple '
        '"user" roles in a row')
    assert caught_anthropic.value.request_id == "tether_1"


def test_scripted_errors_in_each_shape(server: ScriptedModelServer) -> None:
    server.add_replies([ScriptedError(status=429, retry_after=1.5),
                        ScriptedError(status=529, message="busy")])
    assert post(server, OPENAI, chat([USER])) == (429, {"error": {
        "message": "Rate limit reached for requests", "type": "requests", "param": None,
        "code": "rate_limit_exceeded"}})
    assert post(server, ANTHROPIC, messages([USER])) == (529, {
        "type": "error", "error": {"type": "overloaded_error", "message": "busy"},
        "request_id": "tether_1"})
    assert [(r.status, r.step, r.error) for r in server.requests] == [
        (429, 0, "Rate limit reached for requests"), (529, 1, "busy")]


def test_replies_in_each_shape_with_given_ids_and_estimated_usage(
        server: ScriptedModelServer) -> None:
    """Tool call ids given in the script are used; usage defaults to size / 4."""
    step = ScriptedReply(text="Sure.", tool_calls=(
        ScriptedToolCall(name="t", arguments={"a": 1}, id="mine"),))
    server.add_replies([step, step])
    _, completion = post(server, OPENAI, chat([USER]))
    assert completion["choices"][0] == {
        "index": 0, "finish_reason": "tool_calls", "logprobs": None,
        "message": {"role": "assistant", "content": "Sure.", "refusal": None,
                    "annotations": [], "tool_calls": [
                        {"id": "mine", "type": "function",
                         "function": {"name": "t", "arguments": '{"a": 1}'}}]}}
    # 35 characters of messages, 14 of reply ("Sure." + "t" + '{"a": 1}')
    assert completion["usage"] == {"prompt_tokens": 9, "completion_tokens": 4,
                                   "total_tokens": 13}
    _, message = post(server, ANTHROPIC, messages([USER]))
    assert message["content"] == [{"type": "text", "text": "Sure."},
                                  {"type": "tool_use", "id": "mine", "name": "t",
                                   "input": {"a": 1}}]
    assert (message["stop_reason"], message["usage"]) == (
        "tool_use", {"input_tokens": 9, "output_tokens": 4})


def test_a_responder_picks_replies_from_the_request(server: ScriptedModelServer) -> None:
    """Queued steps come first (a step may be a function); then ``respond`` answers."""

    def echo(request: RecordedRequest) -> ScriptedReply:
        last = request.body["messages"][-1]["content"]
        return ScriptedReply(text=f"{request.protocol} heard {last}")

    with ScriptedModelServer([ScriptedReply(text="first"), echo], respond=echo) as scripted:
        texts = [call(scripted, p, [UserMessage(content=word)]).text
                 for p, word in (("openai", "a"), ("anthropic", "b"), ("openai", "c"))]
        assert texts == ["first", "anthropic heard b", "openai heard c"]
        assert (scripted.position, scripted.remaining) == (3, 0)


def test_a_used_up_script_refuses_with_a_clear_message(server: ScriptedModelServer) -> None:
    server.add_replies([ScriptedReply(text="only")])
    assert call(server, "anthropic", [UserMessage(content="hi")]).text == "only"
    with pytest.raises(ModelError) as caught:
        call(server, "anthropic", [UserMessage(content="again")])
    assert caught.value.message == ("tether.testing: the script is used up (1 steps answered) "
                                    "and has no reply for this request")
    assert not caught.value.retryable


def test_state_endpoints_over_http(server: ScriptedModelServer) -> None:
    """Another process sees what this one sees: requests, position, steps left; it can add
    steps too. A request in flight is visible before its answer (``wait_for``)."""
    client = ScriptedServerClient(server.url)
    client.add_replies([ScriptedReply(text="slow", delay=30), ScriptedReply(text="next")])
    assert (client.state().position, client.state().remaining) == (0, 2)
    answers: list[int] = []
    worker = threading.Thread(target=lambda: answers.append(post(server, OPENAI,
                                                                 chat([USER]))[0]))
    worker.start()
    seen = client.requests(wait_for=1)
    assert [(r.index, r.protocol, r.path, r.status, r.step) for r in seen] == [
        (0, "openai", OPENAI, 200, 0)]
    assert seen[0].body == chat([USER])
    assert client.state().position == 1
    server.close()  # answers the delayed request at once
    worker.join()
    assert answers == [200]


def test_unknown_endpoints_and_bad_replies(server: ScriptedModelServer) -> None:
    assert post(server, "/v1/responses", {}) == (404, {"error": {
        "message": "no endpoint /v1/responses"}})
    status, body = post(server, "/_tether/replies", [{"text": 3}])
    assert status == 400 and "text: Input should be a valid string" in body["error"]["message"]


def test_script_files(tmp_path: Path) -> None:
    """A list or ``{"replies": [...]}``; errors say which step is wrong."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": [
        {"text": "hi", "usage": {"input_tokens": 1, "output_tokens": 2}},
        {"tool_calls": [{"name": "t", "arguments": {"x": 1}}], "delay": 0.5},
        {"error": 429, "retry_after": 3}]}))
    assert load_script(path) == (
        ScriptedReply(text="hi", usage={"input_tokens": 1, "output_tokens": 2}),  # type: ignore[arg-type]
        ScriptedReply(tool_calls=(ScriptedToolCall(name="t", arguments={"x": 1}),), delay=0.5),
        ScriptedError(status=429, retry_after=3))
    assert load_script([{"error": 500}]) == (ScriptedError(status=500),)
    for data, message in [
        ({"steps": []}, 'a script is a list of steps, or {"replies": [...]}'),
        (["hi"], "a step must be an object, not 'hi'"),
        ([{"error": 200}], 'invalid step {"error": 200}: error: Input should be greater than '
                           "or equal to 400"),
        ([{"text": "x", "colour": 1}], 'invalid step {"text": "x", "colour": 1}: colour: Extra '
                                       "inputs are not permitted"),
    ]:
        with pytest.raises(ScriptError) as caught:
            load_script(data)  # type: ignore[arg-type]
        assert str(caught.value) == message
    with pytest.raises(ScriptError, match="cannot read script"):
        load_script(tmp_path / "missing.json")


def test_recorded_requests_are_plain_data() -> None:
    request = RecordedRequest(3, "anthropic", ANTHROPIC, {"a": [1]}, 400, None, "bad")
    assert RecordedRequest.from_data(json.loads(json.dumps(request.to_data()))) == request
