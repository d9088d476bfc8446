"""Security headers and the Host check, as one pure ASGI middleware (cheap per request).

Every response: a Content-Security-Policy that allows only this console's own scripts,
styles and images (no inline script, no inline style, no frames, forms post only here),
``X-Frame-Options: DENY``, ``X-Content-Type-Options: nosniff``, ``Referrer-Policy:
same-origin`` (an approval link's token never leaves in a Referer; ``no-referrer`` would
make browsers send ``Origin: null`` with our own forms) and, for everything but
static files, ``Cache-Control: no-store`` (approval pages and API answers are never kept by a
browser or a proxy).

On a loopback address the console also refuses requests whose ``Host`` is not this machine's
name for it: a web page cannot reach it through DNS rebinding.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
_COMMON = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
]
_NO_STORE = (b"cache-control", b"no-store")
_STATIC = (b"cache-control", b"public, max-age=300")


class SecurityHeaders:
    """See the module docstring. ``hosts``: the Host values accepted (None: any)."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.hosts is not None:
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1").lower()
            if host not in self.hosts:
                await _refuse(send, host)
                return
        static = scope["path"].startswith("/static/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", [])
                           if h[0].lower() != b"cache-control" or static]
                headers.extend(_COMMON)
                if not any(h[0].lower() == b"cache-control" for h in headers):
                    headers.append(_STATIC if static else _NO_STORE)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


async def _refuse(send: Send, host: str) -> None:
    body = (f"unknown Host {host[:100]!r}: this console answers on its loopback address "
            "only").encode()
    await send({"type": "http.response.start", "status": 421, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"), *_COMMON, _NO_STORE]})
    await send({"type": "http.response.body", "body": body})


def loopback_hosts(host: str, port: int) -> frozenset[str]:
    """The Host header values a loopback console accepts."""
    names = {f"[{host}]" if ":" in host else host, "localhost", "127.0.0.1", "[::1]"}
    return frozenset({f"{n}:{port}" for n in names} | ({n for n in names} if port == 80
                                                         else set()))
