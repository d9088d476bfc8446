"""OpenAI Chat Completions as the scripted server speaks it: ``POST /v1/chat/completions``.

Requests are checked the way the real API checks them, and refused with its error shape
``{"error": {"message", "type", "param", "code"}}`` and wording:

- ``model`` and ``messages`` are required; ``messages`` is a non-empty array of objects with
  a known role; a tool message needs ``tool_call_id``; an assistant message needs content
  or tool calls;
- tool names (declared, and in the history's tool calls) match ``^[a-zA-Z0-9_-]+$``, at most
  64 characters;
- an assistant message with ``tool_calls`` is followed by tool messages answering each of
  its ids (once); a tool message answers a call of the assistant message before it.

``stream: true`` is refused: the server answers whole responses only.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from tether.agents.conversation import StopReason
from tether.testing.script import ScriptedError, ScriptedReply, WireProtocol
from tether.testing.wire import (
    STREAM_REFUSED,
    WireError,
    estimated_usage,
    retry_headers,
)

ROLES = ("system", "assistant", "user", "function", "tool", "developer")
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
MAX_NAME = 64

_FINISH = {
    StopReason.END_TURN: "stop",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.TOOL_USE: "tool_calls",
    StopReason.MAX_TOKENS: "length",
    StopReason.REFUSAL: "content_filter",
    StopReason.OTHER: "stop",
}


def invalid(message: str, param: str | None = None, code: str | None = None,
            status: int = 400, error_type: str = "invalid_request_error") -> WireError:
    """An error answer in OpenAI's shape."""
    body = {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    return WireError(status, body, message)


class OpenAIWire:
    """The Chat Completions protocol (see the module docstring)."""

    name: WireProtocol = "openai"
    path = "/v1/chat/completions"

    def check_request(self, body: Any, request_id: str) -> WireError | None:
        """The 400 the real API answers to ``body``, or ``None`` if it would accept it."""
        if not isinstance(body, dict):
            return invalid("We could not parse the JSON body of your request.")
        if body.get("stream"):
            return invalid(STREAM_REFUSED, "stream", "unsupported_value")
        if not body.get("model"):
            return invalid("you must provide a model parameter")
        return (_check_message_list(body.get("messages"))
                or _check_tools(body.get("tools"))
                or _check_history(body["messages"]))

    def declared_tools(self, body: Any) -> list[str]:
        """The names of the functions the request declares."""
        return [tool["function"]["name"] for tool in body.get("tools") or ()]

    def reply(self, step: ScriptedReply, body: Any, new_id: Callable[[], str],
              request_id: str) -> dict[str, Any]:
        """A ``chat.completion`` object for a scripted reply."""
        calls = [{"id": call.id or new_id(), "type": "function",
                  "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
                 for call in step.tool_calls]
        message: dict[str, Any] = {"role": "assistant", "content": step.text or None,
                                   "refusal": None, "annotations": []}
        if calls:
            message["tool_calls"] = calls
        stop = step.stop_reason or (StopReason.TOOL_USE if calls else StopReason.END_TURN)
        usage = estimated_usage(step, body["messages"])
        return {
            "id": f"chatcmpl-{request_id}", "object": "chat.completion",
            "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": _FINISH[stop],
                         "logprobs": None}],
            "usage": {"prompt_tokens": usage.input_tokens,
                      "completion_tokens": usage.output_tokens,
                      "total_tokens": usage.total_tokens},
        }

    def error(self, status: int, message: str, request_id: str) -> WireError:
        """An error answer with OpenAI's type for ``status``."""
        if status == 429:
            return invalid(message, None, "rate_limit_exceeded", 429, "requests")
        if status >= 500:
            return invalid(message, None, None, status, "server_error")
        return invalid(message, None, None, status)

    def scripted_error(self, step: ScriptedError, request_id: str) -> WireError:
        """The answer of a scripted error step, in OpenAI's words when it gives none."""
        default = ("Rate limit reached for requests" if step.status == 429 else
                   "The server had an error while processing your request. Sorry about that!"
                   if step.status >= 500 else "Invalid request")
        error = self.error(step.status, step.message or default, request_id)
        return WireError(error.status, error.body, error.message, retry_headers(step))


