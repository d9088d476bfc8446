"""Helpers of the language server tests: the server's command, opening and editing
documents, positions. They wait for the server's notifications with generous timeouts and
never measure time.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

WAIT = 120.0  # seconds: a loaded machine is slow, never wrong


def server_env() -> dict[str, str]:
    """The environment of the server: this one, with the tree's sources on PYTHONPATH."""
    env = dict(os.environ)
    source = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
    return env


CONFIG = ClientServerConfig(server_command=[sys.executable, "-m", "tether", "lsp"],
                            server_env=server_env())


async def wait_diagnostics(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    """The diagnostics the server publishes next for ``uri``."""
    async def published() -> list[types.Diagnostic]:
        while uri not in client.diagnostics:
            await asyncio.sleep(0.01)
        return list(client.diagnostics[uri])

    return await asyncio.wait_for(published(), WAIT)


async def open_document(client: LanguageClient, path: Path,
                        text: str | None = None) -> list[types.Diagnostic]:
    """Open ``path`` (with ``text``, or its content on disk); its diagnostics."""
    uri = path.resolve().as_uri()
    client.diagnostics.pop(uri, None)
    language = "flow" if path.suffix == ".flow" else "yaml"
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(
            uri=uri, language_id=language, version=1,
            text=text if text is not None else path.read_text(encoding="utf-8"))))
    return await wait_diagnostics(client, uri)


async def change_document(client: LanguageClient, path: Path, version: int,
                          changes: list[types.TextDocumentContentChangeEvent],
                          ) -> list[types.Diagnostic]:
    """Send an edit of ``path``; the diagnostics of the edited text."""
    uri = path.resolve().as_uri()
    client.diagnostics.pop(uri, None)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=changes))
    return await wait_diagnostics(client, uri)


def close_document(client: LanguageClient, path: Path) -> None:
    """Close ``path`` in the server."""
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=path.resolve().as_uri())))


def position(text: str, needle: str, offset: int = 0, occurrence: int = 0) -> types.Position:
    """The LSP position ``offset`` characters into the ``occurrence``-th ``needle``
    (UTF-16 columns)."""
    index = -1
    for _ in range(occurrence + 1):
        index = text.index(needle, index + 1)
    index += offset
    line = text.count("\n", 0, index)
    start = text.rfind("\n", 0, index) + 1
    before = text[start:index]
    return types.Position(line=line, character=len(before.encode("utf-16-le")) // 2)


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """``text`` with ``edits`` applied (non-overlapping; UTF-16 columns)."""
    lines = text.split("\n")

    def offset(where: types.Position) -> int:
        line = lines[where.line]
        units, column = 0, 0
        while units < where.character and column < len(line):
            units += 2 if ord(line[column]) > 0xFFFF else 1
            column += 1
        return sum(len(x) + 1 for x in lines[:where.line]) + column

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character),
                       reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


def identifier(path: Path) -> types.TextDocumentIdentifier:
    """The identifier of the document at ``path``."""
    return types.TextDocumentIdentifier(uri=path.resolve().as_uri())
