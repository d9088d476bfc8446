"""The language server's wiring: pygls features, each one call into the modules beside it.

``tether lsp`` runs :func:`serve` over stdio. Documents are synchronised incrementally; every
change is checked at once (see :mod:`tether.lsp.analysis`: an unchanged text is not checked
again) and its diagnostics published with the document's version.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from tether.lsp import completion, hover, navigation, reporting
from tether.lsp.analysis import Analysis, Documents
from tether.lsp.graph import GRAPH_COMMAND, graph_preview

NAME = "tether"


def path_of(uri: str) -> Path:
    """The file a ``file:`` URI names (other schemes: the path part, for a name)."""
    parsed = urlparse(uri)
    return Path(unquote(parsed.path))


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

    def analysis(self, uri: str) -> Analysis:
        """The analysis of the document's current text (checked now if it changed)."""
        document = self.workspace.get_text_document(uri)
        return self.documents.update(uri, path_of(uri), document.source)[0]

    def publish(self, uri: str, version: int | None) -> None:
        """Check the document and publish its diagnostics."""
        document = self.workspace.get_text_document(uri)
        analysis, fresh = self.documents.update(uri, path_of(uri), document.source)
        if fresh:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, version=version, diagnostics=reporting.diagnostics_of(analysis)))


server = TetherServer()


@server.feature(types.SHUTDOWN)
def shutdown(ls: TetherServer, params: None) -> None:
    ls.shut_down = True


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: TetherServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.publish(params.text_document.uri, params.text_document.version)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: TetherServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.publish(params.text_document.uri, params.text_document.version)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: TetherServer, params: types.DidSaveTextDocumentParams) -> None:
    # a file on disk changed: the saved document, and every open one that embeds a
    # sub-workflow (it may be this file), are checked again even if their text did not change
    saved = params.text_document.uri
    for uri, analysis in ls.documents.all():
        known = analysis.known
        embeds = known is not None and any(n.workflow for n in known.nodes.values())
        if uri == saved or embeds:
            ls.documents.close(uri)
            ls.publish(uri, None)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: TetherServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.documents.close(params.text_document.uri)
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
    code_action_kinds=[types.CodeActionKind.QuickFix]))
def code_action(ls: TetherServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    return reporting.quick_fixes(uri, ls.analysis(uri), list(params.context.diagnostics))


@server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
def document_symbol(ls: TetherServer,
                    params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
    return navigation.symbols(ls.analysis(params.text_document.uri))


def _cursor(ls: TetherServer, uri: str, position: types.Position) -> tuple[Analysis, int, int]:
    analysis = ls.analysis(uri)
    line, column = analysis.lines.cursor(position)
    return analysis, line, column


@server.feature(types.TEXT_DOCUMENT_DEFINITION)
def definition(ls: TetherServer, params: types.DefinitionParams) -> list[types.Location]:
    uri = params.text_document.uri
    return navigation.definition(uri, *_cursor(ls, uri, params.position))


@server.feature(types.TEXT_DOCUMENT_REFERENCES)
def references(ls: TetherServer, params: types.ReferenceParams) -> list[types.Location]:
    uri = params.text_document.uri
    return navigation.references(uri, *_cursor(ls, uri, params.position),
                                 params.context.include_declaration)


@server.feature(types.TEXT_DOCUMENT_PREPARE_RENAME)
def prepare_rename(ls: TetherServer, params: types.PrepareRenameParams) -> types.Range | None:
    return navigation.prepare_rename(*_cursor(ls, params.text_document.uri, params.position))


@server.feature(types.TEXT_DOCUMENT_RENAME)
def rename(ls: TetherServer, params: types.RenameParams) -> types.WorkspaceEdit:
    uri = params.text_document.uri
    try:
        return navigation.rename(uri, *_cursor(ls, uri, params.position), params.new_name)
    except navigation.RenameRefused as exc:
        raise JsonRpcInvalidParams(str(exc)) from exc


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover_feature(ls: TetherServer, params: types.HoverParams) -> types.Hover | None:
    return hover.hover(*_cursor(ls, params.text_document.uri, params.position))


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(
    trigger_characters=[".", " ", "[", ",", "'", '"']))
def completion_feature(ls: TetherServer,
                       params: types.CompletionParams) -> types.CompletionList:
    return completion.complete(*_cursor(ls, params.text_document.uri, params.position))


@server.command(GRAPH_COMMAND)
def graph_command(ls: TetherServer, *arguments: object) -> str:
    """``tether.graph URI``: the document's graph as Mermaid text (as ``tether graph``)."""
    if not arguments or not isinstance(arguments[0], str):
        raise JsonRpcInvalidParams(f"{GRAPH_COMMAND} takes the document's URI")
    try:
        return graph_preview(ls.analysis(arguments[0]))
    except ValueError as exc:
        raise JsonRpcInvalidParams(str(exc)) from exc


def serve() -> None:
    """Run the server over stdin and stdout until the client says exit.

    Raises SystemExit: 0 after a ``shutdown`` request, 1 when the client exits without one
    (as the protocol asks); pygls has closed stdout by then, so nothing more is written.
    """
    server.start_io()
    raise SystemExit(0 if server.shut_down else 1)
