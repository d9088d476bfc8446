"""A real language client talking to ``python -m tether lsp`` over stdio (pytest-lsp).

One server per test module (starting one costs a second of CPU); every test opens its own
documents, in its own temporary directory (helpers in lsp_support.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_lsp
from lsp_support import CONFIG
from lsprotocol import types
from pytest_lsp import LanguageClient


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: LanguageClient) -> AsyncIterator[LanguageClient]:
    """A client with an initialized session, shut down after the module's tests."""
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(),
        root_uri=Path.cwd().as_uri()))
    yield lsp_client
    await lsp_client.shutdown_session()
