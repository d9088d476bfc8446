"""OpenAI Chat Completions with tool calls, through the official ``openai`` SDK.

The SDK is imported when a model is opened, never by ``import tether``; without it,
:class:`~tether.agents.errors.ProviderUnavailable` says which extra to install.

Wire format: the system prompt is the first message (``role: system``); an assistant message
carries its text (``null`` when it only calls tools) and its ``tool_calls`` with the
arguments as a JSON string; each tool result is one ``role: tool`` message answering one
``tool_call_id``. OpenAI has no error flag on tool results: ``is_error`` stays in our
history and the content says what went wrong.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, assert_never

from tether.agents.conversation import (
    AssistantMessage,
    Reply,
    StopReason,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
    canonical_json,
)
from tether.agents.errors import ModelError, ProviderUnavailable, mask_secret
from tether.agents.providers.base import (
    DEFAULT_MAX_TOKENS,
    ModelSpec,
    Provider,
    resolve_api_key,
)
from tether.agents.providers.status import is_retryable_status, retry_after_seconds
from tether.agents.tools import ToolSpec

if TYPE_CHECKING:
    import openai
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionAssistantMessageParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
    )

_STOP_REASONS = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.REFUSAL,
}


class OpenAIModel:
    """A Chat Completions model. SDK retries are off: failures become :class:`ModelError`
    and the runtime's node retries decide what happens next."""

    def __init__(self, spec: ModelSpec, *, timeout: float) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ProviderUnavailable(Provider.OPENAI.value, "openai") from exc
        self._spec = spec
        self._key = resolve_api_key(spec)
        self._client = openai.AsyncOpenAI(
            api_key=self._key, base_url=spec.base_url, max_retries=0, timeout=timeout
        )

    def __repr__(self) -> str:
        return f"OpenAIModel({self._spec})"

    @property
    def spec(self) -> ModelSpec:
        """The model this object calls."""
        return self._spec

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[UserMessage | AssistantMessage | ToolResult],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> Reply:
        """One Chat Completions call (see :meth:`tether.agents.Model.complete`)."""
        import openai

        wire_tools = to_openai_tools(tools)
        try:
            completion = await self._client.chat.completions.create(
                model=self._spec.name,
                messages=to_openai_messages(system, messages),
                tools=wire_tools if wire_tools else openai.omit,
                max_completion_tokens=max_tokens,
            )
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        return self._reply(completion)

    async def aclose(self) -> None:
        """Close the SDK client's connections."""
        await self._client.close()

    def _reply(self, completion: ChatCompletion) -> Reply:
        try:
            return reply_from_openai(completion)
        except ValueError as exc:
            raise ModelError(provider="openai", model=self._spec.name, retryable=False,
                             message=f"unreadable reply: {exc}") from exc

    def _error(self, exc: openai.OpenAIError) -> ModelError:
        import openai

        status: int | None = None
        error_type: str | None = None
        retry_after: float | None = None
        if isinstance(exc, openai.APITimeoutError):
            retryable, message = True, "the request timed out"
        elif isinstance(exc, openai.APIConnectionError):
            retryable, message = True, f"connection error: {exc.message}"
        elif isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retryable = is_retryable_status(status)
            message = _status_message(exc)
            error_type = exc.type
            retry_after = retry_after_seconds(exc.response.headers)
        else:
            retryable, message = False, str(exc)
        return ModelError(provider="openai", model=self._spec.name, retryable=retryable,
                          message=mask_secret(message, self._key), status_code=status,
                          error_type=error_type, retry_after=retry_after)


def _status_message(exc: openai.APIStatusError) -> str:
    body: Any = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return exc.message


def to_openai_messages(
    system: str, messages: Sequence[UserMessage | AssistantMessage | ToolResult]
) -> list[ChatCompletionMessageParam]:
    """The Chat Completions ``messages`` for a system prompt and a neutral history."""
    out: list[ChatCompletionMessageParam] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            out.append(_assistant(message))
        elif isinstance(message, ToolResult):
            out.append({"role": "tool", "tool_call_id": message.call_id,
                        "content": message.content})
        else:
            assert_never(message)
    return out


def _assistant(message: AssistantMessage) -> ChatCompletionAssistantMessageParam:
    if not message.tool_calls:
        return {"role": "assistant", "content": message.text}
    calls: list[ChatCompletionMessageFunctionToolCallParam] = [
        {"id": call.id, "type": "function",
         "function": {"name": call.name, "arguments": _arguments_text(call)}}
        for call in message.tool_calls
    ]
    return {"role": "assistant", "content": message.text or None, "tool_calls": calls}


def _arguments_text(call: ToolCall) -> str:
    if call.invalid_arguments is not None:
        return call.invalid_arguments
    return canonical_json(call.arguments)


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[ChatCompletionFunctionToolParam]:
    """The Chat Completions ``tools``: one function per tool, under its declared name."""
    out: list[ChatCompletionFunctionToolParam] = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.declared_name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters
        out.append({"type": "function", "function": function})  # type: ignore[typeddict-item]
    return out


def reply_from_openai(completion: ChatCompletion) -> Reply:
    """The neutral :class:`Reply` of a chat completion (its first choice)."""
    if not completion.choices:
        raise ValueError("the completion has no choices")
    choice = completion.choices[0]
    message = choice.message
    calls = []
    for call in message.tool_calls or ():
        if call.type != "function":
            raise ValueError(f"unsupported tool call type '{call.type}'")
        calls.append(tool_call(call.id, call.function.name, call.function.arguments))
    usage = completion.usage
    return Reply(
        text=message.content or message.refusal or "",
        tool_calls=tuple(calls),
        usage=Usage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens)
        if usage else Usage(),
        stop_reason=_STOP_REASONS.get(choice.finish_reason, StopReason.OTHER),
    )


def tool_call(call_id: str, name: str, arguments: str) -> ToolCall:
    """A neutral tool call from OpenAI's parts; arguments that are not a JSON object are
    kept as raw text in ``invalid_arguments``."""
    if not arguments.strip():
        return ToolCall(id=call_id, name=name)
    try:
        parsed = json.loads(arguments, parse_constant=_not_json)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return ToolCall(id=call_id, name=name, invalid_arguments=arguments)
    return ToolCall(id=call_id, name=name, arguments=parsed)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")
