"""The console's addresses, and routing on the raw path.

Every id in a link is percent-encoded whole (:func:`quote_id`), so an id is one path segment
whatever it holds. Routes are matched on the path the client sent (``scope["raw_path"]``),
not on Starlette's decoded ``scope["path"]``: :class:`RawPathRouting` decodes each segment on
its own and keeps ``/``, ``\\`` and ``%`` inside a segment encoded (``%2F``, ``%5C``,
``%25``), and the ``id`` convertor (``{execution_id:id}``) decodes them for the handler. So
``/runs/x%2Flive`` is the page of a run whose id is ``x/live`` (a 404 unless an old store
holds one), never run ``x``'s live fragment, and ``/runs/p%2Fapprovals%2Fq`` reaches run
``p/approvals/q``. New ids cannot hold ``/`` at all (``check_execution_id``); this keeps ids
stored before that rule reachable.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote_to_bytes

from starlette.convertors import Convertor, register_url_convertor
from starlette.types import ASGIApp, Receive, Scope, Send

_SAFE = re.compile(r"[A-Za-z0-9_.~-]+")
_KEPT = re.compile(r"%(2F|5C|25)")
_KEPT_TEXT = {"2F": "/", "5C": "\\", "25": "%"}


def quote_id(text: str) -> str:
    """``text`` percent-encoded for one path segment (ids made by tether need nothing);
    ``.`` and ``..`` too, which clients would otherwise resolve as dot segments."""
    if text in (".", ".."):
        return text.replace(".", "%2E")
    return text if _SAFE.fullmatch(text) else quote(text, safe="")


def run_url(execution_id: str) -> str:
    return f"/runs/{quote_id(execution_id)}"


def approval_url(execution_id: str, checkpoint_id: str) -> str:
    return f"/runs/{quote_id(execution_id)}/approvals/{quote_id(checkpoint_id)}"


def routing_path(raw_path: bytes) -> str:
    """The path routes are matched on: each segment of ``raw_path`` decoded, with ``/``,
    ``\\`` and ``%`` inside a segment left encoded (see the module docstring)."""
    return "/".join(_segment(part) for part in raw_path.split(b"/"))


def _segment(raw: bytes) -> str:
    text = unquote_to_bytes(raw).decode("utf-8", "replace")
    return text.replace("%", "%25").replace("/", "%2F").replace("\\", "%5C")


class IdConvertor(Convertor[str]):
    """One path segment of :func:`routing_path`, decoded: the id it names."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return _KEPT.sub(lambda m: _KEPT_TEXT[m.group(1)], value)

    def to_string(self, value: str) -> str:
        return quote_id(value)


register_url_convertor("id", IdConvertor())


class RawPathRouting:
    """ASGI middleware: ``scope["path"]`` becomes :func:`routing_path` of the raw path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] in ("http", "websocket") else None
        if raw:
            scope = {**scope, "path": routing_path(raw.split(b"?", 1)[0])}
        await self.app(scope, receive, send)
