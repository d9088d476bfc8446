"""Anthropic Messages with tool_use / tool_result, through the official ``anthropic`` SDK.

The SDK is imported when a model is opened, never by ``import tether``; without it,
:class:`~tether.agents.errors.ProviderUnavailable` says which extra to install.

Wire format: the system prompt is the ``system`` parameter. Roles alternate, so the neutral
history is grouped into turns: an assistant message becomes one ``assistant`` turn (a text
block, then one ``tool_use`` block per call); tool results and user messages that follow each
other become one ``user`` turn, the ``tool_result`` blocks first, in order. A user turn made
of a single user message sends its text as a plain string.
"""

from __future__ import annotations

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
    import anthropic
    from anthropic.types import (
        ContentBlockParam,
        Message,
        MessageParam,
        ToolParam,
        ToolResultBlockParam,
    )

_STOP_REASONS = {
    "end_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "refusal": StopReason.REFUSAL,
}


class AnthropicModel:
    """A Messages API model. SDK retries are off: failures become :class:`ModelError` and
    the runtime's node retries decide what happens next."""

    def __init__(self, spec: ModelSpec, *, timeout: float) -> None:
        try:
            import anthropic
        except ImportError as exc:
            raise ProviderUnavailable(Provider.ANTHROPIC.value, "anthropic") from exc
        self._spec = spec
        self._key = resolve_api_key(spec)
        self._client = anthropic.AsyncAnthropic(
            api_key=self._key, base_url=spec.base_url, max_retries=0, timeout=timeout
        )

    def __repr__(self) -> str:
        return f"AnthropicModel({self._spec})"

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
        """One Messages call (see :meth:`tether.agents.Model.complete`)."""
        import anthropic

        wire_tools = to_anthropic_tools(tools)
        try:
            message = await self._client.messages.create(
                model=self._spec.name,
                max_tokens=max_tokens,
                messages=to_anthropic_messages(messages),
                system=system if system else anthropic.omit,
                tools=wire_tools if wire_tools else anthropic.omit,
            )
        except anthropic.AnthropicError as exc:
            raise self._error(exc) from exc
        try:
            return reply_from_anthropic(message)
        except ValueError as exc:
            raise ModelError(provider="anthropic", model=self._spec.name, retryable=False,
                             message=f"unreadable reply: {exc}") from exc

    async def aclose(self) -> None:
        """Close the SDK client's connections."""
        await self._client.close()

    def _error(self, exc: anthropic.AnthropicError) -> ModelError:
        import anthropic

        status: int | None = None
        error_type: str | None = None
        retry_after: float | None = None
        if isinstance(exc, anthropic.APITimeoutError):
            retryable, message = True, "the request timed out"
        elif isinstance(exc, anthropic.APIConnectionError):
            retryable, message = True, f"connection error: {exc.message}"
        elif isinstance(exc, anthropic.APIStatusError):
            status = exc.status_code
            retryable = is_retryable_status(status)
            message = exc.api_message or exc.message
            error_type = exc.type
            retry_after = retry_after_seconds(exc.response.headers)
        else:
            retryable, message = False, str(exc)
        return ModelError(provider="anthropic", model=self._spec.name, retryable=retryable,
                          message=mask_secret(message, self._key), status_code=status,
                          error_type=error_type, retry_after=retry_after)


def to_anthropic_messages(
    messages: Sequence[UserMessage | AssistantMessage | ToolResult],
) -> list[MessageParam]:
    """The Messages API ``messages`` of a neutral history, grouped into alternating turns."""
    turns: list[tuple[str, list[UserMessage | AssistantMessage | ToolResult]]] = []
    for message in messages:
        role = "assistant" if isinstance(message, AssistantMessage) else "user"
        if turns and turns[-1][0] == role:
            turns[-1][1].append(message)
        else:
            turns.append((role, [message]))
    return [_turn(role, group) for role, group in turns]


def _turn(role: str, group: list[UserMessage | AssistantMessage | ToolResult]) -> MessageParam:
    if role == "user":
        if len(group) == 1 and isinstance(group[0], UserMessage):
            return {"role": "user", "content": group[0].content}
        return {"role": "user", "content": [block for m in group for block in _blocks(m)]}
    return {"role": "assistant", "content": [block for m in group for block in _blocks(m)]}


def _blocks(message: UserMessage | AssistantMessage | ToolResult) -> list[ContentBlockParam]:
    if isinstance(message, UserMessage):
        return [{"type": "text", "text": message.content}]
    if isinstance(message, ToolResult):
        return [_tool_result(message)]
    if isinstance(message, AssistantMessage):
        blocks: list[ContentBlockParam] = []
        if message.text:
            blocks.append({"type": "text", "text": message.text})
        blocks.extend({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": dict(call.arguments)} for call in message.tool_calls)
        return blocks
    assert_never(message)


def _tool_result(result: ToolResult) -> ToolResultBlockParam:
    block: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": result.call_id}
    if result.content:
        block["content"] = result.content
    if result.is_error:
        block["is_error"] = True
    return block


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[ToolParam]:
    """The Messages API ``tools``: each under its declared name, with its input schema."""
    out: list[ToolParam] = []
    for tool in tools:
        param: dict[str, Any] = {"name": tool.declared_name}
        if tool.description:
            param["description"] = tool.description
        param["input_schema"] = tool.parameters
        out.append(param)  # type: ignore[arg-type]
    return out


def reply_from_anthropic(message: Message) -> Reply:
    """The neutral :class:`Reply` of a Messages API response."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall.model_validate(
                {"id": block.id, "name": block.name, "arguments": block.input}))
    usage = message.usage
    input_tokens = (usage.input_tokens + (usage.cache_creation_input_tokens or 0)
                    + (usage.cache_read_input_tokens or 0))
    return Reply(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage(input_tokens=input_tokens, output_tokens=usage.output_tokens),
        stop_reason=_STOP_REASONS.get(message.stop_reason or "", StopReason.OTHER),
    )
