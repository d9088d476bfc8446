"""The language server's wiring: pygls features, each one call into the modules beside it.

``tether lsp`` runs :func:`serve` over stdio. Documents are synchronised incrementally; a
change is checked on a worker thread (edits arriving meanwhile are folded into one check of
the latest text, see :meth:`TetherServer.check`; an unchanged text is not checked again) and
its diagnostics published with the document's version.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from tether.lsp import completion, hover, navigation, reporting
from tether.lsp.analysis import Analysis, Documents
from tether.lsp.graph import GRAPH_COMMAND, NoGraph, graph_preview

NAME = "tether"


def path_of(uri: str) -> Path:
    """The file a ``file:`` URI names (other schemes: the path part, for a name)."""
    path = to_fs_path(uri)
    return Path(path) if path is not None else Path(unquote(urlparse(uri).path))


class TetherServer(LanguageServer):
    """A pygls server holding the analyses of the open documents."""

    def __init__(self) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            release = version("tether")
        except PackageNotFoundError:  # running from a source tree
            release = "0"
        super().__init__(NAME, release,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.documents = Documents()
        self.shut_down = False  # a `shutdown` request came before `exit`: exit 0, else 1
        self._running: set[str] = set()  # documents being checked
        self._dirty: set[str] = set()  # ... and edited since their check began
        self._published: dict[str, str] = {}  # the text whose diagnostics were published
        # open documents by the URI the client gave (pygls's workspace normalises its keys)
        self._open: set[str] = set()

    def analysis(self, uri: str) -> Analysis:
        """The analysis of the document's current text (checked now if it changed)."""
        document = self.workspace.get_text_document(uri)
        return self.documents.update(uri, path_of(uri), document.source)[0]

    async def check(self, uri: str, *, force: bool = False) -> None:
        """Check the document's latest text and publish its diagnostics.

        The check runs on a worker thread so that the event loop keeps reading the client's
        messages meanwhile; edits that arrive during a check are not checked one by one:
        when it ends, the latest text is checked (a burst of keystrokes costs two checks,
        not one per keystroke). Only the diagnostics of the latest text are published.
        """
        if force:
            self._published.pop(uri, None)
        if uri in self._running:
            self._dirty.add(uri)
            return
        self._running.add(uri)
        loop = asyncio.get_running_loop()
        try:
            while uri in self._open:
                self._dirty.discard(uri)
                document = self.workspace.get_text_document(uri)
                text, version = document.source, document.version
                analysis, _ = await loop.run_in_executor(
                    None, self.documents.update, uri, path_of(uri), text)
                if uri not in self._open:
                    return  # closed meanwhile: its diagnostics were cleared
                if uri in self._dirty:
                    continue  # edited meanwhile: check the newer text instead
                if self._published.get(uri) != text:
                    self._published[uri] = text
                    self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                        uri=uri, version=version,
                        diagnostics=reporting.diagnostics_of(analysis)))
                return
        finally:
            self._running.discard(uri)

    def opened(self, uri: str) -> None:
        """Note that the client opened a document."""
        self._open.add(uri)

    def forget(self, uri: str) -> None:
        """Drop what is known of a closed document."""
        self._open.discard(uri)
        self.documents.close(uri)
        self._published.pop(uri, None)


server = TetherServer()


@server.feature(types.SHUTDOWN)
def shutdown(ls: TetherServer, params: None) -> None:
    """The client will exit next: remember it, for the exit code."""
    ls.shut_down = True


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
async def did_open(ls: TetherServer, params: types.DidOpenTextDocumentParams) -> None:
    """A document was opened: check it and publish its diagnostics."""
    ls.opened(params.text_document.uri)
    await ls.check(params.text_document.uri, force=True)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
async def did_change(ls: TetherServer, params: types.DidChangeTextDocumentParams) -> None:
    """A document was edited: check its latest text."""
    await ls.check(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: TetherServer, params: types.DidSaveTextDocumentParams) -> None:
    """A document was saved: check it, and the open documents that may embed it."""
    # a file on disk changed: the saved document, and every open one that embeds a
    # sub-workflow (it may be this file), are checked again even if their text did not change
    saved = params.text_document.uri
    for uri, analysis in ls.documents.all():
        known = analysis.known
        embeds = known is not None and any(n.workflow for n in known.nodes.values())
        if uri == saved or embeds:
            ls.documents.close(uri)
            await ls.check(uri, force=True)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: TetherServer, params: types.DidCloseTextDocumentParams) -> None:
    """A document was closed: forget it and clear its diagnostics."""
    ls.forget(params.text_document.uri)
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
    code_action_kinds=[types.CodeActionKind.QuickFix]))
