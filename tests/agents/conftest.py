"""Fixtures for agent tests: API keys in the environment and a scripted model server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agents_support import ANTHROPIC_KEY, OPENAI_KEY

from tether.testing import ScriptedModelServer


@pytest.fixture(autouse=True)
def api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both providers' default key variables are set (to fake keys)."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    """A started scripted model server with an empty script."""
    with ScriptedModelServer() as started:
        yield started
