"""Anthropic Messages as the scripted server speaks it: ``POST /v1/messages``.

Requests are checked the way the real API checks them, and refused with its error shape
``{"type": "error", "error": {"type": "invalid_request_error", "message"}}`` and wording:

- ``model``, ``max_tokens`` and ``messages`` are required; roles are ``user`` or
  ``assistant``, the first is ``user`` and they alternate; every message has content (except
  a final assistant message) and no text block is empty;
- tool names match ``^[a-zA-Z0-9_-]{1,128}$`` and are unique; a request whose history holds
  ``tool_use`` or ``tool_result`` blocks declares tools;
- every ``tool_use`` of an assistant message is answered by a ``tool_result`` block in the
  next message, and every ``tool_result`` answers a ``tool_use`` of the message before it.

``stream: true`` is refused: the server answers whole responses only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from tether.agents.conversation import StopReason
from tether.testing.script import ScriptedError, ScriptedReply, WireProtocol
from tether.testing.wire import (
    STREAM_REFUSED,
    WireError,
    estimated_usage,
    retry_headers,
)

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                402: "billing_error", 403: "permission_error", 404: "not_found_error",
                413: "request_too_large", 429: "rate_limit_error", 504: "timeout_error",
                529: "overloaded_error"}

_DEFAULT_MESSAGES = {429: "Number of request tokens has exceeded your per-minute rate limit",
                     529: "Overloaded"}


def invalid(message: str, request_id: str = "", status: int = 400,
            error_type: str = "invalid_request_error") -> WireError:
    """An error answer in Anthropic's shape."""
    body: dict[str, Any] = {"type": "error",
                            "error": {"type": error_type, "message": message}}
    if request_id:
        body["request_id"] = request_id
    return WireError(status, body, message)


class AnthropicWire:
    """The Messages protocol (see the module docstring)."""

    name: WireProtocol = "anthropic"
    path = "/v1/messages"

    def check_request(self, body: Any, request_id: str) -> WireError | None:
        """The 400 the real API answers to ``body``, or ``None`` if it would accept it."""
        problem = _check_request(body)
        if problem is None:
            return None
        return invalid(problem.message, request_id)

    def declared_tools(self, body: Any) -> list[str]:
        """The names of the tools the request declares."""
        return [tool["name"] for tool in body.get("tools") or ()]

    def reply(self, step: ScriptedReply, body: Any, new_id: Callable[[], str],
              request_id: str) -> dict[str, Any]:
        """A ``message`` object for a scripted reply."""
        content: list[dict[str, Any]] = []
        if step.text:
            content.append({"type": "text", "text": step.text})
        content.extend({"type": "tool_use", "id": call.id or new_id(), "name": call.name,
                        "input": call.arguments} for call in step.tool_calls)
        stop = step.stop_reason or (StopReason.TOOL_USE if step.tool_calls
                                    else StopReason.END_TURN)
        usage = estimated_usage(step, body["messages"])
        return {
            "id": f"msg_{request_id}", "type": "message", "role": "assistant",
            "model": body["model"], "content": content,
            "stop_reason": "end_turn" if stop is StopReason.OTHER else stop.value,
            "stop_sequence": None,
            "usage": {"input_tokens": usage.input_tokens,
                      "output_tokens": usage.output_tokens},
        }

    def error(self, status: int, message: str, request_id: str) -> WireError:
        """An error answer with Anthropic's type for ``status``."""
        error_type = _ERROR_TYPES.get(status, "api_error" if status >= 500
                                      else "invalid_request_error")
        return invalid(message, request_id, status, error_type)

    def scripted_error(self, step: ScriptedError, request_id: str) -> WireError:
        """The answer of a scripted error step, in Anthropic's words when it gives none."""
        default = _DEFAULT_MESSAGES.get(step.status, "Internal server error"
                                        if step.status >= 500 else "Invalid request")
        error = self.error(step.status, step.message or default, request_id)
        return WireError(error.status, error.body, error.message, retry_headers(step))