def code_action(ls: TetherServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """The quick fixes of the diagnostics the client asks about."""
    uri = params.text_document.uri
    return reporting.quick_fixes(uri, ls.analysis(uri), list(params.context.diagnostics))


@server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
def document_symbol(ls: TetherServer,
                    params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
    """The outline of the document."""
    return navigation.symbols(ls.analysis(params.text_document.uri))


def _cursor(ls: TetherServer, uri: str, position: types.Position) -> tuple[Analysis, int, int]:
    analysis = ls.analysis(uri)
    line, column = analysis.lines.cursor(position)
    return analysis, line, column


@server.feature(types.TEXT_DOCUMENT_DEFINITION)
def definition(ls: TetherServer, params: types.DefinitionParams) -> list[types.Location]:
    """Where the name under the cursor is defined."""
    uri = params.text_document.uri
    return navigation.definition(uri, *_cursor(ls, uri, params.position))


@server.feature(types.TEXT_DOCUMENT_REFERENCES)
def references(ls: TetherServer, params: types.ReferenceParams) -> list[types.Location]:
    """Every place the node id under the cursor is written."""
    uri = params.text_document.uri
    return navigation.references(uri, *_cursor(ls, uri, params.position),
                                 params.context.include_declaration)


@server.feature(types.TEXT_DOCUMENT_PREPARE_RENAME)
def prepare_rename(ls: TetherServer, params: types.PrepareRenameParams) -> types.Range | None:
    """The range a rename at the cursor would change (None: nothing to rename)."""
    return navigation.prepare_rename(*_cursor(ls, params.text_document.uri, params.position))


@server.feature(types.TEXT_DOCUMENT_RENAME)
def rename(ls: TetherServer, params: types.RenameParams) -> types.WorkspaceEdit:
    """Rename the node id under the cursor everywhere (refused with an error when the
    new name is taken or is no id)."""
    uri = params.text_document.uri
    try:
        return navigation.rename(uri, *_cursor(ls, uri, params.position), params.new_name)
    except navigation.RenameRefused as exc:
        raise JsonRpcInvalidParams(str(exc)) from exc


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover_feature(ls: TetherServer, params: types.HoverParams) -> types.Hover | None:
    """What to show for the cursor's place."""
    return hover.hover(*_cursor(ls, params.text_document.uri, params.position))


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(
    trigger_characters=[".", " ", "[", ",", "'", '"']))
def completion_feature(ls: TetherServer,
                       params: types.CompletionParams) -> types.CompletionList:
    """The completions at the cursor.

    Completion comes with every keystroke: it reads the current text around the cursor and
    the names of the latest analysis, without checking the text again (the check of the
    edit is under way on its worker thread).
    """
    uri = params.text_document.uri
    latest = ls.documents.get(uri)
    if latest is None:
        return completion.complete(*_cursor(ls, uri, params.position))
    text = ls.workspace.get_text_document(uri).source
    current = Analysis(latest.path, text, latest.syntax, None, [], known=latest.known)
    line, column = current.lines.cursor(params.position)
    return completion.complete(current, line, column)


@server.command(GRAPH_COMMAND)
def graph_command(ls: TetherServer, *arguments: object) -> str:
    """``tether.graph URI``: the document's graph as Mermaid text (as ``tether graph``)."""
    if not arguments or not isinstance(arguments[0], str):
        raise JsonRpcInvalidParams(f"{GRAPH_COMMAND} takes the document's URI")
    try:
        return graph_preview(ls.analysis(arguments[0]))
    except NoGraph as exc:
        raise JsonRpcInvalidParams(str(exc)) from exc


def serve() -> None:
    """Run the server over stdin and stdout until the client says exit.

    Raises SystemExit: 0 after a ``shutdown`` request, 1 when the client exits without one
    (as the protocol asks); pygls has closed stdout by then, so nothing more is written.
    """
    server.start_io()
    raise SystemExit(0 if server.shut_down else 1)
