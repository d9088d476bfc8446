"""The groundwork of agent nodes: conversations, tools and model providers.

- :mod:`~tether.agents.conversation`: the provider-neutral history (messages, tool calls,
  replies, usage) with its canonical JSON, as checkpoints store it;
- :mod:`~tether.agents.tools`: tool specs from task functions, worker agents and handoffs,
  declared names, argument validation;
- :mod:`~tether.agents.providers`: :func:`open_model` and the :class:`Model` protocol, with
  OpenAI and Anthropic behind it (their SDKs are the extras ``tether[openai]`` and
  ``tether[anthropic]``, imported only when a model is opened);
- :mod:`~tether.agents.errors`: the errors, under :class:`AgentError`.

:mod:`tether.testing` holds a scripted model server that speaks both wire protocols.
"""

from __future__ import annotations

from tether.agents.conversation import (
    AgentSnapshot,
    AssistantMessage,
    Conversation,
    Message,
    Reply,
    StopReason,
    StopReasonName,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from tether.agents.errors import (
    AgentError,
    ConversationError,
    MissingAPIKey,
    ModelError,
    ModelSpecError,
    ProviderUnavailable,
    ToolArgumentsError,
    ToolSchemaError,
)
from tether.agents.providers import (
    Model,
    ModelSpec,
    Provider,
    open_model,
    parse_model_spec,
    require_provider,
)
from tether.agents.tools import (
    NameClash,
    ToolKind,
    ToolSpec,
    declared_name,
    find_clashes,
    handoff_tool,
    tool_spec,
    worker_tool,
)

__all__ = [
    "AgentError",
    "AgentSnapshot",
    "AssistantMessage",
    "Conversation",
    "ConversationError",
    "Message",
    "MissingAPIKey",
    "Model",
    "ModelError",
    "ModelSpec",
    "ModelSpecError",
    "NameClash",
    "Provider",
    "ProviderUnavailable",
    "Reply",
    "StopReason",
    "StopReasonName",
    "ToolArgumentsError",
    "ToolCall",
    "ToolKind",
    "ToolResult",
    "ToolSchemaError",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "declared_name",
    "find_clashes",
    "handoff_tool",
    "open_model",
    "parse_model_spec",
    "require_provider",
    "tool_spec",
    "worker_tool",
]
