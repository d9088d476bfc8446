"""The provider-neutral conversation: messages, tool calls, replies and usage.

An agent's history is stored in checkpoints (the ``{messages, turn}`` snapshot) and sent to
a model again after a resume, possibly by another process: so every value here is frozen,
typed, and serialises to one canonical JSON text. ``Conversation.to_json`` of a conversation
read back with ``Conversation.from_json`` is the same text byte for byte, and the providers
turn equal conversations into equal requests.

The system prompt is not a message: it is given to :meth:`Model.complete` on its own.
Tool calls carry the name the model used (the tool's *declared* name, see ``tools.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

from tether.agents.errors import ConversationError


class StopReason(StrEnum):
    """Why a model stopped: the neutral names of OpenAI's and Anthropic's reasons."""

    END_TURN = "end_turn"
    TOOL_USE = "tool_use"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    REFUSAL = "refusal"
    OTHER = "other"


StopReasonName = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal",
                         "other"]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Value):
    """One call of a tool the model asked for.

    ``invalid_arguments`` holds the raw text when a model sent arguments that are not a JSON
    object (OpenAI sends a string the model wrote); ``arguments`` is then empty and the call
    should be answered with an error result. The raw text is sent back as it came.
    """

    id: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    invalid_arguments: str | None = None


class UserMessage(_Value):
    """A message from the user (the prompt, or a note the agent loop adds)."""

    role: Literal["user"] = "user"
    content: str


class AssistantMessage(_Value):
    """What the model said: text, tool calls, or both."""

    role: Literal["assistant"] = "assistant"
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()

    @model_validator(mode="after")
    def _unique_call_ids(self) -> AssistantMessage:
        ids = [call.id for call in self.tool_calls]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"tool call ids must be unique in a message: {duplicates}")
        return self


class ToolResult(_Value):
    """The result of one tool call, answering the call with id ``call_id``."""

    role: Literal["tool"] = "tool"
    call_id: Annotated[str, Field(min_length=1)]
    tool_name: str
    content: str
    is_error: bool = False


Message = Annotated[UserMessage | AssistantMessage | ToolResult, Field(discriminator="role")]


class Usage(_Value):
    """Tokens a model call consumed."""

    input_tokens: Annotated[int, Field(ge=0)] = 0
    output_tokens: Annotated[int, Field(ge=0)] = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens)

    @property
    def total_tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens


class Reply(_Value):
    """A model's answer to one call."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    stop_reason: StopReason = StopReason.END_TURN

    @property
    def message(self) -> AssistantMessage:
        """The reply as the assistant message to append to the conversation."""
        return AssistantMessage(text=self.text, tool_calls=self.tool_calls)


class _Messages(BaseModel):
    messages: tuple[Message, ...]


def canonical_json(data: Any) -> str:
    """The one JSON text of ``data``: compact, ASCII, keys in their given order, no NaN."""
    try:
        return json.dumps(data, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise ConversationError(str(exc)) from exc


class Conversation:
    """An immutable sequence of messages with the operations an agent loop needs."""

    __slots__ = ("_messages",)

    def __init__(self, messages: Iterable[UserMessage | AssistantMessage | ToolResult] = ()):
        self._messages: tuple[UserMessage | AssistantMessage | ToolResult, ...] = tuple(messages)

    @property
    def messages(self) -> tuple[UserMessage | AssistantMessage | ToolResult, ...]:
        """The messages, oldest first."""
        return self._messages

    def __iter__(self) -> Iterator[UserMessage | AssistantMessage | ToolResult]:
        return iter(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Conversation) and other._messages == self._messages

    def __hash__(self) -> int:
        return hash(self.to_json())

    def __repr__(self) -> str:
        return f"Conversation({list(self._messages)!r})"

    def append(self, *messages: UserMessage | AssistantMessage | ToolResult) -> Conversation:
        """A new conversation with ``messages`` added at the end."""
        return Conversation(self._messages + messages)

    def to_data(self) -> list[dict[str, Any]]:
        """The messages as plain JSON data (what a checkpoint snapshot stores)."""
        return [message.model_dump(mode="json") for message in self._messages]

    def to_json(self) -> str:
        """The canonical JSON text of the messages."""
        return canonical_json(self.to_data())

    @classmethod
    def from_data(cls, data: Any) -> Conversation:
        """Read messages back from :meth:`to_data`'s output."""
        try:
            parsed = _Messages.model_validate({"messages": data})
        except ValidationError as exc:
            raise ConversationError(_first_problem(exc)) from exc
        return cls(parsed.messages)

    @classmethod
    def from_json(cls, text: str | bytes) -> Conversation:
        """Read messages back from :meth:`to_json`'s output."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConversationError(f"not JSON: {exc}") from exc
        return cls.from_data(data)

    def unanswered_tool_calls(self) -> tuple[ToolCall, ...]:
        """Tool calls with no result among the results that directly follow their message.

        Both providers require every call of an assistant message to be answered by the
        tool results that come right after it; a history with an unanswered call is
        refused (HTTP 400) on every later request.
        """
        return tuple(call for _, calls in self._unanswered_by_message() for call in calls)

    def answer_unanswered(self, result: Callable[[ToolCall], ToolResult]) -> Conversation:
        """Answer every unanswered tool call with ``result(call)``.

        Each new result is placed after the results its message already has, in call order,
        so the history becomes acceptable to every provider again.
        """
        missing = dict(self._unanswered_by_message())
        if not missing:
            return self
        out: list[UserMessage | AssistantMessage | ToolResult] = []
        pending: tuple[ToolCall, ...] = ()
        for index, message in enumerate(self._messages):
            if pending and not isinstance(message, ToolResult):
                out.extend(result(call) for call in pending)
                pending = ()
            out.append(message)
            pending = missing.get(index, pending)
        out.extend(result(call) for call in pending)
        return Conversation(out)

    def _unanswered_by_message(self) -> Iterator[tuple[int, tuple[ToolCall, ...]]]:
        for index, message in enumerate(self._messages):
            if not isinstance(message, AssistantMessage) or not message.tool_calls:
                continue
            answered = {m.call_id for m in _results_after(self._messages, index)}
            calls = tuple(c for c in message.tool_calls if c.id not in answered)
            if calls:
                yield index, calls


def _results_after(messages: Sequence[Any], index: int) -> Iterator[ToolResult]:
    for message in messages[index + 1:]:
        if not isinstance(message, ToolResult):
            return
        yield message


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}"


class AgentSnapshot(_Value):
    """An agent node's state at a turn boundary: what a ``turn:N`` checkpoint stores."""

    messages: tuple[Message, ...]
    turn: Annotated[int, Field(ge=0)]

    @property
    def conversation(self) -> Conversation:
        """The messages as a :class:`Conversation`."""
        return Conversation(self.messages)

    @classmethod
    def of(cls, conversation: Conversation, turn: int) -> AgentSnapshot:
        """The snapshot of ``conversation`` before LLM call number ``turn``."""
        return cls(messages=conversation.messages, turn=turn)

    def to_data(self) -> dict[str, Any]:
        """``{"messages": [...], "turn": N}`` as plain JSON data."""
        return {"messages": self.conversation.to_data(), "turn": self.turn}

    @classmethod
    def from_data(cls, data: Any) -> AgentSnapshot:
        """Read a snapshot back from :meth:`to_data`'s output."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConversationError(_first_problem(exc)) from exc