def _check_request(body: Any) -> WireError | None:
    if not isinstance(body, dict):
        return invalid("Input should be a valid dictionary or object")
    if body.get("stream"):
        return invalid(STREAM_REFUSED)
    for required in ("model", "max_tokens", "messages"):
        if body.get(required) is None:
            return invalid(f"{required}: Field required")
    return (_check_fields(body)
            or _check_tools(body.get("tools"))
            or _check_turns(body["messages"])
            or _check_tool_pairs(body["messages"], bool(body.get("tools"))))


def _check_fields(body: dict[str, Any]) -> WireError | None:
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        return invalid("max_tokens: Input should be a valid integer")
    if max_tokens < 1:
        return invalid("max_tokens: Input should be greater than or equal to 1")
    messages = body["messages"]
    if not isinstance(messages, list):
        return invalid("messages: Input should be a valid list")
    if not messages:
        return invalid("messages: List should have at least 1 item after validation, not 0")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return invalid(f"messages.{index}: Input should be a valid dictionary")
        if message.get("role") not in ("user", "assistant"):
            return invalid(f"messages.{index}.role: Input should be 'user' or 'assistant'")
    return None


def _check_tools(tools: Any) -> WireError | None:
    names: list[str] = []
    for index, tool in enumerate(tools or ()):
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            return invalid(f"tools.{index}.custom.name: String should match pattern "
                           f"'{NAME_PATTERN.pattern}'")
        names.append(name)
    if len(set(names)) != len(names):
        return invalid("tools: Tool names must be unique.")
    return None


def _check_turns(messages: list[dict[str, Any]]) -> WireError | None:
    if messages[0]["role"] != "user":
        return invalid('messages: first message must use the "user" role')
    for index, message in enumerate(messages):
        if index and message["role"] == messages[index - 1]["role"]:
            return invalid('messages: roles must alternate between "user" and "assistant", '
                           f'but found multiple "{message["role"]}" roles in a row')
        final_assistant = index == len(messages) - 1 and message["role"] == "assistant"
        content = message.get("content")
        if not content and not final_assistant:
            return invalid(f"messages.{index}: all messages must have non-empty content "
                           "except for the optional final assistant message")
        if isinstance(content, list) and any(block.get("type") == "text" and not block.get("text")
                                             for block in _blocks(message)):
            return invalid("messages: text content blocks must be non-empty")
    return None


def _check_tool_pairs(messages: list[dict[str, Any]], has_tools: bool) -> WireError | None:
    if not has_tools and any(block.get("type") in ("tool_use", "tool_result")
                             for message in messages for block in _blocks(message)):
        return invalid("Requests which include `tool_use` or `tool_result` blocks must "
                       "define tools.")
    for index, message in enumerate(messages):
        previous = messages[index - 1] if index else None
        problem = (_check_results(index, message, previous) if message["role"] == "user"
                   else _check_uses(index, message, messages[index + 1:index + 2]))
        if problem:
            return problem
    return None


def _check_uses(index: int, message: dict[str, Any],
                following: list[dict[str, Any]]) -> WireError | None:
    uses = _ids(message, "tool_use", "id")
    answered = _ids(following[0], "tool_result", "tool_use_id") if following else []
    missing = [use for use in uses if use not in answered]
    if not missing:
        return None
    return invalid(f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                   f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                   "a corresponding `tool_result` block in the next message.")


def _check_results(index: int, message: dict[str, Any],
                   previous: dict[str, Any] | None) -> WireError | None:
    uses = _ids(previous, "tool_use", "id") if previous else []
    for number, block in enumerate(_blocks(message)):
        if block.get("type") == "tool_result" and block.get("tool_use_id") not in uses:
            return invalid(f"messages.{index}.content.{number}: unexpected `tool_use_id` found "
                           f"in `tool_result` blocks: {block.get('tool_use_id')}. Each "
                           "`tool_result` block must have a corresponding `tool_use` block in "
                           "the previous message.")
    return None


def _blocks(message: dict[str, Any]) -> Iterator[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        yield {"type": "text", "text": content}
    elif isinstance(content, list):
        yield from (block for block in content if isinstance(block, dict))


def _ids(message: dict[str, Any], block_type: str, key: str) -> list[str]:
    return [str(block.get(key)) for block in _blocks(message) if block.get("type") == block_type]
