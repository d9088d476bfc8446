"""Helpers for agent tests: one real SDK call through a provider against a scripted server."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tether.agents import Model, Reply, ToolSpec, open_model
from tether.agents.conversation import AssistantMessage, ToolResult, UserMessage
from tether.testing import ScriptedModelServer

OPENAI_KEY = "sk-test-openai-secret-0123456789"
ANTHROPIC_KEY = "sk-ant-test-secret-0123456789"
PROVIDERS = ("openai", "anthropic")


def base_url(server: ScriptedModelServer, provider: str) -> str:
    """The base URL a provider's SDK needs to reach ``server``."""
    return server.openai_base_url if provider == "openai" else server.anthropic_base_url


def open_test_model(url: str, provider: str, timeout: float = 30.0) -> Model:
    """A model of ``provider`` whose SDK client talks to ``url``."""
    return open_model({"provider": provider, "name": "test-model", "base_url": url},
                      timeout=timeout)


def call(server: ScriptedModelServer | str, provider: str,
         messages: Sequence[UserMessage | AssistantMessage | ToolResult],
         tools: Sequence[ToolSpec] = (), system: str = "", timeout: float = 30.0) -> Reply:
    """One model call through the real SDK client against ``server`` (or a base URL)."""
    url = server if isinstance(server, str) else base_url(server, provider)

    async def run() -> Reply:
        model = open_test_model(url, provider, timeout)
        try:
            return await model.complete(system=system, messages=messages, tools=tools,
                                        max_tokens=256)
        finally:
            await model.aclose()

    return asyncio.run(run())
