"""Model providers behind one protocol: OpenAI and Anthropic, through their official SDKs.

``base`` holds the model reference and the :class:`Model` protocol, ``open`` picks a provider,
and ``openai`` / ``anthropic`` hold each SDK's calls and wire conversions (they import their
SDK only when a model is opened).
"""

from __future__ import annotations

from tether.agents.providers.base import (
    DEFAULT_KEY_ENV,
    DEFAULT_MAX_TOKENS,
    Model,
    ModelSpec,
    Provider,
    ProviderName,
    parse_model_spec,
    resolve_api_key,
)
from tether.agents.providers.open import DEFAULT_TIMEOUT, open_model, require_provider

__all__ = [
    "DEFAULT_KEY_ENV",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TIMEOUT",
    "Model",
    "ModelSpec",
    "Provider",
    "ProviderName",
    "open_model",
    "parse_model_spec",
    "require_provider",
    "resolve_api_key",
]