def _check_message_list(messages: Any) -> WireError | None:
    if messages is None:
        return invalid("Missing required parameter: 'messages'.", "messages",
                       "missing_required_parameter")
    if not isinstance(messages, list):
        return invalid("Invalid type for 'messages': expected an array of objects.",
                       "messages", "invalid_type")
    if not messages:
        return invalid("Invalid 'messages': empty array. Expected an array with minimum "
                       "length 1, but got an empty array instead.", "messages", "empty_array")
    for index, message in enumerate(messages):
        problem = _check_message(index, message)
        if problem:
            return problem
    return None


def _check_message(index: int, message: Any) -> WireError | None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        return invalid(f"Invalid type for '{where}': expected an object.", where, "invalid_type")
    role = message.get("role")
    if role not in ROLES:
        supported = ", ".join(f"'{r}'" for r in ROLES[:-1]) + f", and '{ROLES[-1]}'"
        return invalid(f"Invalid value: '{role}'. Supported values are: {supported}.",
                       f"{where}.role", "invalid_value")
    if role == "tool" and not message.get("tool_call_id"):
        return invalid(f"Missing required parameter: '{where}.tool_call_id'.",
                       f"{where}.tool_call_id", "missing_required_parameter")
    if role == "assistant" and message.get("content") is None and not message.get("tool_calls"):
        return invalid("Invalid value for 'content': expected a string, got null.",
                       f"messages.[{index}].content")
    for number, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str):
            return invalid(f"Invalid type for '{where}.tool_calls[{number}]': expected an "
                           "object with 'id', 'type' and 'function'.",
                           f"{where}.tool_calls[{number}]", "invalid_type")
        problem = _check_name(function.get("name"),
                              f"{where}.tool_calls[{number}].function.name")
        if problem:
            return problem
    return None


def _check_tools(tools: Any) -> WireError | None:
    for index, tool in enumerate(tools or ()):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            return invalid(f"Missing required parameter: 'tools[{index}].function'.",
                           f"tools[{index}].function", "missing_required_parameter")
        problem = _check_name(function.get("name"), f"tools[{index}].function.name")
        if problem:
            return problem
    return None


def _check_name(name: Any, param: str) -> WireError | None:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        return invalid(f"Invalid '{param}': string does not match pattern. Expected a string "
                       f"that matches the pattern '{NAME_PATTERN.pattern}'.", param,
                       "invalid_value")
    if len(name) > MAX_NAME:
        return invalid(f"Invalid '{param}': string too long. Expected a string with maximum "
                       f"length {MAX_NAME}, but got a string with length {len(name)} instead.",
                       param, "string_above_max_length")
    return None


def _check_history(messages: list[dict[str, Any]]) -> WireError | None:
    """Every call answered by the tool messages right after it; no tool message that
    answers nothing."""
    index = 0
    while index < len(messages):
        message = messages[index]
        if message["role"] == "assistant" and message.get("tool_calls"):
            problem, index = _check_answers(messages, index)
            if problem:
                return problem
            continue
        if message["role"] == "tool":
            return invalid("Invalid parameter: messages with role 'tool' must be a response "
                           "to a preceeding message with 'tool_calls'.",
                           f"messages.[{index}].role")
        index += 1
    return None


def _check_answers(messages: list[dict[str, Any]], index: int) -> tuple[WireError | None, int]:
    ids = [call.get("id") for call in messages[index]["tool_calls"]]
    answered: list[str] = []
    after = index + 1
    while after < len(messages) and messages[after]["role"] == "tool":
        call_id = messages[after]["tool_call_id"]
        if call_id in answered:
            return invalid("Invalid parameter: messages with role 'tool' must be a response "
                           "to a preceeding message with 'tool_calls'.",
                           f"messages.[{after}].role"), after
        if call_id not in ids:
            return invalid(f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in "
                           "'tool_calls' of previous message.",
                           f"messages.[{after}].tool_call_id"), after
        answered.append(call_id)
        after += 1
    missing = [str(call_id) for call_id in ids if call_id not in answered]
    if missing:
        return invalid("An assistant message with 'tool_calls' must be followed by tool "
                       "messages responding to each 'tool_call_id'. The following "
                       f"tool_call_ids did not have response messages: {', '.join(missing)}",
                       f"messages.[{index}].role"), after
    return None, after
