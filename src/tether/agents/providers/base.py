"""What every provider offers: a model reference (:class:`ModelSpec`) and a :class:`Model`.

A model is named ``openai:gpt-4.1-mini`` or ``anthropic:<model>``, or by a mapping
``{provider, name, base_url, api_key_env}`` (``base_url`` points at a compatible server:
vLLM, Ollama, a proxy, or :mod:`tether.testing`). Keys are read from the environment at
the moment a model is opened: ``api_key_env``, by default the SDK's own variable.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tether.agents.conversation import AssistantMessage, Reply, ToolResult, UserMessage
from tether.agents.errors import MissingAPIKey, ModelSpecError
from tether.agents.tools import ToolSpec


class Provider(StrEnum):
    """The model providers tether talks to, each through its official SDK."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"


ProviderName = Literal["openai", "anthropic"]

DEFAULT_KEY_ENV: dict[Provider, str] = {
    Provider.OPENAI: "OPENAI_API_KEY",
    Provider.ANTHROPIC: "ANTHROPIC_API_KEY",
}
"""The variable each SDK reads its key from, used when a spec names none."""

SDK_PACKAGE: dict[Provider, str] = {Provider.OPENAI: "openai", Provider.ANTHROPIC: "anthropic"}
"""The package (and the tether extra) each provider needs."""

DEFAULT_MAX_TOKENS = 4096

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ModelSpec(BaseModel):
    """Which model to call, where, and which environment variable holds the key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: Provider
    name: Annotated[str, Field(min_length=1)]
    base_url: Annotated[str, Field(pattern=r"^https?://\S+$")] | None = None
    api_key_env: Annotated[str, Field(pattern=_ENV_NAME.pattern)] | None = None

    def __str__(self) -> str:
        return f"{self.provider.value}:{self.name}"

    @property
    def key_env(self) -> str:
        """The environment variable the key is read from."""
        return self.api_key_env or DEFAULT_KEY_ENV[self.provider]


def parse_model_spec(value: str | Mapping[str, Any] | ModelSpec) -> ModelSpec:
    """A :class:`ModelSpec` from ``"openai:gpt-4.1-mini"`` or from a mapping.

    Raises :class:`ModelSpecError` naming what is wrong (an unknown provider gets a
    did-you-mean).
    """
    if isinstance(value, ModelSpec):
        return value
    if isinstance(value, str):
        provider, colon, name = value.partition(":")
        if not colon:
            raise ModelSpecError(value, "write it as provider:model, e.g. openai:gpt-4.1-mini")
        data: Mapping[str, Any] = {"provider": provider.strip(), "name": name.strip()}
    elif isinstance(value, Mapping):
        data = value
    else:
        raise ModelSpecError(value, "expected 'provider:model' or a mapping")
    _check_provider(value, data.get("provider"))
    try:
        return ModelSpec.model_validate({**data, "provider": Provider(data["provider"])})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise ModelSpecError(value, f"{where}: {error['msg']}") from exc


def _check_provider(value: object, provider: object) -> None:
    known = [p.value for p in Provider]
    if provider in known:
        return
    if not isinstance(provider, str) or not provider:
        raise ModelSpecError(value, f"a provider is required (one of {', '.join(known)})")
    close = difflib.get_close_matches(provider, known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(known)})"
    raise ModelSpecError(value, f"unknown provider '{provider}'{hint}")


def resolve_api_key(spec: ModelSpec) -> str:
    """The API key for ``spec``, read from the environment now; :class:`MissingAPIKey` when
    the variable is unset or empty."""
    key = os.environ.get(spec.key_env, "").strip()
    if not key:
        raise MissingAPIKey(spec.provider.value, spec.key_env)
    return key


class Model(Protocol):
    """A chat model with tools, behind one provider's SDK."""

    @property
    def spec(self) -> ModelSpec:
        """The model this object calls."""
        ...

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[UserMessage | AssistantMessage | ToolResult],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> Reply:
        """One model call: the system prompt, the history and the tools, to a reply.

        Raises :class:`~tether.agents.errors.ModelError` when the call fails (with
        ``retryable`` set for timeouts, connection errors, 429 and 5xx).
        """
        ...

    async def aclose(self) -> None:
        """Close the SDK client's connections."""
        ...
