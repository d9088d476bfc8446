"""Opening a model from its reference, and asking whether a provider can be used here."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any, assert_never

from tether.agents.errors import ProviderUnavailable
from tether.agents.providers.base import SDK_PACKAGE, Model, ModelSpec, Provider, parse_model_spec

DEFAULT_TIMEOUT = 600.0
"""Seconds a model call may take before it fails with a retryable timeout (the SDKs' own
default)."""


def open_model(spec: ModelSpec | str | Mapping[str, Any], *,
               timeout: float = DEFAULT_TIMEOUT) -> Model:
    """The :class:`Model` a reference names, with its key read from the environment now.

    Raises :class:`~tether.agents.errors.ModelSpecError` for a bad reference,
    :class:`~tether.agents.errors.ProviderUnavailable` when the provider's SDK is not
    installed and :class:`~tether.agents.errors.MissingAPIKey` when the key is not set.
    """
    spec = parse_model_spec(spec)
    match spec.provider:
        case Provider.OPENAI:
            from tether.agents.providers.openai import OpenAIModel

            return OpenAIModel(spec, timeout=timeout)
        case Provider.ANTHROPIC:
            from tether.agents.providers.anthropic import AnthropicModel

            return AnthropicModel(spec, timeout=timeout)
        case _:
            assert_never(spec.provider)


def require_provider(spec: ModelSpec | str | Mapping[str, Any]) -> ModelSpec:
    """``spec`` parsed, after checking (without importing it) that its provider's SDK is
    installed: what ``tether check`` asks of a workflow that uses the model."""
    spec = parse_model_spec(spec)
    package = SDK_PACKAGE[spec.provider]
    if importlib.util.find_spec(package) is None:
        raise ProviderUnavailable(spec.provider.value, package)
    return spec
